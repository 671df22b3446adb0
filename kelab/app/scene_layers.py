"""The layers an App draws under the user's `App.render`: backdrop, World, overlays."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from kelab.app.view import lift_color
from kelab.render.scenery import (
    Ground,
    draw_backdrop,
    draw_below_ground,
    draw_contact_forces,
    draw_ground_marks,
    draw_joints,
)

if TYPE_CHECKING:
    from kelab.render.canvas import Canvas
    from kelab.sim.world import World

__all__ = ["draw_scene", "interpolated_poses"]


def interpolated_poses(world: World, prev: np.ndarray | None, alpha: float) -> np.ndarray:
    """The poses a frame draws: between the last two steps by ``alpha`` (angles the short way).

    Args:
        world: The World (its present ``body_poses``).
        prev: The poses before the last step (None: none yet).
        alpha: The interpolation fraction in [0, 1].
    """
    cur = np.asarray(world.body_poses)
    if prev is None or alpha >= 1.0 or prev.shape != cur.shape:
        return cur
    mixed = prev + alpha * (cur - prev)
    turn = (cur[..., 2] - prev[..., 2] + np.pi) % (2 * np.pi) - np.pi
    mixed[..., 2] = prev[..., 2] + alpha * turn
    return mixed


def draw_scene(
    canvas: Canvas,
    world: World | None,
    alpha: float,
    prev_poses: np.ndarray | None,
    *,
    background: tuple[int, int, int],
    ground: Ground | None,
    show_contacts: bool,
    show_joints: bool,
) -> None:
    """Draw the shaded backdrop, then the World interpolated by ``alpha`` and its overlays.

    Args:
        canvas: The frame's canvas.
        world: The World to draw (None: only the backdrop).
        alpha: Interpolation fraction of a fixed step.
        prev_poses: The poses before the last step.
        background: The backdrop's lower colour (the upper half shades to a paler sky).
        ground: The scene's ground, filled down to the frame's bottom and marked every
            metre (None: no ground).
        show_contacts: Draw contact-force arrows.
        show_joints: Mark revolute joint pivots.
    """
    draw_backdrop(canvas, top=lift_color(background), bottom=background)
    if world is None:
        return
    canvas.draw_world(world, alpha, prev_poses)
    if ground is not None:
        draw_below_ground(canvas, ground)
        draw_ground_marks(canvas, ground.top)
    if show_contacts:
        draw_contact_forces(canvas, world)
    if show_joints:
        draw_joints(canvas, world, interpolated_poses(world, prev_poses, alpha))
