"""Session-wide test set-up: a virtual X server for the windowed tests, and the
subprocesses tests start early.

Windowed code is tested for real, never skipped: when no DISPLAY is set, the first test
that needs one starts an Xvfb server for the whole session (install it with
``apt-get install xvfb``; `.ci/run` does). Headless code never needs it.

A test marked ``@pytest.mark.prestart(JOB)`` has its subprocess started before it runs,
one job at a time from the start of the session (tests/prestart.py).
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator

import prestart
import pytest

os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "prestart(job): the test's subprocess (a tests/prestart.py Prestart) starts early, "
        "on the core the suite leaves idle; the test reads its result",
    )


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return
    prestart.schedule(
        marker.args[0] for item in session.items for marker in item.iter_markers("prestart")
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    prestart.start_next()  # the previous job ended: the next one starts


def pytest_sessionfinish(session: pytest.Session) -> None:
    prestart.close_all()


def _die_with_parent() -> None:
    """In the Xvfb child: ask Linux to end it when the test process dies, even by a crash."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:  # not Linux: the fixture's finaliser still stops it on a normal exit
        pass


@pytest.fixture(scope="session", autouse=True)
def _own_config_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The panel's default settings files (the user's config folder, #42) go to a temp one."""
    before = os.environ.get("XDG_CONFIG_HOME")
    os.environ["XDG_CONFIG_HOME"] = str(tmp_path_factory.mktemp("config"))
    yield
    if before is None:
        os.environ.pop("XDG_CONFIG_HOME", None)
    else:
        os.environ["XDG_CONFIG_HOME"] = before


@pytest.fixture(scope="session")
def x_display() -> Iterator[str]:
    """An X display for windowed tests: the user's one, or a private Xvfb server."""
    existing = os.environ.get("DISPLAY")
    if existing:
        yield existing
        return
    xvfb = shutil.which("Xvfb")
    if xvfb is None:
        pytest.fail(
            "windowed tests need an X server: no DISPLAY is set and Xvfb is not installed; "
            "install it with `apt-get install xvfb` (as .ci/run does) or run under xvfb-run"
        )
    # Xvfb picks a free display itself and writes its number to the pipe once it accepts
    # connections (-displayfd): no display two sessions (pytest-xdist workers) both took
    read_end, write_end = os.pipe()
    proc = subprocess.Popen(
        [xvfb, "-displayfd", str(write_end), "-screen", "0", "1280x1024x24", "-nolisten", "tcp"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        pass_fds=(write_end,),
        preexec_fn=_die_with_parent,
    )
    os.close(write_end)
    number = b""
    deadline = time.monotonic() + 10.0
    while not number.endswith(b"\n") and time.monotonic() < deadline:
        if not select.select([read_end], [], [], max(0.0, deadline - time.monotonic()))[0]:
            break
        chunk = os.read(read_end, 16)
        if not chunk:  # Xvfb ended without a display
            break
        number += chunk
    os.close(read_end)
    if not number.endswith(b"\n"):
        proc.kill()
        proc.wait(timeout=5)
        pytest.fail("could not start Xvfb: it named no display within 10 s")
    display = f":{int(number)}"
    os.environ["DISPLAY"] = display
    try:
        yield display
    finally:
        os.environ.pop("DISPLAY", None)
        proc.terminate()
        proc.wait(timeout=5)
