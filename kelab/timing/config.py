"""Timing and run configuration: how fast the simulation steps and how it meets wall time.

`SimulationTimingConfig` defines rates and intervals; `SimulationRunConfig` defines how an
externally stepped loop (the RL environments) relates them to wall time. `TimeMode` selects
how the App's `FixedStepClock` follows wall time. See docs/timing.md.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from kelab._validate import check_int, check_number, check_number_or_none, must
from kelab.errors import UserError

__all__ = [
    "MAX_DECIMATION",
    "MAX_EPISODE_LENGTH_S",
    "SIM_DT_RANGE",
    "RunMode",
    "SimulationRunConfig",
    "SimulationTimingConfig",
    "TimeMode",
]

# Ratios within this relative distance of an integer are that integer: 5.0 s / (1/60 s)
# is 300 even when float rounding makes it 300.00000000000006.
_RATIO_TOLERANCE = 1e-9

#: The physics step's range in seconds (1 microsecond to 1 second).
SIM_DT_RANGE = (1e-6, 1.0)
#: The most physics steps one environment step may take.
MAX_DECIMATION = 10_000
#: The longest episode horizon in seconds (about 31.7 years of simulated time).
MAX_EPISODE_LENGTH_S = 1e9


def ceil_ratio(numerator: float, denominator: float) -> int:
    """Return ``ceil(numerator / denominator)``, treating near-integers as integers.

    Args:
        numerator: A finite non-negative number of seconds.
        denominator: A finite positive number of seconds.

    Returns:
        The smallest integer count of ``denominator`` intervals covering ``numerator``.

    Example:
        >>> ceil_ratio(5.0, 1 / 60)
        300
    """
    ratio = numerator / denominator
    nearest = round(ratio)
    if abs(ratio - nearest) <= _RATIO_TOLERANCE * max(1.0, abs(nearest)):
        return int(nearest)
    return math.ceil(ratio)


RENDER_MODE_FIX = (
    "None never draws, 'rgb_array' makes render() return frames, 'human' opens a window"
)
"""What each Gymnasium render mode does: the fix of an unknown render mode's error."""


@dataclass(frozen=True)
class SimulationTimingConfig:
    """Rates and intervals of a simulation: physics step, control decimation, horizon.

    Attributes:
        sim_dt: Physics time step in seconds, in [1e-6, 1] (`SIM_DT_RANGE`).
        decimation: Physics steps per environment (control) step, an int in
            [1, 10000] (`MAX_DECIMATION`).
        episode_length_s: Episode horizon in seconds, in (0, 1e9]
            (`MAX_EPISODE_LENGTH_S`), or None for no time limit.

    Example:
        >>> timing = SimulationTimingConfig(sim_dt=1 / 120, decimation=2, episode_length_s=5.0)
        >>> timing.physics_hz, timing.control_hz, timing.max_episode_length
        (120.0, 60.0, 300)
    """

    sim_dt: float
    decimation: int = 1
    episode_length_s: float | None = None

    def __post_init__(self) -> None:
        lo, hi = SIM_DT_RANGE
        sim_dt = check_number(
            self.sim_dt,
            "SimulationTimingConfig.sim_dt",
            low=lo,
            high=hi,
            unit="seconds",
            fix="for 120 Hz physics pass sim_dt=1/120",
        )
        decimation = check_int(
            self.decimation,
            "SimulationTimingConfig.decimation",
            low=1,
            high=MAX_DECIMATION,
            fix="it counts physics steps per environment step",
        )
        length = check_number_or_none(
            self.episode_length_s,
            "SimulationTimingConfig.episode_length_s",
            low=0.0,
            low_open=True,
            high=MAX_EPISODE_LENGTH_S,
            unit="seconds",
            fix="None means no time limit",
        )
        # numpy scalars and Fractions are stored as the Python numbers they equal
        if not isinstance(self.sim_dt, (int, float)):
            object.__setattr__(self, "sim_dt", sim_dt)
        if not isinstance(self.episode_length_s, (int, float, type(None))):
            object.__setattr__(self, "episode_length_s", length)
        object.__setattr__(self, "decimation", decimation)

    @property
    def physics_hz(self) -> float:
        """Physics steps per simulated second: ``1 / sim_dt``."""
        return 1.0 / self.sim_dt

    @property
    def step_dt(self) -> float:
        """Seconds of simulated time per environment step: ``sim_dt * decimation``."""
        return self.sim_dt * self.decimation

    @property
    def step_hz(self) -> float:
        """Environment steps per simulated second: ``1 / step_dt``."""
        return 1.0 / self.step_dt

    @property
    def control_hz(self) -> float:
        """The policy's control rate; the same as `step_hz`."""
        return self.step_hz

    @property
    def max_episode_length(self) -> int | None:
        """Env steps per episode: ``ceil(episode_length_s / step_dt)``, >= 1; None if unlimited."""
        if self.episode_length_s is None:
            return None
        return max(1, ceil_ratio(self.episode_length_s, self.step_dt))


class RunMode(enum.Enum):
    """How an externally stepped loop relates simulated time to wall time."""

    HEADLESS_FAST = "HEADLESS_FAST"
    """No rendering, no waiting: RL training and benchmarks."""
    OFFSCREEN_FAST = "OFFSCREEN_FAST"
    """Offscreen rendering when ``render()`` is called, no waiting: capture and evaluation."""
    PACED = "PACED"
    """A human window, waiting for wall time when ahead, never catching up when behind."""


_RENDER_MODE_OF: dict[RunMode, str | None] = {
    RunMode.HEADLESS_FAST: None,
    RunMode.OFFSCREEN_FAST: "rgb_array",
    RunMode.PACED: "human",
}


@dataclass(frozen=True)
class SimulationRunConfig:
    """The run mode of an externally stepped loop (a `DirectRLEnv` or `LearningEnv`).

    Attributes:
        mode: A `RunMode`, or its name as a string in any letter case (``"paced"``).

    Example:
        >>> cfg = SimulationRunConfig(mode="paced")
        >>> cfg.mode, cfg.render_mode, cfg.waits_for_wall_clock, cfg.catches_up
        (<RunMode.PACED: 'PACED'>, 'human', True, False)
    """

    mode: RunMode = RunMode.HEADLESS_FAST

    def __post_init__(self) -> None:
        mode = self.mode
        if isinstance(mode, str):
            try:
                mode = RunMode[mode.strip().upper()]
            except KeyError:
                mode = None
        if not isinstance(mode, RunMode):
            valid = ", ".join(m.name for m in RunMode)
            raise UserError(
                must(
                    "SimulationRunConfig.mode",
                    f"one of {valid}",
                    self.mode,
                    "pass a RunMode or its name in any letter case",
                )
            )
        object.__setattr__(self, "mode", mode)

    @classmethod
    def from_render_mode(cls, render_mode: str | None) -> SimulationRunConfig:
        """Return the default run config for a Gymnasium ``render_mode``.

        None -> HEADLESS_FAST, ``"human"`` -> PACED, ``"rgb_array"`` -> OFFSCREEN_FAST.

        Raises:
            UserError: For any other render mode.
        """
        if render_mode is None or isinstance(render_mode, str):
            for mode, mapped in _RENDER_MODE_OF.items():
                if render_mode == mapped:
                    return cls(mode=mode)
        raise UserError(
            must("render_mode", "None, 'rgb_array' or 'human'", render_mode, RENDER_MODE_FIX)
        )

    @property
    def render_mode(self) -> str | None:
        """The Gymnasium render mode this run mode requires (None, "rgb_array" or "human")."""
        return _RENDER_MODE_OF[self.mode]

    @property
    def renders(self) -> bool:
        """Whether this mode renders at all."""
        return self.mode is not RunMode.HEADLESS_FAST

    @property
    def waits_for_wall_clock(self) -> bool:
        """Whether a step that finished early waits for wall time (only PACED)."""
        return self.mode is RunMode.PACED

    @property
    def catches_up(self) -> bool:
        """Whether late steps are followed by catch-up bursts: never, in every mode."""
        return False


class TimeMode(enum.Enum):
    """How the App's `FixedStepClock` advances simulated time relative to wall time."""

    GAME_REALTIME = "GAME_REALTIME"
    """Follows wall time and skips simulated time under load (non-deterministic)."""
    SIM_REALTIME = "SIM_REALTIME"
    """Never ahead of wall time; slows down rather than skipping under load (deterministic)."""
    SIM_HIGH_PERF = "SIM_HIGH_PERF"
    """Ignores wall time; runs a fixed number of steps per frame as fast as possible."""
