"""Recorders under faults: SIGKILL mid-run, unwritable destinations, GIF timing, sensors.

The kill tests run a real recording in a child process, SIGKILL it, and read back what it
left in ``<path>.partial``: every row but at most ``flush_every - 1`` (or the rows of the
last ``flush_interval_s``), every GIF frame but at most the one being written.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import kelab as ke
from kelab.app.recorders import load_recording

# imageio-ffmpeg (0.6) leaves ffmpeg's stdin/stdout pipes open once a read reaches the
# end of an mp4 (read_frames closes them only while ffmpeg still runs): ignore just that
IMAGEIO_PIPES = "ignore:unclosed file <_io.Buffered:ResourceWarning"

CHILD = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    from kelab.app.recorders import DataRecorder, VideoRecorder
    from kelab.timing.timeline import Timeline

    out, mode = sys.argv[1], sys.argv[2]
    tl = Timeline()
    sig = {"x": lambda: tl.time_s * 2.0, "pair": lambda: np.array([tl.time_s, -1.0])}
    every = 16 if mode == "running" else 10_000
    recs = [
        DataRecorder(f"{out}/log.csv", bodies=(), signals=sig, flush_every=every,
                     flush_interval_s=0.05),
        DataRecorder(f"{out}/log.npz", bodies=(), signals=sig, flush_every=every,
                     flush_interval_s=0.05),
    ]
    for r in recs:
        r.attach(tl)
    video = VideoRecorder(f"{out}/clip.gif")
    k = [0]
    def frame():
        k[0] += 1
        img = np.zeros((24, 32, 3), np.uint8)
        img[:, :, 0] = (k[0] * 7) % 256
        return img
    video.attach(tl, frame_source=frame)
    if mode == "running":
        VideoRecorder(f"{out}/clip.mp4").attach(tl, frame_source=frame)
        while True:  # record until killed, reporting progress
            tl.advance(1 / 30)
            print(recs[0].rows, recs[1].rows, video.frames, flush=True)
    else:  # 40 rows, a pause longer than flush_interval_s, one more row: all flushed
        for _ in range(40):
            tl.advance(1 / 30)
        time.sleep(0.2)
        tl.advance(1 / 30)
        print(recs[0].rows, recs[1].rows, video.frames, flush=True)
        time.sleep(60)
    """
)


def _run_and_kill(tmp_path: Path, mode: str, min_rows: int) -> tuple[int, int, int]:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path), mode],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        counts = (0, 0, 0)
        for line in proc.stdout:
            counts = tuple(int(v) for v in line.split())  # type: ignore[assignment]
            if counts[0] >= min_rows:
                break
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()  # type: ignore[union-attr]
    assert proc.returncode == -signal.SIGKILL
    assert counts[0] >= min_rows, "the child never got going"
    return counts


def _gif_frames(path: Path) -> list[np.ndarray]:
    """Every frame Pillow can decode (a frame cut by the kill ends the list)."""
    frames = []
    with Image.open(path) as im:
        k = 0
        while True:
            try:
                im.seek(k)
                frames.append(np.asarray(im.convert("RGB")))
            except (EOFError, OSError):
                break
            k += 1
    return frames


def _check_rows(rec, at_least: int) -> None:
    assert not rec.complete
    assert rec.columns == ("time", "step", "x", "pair[0]", "pair[1]")
    n = rec.data.shape[0]
    assert n >= at_least
    assert np.array_equal(rec.step, np.arange(n))  # no gap, no garbage
    assert np.array_equal(rec.data[:, 2], rec.time * 2.0)
    assert np.array_equal(rec.data[:, 3], rec.time) and (rec.data[:, 4] == -1.0).all()


@pytest.mark.filterwarnings(IMAGEIO_PIPES)
def test_sigkill_mid_run_loses_at_most_one_flush_of_rows_and_one_frame(tmp_path):
    csv_rows, npz_rows, frames = _run_and_kill(tmp_path, "running", min_rows=150)
    assert not (tmp_path / "log.csv").exists() and not (tmp_path / "log.npz").exists()
    _check_rows(load_recording(tmp_path / "log.csv"), csv_rows - 15)
    _check_rows(load_recording(tmp_path / "log.npz"), npz_rows - 15)
    got = _gif_frames(tmp_path / "clip.gif.partial")
    assert len(got) >= frames - 1
    reds = [int(f[0, 0, 0]) for f in got]
    assert reds == [((2 * k + 1) * 7) % 256 for k in range(len(got))]  # gif, mp4, gif...
    # ffmpeg is a process of its own: it sees the pipe close and finishes the mp4 with
    # every frame it was handed but what sat in the 8 KiB pipe buffer (at most one frame
    # of this size; poll: it finishes after the kill)
    import imageio.v3 as iio

    deadline = time.monotonic() + 20
    while True:
        try:
            clip = iio.imread(tmp_path / "clip.mp4")
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    assert clip.shape[0] >= frames - 1


def test_sigkill_after_a_pause_loses_nothing_thanks_to_the_flush_interval(tmp_path):
    csv_rows, npz_rows, frames = _run_and_kill(tmp_path, "paused", min_rows=41)
    assert csv_rows == npz_rows == 41  # flush_every is 10,000: only the interval flushed
    _check_rows(load_recording(tmp_path / "log.csv"), 41)
    _check_rows(load_recording(tmp_path / "log.npz"), 41)
    assert len(_gif_frames(tmp_path / "clip.gif.partial")) == frames


def test_npz_streams_rows_while_recording_and_publishes_atomically(tmp_path):
    timeline = ke.Timeline()
    rec = ke.DataRecorder(tmp_path / "s.npz", bodies=(), signals={"v": lambda: 1.5})
    rec.attach(timeline)
    timeline.advance(10.0)  # 301 rows at 30 Hz
    mid = load_recording(tmp_path / "s.npz")  # read while recording: the .partial spool
    assert not mid.complete and 301 - 15 <= mid.data.shape[0] <= 301
    rec.close()
    assert not rec.partial_path.exists()
    done = load_recording(tmp_path / "s.npz")
    assert (
        done.complete and done.data.shape == (301, 3) and done.column("v").tolist() == [1.5] * 301
    )
    with np.load(tmp_path / "s.npz", allow_pickle=False) as z:
        assert z["data"].shape == (301, 3) and z["step"].dtype == np.int64
        assert np.array_equal(z["time"], z["data"][:, 0])


def test_empty_npz_and_csv_recordings(tmp_path):
    for name in ("e.npz", "e.csv"):
        rec = ke.DataRecorder(tmp_path / name, bodies=(), signals={"v": lambda: 0.0})
        rec.attach(ke.Timeline())
        rec.close()
        out = load_recording(tmp_path / name)
        assert out.complete and out.columns == ("time", "step", "v") and out.data.shape == (0, 3)


@pytest.mark.parametrize("cls, name", [(ke.DataRecorder, "x.csv"), (ke.VideoRecorder, "x.gif")])
def test_unwritable_destination_is_refused_at_creation(tmp_path, cls, name):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    for bad in (blocker / name, Path("/proc") / name, Path("/proc/kelab-nope") / name):
        with pytest.raises(ValueError, match=rf"{cls.__name__}: .*(directory|writable)"):
            cls(bad)
    (tmp_path / name).mkdir()
    with pytest.raises(ValueError, match="is a directory"):
        cls(tmp_path / name)


def test_unwritable_destination_refused_for_a_regular_user():
    if os.geteuid() != 0:
        pytest.skip("needs root to drop to another user")
    import shutil
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="kelab-ro-", dir="/tmp"))
    try:
        os.chmod(base, 0o755)  # traversable by the unprivileged user, not writable
        locked = base / "locked"
        locked.mkdir(mode=0o555)
        code = textwrap.dedent(
            f"""
            import os
            import numpy.ma  # numpy imports it lazily; the user may not read root's home
            from kelab.app.recorders import DataRecorder  # imported before dropping root
            os.setgid(65534); os.setuid(65534)
            try:
                DataRecorder({str(locked / "x.csv")!r})
            except ValueError as exc:
                print("refused:", exc)
            """
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
        )
        assert "refused:" in out.stdout and "permission denied" in out.stdout, out.stderr
        assert os.listdir(locked) == []  # no probe file left behind
    finally:
        shutil.rmtree(base)


def test_gif_frame_timing_is_exact_on_average(tmp_path):
    timeline = ke.Timeline()
    frame = np.zeros((8, 8, 3), np.uint8)
    video = ke.VideoRecorder(tmp_path / "t.gif")
    video.attach(timeline, frame_source=lambda: frame)
    timeline.advance(2.99)  # 90 Capture steps at 30 Hz
    video.close()
    with Image.open(tmp_path / "t.gif") as im:
        durations = []
        for k in range(im.n_frames):
            im.seek(k)
            durations.append(im.info["duration"])
    assert video.frames == len(durations) == 90
    assert durations[:6] == [30, 40, 30, 30, 40, 30]
    assert sum(durations) == 3000  # 90 frames at 30 fps: exactly 3 s, not 2.7 s
    cum = np.cumsum(durations)
    assert np.abs(cum - 1000 * np.arange(1, 91) / 30).max() <= 5  # within half a centisecond


@pytest.mark.parametrize("fps, first", [(20, [50, 50]), (24, [40, 40, 50]), (60, [20, 10, 20])])
def test_gif_delays_for_other_rates(tmp_path, fps, first):
    timeline = ke.Timeline()
    video = ke.VideoRecorder(tmp_path / "r.gif", fps=fps)
    video.attach(timeline, frame_source=lambda: np.zeros((4, 4, 3), np.uint8))
    timeline.advance(1.0)
    video.close()
    with Image.open(tmp_path / "r.gif") as im:
        durations = []
        for k in range(im.n_frames):
            im.seek(k)
            durations.append(im.info["duration"])
    assert durations[: len(first)] == first
    exact = 1000 * np.arange(1, len(durations) + 1) / fps
    assert np.abs(np.cumsum(durations) - exact).max() <= 5


def test_unknown_sensor_is_refused_at_attach(tmp_path):
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(name="ground"), at="/", per_environment=False)
    b.add(ke.Robot(ke.Asset.from_registry("kelab/robot/cartpole:v1")), at="/World/Robot")
    b.joint_sensor("pole.joint", "/World/Robot/cart_to_pole")
    world = ke.World(b.build())
    rec = ke.DataRecorder(tmp_path / "s.csv", bodies=(), sensors=["pole.joitn"])
    with pytest.raises(ValueError, match=r"unknown sensors \['pole.joitn'\].*'pole.joint'"):
        rec.attach(ke.Timeline(), world=world)
    assert not rec.attached
    with pytest.raises(ValueError, match="sensors must be a sequence of sensor names"):
        ke.DataRecorder(tmp_path / "s.csv", sensors="pole.joint")


@pytest.mark.parametrize("bad", [[0, 0], [0.5], ["1"], [True], [-1]])
def test_recorder_env_ids_are_strict(tmp_path, bad):
    with pytest.raises(ValueError, match="DataRecorder.env_ids"):
        ke.DataRecorder(tmp_path / "e.csv", env_ids=bad)


@pytest.mark.parametrize("bad", ["1.0", [[1.0, 2.0]], object(), 1 + 2j])
def test_a_signal_returning_a_non_number_is_a_clear_error(tmp_path, bad):
    timeline = ke.Timeline()
    rec = ke.DataRecorder(tmp_path / "s.csv", bodies=(), signals={"odd": lambda: bad})
    rec.attach(timeline)
    with pytest.raises(ValueError, match=r"signals\['odd'\] must return a real number"):
        timeline.advance(0.0)
    rec.close()


LIDAR_CHILD = textwrap.dedent(
    """
    import sys
    import kelab as ke
    from kelab.app.lidar_recorder import LidarRecorder

    out = sys.argv[1]
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(name="ground"), at="/", per_environment=False)
    b.add(ke.Prop(ke.Circle(0.2), mass=1.0, initial_pose=ke.Pose(0.0, 3.0)), at="/World/Bot")
    for k, angle in enumerate((-2.0, -1.57, -1.1)):
        b.rangefinder(f"beam{k}", "/World/Bot", angle=angle, max_range=50.0)
    world = ke.World(b.build())
    tl = ke.Timeline()
    tl.bind(world.step, runner="Robot", phase=ke.Phase.PHYSICS, name="world.step")
    recs = [LidarRecorder(f"{out}/scan{s}", flush_interval_s=60.0) for s in (".npz", ".csv")]
    for r in recs:
        r.attach(tl, world=world)
    while True:  # the ball falls: the beams shorten scan by scan; record until killed
        tl.advance(1 / 30)
        print(recs[0].scans, recs[1].scans, flush=True)
    """
)


@pytest.mark.parametrize("suffix", [".npz", ".csv"])
def test_sigkill_leaves_a_lidar_recording_that_load_recording_reads(tmp_path, suffix):
    proc = subprocess.Popen(
        [sys.executable, "-c", LIDAR_CHILD, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        scans = 0
        for line in proc.stdout:
            scans = min(int(v) for v in line.split())
            if scans >= 40:
                break
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()  # type: ignore[union-attr]
    assert proc.returncode == -signal.SIGKILL and scans >= 40
    assert not (tmp_path / f"scan{suffix}").exists()
    rec = load_recording(tmp_path / f"scan{suffix}")  # <path>.partial, with the beam names
    assert not rec.complete
    assert rec.columns == ("time", "step", "beam0", "beam1", "beam2")
    n = rec.data.shape[0]
    assert scans - 15 <= n <= scans + 16  # all but the last flush_every - 1 = 15 scans
    assert np.array_equal(rec.step, np.arange(n))
    np.testing.assert_allclose(rec.time, np.arange(n) / 30, rtol=0, atol=1e-9)
    beams = rec.data[:, 2:]
    assert np.isfinite(beams).all() and (beams > 0).all()
    assert beams[:, 1].min() < beams[0, 1] - 1.0  # scans of the falling ball, not one repeated


def test_closed_lidar_npz_reads_back_with_load_recording_like_its_spool(tmp_path):
    from kelab.app.lidar_recorder import LidarRecorder

    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(name="ground"), at="/", per_environment=False)
    b.add(ke.Prop(ke.Circle(0.2), mass=1.0, initial_pose=ke.Pose(0.0, 3.0)), at="/World/Bot")
    b.rangefinder("down", "/World/Bot", angle=-1.57, max_range=50.0)
    world = ke.World(b.build(), num_envs=2)
    tl = ke.Timeline()
    tl.bind(world.step, runner="Capture", phase=ke.Phase.PHYSICS, name="world.step")
    rec = LidarRecorder(tmp_path / "s.npz", env_ids=(0, 1))
    rec.attach(tl, world=world)
    tl.advance(1.0)
    live = load_recording(tmp_path / "s.npz")
    rec.close()
    done = load_recording(tmp_path / "s.npz")
    assert not live.complete and done.complete and not rec.partial_path.exists()
    assert done.columns == live.columns == ("time", "step", "env0:down", "env1:down")
    assert done.data.shape == (31, 4) and np.array_equal(done.data[: len(live.data)], live.data)
    with np.load(tmp_path / "s.npz") as z:
        assert z["ranges"].shape == (31, 2, 1) and z["beams"].tolist() == ["down"]


MP4_CHILD = textwrap.dedent(
    """
    import sys
    import numpy as np
    from kelab.app.recorders import VideoRecorder
    from kelab.timing.timeline import Timeline

    tl = Timeline()
    k = [0]
    def frame():
        k[0] += 1
        img = np.zeros((48, 64, 3), np.uint8)
        img[:, :, 0] = (k[0] * 7) % 256
        return img
    video = VideoRecorder(sys.argv[1] + "/clip.mp4")
    video.attach(tl, frame_source=frame)
    while True:  # record until killed
        tl.advance(1 / 30)
        print(video.frames, flush=True)
    """
)


def _read_mp4_when_done(path: Path) -> np.ndarray:
    """The frames of an mp4 that ffmpeg may still be finishing (poll up to 20 s)."""
    import imageio.v3 as iio

    deadline = time.monotonic() + 20
    while True:
        try:
            return iio.imread(path)
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.mark.filterwarnings(IMAGEIO_PIPES)
@pytest.mark.parametrize("victim", ["process group", "ffmpeg too"])
def test_mp4_after_a_process_group_kill(tmp_path, victim):
    """ffmpeg runs in a process group of its own (imageio-ffmpeg's setpgrp): a SIGKILL to
    the recording's whole process group leaves it running to finish a readable mp4; only a
    kill that reaches ffmpeg itself leaves an unreadable file (docs/recorders.md)."""
    import imageio.v3 as iio

    proc = subprocess.Popen(
        [sys.executable, "-c", MP4_CHILD, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a shell job or a service
    )
    try:
        assert proc.stdout is not None
        frames = 0
        for line in proc.stdout:
            frames = int(line)
            if frames >= 90:
                break
        kids = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        assert len(kids) == 1 and os.getpgid(int(kids[0])) != os.getpgid(proc.pid)
        if victim == "ffmpeg too":
            os.kill(int(kids[0]), signal.SIGKILL)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()  # type: ignore[union-attr]
    assert proc.returncode == -signal.SIGKILL and frames >= 90
    if victim == "process group":
        assert _read_mp4_when_done(tmp_path / "clip.mp4").shape[0] >= frames - 1
    else:
        time.sleep(0.5)
        with pytest.raises(Exception, match="meta information|moov|Invalid data"):
            iio.imread(tmp_path / "clip.mp4")
