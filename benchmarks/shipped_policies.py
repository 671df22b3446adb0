"""The shipped policies' success rates as ``kelab play``/``kelab eval`` run them (numpy).

    python benchmarks/shipped_policies.py [--episodes 100] [--seed 1000] [--torch]

For every built-in task, evaluates its shipped policy (``kelab/train/policies/``) with
``ke.RLPlayer``'s numpy actor (no torch) over ``--episodes`` episodes (seed 1000, as the
policies' JSON records them), and prints one markdown row per task: the success rate and
mean return next to the ones recorded in the policy's JSON when it was shipped (judged
with the torch actor). ``--torch`` also judges the torch actor (needs kelab[train]) on the
same episodes and reports the largest action difference seen between the two.
Deterministic: the same seed gives the same table.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import kelab as ke
from kelab.tasks import TASK_IDS
from kelab.tasks.registry import task_class
from kelab.train.shipped import shipped_policy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1000)
    parser.add_argument("--torch", action="store_true", help="also judge the torch actor")
    args = parser.parse_args()
    print(
        "| task | numpy actor: success | return | shipped (torch): success | return |"
        + (" torch now: success | max action diff |" if args.torch else "")
        + " eval s |"
    )
    print("|---|---|---|---|---|" + ("---|---|" if args.torch else "") + "---|")
    for env_id, target in TASK_IDS.items():
        spec = shipped_policy(target)
        if spec is None:  # a built-in task with no trained policy yet (CartPole-Pixels-v0)
            print(f"| {env_id} | no shipped policy |", flush=True)
            continue
        player = ke.RLPlayer(spec, render_mode=None)
        recorded = player.checkpoint.meta.get("evaluation") or {}
        env = ke.LearningEnv(task_class(target)(), num_envs=args.episodes, seed=args.seed)
        t0 = time.perf_counter()
        report = ke.evaluate(env, player.policy, episodes=args.episodes, seed=args.seed)
        seconds = time.perf_counter() - t0
        extra = ""
        if args.torch:
            from kelab.train.checkpoint import load_checkpoint
            from kelab.train.policy import CheckpointPolicy

            torch_actor = CheckpointPolicy(load_checkpoint(spec))
            diffs: list[float] = []

            def judged(
                obs: np.ndarray,
                actor: CheckpointPolicy = torch_actor,
                mine: ke.RLPlayer = player,
                diffs: list[float] = diffs,
            ) -> np.ndarray:
                out = actor(obs)
                diffs.append(float(np.abs(out - mine.act(obs)).max()))
                return out

            theirs = ke.evaluate(env, judged, episodes=args.episodes, seed=args.seed)
            extra = f" {theirs.success_rate:.2f} | {max(diffs):.1e} |"
        env.close()
        print(
            f"| {env_id} | {report.success_rate:.2f} ({report.episodes} episodes) | "
            f"{report.return_mean:.1f} | {recorded.get('success_rate', float('nan')):.2f} "
            f"({recorded.get('episodes', '?')} episodes) | "
            f"{recorded.get('return_mean', float('nan')):.1f} |{extra} {seconds:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
