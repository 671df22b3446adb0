"""Helpers shared by the App tests (scenes, a fake clock, a small headless App)."""

from __future__ import annotations

import kelab as ke


class FakeClock:
    """A settable wall clock in seconds (the App's loop logic never reads real time)."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += max(0.0, seconds)


def ball_scene(num_balls: int = 1) -> ke.Scene:
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(name="ground"), at="/", per_environment=False)
    for i in range(num_balls):
        b.add(
            ke.Prop(ke.Circle(0.2), mass=1.0, initial_pose=ke.Pose(-1.0 + i, 0.2)),
            at=f"/World/Ball{i}",
        )
    b.add(
        ke.Prop(ke.Box(0.4, 0.4), mass=1.0, initial_pose=ke.Pose(1.5, 0.2)),
        at="/World/Crate",
    )
    return b.build()


def cartpole_scene() -> ke.Scene:
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(name="ground"), at="/", per_environment=False)
    b.add(ke.Robot(ke.Asset.from_registry("kelab/robot/cartpole:v1")), at="/World/Robot")
    return b.build()


def make_app(clock: FakeClock, cls: type[ke.App] = ke.App, **kwargs) -> ke.App:
    """A small headless App on a fake clock with no frame pacing."""
    kwargs.setdefault("size", (160, 120))
    kwargs.setdefault("headless", True)
    kwargs.setdefault("render_hz", None)
    return cls(clock=clock, sleep=clock.sleep, **kwargs)
