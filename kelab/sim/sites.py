"""Where a scene's sites are: each site's pose in every copy's frame, batched.

A site (``ke.Site`` on a robot body, ``SceneBuilder.site`` on any body) is a frame fixed
to a body at an offset: a fingertip, a sensor mount, a marker. :class:`SiteReadout` is
the part of ``World``'s public API that reads them (``World.site_poses``,
``World.site_positions``, ``World.site_names``); it is mixed into ``World`` and reads
only the World's public ``scene``, ``body_names`` and ``body_poses``. A robot's view
reads its own sites by their short names (``RobotView.site_positions``). See
docs/world.md, "Reading".
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

import numpy as np

from kelab.sim.scene.fields import short_repr
from kelab.sim.scene.scene import Scene

__all__ = ["SiteReadout", "site_names_arg"]


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


class SiteReadout:
    """``World``'s site readout (a mixin over the World's public API)."""

    scene: Scene
    body_names: tuple[str, ...]
    body_poses: np.ndarray

    @cached_property
    def _site_table(self) -> dict[str, tuple[int, tuple[float, float, float]]]:
        """Each site's body index and offset ``(x, y, angle)`` in that body's frame."""
        index = {p: i for i, p in enumerate(self.body_names)}
        return {
            s.name: (index[s.body], (s.offset.x, s.offset.y, s.offset.angle))
            for s in self.scene.sites
        }

    @property
    def site_names(self) -> tuple[str, ...]:
        """Every site's name in scene order (a robot's: ``"<robot path>/<site name>"``)."""
        return tuple(self._site_table)

    def site_poses(self, names: str | Sequence[str]) -> np.ndarray:
        """Poses of sites in each copy's frame, ``(num_envs, len(names), 3)``: x, y, angle.

        The body's pose composed with the site's offset, batched over copies (the body
        pose is its frame's origin, where the offset is measured from).

        Args:
            names: A site name or a list of them (see :attr:`site_names`).

        Raises:
            KeyError: For a name that is no site (the message lists the sites).
            ValueError: For names that are not strings.
        """
        wanted = site_names_arg(names, "World.site_poses")
        table = self._site_table
        for name in wanted:
            if name not in table:
                raise KeyError(f"no site {name!r}; sites: {list(table)}")
        body = np.array([table[n][0] for n in wanted], dtype=np.int64)
        off = np.array([table[n][1] for n in wanted], dtype=np.float64).reshape(-1, 3)
        poses = self.body_poses[:, body]  # (num_envs, k, 3)
        c, s = np.cos(poses[..., 2]), np.sin(poses[..., 2])
        out = np.empty_like(poses)
        out[..., 0] = poses[..., 0] + c * off[:, 0] - s * off[:, 1]
        out[..., 1] = poses[..., 1] + s * off[:, 0] + c * off[:, 1]
        out[..., 2] = poses[..., 2] + off[:, 2]
        return out

    def site_positions(self, names: str | Sequence[str]) -> np.ndarray:
        """Positions of sites in each copy's frame, ``(num_envs, len(names), 2)``.

        Args:
            names: A site name or a list of them (see :attr:`site_names`).

        Raises:
            KeyError: For a name that is no site (the message lists the sites).
            ValueError: For names that are not strings.

        Example:
            >>> import kelab as ke
            >>> b = ke.SceneBuilder()
            >>> ball = ke.Prop(ke.Circle(0.1), body_type="kinematic", initial_pose=ke.Pose(1, 2))
            >>> _ = b.add(ball, at="/World/Ball")
            >>> b.site("ball.top", ball, ke.Pose(0.0, 0.1))
            >>> world = ke.World(b.build(), num_envs=2)
            >>> world.site_positions(["ball.top"]).round(6).tolist()
            [[[1.0, 2.1]], [[1.0, 2.1]]]
        """
        return self.site_poses(names)[..., :2]
