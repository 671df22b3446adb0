"""``kelab play`` and ``kelab eval``: watch a checkpoint, or its evaluation report.

Both run the policy in numpy and need no extra; without ``--checkpoint`` they use the
task's shipped policy (:func:`kelab.train.shipped.shipped_policy`).
"""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path
from typing import TextIO

from kelab._files import make_parent
from kelab.cli.args import NUM_ENVS_MAX, positive_int
from kelab.cli.config_options import ConfigOptions
from kelab.cli.progress import EvalProgress
from kelab.cli.tasks import ENV_EXCLUDED, add_task_subcommand, start_command
from kelab.errors import UserError
from kelab.rl.config import EnvConfig
from kelab.train.shipped import shipped_policy

__all__ = ["EVAL_ENV_OPTIONS", "PLAY_ENV_OPTIONS", "add_play_parsers", "run_eval", "run_play"]

PLAY_ENV_OPTIONS = ConfigOptions(
    EnvConfig,
    excluded={
        **ENV_EXCLUDED,
        "num_envs": "play runs one copy (a DirectRLEnv)",
        "seed": "--seed seeds the first episode's reset (the player's), not only the env",
        "render_mode": "--video draws offscreen (rgb_array), --interactive opens an App, "
        "else a window (human)",
        "layout": "the default (isolated): the one copy at full precision",
        "num_threads": "one copy: one thread",
        "render_backend": "play draws with pygame (kelab preview --backend gl shows the GL "
        "renderer)",
    },
)
"""``kelab play``'s env has no option of its own (`EnvConfig`): these are the reasons."""

EVAL_ENV_OPTIONS = ConfigOptions(
    EnvConfig,
    excluded={
        **ENV_EXCLUDED,
        "seed": "--seed seeds the evaluation episodes (ke.evaluate), not only the env",
        "render_mode": "eval draws nothing (kelab play --video records episodes)",
        "render_backend": "eval draws nothing (kelab play --video records episodes)",
        "layout": "the default (isolated): every copy exact, as a lone copy",
        "num_threads": "the copies step on one thread (more give the same report)",
    },
    defaults={"num_envs": 100},
    highs={"num_envs": (NUM_ENVS_MAX, "more copies than a World holds")},
)
"""``kelab eval``'s option of `EnvConfig`: ``--num-envs`` (default 100 copies)."""


def _checkpoint_spec(args: argparse.Namespace, class_path: str) -> str:
    if args.checkpoint is not None:
        from kelab.train.checkpoint import refuse_weights_file

        refuse_weights_file(args.checkpoint)  # before any window or warning
        return args.checkpoint
    shipped = shipped_policy(class_path)
    if shipped is None:
        raise UserError(
            f"KELab ships no policy for {args.task}; train one with `kelab train {args.task}` "
            "and pass --checkpoint RUN_DIR:best"
        )
    return str(shipped)


def _print_episode(
    out: TextIO, i: int, ret: float, length: int, end: object, ok: bool | None
) -> None:
    verdict = "" if ok is None else ("  success" if ok else "  failure")
    print(
        f"episode {i}: return {float(ret):.2f}, {int(length)} steps, ended by {end}{verdict}",
        file=out,
        flush=True,
    )


VIDEO_SUFFIXES = (".mp4", ".gif")
"""What ``play --video`` can write."""


def _check_video(video: str) -> None:
    if Path(video).suffix.lower() not in VIDEO_SUFFIXES:
        raise UserError(f"--video must end in .mp4 or .gif, got {video!r}; e.g. --video play.mp4")
    make_parent(video, "--video")  # a missing folder is created, as for every --out


def run_play(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``kelab play``: watch a checkpoint in a window, in an App, or record a video.

    Args:
        args: The parsed arguments of ``kelab play``.
        out: Where results go (default: stdout).
        err: Where progress and problems go (default: stderr).

    Returns:
        The exit code: 0 (a user error raises, and ``kelab`` prints it as one line, exit 2).
    """
    cmd = start_command(args, out, err, extra=False)
    if cmd is None:
        return 2
    spec = _checkpoint_spec(args, cmd.class_path)
    from kelab.render.renderer import display_available
    from kelab.rl.direct import DirectRLEnv
    from kelab.train.player import RLPlayer

    render_mode = "rgb_array" if args.video else (None if args.interactive else "human")
    if args.video is not None:  # in the CLI's words, before a window or a video opens
        _check_video(args.video)
    if args.video and args.interactive:
        raise UserError("--video and --interactive cannot be combined; pick one")
    if args.interactive and not display_available():  # the App's advice is for Python
        from kelab.render.renderer import DisplayUnavailableError

        raise DisplayUnavailableError(
            "--interactive needs a display for its window (DISPLAY and WAYLAND_DISPLAY are "
            f"unset); record the episodes offscreen instead (kelab play {args.task} --video "
            f"play.mp4), or run under a virtual display (xvfb-run -a kelab play {args.task} "
            "--interactive)"
        )
    with warnings.catch_warnings():
        if render_mode == "human" and not display_available():
            # one warning that says what to do here, instead of the env's generic one
            warnings.filterwarnings(
                "ignore", message="render_mode='human' but no display", category=RuntimeWarning
            )
            warnings.warn(
                "no display (DISPLAY and WAYLAND_DISPLAY are unset): the episodes play "
                "offscreen with no window; --video out.mp4 records them (or run under "
                "xvfb-run -a to watch)",
                RuntimeWarning,
                stacklevel=1,
            )
        env = DirectRLEnv(cmd.cls(), render_mode=render_mode, seed=args.seed)
        episodes = args.episodes if args.episodes or args.interactive else 3

        def report(i: int, info: dict) -> None:  # interactive: each episode as it ends
            ok = info.get("is_success")
            _print_episode(
                cmd.out, i, info["episode_return"], info["episode_length"], info["ended_by"], ok
            )

        try:
            with RLPlayer(spec, env=env) as player:
                result = player.play(
                    episodes=episodes,
                    video=args.video,
                    seed=args.seed,  # the first episode's reset (the player's own is 0)
                    interactive=args.interactive,
                    on_episode=report if args.interactive else None,
                )
        finally:
            env.close()
    if not args.interactive:
        for i, row in enumerate(
            zip(
                result["returns"],
                result["lengths"],
                result["ended_by"],
                result["successes"],
                strict=True,
            ),
            start=1,
        ):
            _print_episode(cmd.out, i, *row)
    if result["video"]:
        print(f"video: {result['video']}", file=cmd.out)
    return 0


def run_eval(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``kelab eval``: the evaluation report of a checkpoint (episodes run in parallel).

    Args:
        args: The parsed arguments of ``kelab eval``.
        out: Where results go (default: stdout).
        err: Where progress and problems go (default: stderr).

    Returns:
        The exit code: 0 done, 130 interrupted (the report of the episodes finished).
    """
    cmd = start_command(args, out, err, extra=False)
    if cmd is None:
        return 2
    spec = _checkpoint_spec(args, cmd.class_path)
    import kelab as ke
    from kelab.rl.evaluation import EvaluationInterrupted, episode_quotas
    from kelab.train.player import RLPlayer

    player = RLPlayer(spec, render_mode=None)
    env = ke.LearningEnv(cmd.cls(), num_envs=min(args.episodes, args.num_envs), seed=args.seed)
    interrupted = False
    try:
        player.check_env(env)
        share = int(episode_quotas(args.episodes, env.num_envs).max())  # episodes per copy
        bar = EvalProgress(args.episodes, cmd.err, most_steps=share * env.max_episode_length)
        try:  # progress every step: long episodes that end together show where they are
            report = ke.evaluate(
                env, player.policy, episodes=args.episodes, seed=args.seed, on_step=bar.step
            )
        except EvaluationInterrupted as stop:  # Ctrl-C: the report of the finished ones
            report, interrupted = stop.report, True
        finally:
            bar.close()
    finally:
        env.close()
    if interrupted and report.episodes == 0:
        print("kelab: interrupted before any episode finished", file=cmd.err)
        return 130
    if interrupted:
        print(
            f"interrupted after {report.episodes:,} of {args.episodes:,} episodes; the "
            "report of the episodes finished:",
            file=cmd.err,
        )
    if args.json:
        data = report.to_dict()
        data["checkpoint"] = str(player.checkpoint.path)
        data["task"] = cmd.task_name
        if interrupted:
            data["interrupted"] = {"episodes_asked": args.episodes}
        print(json.dumps(data, indent=2), file=cmd.out)
    else:
        print(f"{cmd.task_name}  checkpoint {player.checkpoint.path}", file=cmd.out)
        print(report.table(), file=cmd.out)
    return 130 if interrupted else 0


def add_play_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``play`` and ``eval`` to the ``kelab`` command's subparsers."""
    play = add_task_subcommand(
        sub,
        "play",
        "watch a trained policy (window, App, or video)",
        run_play,
        seed=0,
        seed_help="seed of the first episode's reset",
    )
    play.add_argument(
        "--episodes",
        type=positive_int("episodes"),
        default=None,
        metavar="N",
        help="episodes to play (default: 3; with --interactive, until the window is closed)",
    )
    play.add_argument(
        "--video",
        default=None,
        metavar="OUT",
        help="record the episodes offscreen to OUT (.mp4 or .gif) instead of a window",
    )
    play.add_argument(
        "--interactive", action="store_true", help="play in an App: pause, step, drag"
    )

    ev = add_task_subcommand(
        sub,
        "eval",
        "evaluation report of a checkpoint (its episodes run in min(--episodes, --num-envs) "
        "copies at once)",
        run_eval,
        seed=1000,
        seed_help="seed of the evaluation episodes",
    )
    ev.add_argument(
        "--episodes",
        type=positive_int("episodes"),
        default=100,
        metavar="N",
        help="episodes judged",
    )
    EVAL_ENV_OPTIONS.add_to(ev)
    ev.add_argument("--json", action="store_true", help="print the report as JSON")
