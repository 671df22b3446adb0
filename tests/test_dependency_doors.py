"""Each dependency's private API behind one door, tested both ways (#38).

A door checks at import that the dependency is the release it was written for and takes
the public path elsewhere: torch's ``_fused_adam_`` (kelab.train._torch; public path
``torch.optim.Adam(fused=True)``), glibc's ``mallopt`` (kelab.train._malloc; public path
the C library's own allocation) and CPython's ``atexit._run_exitfuncs`` + ``os._exit``
(kelab.cli._exit; public path ``sys.exit``). Each test forces the public path and checks
that it gives the result the door gives. tests/test_layers.py checks that no other module
uses these private names.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from prestart import Prestart

torch = pytest.importorskip("torch")


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


# ----------------------------------------------------------------------- torch: fused Adam
def _adam_run() -> tuple[list[torch.Tensor], dict]:
    """Six Adam steps: a parameter without a gradient at step 2, a new rate at step 3."""
    from kelab.train.adam import Adam

    g = torch.Generator().manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(s, generator=g)) for s in [(8, 4), (8,), (1, 8), (3,)]]
    opt = Adam(params, lr=3e-3)
    for step in range(6):
        for i, p in enumerate(params):
            grad = torch.randn(p.shape, generator=g)
            p.grad = None if (step == 2 and i == 3) else grad
        if step == 3:
            opt.param_groups[0]["lr"] = 1e-3
        opt.step()
    return [p.detach().clone() for p in params], opt.state_dict()


def test_the_torch_door_is_open_only_on_the_release_it_was_written_for():
    from kelab.train import _torch

    assert _torch.private_kernel_fits("2.13.0+cpu") and _torch.private_kernel_fits("2.13.1")
    for other in ("2.14.0", "2.1.3", "3.13.0", "2.130.0", "nightly"):
        assert not _torch.private_kernel_fits(other), other
    assert _torch.PRIVATE_KERNEL == _torch.private_kernel_fits(torch.__version__)


def test_adam_through_torch_optim_gives_the_door_s_weights_bit_for_bit(monkeypatch):
    from kelab.train import _torch

    if not _torch.PRIVATE_KERNEL:
        pytest.skip(f"torch {torch.__version__} is not a release the door was written for")
    door_weights, door_state = _adam_run()
    built = []

    class Counted(torch.optim.Adam):
        def __init__(self, *args, **kwargs):
            built.append(kwargs)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(_torch, "PRIVATE_KERNEL", False)  # the public path, forced
    monkeypatch.setattr(torch.optim, "Adam", Counted)
    public_weights, public_state = _adam_run()
    assert len(built) == 6 and all(k["fused"] for k in built)
    # bit-identical, not merely close: torch.optim.Adam(fused=True) runs the same kernel
    assert all(torch.equal(a, b) for a, b in zip(door_weights, public_weights, strict=True))
    assert door_state["param_groups"] == public_state["param_groups"]
    for i, entry in door_state["state"].items():
        assert all(torch.equal(entry[k], public_state["state"][i][k]) for k in entry)


ANOTHER_TORCH = Prestart(  # ~3 s of torch and torch.optim imports, beside the suite
    [
        sys.executable,
        "-c",
        textwrap.dedent(
            """
            import json, torch
            torch.__version__ = "2.14.0"  # as if another release were installed
            from kelab.train import _torch
            from kelab.train.adam import Adam
            w = torch.nn.Parameter(torch.ones(3))
            opt = Adam([w], lr=0.1)
            for g in ([1.0, -1.0, 0.0], [0.5, 2.0, -3.0]):
                w.grad = torch.tensor(g)
                opt.step()
            print(json.dumps({"open": _torch.PRIVATE_KERNEL,
                              "w": [x.hex() for x in w.tolist()],
                              "dynamo": "torch._dynamo" in __import__("sys").modules}))
            """
        ),
    ],
    cwd=Path.cwd(),
    timeout=300,
)


@pytest.mark.prestart(ANOTHER_TORCH)
def test_another_torch_release_closes_the_door_at_import():
    done = ANOTHER_TORCH.result()
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["open"] is False and seen["dynamo"]  # it went through torch.optim
    from kelab.train.adam import Adam

    w = torch.nn.Parameter(torch.ones(3))
    opt = Adam([w], lr=0.1)
    for g in ([1.0, -1.0, 0.0], [0.5, 2.0, -3.0]):
        w.grad = torch.tensor(g)
        opt.step()
    assert seen["w"] == [x.hex() for x in w.tolist()]


# --------------------------------------------------------------------- glibc: mallopt
def _update_like() -> torch.Tensor:
    """Megabyte activations and gradients allocated and freed again and again."""
    g = torch.Generator().manual_seed(1)
    w = torch.randn(256, 256, generator=g, requires_grad=True)
    total = torch.zeros(())
    for _ in range(5):
        x = torch.randn(3072, 256, generator=g)
        loss = torch.tanh(x @ w).square().mean()
        loss.backward()
        total = total + loss.detach() + w.grad.sum()
        w.grad = None
    return total


class _Recorder:
    """glibc's two calls, recorded: what heap_reuse asks of the C library."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int]] = []

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append(("mallopt", param, value))
        return 1

    def malloc_trim(self, pad: int) -> int:
        self.calls.append(("malloc_trim", pad, 0))
        return 1


def test_heap_reuse_sets_glibc_s_thresholds_for_the_block_and_puts_them_back(monkeypatch):
    from kelab.train import _malloc

    recorder = _Recorder()
    monkeypatch.setattr(_malloc, "_libc", recorder)
    with _malloc.heap_reuse() as active:
        inside = list(recorder.calls)
    assert active is True
    assert inside == [("mallopt", -3, 32 << 20), ("mallopt", -1, 256 << 20)]
    assert recorder.calls[2:] == [
        ("mallopt", -3, 128 << 10),
        ("mallopt", -1, 128 << 10),
        ("malloc_trim", 0, 0),
    ]


def test_heap_reuse_off_glibc_leaves_allocation_alone_with_the_same_numbers(monkeypatch):
    from kelab.train import _malloc

    with _malloc.heap_reuse() as door:
        reused = _update_like()
    assert door is _malloc.GLIBC  # this machine's C library decides (glibc 2: the door)
    loaded: list[str] = []
    monkeypatch.setattr(_malloc, "GLIBC", False)  # the public path, forced
    monkeypatch.setattr(_malloc, "_libc", False)  # looked up again, under GLIBC = False
    monkeypatch.setattr(_malloc.ctypes, "CDLL", lambda name: loaded.append(name))
    with _malloc.heap_reuse() as public:
        plain = _update_like()
    assert public is False and loaded == []  # the C library was not even loaded
    assert torch.equal(reused, plain)


def test_another_c_library_closes_the_glibc_door_at_import():
    from kelab.train import _malloc

    assert _malloc.glibc_fits("glibc 2.36") and _malloc.glibc_fits("glibc 2.17")
    for other in ("glibc 2.16", "glibc 3.0", "musl 1.2.4", "", None):
        assert not _malloc.glibc_fits(other), other
    done = _python(
        """
        import os
        os.confstr = lambda name: "glibc 3.0"  # as if another C library were installed
        from kelab.train import _malloc
        with _malloc.heap_reuse() as active:
            pass
        print(_malloc.GLIBC, active, _malloc._libc)
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False", "None"]


# ------------------------------------------------------------- CPython: the prompt exit
_EXIT_PROBE = """
import sys, atexit
from kelab.cli import _exit
if {closed}:
    _exit.PROMPT_EXIT = False  # the public path, forced
class Loud:
    def __del__(self):  # runs in the interpreter's teardown, which the prompt exit skips
        sys.stdout.write(" teardown")
        sys.stdout.flush()
loud = Loud()
atexit.register(lambda: sys.stdout.write(" handler"))
sys.stdout.write("main")  # not flushed yet: the exit flushes it
print(_exit.PROMPT_EXIT, file=sys.stderr)
_exit.exit_now(3)
"""


@pytest.mark.parametrize("closed", [False, True])
def test_the_exit_runs_the_handlers_and_flushes_either_way(closed):
    done = _python(_EXIT_PROBE.format(closed=closed))
    assert done.returncode == 3, done.stderr
    from kelab.cli import _exit

    door = _exit.PROMPT_EXIT and not closed
    assert done.stderr.split() == [str(door)]
    # the same handlers and output; only the teardown is skipped by the door
    assert done.stdout == ("main handler" if door else "main handler teardown")


def test_the_exit_door_is_open_only_on_the_interpreters_it_was_written_for():
    from kelab.cli import _exit

    assert _exit.prompt_exit_fits("cpython", (3, 11))
    for implementation, version in [("cpython", (3, 9)), ("cpython", (3, 14)), ("pypy", (3, 11))]:
        assert not _exit.prompt_exit_fits(implementation, version)
    expected = _exit.prompt_exit_fits(sys.implementation.name, sys.version_info[:2])
    assert _exit.PROMPT_EXIT == expected
