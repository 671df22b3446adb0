"""Training curves a person can read (matplotlib) and ``kelab plot`` comparing runs."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from prestart import Prestart
from train_helpers import metrics_row

from kelab.cli import main
from kelab.train.curve import (
    RunCurve,
    curve_figure,
    draw_curves,
    read_run,
    write_training_curve,
)
from kelab.train.runlog import RunLog

PNG = b"\x89PNG\r\n\x1a\n"


def _run(steps=8, walls=True, evals=((3, 4, 0.25), (7, 8, 1.0))):
    """A RunCurve as read from a log: 1000 env steps per iteration."""
    it = np.arange(1, steps + 1)
    return RunCurve(
        label="a",
        env_steps=it * 1000.0,
        mean_return=it * 12.5,
        success_rate=it / (2.0 * steps),
        wall_time_s=it * 2.5 if walls else np.full(steps, np.nan),
        eval_steps=np.array([e[1] * 1000.0 for e in evals]),
        eval_rates=np.array([e[2] for e in evals]),
        target=0.95,
        title="kelab/CartPole-v0 · run a, seed 1",
    )


def _write_log(run_dir: Path, rows, target=0.95, seed=1):
    """A run directory as the trainer leaves it: metrics.csv (RunLog) and latest.json."""
    log = RunLog(run_dir, enabled=True)
    log.open()
    for row in rows:
        log.record(metrics_row(**row))
    log.close()
    (run_dir / "latest.json").write_text(
        json.dumps(
            {
                "task": {"id": "kelab/CartPole-v0", "class": "kelab.tasks.cartpole:CartPoleTask"},
                "seed": seed,
                "train_config": {"success_target": target},
            }
        )
    )
    return run_dir


def _rows(n=6, scale=1.0):
    return [
        {
            "iteration": i,
            "env_steps": 1024 * i,
            "wall_time_s": 0.5 * i,
            "mean_return": scale * 10.0 * i,
            "success_rate": min(1.0, i / n),
            "eval_success_rate": 0.5 if i == 4 else None,
            "eval_iteration": 3 if i == 4 else None,
        }
        for i in range(1, n + 1)
    ]


def test_the_curve_has_ticks_grids_two_panels_evaluations_target_and_wall_clock():
    fig = curve_figure([_run()])
    returns, success = fig.axes[:2]
    assert returns.get_ylabel() == "mean return" and success.get_ylabel() == "success rate"
    assert success.get_xlabel() == "env steps"
    # ticks along every axis, not just labels at the ends
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig).draw()
    assert len([t for t in success.get_xticklabels() if t.get_text()]) >= 4
    assert len([t for t in returns.get_yticklabels() if t.get_text()]) >= 4
    assert [t.get_text() for t in success.get_yticklabels() if t.get_text()][-1] == "100%"
    assert all(line.get_visible() for line in returns.get_xgridlines())
    # the return on its own axes, the success rates on theirs (0..1)
    np.testing.assert_array_equal(returns.lines[0].get_ydata(), _run().mean_return)
    assert success.get_ylim()[0] < 0 < 1 < success.get_ylim()[1]
    # evaluations as marked points, the target as a horizontal line
    marked = [ln for ln in success.lines if ln.get_marker() == "o" and ln.get_linestyle() == "None"]
    assert len(marked) == 1
    np.testing.assert_array_equal(marked[0].get_xdata(), [4000.0, 8000.0])
    target = [ln for ln in success.lines if list(ln.get_ydata()) == [0.95, 0.95]]
    assert len(target) == 1
    # wall-clock time as a second x axis, mapped from env steps through the run's times
    (top,) = [c for c in returns.child_axes if c.get_xlabel()]
    assert top.get_xlabel() == "wall-clock time (s)"
    lo, hi = returns.get_xlim()  # env steps: 2.5 s per 1000 here
    np.testing.assert_allclose(top.get_xlim(), [2.5 + (lo - 1000) / 400, 2.5 + (hi - 1000) / 400])
    # a key that names the series, outside the data
    texts = [t.get_text() for t in success.get_legend().get_texts()]
    assert texts == [
        "training episodes (with exploration noise)",
        "evaluated (deterministic policy)",
        "target 95%",
    ]
    assert fig.get_suptitle() == "kelab/CartPole-v0 · run a, seed 1"


def test_no_wall_clock_axis_without_times_and_no_success_panel_without_a_rule():
    fig = curve_figure([_run(walls=False)])
    assert not [c for c in fig.axes[0].child_axes if c.get_xlabel()]
    bare = RunCurve("b", np.arange(1.0, 5.0), np.arange(4.0), np.full(4, np.nan), np.arange(4.0))
    fig = curve_figure([bare])
    assert len(fig.axes) == 1 and fig.axes[0].get_xlabel() == "env steps"


def test_wall_clock_skips_rows_without_new_steps_and_one_row_is_a_point():
    run = _run()
    steps = run.env_steps.copy()
    steps[-1] = steps[-2]  # overlap_rollout's last row only updates: no new env steps
    fig = curve_figure([replace(run, env_steps=steps)])
    (top,) = [c for c in fig.axes[0].child_axes if c.get_xlabel()]
    assert top.get_xlabel() == "wall-clock time (s)"
    walls = run.wall_time_s.copy()
    walls[3] = walls[2] - 1.0  # a clock that went back: no axis rather than a wrong one
    fig = curve_figure([replace(run, wall_time_s=walls)])
    assert not [c for c in fig.axes[0].child_axes if c.get_xlabel()]
    one = RunCurve("c", np.array([128.0]), np.array([3.0]), np.array([0.0]), np.array([0.2]))
    returns = curve_figure([one]).axes[0]
    assert returns.lines[0].get_marker() == "o"


def test_several_runs_share_a_figure_with_a_legend_naming_them():
    runs = [_run(), replace(_run(), label="b", target=0.9)]
    fig = curve_figure(runs)
    returns, success = fig.axes[:2]
    assert [t.get_text() for t in returns.get_legend().get_texts()] == ["a", "b"]
    assert returns.lines[0].get_color() != returns.lines[1].get_color()
    assert "target 90%, 95%" in [t.get_text() for t in success.get_legend().get_texts()]
    assert not [c for c in returns.child_axes if c.get_xlabel()]  # wall clocks differ
    assert fig.get_suptitle() == "kelab/CartPole-v0: 2 runs"


def test_the_png_is_written_atomically_replacing_a_symlink_not_following_it(tmp_path):
    real = tmp_path / "elsewhere.png"
    real.write_bytes(b"keep me")
    out = tmp_path / "curve.png"
    out.symlink_to(real)
    written = write_training_curve(out, [(100, 1.0, 0.0), (200, 2.0, 0.5)], [(200, 1.0)])
    assert written == out and not out.is_symlink()
    assert out.read_bytes()[:8] == PNG and real.read_bytes() == b"keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["curve.png", "elsewhere.png"]


def test_draw_curves_refuses_no_runs(tmp_path):
    with pytest.raises(ValueError, match="runs must hold at least one RunCurve, got none"):
        draw_curves(tmp_path / "x.png", [])


def test_a_real_run_is_read_back_with_its_target_title_and_evaluations(trained_run):
    run = read_run(trained_run["dir"])
    steps = [int(s) for s in run.env_steps]
    assert steps == [128, 256, 384]  # 16 copies x 8 steps, 3 iterations
    assert run.target == 0.95 and run.title.startswith("kelab/CartPole-v0 · run ")
    assert run.title.endswith(", seed 3") and np.isfinite(run.wall_time_s).all()
    png = (trained_run["dir"] / "training_curve.png").read_bytes()
    assert png[:8] == PNG


def test_the_trainer_redraws_the_curve_at_most_as_often_as_asked(tmp_path):
    log = RunLog(tmp_path, enabled=True)
    log.open()
    log.record(metrics_row(iteration=1, env_steps=64, wall_time_s=0.1, mean_return=2.0))
    log.draw_curve(min_interval_s=3600.0)  # periodic: the log opened just now
    assert not (tmp_path / "training_curve.png").exists()
    log.draw_curve()  # the end of train(): always
    assert (tmp_path / "training_curve.png").read_bytes()[:8] == PNG
    log.close()


def test_kelab_plot_compares_runs_on_one_figure(tmp_path, capsys):
    a = _write_log(tmp_path / "a", _rows(), seed=1)
    b = _write_log(tmp_path / "b", _rows(8, scale=0.8), seed=2)
    out = tmp_path / "cmp.png"
    assert main(["plot", str(a), str(b), "--out", str(out)]) == 0
    assert capsys.readouterr().out == f"wrote {out} (2 runs)\n"
    assert out.read_bytes()[:8] == PNG
    assert [r.label for r in (read_run(a), read_run(b))] == ["a, seed 1", "b, seed 2"]
    # runs in folders of one name are told apart by their paths
    c = _write_log(tmp_path / "x" / "a", _rows())
    assert main(["plot", str(a), str(c), "--out", str(out)]) == 0


def test_kelab_plot_reads_evaluations_at_the_judged_iteration(tmp_path):
    run = read_run(_write_log(tmp_path / "a", _rows()))
    np.testing.assert_array_equal(run.eval_steps, [3 * 1024])  # judged 3, arrived at 4
    np.testing.assert_array_equal(run.eval_rates, [0.5])
    np.testing.assert_array_equal(run.eval_at_most, [False])  # an older log: no flag


def test_an_evaluation_that_stopped_early_is_drawn_as_a_bound(tmp_path):
    """Its rate is the most it can be (the check stopped once the target was out of
    reach): a downward triangle with its own key, never a measured point."""
    rows = _rows()
    rows[1].update(eval_success_rate=0.4, eval_iteration=1, eval_episodes=10,
                   eval_stopped_early=True)  # fmt: skip
    rows[3].update(eval_episodes=100, eval_stopped_early=False)
    run = read_run(_write_log(tmp_path / "a", rows))
    assert (tmp_path / "a" / "metrics.csv").read_text().splitlines()[2].endswith(",0.4,1,10,1")
    assert list(zip(run.eval_steps, run.eval_rates, run.eval_at_most, strict=True)) == [
        (3 * 1024, 0.5, False),
        (1024, 0.4, True),
    ]
    success = curve_figure([run]).axes[1]
    points = {ln.get_marker(): ln for ln in success.lines if ln.get_linestyle() == "None"}
    assert set(points) == {"o", "v"}
    np.testing.assert_array_equal(points["v"].get_ydata(), [0.4])
    np.testing.assert_array_equal(points["o"].get_ydata(), [0.5])
    texts = [t.get_text() for t in success.get_legend().get_texts()]
    assert "evaluation stopped early: at most" in texts
    # the trainer's own drawing: (env_steps, rate, stopped_early) triples
    png = write_training_curve(tmp_path / "c.png", [(1000, 1.0, 0.5)], [(1000, 0.4, True)])
    assert png.read_bytes()[:8] == PNG


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (lambda d: d.rename(d.with_name("gone")), "RUN_DIR must be a run directory, got"),
        (lambda d: (d / "metrics.csv").unlink(), "RUN_DIR must hold a metrics.csv"),
        (
            lambda d: (d / "metrics.csv").write_bytes((d / "metrics.csv").read_bytes()[:-9]),
            "line 7 must end with a newline, got a row cut short",
        ),
        (
            lambda d: (d / "metrics.csv").write_text(
                (d / "metrics.csv").read_text().replace("\n3,", "\n3,oops,", 1)
            ),
            "line 4 must hold 17 values like its header, got 18",
        ),
        (
            lambda d: (d / "metrics.csv").write_text(
                (d / "metrics.csv").read_text().replace("\n3,3072,", "\n3,3x72,", 1)
            ),
            "line 4: env_steps must be a number, got '3x72'",
        ),
        (
            lambda d: (d / "metrics.csv").write_text(
                (d / "metrics.csv").read_text().replace(",0.5,3,,\n", ",0.5,3,10,2\n", 1)
            ),
            "line 5: eval_stopped_early must be 0 or 1, got '2'",
        ),
        (lambda d: (d / "metrics.csv").write_bytes(b"\xff\xfe garbage\n"), "must be UTF-8"),
        (
            lambda d: (d / "metrics.csv").write_text("iteration,env_steps,mean_return\n"),
            "must hold at least one iteration's row, got only the header",
        ),
        (
            lambda d: (d / "metrics.csv").write_text("steps,return\n1,2\n"),
            "must start with a header naming env_steps and mean_return",
        ),
    ],
    ids=[
        "missing-dir",
        "no-log",
        "truncated",
        "extra-field",
        "bad-number",
        "bad-flag",
        "binary",
        "header-only",
        "foreign-header",
    ],  # fmt: skip
)
def test_kelab_plot_gives_one_line_for_a_bad_run(tmp_path, capsys, damage, says):
    run = _write_log(tmp_path / "run", _rows())
    damage(run)
    out = tmp_path / "cmp.png"
    assert main(["plot", str(run), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kelab: error: ") and says in err, err
    assert err.count("\n") == 1
    assert not out.exists()


def test_kelab_plot_wants_a_png_name(tmp_path, capsys):
    run = _write_log(tmp_path / "run", _rows())
    assert main(["plot", str(run), "--out", str(tmp_path / "c.jpg")]) == 2
    assert "--out must be a .png file, got" in capsys.readouterr().err


def _draw_a_curve(folder: Path) -> list[str]:
    script = textwrap.dedent(
        f"""
        import sys
        import kelab.cli, kelab.train.curve, kelab.train.trainer, kelab.train.runlog
        kelab.cli.build_parser()
        assert "matplotlib" not in sys.modules, "imported before a curve is drawn"
        kelab.train.curve.write_training_curve({str(folder / "c.png")!r}, [(1, 1.0, None)])
        assert "matplotlib" in sys.modules
        assert "matplotlib.pyplot" not in sys.modules
        print("ok")
        """
    )
    return [sys.executable, "-c", script]


MATPLOTLIB_IMPORTS = Prestart(  # a fresh interpreter (~2 s), started early: tests/prestart.py
    _draw_a_curve,
    env={k: v for k, v in os.environ.items() if k != "MPLBACKEND"},
    timeout=120,
)


@pytest.mark.prestart(MATPLOTLIB_IMPORTS)
def test_matplotlib_loads_only_when_a_curve_is_drawn_and_never_pyplot():
    proc = MATPLOTLIB_IMPORTS.result()
    assert proc.stdout == "ok\n", proc.stderr[-2000:]


def test_kelab_train_says_up_front_that_matplotlib_is_missing(monkeypatch):
    import importlib.util

    from kelab.train import extra

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name)
    )
    assert extra.missing_training_packages() == ["matplotlib"]


def test_kelab_plot_checks_matplotlib_before_the_run_folders(tmp_path, monkeypatch, capsys):
    """Without matplotlib: one line naming the extra, even for a folder that is no run."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name)
    )
    assert main(["plot", str(tmp_path / "nope"), "--out", str(tmp_path / "c.png")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("kelab: error: kelab plot needs matplotlib")
    assert "pip install 'kelab[train]'" in err


@pytest.mark.filterwarnings("default")  # the note is a warning, printed as one line
def test_kelab_plot_draws_a_run_given_twice_once(tmp_path, capsys):
    """kelab plot D D (or D and D/): one curve, and a one-line note saying so."""
    a = _write_log(tmp_path / "a", _rows(), seed=1)
    out = tmp_path / "cmp.png"
    assert main(["plot", str(a), str(a) + "/", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.out == f"wrote {out} (1 run)\n"
    assert captured.err == f"kelab: warning: {a}/ is {a} again; it is drawn once\n"


# ------------------------------------------------ files kelab plot is handed (#37, item 18)
_HEADER = (
    "iteration,env_steps,wall_time_s,mean_return,success_rate,episodes,env_steps_per_s,"
    "collect_steps_per_s,learning_rate,action_std,value_loss,surrogate_loss,entropy,"
    "eval_success_rate,eval_iteration\r\n"
)


def _big_log(run_dir: Path, rows: int, spike_at: int | None = None) -> Path:
    """A metrics.csv of ``rows`` rows (a saw-tooth return, a spike at ``spike_at``), fast."""
    run_dir.mkdir(parents=True, exist_ok=True)

    def row(i: int) -> str:
        ret = 1000.0 if i == spike_at else (i % 1000) * 0.37
        judged = f"{0.25 + (i % 3) / 4},{i - 2}" if i % 50 == 0 else ","
        return f"{i},{1024 * i},{0.5 * i},{ret:.4f},{(i % 97) / 97:.6f},,,,,,,,,{judged}\r\n"

    with open(run_dir / "metrics.csv", "w", newline="") as fh:
        fh.write(_HEADER)
        fh.writelines(row(i) for i in range(1, rows + 1))
    return run_dir


def test_a_long_log_keeps_every_row_up_to_the_bound_and_its_shape_past_it(tmp_path):
    small = read_run(_big_log(tmp_path / "small", 1500))
    np.testing.assert_array_equal(small.env_steps, 1024.0 * np.arange(1, 1501))  # every row
    np.testing.assert_array_equal(small.eval_steps, 1024.0 * np.arange(48, 1500, 50))
    run = read_run(_big_log(tmp_path / "long", 60_000, spike_at=31_234))
    assert 2000 <= run.env_steps.size <= 30_000  # bounded, and still dense
    assert (np.diff(run.env_steps) > 0).all()  # in order, no row twice
    assert run.env_steps[0] == 1024 and run.env_steps[-1] == 1024 * 60_000  # both ends
    assert run.mean_return.max() == 1000.0  # the spike survives
    assert run.env_steps[run.mean_return.argmax()] == 1024 * 31_234
    assert run.mean_return.min() == 0.0 and run.success_rate.max() == 0.989691  # 96 / 97
    assert 100 <= run.eval_steps.size <= 1200  # 1,200 evaluations, bounded too
    assert set(run.eval_rates) == {0.25, 0.5, 0.75}


def _plot_a_big_log(folder: Path) -> list[str]:
    run = _big_log(folder / "big", 400_000)
    (run / "latest.json").write_text(json.dumps({"task": {"id": "kelab/CartPole-v0"}, "seed": 3}))
    script = textwrap.dedent(
        f"""
        import resource, sys
        limit = 450 * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        from kelab.cli import main
        sys.exit(main(["plot", {str(run)!r}, "--out", {str(folder / "big.png")!r}]))
        """
    )
    return [sys.executable, "-c", script]


BIG_LOG = Prestart(  # ~3 s of reading 21 MB, started early (tests/prestart.py)
    _plot_a_big_log,
    env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"},
    timeout=120,
)


@pytest.mark.prestart(BIG_LOG)
def test_kelab_plot_reads_a_large_log_in_bounded_memory():
    """A 21 MB metrics.csv under a 450 MB address-space limit.

    Reading it whole took ~15x its size (VmPeak 557 MB here); read a line at a time and
    kept as its envelope, the command peaks at ~260 MB, what drawing any run takes.
    """
    proc = BIG_LOG.result()
    assert (proc.folder / "big" / "metrics.csv").stat().st_size > 20_000_000
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (proc.folder / "big.png").read_bytes()[:8] == PNG


@pytest.mark.parametrize(
    ("line", "says"),
    [
        (b"1," * 40_000 + b"\n", "line 2 must be at most 65536 bytes"),
        (b"1,2\r3,4\n", "line 2 must be CSV"),
        (b"1,\xc3(,3\n", r"line 2 must be UTF-8 text, got byte 0xc3 at column 3"),
    ],
    ids=["endless-line", "lone-cr", "bad-utf8"],
)
def test_kelab_plot_refuses_a_line_it_cannot_read_in_one_line(tmp_path, capsys, line, says):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.csv").write_bytes(b"iteration,env_steps,mean_return\n" + line)
    assert main(["plot", str(run), "--out", str(tmp_path / "c.png")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err, err


@pytest.mark.filterwarnings("default")  # the note is a warning, printed as one line
@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[" * 100_000, "nested deeper than"),
        ('{"seed": 1' + "0" * 5000 + "}", "Exceeds the limit"),
        (None, "is 4194305 bytes, more than"),
    ],
    ids=["deep", "huge-int", "huge-file"],
)
def test_a_latest_json_that_cannot_be_read_is_one_warning_and_the_curve_is_drawn(
    tmp_path, capsys, text, says
):
    run = _write_log(tmp_path / "run", _rows())
    latest = run / "latest.json"
    latest.write_text(" " * (4 * 1024 * 1024 + 1) if text is None else text)
    out = tmp_path / "c.png"
    assert main(["plot", str(run), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.out == f"wrote {out} (1 run)\n"
    assert captured.err.count("\n") == 1, captured.err
    assert captured.err.startswith(f"kelab: warning: {latest} ") and says in captured.err
    assert "drawn without the run's task, seed and success target" in captured.err
    assert out.read_bytes()[:8] == PNG


def _plot_a_run_whose_latest_is_a_fifo(folder: Path) -> list[str]:
    run = _write_log(folder / "run", _rows())
    (run / "latest.json").unlink()
    os.mkfifo(run / "latest.json")
    return [sys.executable, "-m", "kelab", "plot", str(run), "--out", str(folder / "c.png")]


FIFO = Prestart(_plot_a_run_whose_latest_is_a_fifo, cwd=Path.cwd(), timeout=60)  # started early


@pytest.mark.prestart(FIFO)
def test_a_latest_json_that_is_a_fifo_is_not_waited_on():
    """Reading a named pipe waits for a writer forever: it is passed over with a warning."""
    proc = FIFO.result()
    run, out = proc.folder / "run", proc.folder / "c.png"
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stderr == f"kelab: warning: {run / 'latest.json'} is not a regular file; " + (
        "the curve is drawn without the run's task, seed and success target\n"
    )
    assert out.read_bytes()[:8] == PNG


def _drawn_texts(fig) -> list:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text

    FigureCanvasAgg(fig).draw()  # mathtext fails here, when a text is laid out
    return [t for t in fig.findobj(Text) if t.get_text()]


def test_dollars_and_underscores_in_names_are_drawn_as_written(tmp_path, capsys):
    """`$...$` in a run dir or task id is text, not mathtext; a leading `_` stays in the legend."""
    a = _write_log(tmp_path / "q$^$", _rows(), seed=1)
    (a / "latest.json").write_text(
        json.dumps({"task": {"id": r"my$task\_$x"}, "seed": 1, "train_config": {}})
    )
    b = _write_log(tmp_path / "_r$x$", _rows(8), seed=2)
    out = tmp_path / "c.png"
    assert main(["plot", str(a), "--out", str(out)]) == 0
    assert main(["plot", str(a), str(b), "--out", str(tmp_path / "two.png")]) == 0
    capsys.readouterr()
    single = curve_figure([read_run(a)])
    assert single.get_suptitle() == r"my$task\_$x · run q$^$, seed 1"
    both = curve_figure([read_run(a), read_run(b)])
    legend = both.axes[0].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["q$^$, seed 1", "_r$x$, seed 2"]
    for fig in (single, both):
        texts = _drawn_texts(fig)
        assert any("$" in t.get_text() for t in texts)
        assert not [t.get_text() for t in texts if "$" in t.get_text() and t.get_parse_math()]
