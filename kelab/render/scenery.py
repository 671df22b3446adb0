"""Scenery drawn around a World: a shaded backdrop, distance marks on the ground, a palette.

The App and the RL frames (``rgb_array``, ``human``) draw the same look: a sky-to-haze
backdrop instead of a flat grey, the World, then ground marks every metre (labelled) and
half metre so motion along the ground is visible even when the camera follows a body.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from kelab.render.canvas import Canvas, Color
from kelab.render.plan import OUTLINE_PX

if TYPE_CHECKING:
    from kelab.sim.scene import Scene
    from kelab.sim.world import World

__all__ = [
    "PALETTE",
    "Ground",
    "draw_backdrop",
    "draw_below_ground",
    "draw_contact_forces",
    "draw_ground_marks",
    "draw_joints",
    "find_ground",
    "find_ground_top",
    "joint_anchors",
]

PALETTE: dict[str, Color] = {
    "sky_top": (196, 214, 232),
    "sky_bottom": (236, 240, 244),
    "ground_mark": (200, 214, 196),
    "ground_label": (238, 244, 236),
    "text": (32, 38, 46),
    "text_dim": (90, 98, 110),
    "panel": (18, 22, 28),
    "panel_text": (222, 230, 240),
    "accent": (215, 60, 50),
    "joint": (250, 250, 250),
    "contact": (230, 60, 40),
}
"""The colours KELab's own overlays use (HUD panel, text, marks, recording dot)."""


def draw_backdrop(
    canvas: Canvas,
    top: Color = PALETTE["sky_top"],
    bottom: Color = PALETTE["sky_bottom"],
) -> None:
    """Clear the frame: ``bottom`` below the middle, shading to ``top`` at the top row.

    Costs less than a ``clear``: the picture is made once per frame size and copied
    (``Canvas.backdrop``: one blit on "pygame", one framebuffer copy on "gl").

    Args:
        canvas: The frame's canvas.
        top: Colour of the top row.
        bottom: Colour of the lower half.
    """
    canvas.backdrop(top, bottom)


class Ground(NamedTuple):
    """A scene's ground box in world units (:func:`find_ground`) and its colour."""

    top: float
    bottom: float
    left: float
    right: float
    color: Color


def find_ground(scene: Scene) -> Ground | None:
    """The scene's ground, or None when it has none.

    The ground is the widest static box at least 20 m wide that is shared by every copy
    (``ke.Terrain.plane`` makes one).

    Args:
        scene: A built scene (``world.scene``).

    Example:
        >>> import kelab as ke
        >>> from kelab.render.scenery import find_ground
        >>> scene = ke.SceneBuilder()
        >>> _ = scene.add(ke.Terrain.plane(name="ground"), at="/", per_environment=False)
        >>> g = find_ground(scene.build())
        >>> (g.top, g.bottom)
        (0.0, -1.0)
    """
    from kelab.sim.scene.shapes import Box

    best: Ground | None = None
    for inst in getattr(scene, "bodies", ()):
        spec = inst.spec
        if spec.body_type != "static" or not spec.render.visible:
            continue
        for shape in spec.shapes:
            if not isinstance(shape, Box) or shape.width < 20.0 or shape.offset.angle != 0.0:
                continue
            if best is not None and shape.width <= best.right - best.left:
                continue
            y = inst.pose.y + shape.offset.y
            x = inst.pose.x + shape.offset.x
            best = Ground(
                top=y + 0.5 * shape.height,
                bottom=y - 0.5 * shape.height,
                left=x - 0.5 * shape.width,
                right=x + 0.5 * shape.width,
                color=spec.render.color,
            )
    return best


def find_ground_top(scene: Scene) -> float | None:
    """The top surface (world y) of the scene's ground (:func:`find_ground`), or None.

    Args:
        scene: A built scene (``world.scene``).
    """
    ground = find_ground(scene)
    return None if ground is None else ground.top


def draw_below_ground(canvas: Canvas, ground: Ground) -> None:
    """Fill the frame under the ground's box with its colour.

    A ground box is a metre or so deep: zoomed in, the frame showed its lower edge and a
    strip of sky under it. Drawn after the World (it covers the box's bottom outline);
    nothing is drawn where the box does not reach.

    Args:
        canvas: The frame's canvas.
        ground: The scene's ground (:func:`find_ground`).
    """
    cam = canvas.camera
    w, h = cam.size
    cx, cy = cam.center
    zoom = cam.zoom
    # from just above the box's bottom outline (OUTLINE_PX wide, its edge antialiased)
    top = (cy - ground.bottom) * zoom + 0.5 * h - (OUTLINE_PX + 1.0)
    x0 = max(0.0, (ground.left - cx) * zoom + 0.5 * w)
    x1 = min(float(w), (ground.right - cx) * zoom + 0.5 * w)
    if top < h and x1 > x0:
        canvas.screen_rect((x0, max(0.0, top), x1, float(h)), ground.color)


def draw_ground_marks(canvas: Canvas, ground_y: float, label_size: int = 12) -> None:
    """Tick marks along the ground surface every metre (labelled) and half metre.

    Marks are spaced for the zoom (every 1, 2, 5 or 10 m when zoomed out) so they never
    crowd; labels sit just below the surface.

    Args:
        canvas: The frame's canvas.
        ground_y: World y of the ground's top surface.
        label_size: Font size of the metre labels in pixels.
    """
    cam = canvas.camera
    x0, y0, x1, y1 = cam.visible_world_rect()
    if not (y0 <= ground_y <= y1 + 1e-9):
        return
    zoom = cam.zoom
    major = next((m for m in (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0) if m * zoom >= 60.0), 100.0)
    minor = major / 2.0  # every spacing is a binary fraction: k * minor is exact
    depth = min(0.25 * major, 14.0 / zoom)
    k0 = math.floor(x0 / minor)
    n = math.ceil((x1 + minor - k0 * minor) / minor)  # np.arange's count
    if n > 400:
        return
    k = np.arange(k0, k0 + max(n, 0))
    xs = k * minor
    is_major = k % 2 == 0
    mark, label = PALETTE["ground_mark"], PALETTE["ground_label"]
    # in pixels, as Camera.world_to_screen_batch maps them (one numpy pass for all)
    w, h = cam.size
    cx, cy = cam.center
    sx = (xs - cx) * zoom + w * 0.5
    sy_top = (cy - ground_y) * zoom + h * 0.5
    for big, d, width in ((True, depth, 2.0), (False, 0.5 * depth, 1.0)):
        px = sx[is_major == big]
        a = np.empty((px.shape[0], 2))
        a[:, 0] = px
        b = a.copy()
        a[:, 1] = sy_top
        b[:, 1] = (cy - (ground_y - d)) * zoom + h * 0.5
        # one batch per kind; the width as world lines get it (metres times zoom)
        canvas.lines(a, b, mark, width=(width / zoom) * zoom, screen_space=True)
    sy = (cy - (ground_y - depth)) * zoom + h * 0.5 - 11
    for x, px in zip(xs[is_major].tolist(), sx[is_major].tolist(), strict=True):
        text = f"{x:g} m"
        # whole labels only: one cut by the view's edge reads as another number (or "m")
        if px < 0.0 or px + 3 + canvas.text_size(text, label_size)[0] > w:
            continue
        canvas.text((px + 3, sy), text, label, size=label_size, screen_space=True)


def _revolute_joints(scene: Scene, body_names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Parent body column (-1: the copy's ground frame) and anchor of each revolute joint."""
    from kelab.sim.scene.joints import RevoluteJoint

    index = {name: i for i, name in enumerate(body_names)}
    parents, anchors = [], []
    for joint in getattr(scene, "joints", ()):
        if not isinstance(joint.spec, RevoluteJoint) or not joint.per_environment:
            continue
        parent = -1 if joint.parent_path is None else index.get(joint.parent_path, -2)
        if parent == -2:
            continue
        parents.append(parent)
        anchors.append(joint.spec.anchor)
    return np.array(parents, dtype=np.intp), np.array(anchors, dtype=np.float64).reshape(-1, 2)


_JOINT_CACHE: dict[int, tuple[Scene, tuple[np.ndarray, np.ndarray]]] = {}


def joint_anchors(world: World, poses: np.ndarray | None = None) -> np.ndarray:
    """World positions of every revolute joint's pivot, ``(num_envs, n_joints, 2)``.

    Args:
        world: A ``kelab.World``.
        poses: Body poses to use (e.g. interpolated ones), default ``world.body_poses``.
    """
    cached = _JOINT_CACHE.get(id(world))
    if cached is None or cached[0] is not world.scene:
        cached = (world.scene, _revolute_joints(world.scene, list(world.body_names)))
        _JOINT_CACHE.clear()  # one World at a time is drawn with joints
        _JOINT_CACHE[id(world)] = cached
    parents, anchors = cached[1]
    p = np.asarray(world.body_poses if poses is None else poses, dtype=np.float64)
    n = p.shape[0]
    out = np.empty((n, len(parents), 2))
    if not len(parents):
        return out
    pose = p[:, np.maximum(parents, 0)]  # (n, J, 3)
    c, s = np.cos(pose[..., 2]), np.sin(pose[..., 2])
    ax, ay = anchors[:, 0], anchors[:, 1]
    out[..., 0] = np.where(parents >= 0, pose[..., 0] + c * ax - s * ay, ax)
    out[..., 1] = np.where(parents >= 0, pose[..., 1] + s * ax + c * ay, ay)
    origins = getattr(world, "env_origins", None)
    if origins is not None:
        out += np.asarray(origins, dtype=np.float64)[:, None, :]
    return out


def draw_joints(canvas: Canvas, world: World, poses: np.ndarray | None = None) -> None:
    """Mark every revolute joint's pivot with a small ring (on top of the bodies).

    Args:
        canvas: The frame's canvas.
        world: A ``kelab.World``.
        poses: The poses drawn this frame (interpolated), default the current ones.
    """
    zoom = canvas.camera.zoom
    for x, y in joint_anchors(world, poses).reshape(-1, 2).tolist():
        canvas.circle((x, y), 4.0 / zoom, PALETTE["panel"])
        canvas.circle((x, y), 3.0 / zoom, PALETTE["joint"], width=1.5 / zoom)


def draw_contact_forces(canvas: Canvas, world: World, newtons_per_metre: float = 100.0) -> None:
    """Draw each touching body's summed contact force as an arrow from its centre.

    KELab reads contact forces per body (``world.contact_forces``), not per contact
    point, so the arrow starts at the body's origin.

    Args:
        canvas: The frame's canvas.
        world: A ``kelab.World``.
        newtons_per_metre: Force per metre of arrow length.
    """
    forces = np.asarray(world.contact_forces, dtype=np.float64)
    poses = np.asarray(world.body_poses, dtype=np.float64)
    origins = getattr(world, "env_origins", None)
    if origins is not None:
        poses = poses.copy()
        poses[..., :2] += np.asarray(origins, dtype=np.float64)[:, None, :]
    mag = np.hypot(forces[..., 0], forces[..., 1])
    static = {i.path for i in world.scene.bodies if i.spec.body_type != "dynamic"}
    moving = np.array([name not in static for name in world.body_names])
    mag = mag * moving  # the ground's reaction is not drawn
    zoom = canvas.camera.zoom
    color = PALETTE["contact"]
    for e, b in zip(*np.nonzero(mag > 1e-6), strict=True):
        start = poses[e, b, :2]
        end = start + forces[e, b] / newtons_per_metre
        canvas.line(tuple(start), tuple(end), color, width=2.0 / zoom)
        canvas.circle(tuple(end), 3.0 / zoom, color)
        canvas.circle(tuple(start), 2.5 / zoom, color)
