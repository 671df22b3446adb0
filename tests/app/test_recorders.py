"""DataRecorder and VideoRecorder: rows per runner step, phases, formats, closing."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from app_helpers import FakeClock, cartpole_scene, make_app

import kelab as ke


def test_csv_rows_follow_the_capture_runner_and_read_back_exactly(tmp_path):
    world = ke.World(cartpole_scene(), num_envs=2)
    timeline = ke.Timeline()
    timeline.bind(lambda ts: world.step(ts), runner="Robot", phase=ke.Phase.PHYSICS)
    rec = ke.DataRecorder(tmp_path / "log.csv", bodies=["/World/Robot/pole"], env_ids=(0, 1))
    rec.attach(timeline, world=world)
    seen = []
    timeline.bind(lambda ts: seen.append(world.body_poses[:, 2].copy()), runner="Capture")
    timeline.advance(Fraction(1, 10))
    rec.close()
    assert rec.rows == 4 and rec.closed and not rec.attached
    header = (tmp_path / "log.csv").read_text().splitlines()[0].split(",")
    assert header[:3] == ["time", "step", "env0:/World/Robot/pole.x"]
    assert header[-1] == "env1:/World/Robot/pole.omega" and len(header) == 2 + 2 * 6
    data = np.loadtxt(tmp_path / "log.csv", delimiter=",", skiprows=1)
    assert data[:, 0] == pytest.approx([0, 1 / 30, 2 / 30, 0.1])
    assert np.array_equal(data[:, 1], [0, 1, 2, 3])
    # ACQUISITION runs before the CONTROL callback of the same step: same state, exactly
    for row, poses in zip(data, seen, strict=True):
        assert np.array_equal(row[2:5], poses[0]) and np.array_equal(row[8:11], poses[1])


def test_npz_with_sensors_signals_and_fields(tmp_path):
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(name="ground"), at="/", per_environment=False)
    b.add(ke.Robot(ke.Asset.from_registry("kelab/robot/cartpole:v1")), at="/World/Robot")
    b.joint_sensor("pole.joint", "/World/Robot/cart_to_pole")
    world = ke.World(b.build())
    timeline = ke.Timeline()
    timeline.bind(lambda ts: world.step(ts), runner="Robot", phase=ke.Phase.PHYSICS)
    rec = ke.DataRecorder(
        tmp_path / "log.npz",
        bodies=["/World/Robot/cart"],
        sensors=["pole.joint"],
        signals={"t2": lambda: timeline.time_s * 2, "pair": lambda: np.array([1.0, 2.0])},
        fields=("velocity",),
        runner="Robot",
        phase="export",
    )
    rec.attach(timeline, world=world)
    timeline.advance(0.2)
    rec.close()
    out = np.load(tmp_path / "log.npz")
    assert list(out["columns"]) == [
        "time",
        "step",
        "/World/Robot/cart.vx",
        "/World/Robot/cart.vy",
        "/World/Robot/cart.omega",
        "pole.joint[0]",
        "pole.joint[1]",
        "t2",
        "pair[0]",
        "pair[1]",
    ]
    assert out["data"].shape == (11, 10) and np.array_equal(out["step"], np.arange(11))
    assert out["data"][:, 7] == pytest.approx(out["time"] * 2)


def test_recorder_validation(tmp_path):
    with pytest.raises(ValueError, match=r"\.csv"):
        ke.DataRecorder(tmp_path / "log.txt")
    with pytest.raises(ValueError, match="fields"):
        ke.DataRecorder(tmp_path / "log.csv", fields=("pose", "force"))
    with pytest.raises(ValueError, match="unknown bodies"):
        ke.DataRecorder(tmp_path / "a.csv", bodies=["/nope"]).attach(
            ke.Timeline(), world=ke.World(cartpole_scene())
        )
    with pytest.raises(KeyError, match="no time runner named 'Fast'"):
        ke.DataRecorder(tmp_path / "b.csv", bodies=(), runner="Fast").attach(ke.Timeline())
    with pytest.raises(ValueError, match="VideoRecorder.every"):
        ke.VideoRecorder(tmp_path / "v.mp4", every=0)
    with pytest.raises(ValueError, match="frame_source"):
        ke.VideoRecorder(tmp_path / "v.gif").attach(ke.Timeline())
    with pytest.raises(ValueError, match=r"phase must be a Phase \(ACQUISITION.*got 'later'"):
        ke.DataRecorder(tmp_path / "c.csv", bodies=(), phase="later")


@pytest.mark.parametrize(
    ("env_ids", "shown"),
    [((), r"\(\)"), ((0, -1), r"\(0, -1\)"), ((True,), r"\(True,\)"), ("01", "'01'"), (3, "3")],
)
def test_both_recorders_check_env_ids_in_one_wording(tmp_path, env_ids, shown):
    from kelab.app.lidar_recorder import LidarRecorder

    with pytest.raises(
        ValueError, match=f"DataRecorder.env_ids must be distinct copy indices >= 0, got {shown}$"
    ):
        ke.DataRecorder(tmp_path / "a.csv", env_ids=env_ids)
    with pytest.raises(
        ValueError, match=f"LidarRecorder.env_ids must be copy indices >= 0, got {shown}$"
    ):
        LidarRecorder(tmp_path / "a.npz", env_ids=env_ids)


def test_recorders_take_numpy_copy_indices_and_only_data_refuses_repeats(tmp_path):
    from kelab.app.lidar_recorder import LidarRecorder

    rec = ke.DataRecorder(tmp_path / "a.csv", env_ids=np.array([2, 0]))
    assert rec.env_ids.tolist() == [2, 0] and rec.env_ids.dtype == np.intp
    with pytest.raises(ValueError, match=r"distinct copy indices >= 0, got \(1, 1\)"):
        ke.DataRecorder(tmp_path / "b.csv", env_ids=(1, 1))
    assert LidarRecorder(tmp_path / "c.npz", env_ids=(1, 1)).env_ids.tolist() == [1, 1]


def test_empty_recording_still_writes_a_readable_file(tmp_path):
    rec = ke.DataRecorder(tmp_path / "none.csv", bodies=(), signals={"x": lambda: 0.0})
    rec.attach(ke.Timeline())
    rec.close()
    assert (tmp_path / "none.csv").read_text() == "time,step,x\n"


# imageio-ffmpeg (0.6) leaves ffmpeg's pipes open once a read reaches the end of an mp4
@pytest.mark.filterwarnings("ignore:unclosed file <_io.Buffered:ResourceWarning")
@pytest.mark.parametrize("suffix", [".gif", ".mp4"])
def test_video_recorder_in_an_app(fake_clock: FakeClock, tmp_path, suffix):
    import imageio.v3 as iio

    class Moving(ke.App):
        def render(self, canvas, alpha):
            canvas.circle((self.sim_time - 0.5, 1.0), 0.1, (255, 255, 0))

    app = make_app(fake_clock, Moving, size=(63, 47), time_mode=ke.TimeMode.SIM_HIGH_PERF)
    video = app.add_recorder(ke.VideoRecorder(tmp_path / f"v{suffix}", every=2))
    assert video.fps == pytest.approx(15.0)
    # 0.6 s: Capture fires 18 times and every 2nd one records, but the first (t = 0)
    # comes before any frame was drawn, so it is skipped
    app.start(max_frames=30)
    frames = iio.imread(tmp_path / f"v{suffix}")
    assert frames.shape[0] == video.frames == 8
    assert frames.shape[1:3] == (48, 64)  # padded to even sizes
    assert not np.array_equal(frames[0], frames[-1])


def test_destination_checked_at_creation_and_gif_timing_exact(tmp_path):
    # issue 9: a bad directory was found only at close; GIF frames were 30 ms, not 33.3 ms
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="cannot create the directory"):
        ke.VideoRecorder(tmp_path / "file" / "v.gif")
    timeline = ke.Timeline()
    video = ke.VideoRecorder(tmp_path / "v.gif")
    video.attach(timeline, frame_source=lambda: np.zeros((4, 4, 3), np.uint8))
    timeline.advance(0.99)
    video.close()
    from PIL import Image

    with Image.open(tmp_path / "v.gif") as im:
        total = 0
        for k in range(im.n_frames):
            im.seek(k)
            total += im.info["duration"]
    assert video.frames == 30 and total == 1000


def _lidar_scene():
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(name="ground"), at="/", per_environment=False)
    b.add(ke.Prop(ke.Circle(0.1), mass=1.0, initial_pose=ke.Pose(0.0, 0.5)), at="/World/Bot")
    b.rangefinder("beam", "/World/Bot", angle=-np.pi / 2, max_range=5.0)
    return b.build()


@pytest.mark.parametrize(
    ("kind", "name"),
    [("data", "log.csv"), ("data", "log.npz"), ("lidar", "scan.npz"), ("video", "v.gif")],
)
def test_a_link_planted_at_the_partial_file_is_never_written_through(tmp_path, kind, name):
    # the streamed <path>.partial was opened with open(..., "w"): a symbolic link planted
    # there truncated and overwrote its target (kelab/_files.py: no write follows a link)
    from kelab.app.lidar_recorder import LidarRecorder

    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (tmp_path / f"{name}.partial").symlink_to(victim)
    world = ke.World(_lidar_scene())
    timeline = ke.Timeline()
    rec = {
        "data": lambda: ke.DataRecorder(tmp_path / name, bodies=["/World/Bot"]),
        "lidar": lambda: LidarRecorder(tmp_path / name),
        "video": lambda: ke.VideoRecorder(tmp_path / name),
    }[kind]()
    with pytest.raises(ValueError, match=r"\.partial' must not be a symbolic link, got one"):
        rec.attach(timeline, world=world, frame_source=lambda: np.zeros((4, 4, 3), np.uint8))
        timeline.advance(0.2)  # a video opens its file at the first frame
    assert victim.read_text() == "keep me"


def test_a_link_planted_at_an_mp4_path_is_never_written_through(tmp_path):
    # ffmpeg wrote the .mp4 straight to its path, following a link planted there
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (tmp_path / "v.mp4").symlink_to(victim)
    rec = ke.VideoRecorder(tmp_path / "v.mp4")
    timeline = ke.Timeline()
    with pytest.raises(ValueError, match=r"v\.mp4' must not be a symbolic link, got one"):
        rec.attach(timeline, frame_source=lambda: np.zeros((4, 4, 3), np.uint8))
        timeline.advance(0.2)  # the file opens at the first frame
    assert victim.read_text() == "keep me"


@pytest.mark.parametrize(
    ("make", "fixed"),
    [
        (lambda p: ke.VideoRecorder(p / "clip.avi"), "clip.mp4"),
        (lambda p: ke.DataRecorder(p / "log.txt"), "log.csv"),
    ],
)
def test_a_wrong_suffix_says_which_name_would_do(tmp_path, make, fixed):
    with pytest.raises(ValueError, match=rf"must end in one of .*; name the file .*{fixed}"):
        make(tmp_path)


def test_a_destination_that_takes_no_files_says_what_is_wrong(tmp_path):
    """/proc exists but takes no files: the error says so, not "not writable (No such file
    or directory)"; a file where a directory should be is named as one (#42 item 5)."""
    import re
    from pathlib import Path

    if not Path("/proc/self").is_dir():
        pytest.skip("no /proc on this platform")
    for path in ("/proc/run.csv", "/proc/x/run.csv"):
        with pytest.raises(ValueError) as err:
            ke.DataRecorder(path)
        text = str(err.value)
        assert "'/proc' takes no files (a special file system, such as /proc or /sys" in text
        assert "not writable" not in text and "choose a path in a writable directory" in text
    (tmp_path / "file").write_text("x")
    where = re.escape(repr(str(tmp_path / "file")))
    with pytest.raises(ValueError, match=f"{where} is a file, not a directory; choose a path"):
        ke.DataRecorder(tmp_path / "file" / "sub" / "run.csv")


@pytest.mark.parametrize("missing", [None, [1.0, None]])
def test_a_signal_returning_none_is_refused_naming_it(tmp_path, missing):
    # before: None was written as NaN without a word
    timeline = ke.Timeline()
    rec = ke.DataRecorder(tmp_path / "s.csv", bodies=(), signals={"load": lambda: missing})
    rec.attach(timeline)
    with pytest.raises(ValueError, match=r"^DataRecorder.signals\['load'\] must return a real "
                       r"number .*; return float\('nan'\) where there is no value"):  # fmt: skip
        timeline.advance(0.0)
    rec.close()
    assert rec.rows == 0


def test_add_recorder_says_it_takes_a_recorder(fake_clock: FakeClock, tmp_path):
    # before: "'str' object has no attribute 'attach'"
    app = make_app(fake_clock)
    with pytest.raises(ValueError, match=r"^App.add_recorder\(recorder\) must be a recorder "
                       r"\(ke.DataRecorder.*got 'x.csv'; make one, e.g."):  # fmt: skip
        app.add_recorder("x.csv")
    assert app.recorders == ()
    app.close()


def test_two_recorders_of_one_file_name_in_two_folders(fake_clock: FakeClock, tmp_path):
    """Binding names are unique: the second binds under its full path."""
    app = make_app(fake_clock, world=ke.World(cartpole_scene()))
    a = app.add_recorder(ke.DataRecorder(tmp_path / "a" / "log.csv"))
    b = app.add_recorder(ke.DataRecorder(tmp_path / "b" / "log.csv"))
    names = [x.name for x in app.timeline.bindings]
    assert "DataRecorder(log.csv)" in names and f"DataRecorder({b.path})" in names
    app.renderFrameOnce()
    fake_clock.advance(0.1)
    app.renderFrameOnce()
    app.close()
    assert a.rows == b.rows > 0
