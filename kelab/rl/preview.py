"""``kelab preview <Id>``: open a task in a PACED window with zero or random actions.

Preview a task before training it, and after every task or robot change: the window
shows copy 0 at real-time pace (``SimulationPacer``), and every finished episode is
printed with how it ended. ``kelab/cli.py`` calls :func:`add_preview_parser`.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

__all__ = ["add_preview_parser", "run_preview"]


def _resolve(task_id: str) -> str:
    from kelab.tasks import TASK_IDS

    if task_id in TASK_IDS:
        return TASK_IDS[task_id]
    if f"kelab/{task_id}" in TASK_IDS:
        return TASK_IDS[f"kelab/{task_id}"]
    if ":" in task_id:
        return task_id  # "package.module:TaskClass" of your own task
    known = ", ".join(t.split("/", 1)[1] for t in TASK_IDS)
    raise ValueError(f"unknown task {task_id!r}; built-in tasks: {known} (or module:TaskClass)")


def run_preview(
    task_id: str,
    actions: str = "zero",
    seconds: float | None = None,
    seed: int = 0,
    render_mode: str = "human",
    print_fn: Any = print,
) -> dict[str, Any]:
    """Run a task in one copy with zero or random actions and report the episodes.

    Args:
        task_id: ``"CartPole-v0"``, ``"kelab/CartPole-v0"`` or ``"module:TaskClass"``.
        actions: ``"zero"`` or ``"random"`` (uniform in [-1, 1], seeded).
        seconds: Simulated seconds to run; None runs until the window is closed.
        seed: Seed of the env and of the random actions.
        render_mode: ``"human"`` (PACED window) or ``"rgb_array"``/None (no window, for
            scripted checks).
        print_fn: Where episode lines go.

    Returns:
        ``{"steps", "episodes", "ended_by": {name: count}}``.

    Raises:
        ValueError: For an unknown task or action mode.
    """
    from kelab.rl.direct import DirectRLEnv
    from kelab.tasks.registry import task_class

    if actions not in ("zero", "random"):
        raise ValueError(f"actions must be 'zero' or 'random', got {actions!r}")
    cls = task_class(_resolve(task_id))
    env = DirectRLEnv(cls(), render_mode=render_mode, seed=seed)
    rng = np.random.default_rng(seed)
    max_steps = None if seconds is None else max(1, round(seconds / env.step_dt))
    ended: dict[str, int] = {}
    steps = episodes = 0
    print_fn(
        f"previewing {cls.__name__}: {env.timing.physics_hz:.0f} Hz physics, "
        f"{env.timing.decimation} steps/action, {env.timing.control_hz:.0f} Hz control, "
        f"{actions} actions; close the window to stop"
    )
    try:
        env.reset(seed=seed)
        while (max_steps is None or steps < max_steps) and not env.window_closed:
            if actions == "zero":
                action = np.zeros(env.action_space.shape, dtype=np.float32)
            else:
                action = rng.uniform(-1.0, 1.0, env.action_space.shape).astype(np.float32)
            _, _, terminated, truncated, info = env.step(action)
            steps += 1
            if terminated or truncated:
                episodes += 1
                ended[info["ended_by"]] = ended.get(info["ended_by"], 0) + 1
                ok = "" if "is_success" not in info else f", success={info['is_success']}"
                print_fn(
                    f"episode {episodes}: ended by {info['ended_by']!r} after "
                    f"{info['episode_length']} steps, return {info['episode_return']:.2f}{ok}"
                )
                env.reset()
    finally:
        env.close()
    return {"steps": steps, "episodes": episodes, "ended_by": ended}


def _main(args: argparse.Namespace) -> int:
    run_preview(args.task, actions=args.actions, seconds=args.seconds, seed=args.seed)
    return 0


def add_preview_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``preview`` subcommand to the ``kelab`` command's subparsers.

    Args:
        subparsers: What ``parser.add_subparsers()`` returned.

    Returns:
        The new subparser (its ``func`` default runs the preview and returns an exit code).
    """
    p = subparsers.add_parser(
        "preview", help="open a task in a real-time window with zero or random actions"
    )
    p.add_argument("task", help="task id, e.g. CartPole-v0, Humanoid-v0, BallToGoal-v0")
    p.add_argument("--actions", choices=("zero", "random"), default="zero")
    p.add_argument(
        "--seconds", type=float, default=None, help="simulated seconds (default: until closed)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_main)
    return p
