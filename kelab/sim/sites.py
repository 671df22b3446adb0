"""Where a scene's sites are: each site's pose in every copy's frame, batched.

A site (``ke.Site`` on a robot body, ``SceneBuilder.site`` on any body) is a frame fixed
to a body at an offset: a fingertip, a sensor mount, a marker. :class:`Sites` is the
World's helper that reads them: built from the scene and the body order (never the
World), it composes the bodies' poses with the sites' offsets. The public API is
``World.site_names``, ``World.site_poses`` and ``World.site_positions``; a robot's view
reads its own sites by their short names (``RobotView.site_positions``). See
docs/world.md, "Reading".
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kelab.sim.scene.fields import short_repr
from kelab.sim.scene.scene import Scene

__all__ = ["Sites", "site_names_arg"]


def site_names_arg(names: str | Sequence[str], where: str) -> list[str]:
    """Return ``names`` (one name or a sequence of names) as a list of str.

    Raises:
        ValueError: For anything but a str or a sequence of str.
    """
    out = [names] if isinstance(names, str) else names
    if not isinstance(out, (list, tuple)) or not all(isinstance(n, str) for n in out):
        raise ValueError(
            f"{where}: names must be a site name or a list of site names, got "
            f"{short_repr(names)}; e.g. ['/World/Robot/tip']"
        )
    return list(out)


class Sites:
    """A scene's sites: each one's body index and offset, and their poses in copy frames.

    Args:
        scene: The scene whose sites these are.
        body_names: The body paths in the order of the World's body arrays.

    Example:
        >>> import numpy as np
        >>> import kelab as ke
        >>> b = ke.SceneBuilder()
        >>> ball = ke.Prop(ke.Circle(0.1))
        >>> _ = b.add(ball, at="/World/Ball")
        >>> b.site("ball.top", ball, ke.Pose(0.0, 0.1))
        >>> sites = Sites(b.build(), ("/World/Ball",))
        >>> sites.names
        ('ball.top',)
        >>> poses = np.array([[[1.0, 2.0, np.pi / 2]]])  # (num_envs, bodies, 3)
        >>> sites.poses(poses, "ball.top").round(6).tolist()
        [[[0.9, 2.0, 1.570796]]]
    """

    def __init__(self, scene: Scene, body_names: Sequence[str]) -> None:
        index = {p: i for i, p in enumerate(body_names)}
        self._table = {
            s.name: (index[s.body], (s.offset.x, s.offset.y, s.offset.angle)) for s in scene.sites
        }

    @property
    def names(self) -> tuple[str, ...]:
        """Every site's name in scene order (a robot's: ``"<robot path>/<site name>"``)."""
        return tuple(self._table)

    def poses(
        self, body_poses: np.ndarray, names: str | Sequence[str], where: str = "World.site_poses"
    ) -> np.ndarray:
        """Poses of sites in each copy's frame, ``(num_envs, len(names), 3)``: x, y, angle.

        Each site's body pose (its frame's origin, where the offset is measured from)
        composed with the site's offset, batched over copies.

        Args:
            body_poses: Every body's pose, ``(num_envs, num_bodies, 3)``.
            names: A site name or a list of them (see :attr:`names`).
            where: What the error messages name.

        Raises:
            KeyError: For a name that is no site (the message lists the sites).
            ValueError: For names that are not strings.
        """
        wanted = site_names_arg(names, where)
        table = self._table
        for name in wanted:
            if name not in table:
                raise KeyError(f"no site {name!r}; sites: {list(table)}")
        body = np.array([table[n][0] for n in wanted], dtype=np.int64)
        off = np.array([table[n][1] for n in wanted], dtype=np.float64).reshape(-1, 3)
        poses = body_poses[:, body]  # (num_envs, k, 3)
        c, s = np.cos(poses[..., 2]), np.sin(poses[..., 2])
        out = np.empty_like(poses)
        out[..., 0] = poses[..., 0] + c * off[:, 0] - s * off[:, 1]
        out[..., 1] = poses[..., 1] + s * off[:, 0] + c * off[:, 1]
        out[..., 2] = poses[..., 2] + off[:, 2]
        return out
