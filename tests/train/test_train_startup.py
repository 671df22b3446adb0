"""``kelab train``'s start and end: what the command imports, when, and what it leaves.

Each check runs in a fresh interpreter (``python -c``), where ``sys.modules`` and the
garbage collector start as a command's do, started early beside the suite
(tests/prestart.py). Nothing here times anything.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from prestart import Prestart


def _job(code: str | Callable[[Path], str]) -> Prestart:
    """``code`` (or a function of the job's folder that returns it) in a fresh interpreter,
    started early, beside the suite (tests/prestart.py); it prints one JSON line last."""
    if callable(code):

        def command(folder: Path) -> list[str]:
            return [sys.executable, "-c", textwrap.dedent(code(folder))]

        return Prestart(command, timeout=300)
    return Prestart([sys.executable, "-c", textwrap.dedent(code)], cwd=Path.cwd(), timeout=300)


def _seen(job: Prestart) -> dict:
    """The JSON line the job printed last (it exited cleanly)."""
    done = job.result()
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


IMPORTED_ONCE = _job(
    """
    import gc, json, sys
    from kelab.cli.train import import_trainer
    before = gc.get_freeze_count()
    import_trainer()
    frozen = gc.get_freeze_count()
    import_trainer()  # imported already: nothing more is frozen
    print(json.dumps({
        "before": before, "frozen": frozen, "again": gc.get_freeze_count(),
        "enabled": gc.isenabled(), "torch": "torch" in sys.modules,
        "trainer": "kelab.train.trainer" in sys.modules,
    }))
    """
)


@pytest.mark.prestart(IMPORTED_ONCE)
def test_the_trainer_is_imported_once_with_its_objects_frozen():
    seen = _seen(IMPORTED_ONCE)
    assert seen["before"] == 0 and seen["torch"] and seen["trainer"]
    # torch's modules, functions and classes: out of every later collection's sight
    assert seen["frozen"] > 100_000, seen
    assert seen["again"] == seen["frozen"]
    assert seen["enabled"]  # the collector runs again for what training makes


COLLECTOR_OFF = _job(
    """
    import gc, json
    gc.disable()
    from kelab.cli.train import import_trainer
    import_trainer()
    print(json.dumps({"enabled": gc.isenabled()}))
    """
)


@pytest.mark.prestart(COLLECTOR_OFF)
def test_a_collector_the_caller_turned_off_stays_off():
    assert _seen(COLLECTOR_OFF) == {"enabled": False}


def _is_png(data: bytes) -> bool:
    """A whole PNG: the signature, an IHDR chunk first and an IEND chunk last."""
    return (
        data[:8] == b"\x89PNG\r\n\x1a\n"
        and data[12:16] == b"IHDR"
        and data[-12:] == b"\x00\x00\x00\x00IEND\xaeB`\x82"
    )


def _train_three_iterations(folder: Path) -> str:
    return f"""
    import json, sys
    from kelab.cli import main
    code = main(["train", "CartPole-v0", "--num-envs", "8", "--iterations", "3",
                 "--run-dir", {str(folder / "run")!r}])
    print(json.dumps({{"code": code, "matplotlib": "matplotlib" in sys.modules}}))
    """


WHOLE_CURVE = _job(_train_three_iterations)


@pytest.mark.prestart(WHOLE_CURVE)
def test_the_command_leaves_a_whole_curve_drawn_by_its_curve_process():
    seen = _seen(WHOLE_CURVE)
    run = WHOLE_CURVE.result().folder / "run"
    assert seen["code"] == 0
    # drawn in the command's curve process: this one never imported matplotlib
    assert seen["matplotlib"] is False
    png = run / "training_curve.png"
    assert _is_png(png.read_bytes())
    assert [p.name for p in run.iterdir() if p.name.startswith(".training_curve")] == []


def test_the_curve_process_draws_the_png_the_trainer_would(tmp_path):
    from kelab.train.curve import write_training_curve
    from kelab.train.curve_process import CurveProcess

    curve = {
        "history": [[1024 * i, 10.0 * i, i / 20] for i in range(1, 9)],
        "evaluations": [[2048, 0.25], [6144, 1.0]],
        "wall_times": [0.1 * i for i in range(1, 9)],
        "target": 0.95,
        "title": "kelab/CartPole-v0 · run r, seed 1",
    }
    curve["history"][0][1] = float("nan")  # no episode ended yet: NaN crosses as JSON
    drawer = CurveProcess()
    try:
        assert drawer.submit(tmp_path / "there.png", curve)
        assert drawer.finish()
    finally:
        drawer.close()
    write_training_curve(tmp_path / "here.png", **curve)
    there = (tmp_path / "there.png").read_bytes()
    assert _is_png(there)
    assert there == (tmp_path / "here.png").read_bytes()


def test_a_curve_process_that_is_gone_leaves_the_drawing_to_the_log(tmp_path):
    from kelab.train.curve_process import CurveProcess
    from kelab.train.records import IterationRow
    from kelab.train.runlog import RunLog

    drawer = CurveProcess()
    drawer.close()  # gone before the first curve
    log = RunLog(tmp_path, enabled=True, drawer=drawer)
    log.open()
    log.record(IterationRow(1, 64, 0.5, 2.5, 0.0, 3, 128.0, 256.0, 1e-3, 1.0, 0.1, 0.0, 1.4))
    log.draw_curve()
    log.close()
    assert _is_png((tmp_path / "training_curve.png").read_bytes())


CURVE_PROCESS_IMPORTS = _job(
    """
    import json, sys
    import kelab.cli.train, kelab.train.curve_process
    print(json.dumps(sorted(m for m in ("torch", "matplotlib", "rsl_rl", "tensordict")
                            if m in sys.modules)))
    """
)


@pytest.mark.prestart(CURVE_PROCESS_IMPORTS)
def test_the_curve_process_module_imports_neither_torch_nor_matplotlib():
    assert _seen(CURVE_PROCESS_IMPORTS) == []


def test_ctrl_c_while_the_curve_is_awaited_still_releases_the_run_dir(tmp_path, monkeypatch):
    import pytest
    from train_helpers import tiny_config

    import kelab as ke
    from kelab.tasks.cartpole import CartPoleTask
    from kelab.train.curve_process import CurveProcess

    def interrupted() -> bool:
        raise KeyboardInterrupt

    run = tmp_path / "run"
    env = ke.LearningEnv(CartPoleTask(), num_envs=tiny_config().num_envs, seed=0)
    drawer = CurveProcess()
    try:
        trainer = ke.RLTrainer(env, run_dir=run, config=tiny_config(), curve_process=drawer)
        trainer.train(1)
        monkeypatch.setattr(drawer, "finish", interrupted)  # Ctrl-C in close()'s wait
        with pytest.raises(KeyboardInterrupt):
            trainer.close()
        assert "pid=" not in (run / ".kelab-run").read_text()  # released all the same
        again = ke.RLTrainer(env, run_dir=run, resume=f"{run}:latest", curve_process=drawer)
        again.close()
    finally:
        drawer.close()
        env.close()


def _train_and_resume(folder: Path) -> str:
    return f"""
    import json, sys
    sys.path.insert(0, {str(Path(__file__).parent)!r})
    from train_helpers import tiny_config
    import kelab as ke
    from kelab.tasks.cartpole import CartPoleTask
    cfg = tiny_config(overlap_rollout=True, eval_every=1, eval_episodes=4,
                      eval_process=True, success_target=0.5)
    env = ke.LearningEnv(CartPoleTask(), num_envs=cfg.num_envs, seed=0)
    with ke.RLTrainer(env, run_dir={str(folder / "a")!r}, config=cfg) as tr:
        tr.train(3)
    with ke.RLTrainer(env, run_dir={str(folder / "a")!r}, config=cfg,
                      resume={str(folder / "a")!r} + ":latest") as tr:
        tr.train(2)
    env.close()
    print(json.dumps(sorted(m for m in ("torch._dynamo", "rsl_rl", "tensordict")
                            if m in sys.modules)))
    """


NO_COMPILER = _job(_train_and_resume)


@pytest.mark.prestart(NO_COMPILER)
def test_training_loads_no_compiler_rsl_rl_or_tensordict():
    """A whole training run (overlapped update in the learner process, evaluations in the
    evaluation process, a checkpoint saved and resumed) imports none of them: rsl-rl and
    tensordict are test references only, and torch._dynamo (which tensordict, and any
    torch.optim optimizer, import) was ~2.5 s of `kelab train`'s start."""
    assert _seen(NO_COMPILER) == []
