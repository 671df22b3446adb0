"""A/B: the current tree against a named commit, interleaved in one run.

    python benchmarks/ab.py --against 01ecdfb [--rounds 5] [--cases world,humanoid,...]
    python benchmarks/ab.py --against 01ecdfb --cases states      # bit-identity only

The commit's ``kelab/`` is exported once (``git archive``, into ``/tmp/kelab-ab/<sha>``;
the repository and its working tree are not touched) and every measurement runs in a
fresh child process whose ``PYTHONPATH`` puts either that export or this tree first (the
child checks which ``kelab`` it imported); both trees are byte-compiled first, as an
installed kelab is. The measuring code is always this tree's
(``world_throughput.py``, ``env_throughput.py``), so both sides run the same loop. Each
round runs every case once for each side, the side that goes first alternating between
rounds (so a slow spell or a warm cache hits both); the table gives the median per side,
the median of the per-round ratios B/A, and the load average before and after.
One-thread cases are timed by the child's CPU time (``--clock cpu``, the default: on a
shared machine other processes' load inflates wall time by several times, CPU time far
less); two-thread cases and the ``train-*`` commands by wall time.

Cases (``--cases``, comma separated):

- ``world``: 1024 cartpoles, packed World, 1 thread, and the bare ``pymunk.batch`` loop
  in the same child (world_throughput.py); the row is the World's env-steps/s and its
  ratio to the bare loop of the same child. ``world2``: the same with 2 threads.
- ``humanoid``: LearningEnv kelab/Humanoid-v0, 256 copies, packed, random actions (a
  copy falls and resets every few dozen steps: the reset-heavy loop), 1 thread;
  ``humanoid2``: 2 threads.
- ``cartpole``: LearningEnv kelab/CartPole-v0, 1024 copies, packed, the LQR balancing
  policy (no resets before the 5 s limit: the reset-free loop).
- ``train-cartpole`` / ``train-humanoid``: the whole ``python -m kelab train TASK``
  command with its defaults, wall seconds (imports, environment start, training to the
  task's stopping rule); the row also gives the CPU seconds of the command's processes
  (steadier than wall time on a loaded machine), whether every run saved the same weights
  (the checkpoints' files are named by their SHA-256) and the command's last line.
- ``states``: no timing; a SHA-256 of the packed Humanoid env's observations, rewards and
  dones over 300 random-action steps (hundreds of resets), so "bit-identical" is checked
  against the commit in the same run.
- ``single-cartpole``, ``single-humanoid``, ``single-ball``, ``single-pi``: one copy made
  by ``gymnasium.make`` (kelab/CartPole-v0, Humanoid-v0, BallToGoal-v0, Pi-Locomotion-v0),
  random actions of its seeded action space, reset when an episode ends; steps/s after
  50 untimed steps (benchmarks/single_env.py measures the same loop against its peers).
- ``single-states``: no timing; a SHA-256 of those four single envs' observations,
  rewards and flags over the steps (seeded actions, episodes ending and restarting).
- ``sb3-cartpole``: Stable-Baselines3's PPO ``learn()`` on kelab/CartPole-v0 as SB3 users
  run it (``make_vec_env``: 8 ``gymnasium.make`` envs in a ``DummyVecEnv``; n_steps 128,
  batch 256, 4 epochs, one torch thread), timesteps per second of ``learn()`` alone.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

CHILD = r"""
import json, sys, time, hashlib
case, steps, root, clock = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
import kelab
assert kelab.__file__.startswith(root), (kelab.__file__, root)
import importlib, importlib.util
OLD = "kelab.sim." + "assets"  # the asset package before the sim subpackages (kept apart
NEW = "kelab.sim.scene." + "assets"  # so that a tree-wide rename leaves these two alone)
if importlib.util.find_spec(OLD) is not None:
    sys.modules[NEW] = importlib.import_module(OLD)
    importlib.import_module(OLD + ".cartpole")
import gymnasium, numpy as np
import types
import world_throughput, env_throughput
if clock == "cpu":  # this process's CPU time: far less sensitive to other processes' load
    cpu = types.SimpleNamespace(perf_counter=time.process_time)
    world_throughput.time = env_throughput.time = cpu
    time = cpu
from world_throughput import bare_loop, world_loop, start_clock
from env_throughput import kelab_cartpole

def env_rate(task, n, steps, threads, act_dim):
    env = gymnasium.make_vec(task, num_envs=n, vectorization_mode="vector_entry_point",
                             layout="packed", num_threads=threads)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    acts = [rng.uniform(-1, 1, (n, act_dim)).astype(np.float32) for _ in range(steps)]
    ends = 0
    t0 = start_clock()
    for a in acts:
        _, _, term, trunc, _ = env.step(a)
        ends += int((term | trunc).sum())
    rate = n * steps / (time.perf_counter() - t0)
    env.close()
    return {"rate": rate, "resets": ends / (n * steps)}

if case in ("world", "world2"):
    k = 2 if case == "world2" else 1
    bare = bare_loop(1024, steps)
    world = world_loop(1024, steps, k, "packed")
    out = {"rate": world, "bare": bare, "vs_bare": world / bare}
elif case in ("humanoid", "humanoid2"):
    out = env_rate("kelab/Humanoid-v0", 256, steps, 2 if case == "humanoid2" else 1, 6)
elif case == "cartpole":
    rate, ends = kelab_cartpole(1024, steps, "packed")
    out = {"rate": rate, "resets": ends}
elif case == "states":
    env = gymnasium.make_vec("kelab/Humanoid-v0", num_envs=64,
                             vectorization_mode="vector_entry_point", layout="packed")
    obs, _ = env.reset(seed=3)
    rng = np.random.default_rng(3)
    h = hashlib.sha256(np.ascontiguousarray(obs).tobytes())
    ends = 0
    for _ in range(steps):
        obs, rew, term, trunc, _ = env.step(rng.uniform(-1, 1, (64, 6)).astype(np.float32))
        ends += int((term | trunc).sum())
        for a in (obs, rew, term, trunc):
            h.update(np.ascontiguousarray(a).tobytes())
    out = {"hash": h.hexdigest()[:16], "resets": ends}
elif case.startswith("single-"):
    ids = {"cartpole": "CartPole-v0", "humanoid": "Humanoid-v0", "ball": "BallToGoal-v0",
           "pi": "Pi-Locomotion-v0"}
    names = list(ids.values()) if case == "single-states" else [ids[case[7:]]]
    h = hashlib.sha256()
    ends = 0
    for name in names:
        env = gymnasium.make("kelab/" + name)
        env.reset(seed=0)
        env.action_space.seed(0)
        acts = [env.action_space.sample() for _ in range(50 + steps)]
        for k, a in enumerate(acts):
            if k == 50:
                t0 = start_clock()
            obs, rew, term, trunc, _ = env.step(a)
            h.update(np.ascontiguousarray(obs).tobytes() + np.float64(rew).tobytes())
            h.update(bytes([term, trunc]))
            if term or trunc:
                ends += 1
                obs, _ = env.reset()
                h.update(np.ascontiguousarray(obs).tobytes())
        rate = steps / (time.perf_counter() - t0)
        env.close()
    out = {"hash": h.hexdigest()[:16], "resets": ends} if case == "single-states" else {
        "rate": rate, "resets": ends / (50 + steps)}
elif case == "sb3-cartpole":
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    torch.set_num_threads(1)
    venv = make_vec_env("kelab/CartPole-v0", n_envs=8, seed=0)
    model = PPO("MlpPolicy", venv, n_steps=128, batch_size=256, n_epochs=4, seed=0,
                device="cpu")
    t0 = start_clock()
    model.learn(steps)
    out = {"rate": steps / (time.perf_counter() - t0)}
    venv.close()
else:
    raise SystemExit(f"unknown case {case!r}")
print("AB-RESULT " + json.dumps(out))
"""

DEFAULT_STEPS = {"world": 200, "world2": 200, "humanoid": 200, "humanoid2": 200,
                 "cartpole": 200, "states": 300, "single-cartpole": 2000,
                 "single-humanoid": 2000, "single-ball": 2000, "single-pi": 300,
                 "single-states": 500, "sb3-cartpole": 8192}  # fmt: skip
TRAIN_TASKS = {"train-cartpole": "CartPole-v0", "train-humanoid": "Humanoid-v0"}


def export(commit: str) -> tuple[str, Path]:
    """The commit's tree under /tmp/kelab-ab/<sha> (made once): its full sha and path."""
    sha = subprocess.run(
        ["git", "rev-parse", "--verify", f"{commit}^{{commit}}"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if sha.returncode != 0:
        raise SystemExit(f"--against must name a commit of {ROOT}, got {commit!r}")
    full = sha.stdout.strip()
    dest = Path(tempfile.gettempdir()) / "kelab-ab" / full
    if not (dest / "kelab" / "__init__.py").exists():
        dest.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            ["git", "archive", "--format=tar", full], cwd=ROOT, capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    build_helper(dest)
    return full, dest


def build_helper(root: Path) -> None:
    """Build a tree's optional C helper in place, as ``pip install`` does where a compiler is.

    An export has only the sources: without this, side A ran without the helper (the
    slower pymunk path) wherever the commit has one, and every timed case favoured B.
    """
    helper = root / "kelab" / "sim" / "physics"
    if (root / "setup.py").exists() and not list(helper.glob("_native*.so")):
        subprocess.run(
            [sys.executable, "setup.py", "-q", "build_ext", "--inplace"],
            cwd=root, capture_output=True, check=False,
        )  # fmt: skip


def compile_tree(root: Path) -> None:
    """Byte-compile ``root``'s kelab, as ``pip install`` does on a user's machine.

    Without it a side with no ``__pycache__`` (an export, or any tree where
    ``PYTHONDONTWRITEBYTECODE`` is set) compiles kelab from source in every child:
    ~0.3-0.6 s more per ``train-*`` command on one side only.
    """
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "kelab")], check=True)


class CaseFailedError(RuntimeError):
    """A case's child failed (e.g. a tree caught mid-edit); its round is dropped."""


def run_case(case: str, root: Path, steps: int, clock: str = "wall") -> dict:
    """One measurement in a fresh child with ``root``'s kelab first on the path."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), str(HERE)]))
    env.setdefault("SDL_VIDEODRIVER", "dummy")
    if case in TRAIN_TASKS:
        with tempfile.TemporaryDirectory() as tmp:
            c0 = children_cpu()
            t0 = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-m", "kelab", "train", TRAIN_TASKS[case], "--run-dir",
                 str(Path(tmp) / "run")],
                cwd=tmp, env=env, capture_output=True, text=True, check=False,
            )  # fmt: skip
            wall = time.perf_counter() - t0
            cpu = children_cpu() - c0
            # the checkpoints' weights files are named by their SHA-256: the same names,
            # the same weights
            weights = sorted(p.name for p in (Path(tmp) / "run").rglob("*.safetensors"))
        if done.returncode != 0:
            raise CaseFailedError(f"{case} failed under {root}:\n{done.stderr[-2000:]}")
        tail = done.stdout.strip().splitlines()[-1:]
        return {"seconds": wall, "cpu": cpu, "tail": tail, "weights": weights}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, case, str(steps), str(root), clock],
        cwd=HERE, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    for line in done.stdout.splitlines():
        if line.startswith("AB-RESULT "):
            return json.loads(line[len("AB-RESULT ") :])
    raise CaseFailedError(f"{case} failed under {root}:\n{done.stderr[-3000:]}")


def children_cpu() -> float:
    """CPU seconds of this process's finished children (and theirs that they waited for)."""
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def load() -> str:
    """The 1/5/15-minute load averages."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", required=True, help="commit to compare with (side A)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds (median per side)")
    ap.add_argument("--cases", default="world,humanoid,cartpole", help="comma separated")
    ap.add_argument("--steps", type=int, default=0, help="steps per case (0: its default)")
    ap.add_argument(
        "--clock",
        choices=("cpu", "wall"),
        default="cpu",
        help="time one-thread cases by the child's CPU time (default; robust to other "
        "processes' load) or wall time; two-thread cases and train-* are always wall time",
    )
    args = ap.parse_args()
    cases = [c for c in args.cases.split(",") if c]
    for c in cases:
        if c not in DEFAULT_STEPS and c not in TRAIN_TASKS:
            raise SystemExit(f"--cases: unknown case {c!r}; pick from "
                             f"{sorted([*DEFAULT_STEPS, *TRAIN_TASKS])}")  # fmt: skip
    if args.rounds < 1:
        raise SystemExit(f"--rounds must be >= 1, got {args.rounds}")
    full, tree_a = export(args.against)
    sides = {"A": tree_a, "B": ROOT}
    for tree in sides.values():
        compile_tree(tree)
    print(f"A = {args.against} ({full[:12]}, exported to {tree_a}); B = this tree ({ROOT})")
    print(f"load average before: {load()}")
    got: dict[tuple[str, str], list[dict]] = {}
    for r in range(args.rounds):
        order = ("A", "B") if r % 2 == 0 else ("B", "A")
        for case in cases:
            steps = args.steps or DEFAULT_STEPS.get(case, 0)
            try:  # both sides of a round, or neither
                clock = "wall" if case.endswith("2") else args.clock
                pair = {side: run_case(case, sides[side], steps, clock) for side in order}
            except CaseFailedError as exc:
                print(f"  round {r + 1}: {exc} (round dropped)", file=sys.stderr)
                continue
            for side, result in pair.items():
                got.setdefault((case, side), []).append(result)
        print(f"  round {r + 1}/{args.rounds} done, load {load()}", file=sys.stderr)
    print(f"load average after: {load()}; one-thread cases timed by {args.clock} time\n")
    print(f"| case | A {args.against} | B this tree | B/A (median of rounds) | B/A range "
          "| rounds |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|")
    for case in cases:
        if (case, "A") not in got:
            print(f"| {case} | failed | failed | - | - | 0 |")
            continue
        a, b = got[(case, "A")], got[(case, "B")]
        if case in ("states", "single-states"):
            same = all(x["hash"] == b[0]["hash"] for x in a + b)
            verdict = "identical" if same else "DIFFERENT"
            print(f"| {case} (sha256 of the steps, {a[0]['resets']} resets) | {a[0]['hash']} | "
                  f"{b[0]['hash']} | {verdict} | - | {len(a)} |")  # fmt: skip
            continue
        key = "seconds" if case in TRAIN_TASKS else "rate"
        ratios = [y[key] / x[key] for x, y in zip(a, b, strict=True)]
        ma, mb = statistics.median(x[key] for x in a), statistics.median(y[key] for y in b)
        unit = " s" if key == "seconds" else "/s"
        extra = ""
        if "vs_bare" in a[0]:
            va = statistics.median(x["vs_bare"] for x in a)
            vb = statistics.median(y["vs_bare"] for y in b)
            extra = f" (vs bare: A {va:.2f}x, B {vb:.2f}x)"
        if "resets" in a[0]:
            extra = f" ({100 * a[0]['resets']:.1f} % / {100 * b[0]['resets']:.1f} % resets)"
        if "weights" in a[0]:
            same = all(x["weights"] == a[0]["weights"] for x in a + b)
            verdict = "identical" if same else "DIFFERENT"
            ca, cb = (statistics.median(x["cpu"] for x in side) for side in (a, b))
            cpu = statistics.median(y["cpu"] / x["cpu"] for x, y in zip(a, b, strict=True))
            extra = (
                f" (CPU seconds A {ca:.1f}, B {cb:.1f}: B/A {cpu:.3f}; weights {verdict} on "
                f"both sides; {a[0]['tail']})"
            )
        print(f"| {case}{extra} | {ma:,.1f}{unit} | {mb:,.1f}{unit} | "
              f"{statistics.median(ratios):.3f} | {min(ratios):.3f}-{max(ratios):.3f} | "
              f"{len(a)} |")  # fmt: skip


if __name__ == "__main__":
    main()
