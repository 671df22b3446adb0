"""What a camera sensor sees: every copy's held body poses drawn into small images.

A camera sensor (``SENSOR_KINDS["camera"]``, ``SceneBuilder.camera_sensor``) holds every
body's x, y and angle in its pipeline (sampled, delayed like any sensor); :class:`CameraView`
turns those held poses into the images a policy reads, ``(num_envs, height, width,
channels)`` uint8, with :func:`kelab.sim.raster.draw`: one batched call per shape for all
copies. Static bodies seen by a camera fixed to the world look the same in every copy and
every step, so they are drawn once, into the background, when the view is built.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kelab.errors import UserError
from kelab.sim.raster import Primitive, draw, luma
from kelab.sim.scene.instances import SensorSpec
from kelab.sim.scene.scene import Scene
from kelab.sim.scene.sensor_kinds import WORLD_FRAME
from kelab.sim.scene.shapes import Box, Circle, Polygon, Pose, Segment, Shape

__all__ = ["MAX_IMAGE_BYTES", "CameraView"]

MAX_IMAGE_BYTES = 2**31
"""Most bytes one read of a camera may make for all copies (``num_envs * H * W * C``)."""


def _place(offset: Pose, points: Sequence[tuple[float, float]]) -> np.ndarray:
    """Points of a shape's own frame in its body's frame, ``(P, 2)``."""
    return np.array([offset.transform_point(p) for p in points], dtype=np.float64)


def _primitive(shape: Shape, body: int, color: tuple[int, ...]) -> Primitive:
    if isinstance(shape, (Box, Polygon)):
        verts = shape.vertices() if isinstance(shape, Box) else shape.vertices
        return Primitive.polygon(body, _place(shape.offset, verts), color)
    if isinstance(shape, Circle):
        center = _place(shape.offset, [(0.0, 0.0)])[0]
        return Primitive.circle(body, (center[0], center[1]), shape.radius, color)
    if isinstance(shape, Segment):
        a, b = _place(shape.offset, [shape.a, shape.b])
        return Primitive.capsule(body, a, b, shape.radius, color)
    raise TypeError(f"a camera cannot draw a {type(shape).__name__}")


class CameraView:
    """The images of one camera sensor from the body poses it holds.

    Args:
        scene: The World's scene (its bodies, their shapes and render hints).
        body_paths: The World's body order (the columns of the held poses).
        spec: The camera sensor (its checked parameters and target).
        num_envs: Copies drawn per read.

    Raises:
        UserError: When one read would make more than :data:`MAX_IMAGE_BYTES`.

    Example:
        >>> import numpy as np
        >>> import kelab as ke
        >>> b = ke.SceneBuilder()
        >>> _ = b.add(ke.Prop(ke.Box(1.0, 1.0), initial_pose=ke.Pose()), at="/Crate")
        >>> b.camera_sensor("eye", size=(8, 8), channels=1, zoom=2.0)
        >>> scene = b.build()
        >>> view = CameraView(scene, ("/Crate",), scene.sensors[0], num_envs=1)
        >>> view(np.zeros((1, 3)))[0, :, :, 0]  # the 1 m crate: 2x2 pixels, its orange's luma
        array([[  0,   0,   0,   0,   0,   0,   0,   0],
               [  0,   0,   0,   0,   0,   0,   0,   0],
               [  0,   0,   0,   0,   0,   0,   0,   0],
               [  0,   0,   0, 144, 144,   0,   0,   0],
               [  0,   0,   0, 144, 144,   0,   0,   0],
               [  0,   0,   0,   0,   0,   0,   0,   0],
               [  0,   0,   0,   0,   0,   0,   0,   0],
               [  0,   0,   0,   0,   0,   0,   0,   0]], dtype=uint8)
    """

    def __init__(
        self, scene: Scene, body_paths: Sequence[str], spec: SensorSpec, num_envs: int
    ) -> None:
        params = dict(spec.params)
        width, height = params["size"]
        channels = params["channels"]
        self.shape = (height, width, channels)
        """One copy's image: ``(height, width, channels)``."""
        size = num_envs * height * width * channels
        if size > MAX_IMAGE_BYTES:
            raise UserError(
                f"camera sensor {spec.name!r}: one read of {num_envs} copies of "
                f"{height}x{width}x{channels} images takes {size / 2**30:.1f} GiB, more than "
                f"{MAX_IMAGE_BYTES / 2**30:.0f} GiB; use a smaller size, channels=1 or fewer "
                "copies"
            )
        self.num_envs = num_envs
        self.zoom = float(params["zoom"])
        self.offset: Pose = params["offset"]
        self.follow = params["follow"]
        column = {path: i for i, path in enumerate(body_paths)}
        self.target = -1 if spec.target == WORLD_FRAME else column[spec.target]
        self.num_bodies = len(body_paths)

        def paint(rgb: tuple[int, int, int]) -> tuple[int, ...]:
            return (luma(rgb),) if channels == 1 else rgb

        background = np.empty((1, height, width, channels), dtype=np.uint8)
        background[...] = paint(params["background"])
        # bodies in drawing order: render layer, then scene order (as the renderer draws)
        order = sorted(
            (inst for inst in scene.bodies if inst.spec.render.visible and inst.spec.shapes),
            key=lambda inst: inst.spec.render.layer,
        )
        #: Static bodies' poses: they never move (poses written to them are ignored).
        self._static = np.zeros((1, len(body_paths), 3))
        fixed = self.target < 0
        self._prims: list[Primitive] = []
        still = fixed  # static bodies under every moving one: drawn into the background
        for inst in order:
            b = column[inst.path]
            static = inst.spec.body_type == "static"
            if static:
                self._static[0, b] = (inst.pose.x, inst.pose.y, inst.pose.angle)
            still = still and static
            color = paint(inst.spec.render.color)
            for shape in inst.spec.shapes:
                prim = _primitive(shape, b, color)
                if still:
                    draw(background, prim, self._camera_fixed(1), self._static, self.zoom)
                else:
                    self._prims.append(prim)
        self._statics = np.array(
            [column[i.path] for i in scene.bodies if i.spec.body_type == "static"], dtype=np.int64
        )
        self.background = background[0]
        """The image before the moving bodies are drawn: ``(height, width, channels)``."""

    def _camera_fixed(self, n: int) -> np.ndarray:
        o = self.offset
        return np.broadcast_to(np.array([o.x, o.y, o.angle]), (n, 3))

    def camera_poses(self, poses: np.ndarray) -> np.ndarray:
        """Each copy's camera pose ``(n, 3)`` from the body poses ``(n, B, 3)``."""
        if self.target < 0:
            return self._camera_fixed(poses.shape[0])
        body = poses[:, self.target, :]
        o = self.offset
        c, s = np.cos(body[:, 2]), np.sin(body[:, 2])
        out = np.empty((poses.shape[0], 3))
        out[:, 0] = body[:, 0] + c * o.x - s * o.y
        out[:, 1] = body[:, 1] + s * o.x + c * o.y
        out[:, 2] = o.angle + (body[:, 2] if self.follow == "pose" else 0.0)
        return out

    def __call__(self, held: np.ndarray) -> np.ndarray:
        """The images ``(n, height, width, channels)`` uint8 for held poses ``(n, 3 * B)``.

        Static bodies are drawn where the scene put them, whatever the held values say.
        """
        n = held.shape[0]
        poses = held.reshape(n, self.num_bodies, 3)
        if self._statics.size:
            poses = poses.copy()
            poses[:, self._statics] = self._static[:, self._statics]
        images = np.empty((n, *self.shape), dtype=np.uint8)
        images[...] = self.background
        camera = self.camera_poses(poses)
        for prim in self._prims:
            draw(images, prim, camera, poses, self.zoom)
        return images
