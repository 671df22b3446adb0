"""Pure time logic: configs, the App's FixedStepClock, the RL pacer and the Timeline.

This layer imports nothing else of kelab; it touches no I/O but clocks and sleep.
"""

from kelab.timing.clock import ClockState, FixedStepClock
from kelab.timing.config import RunMode, SimulationRunConfig, SimulationTimingConfig, TimeMode
from kelab.timing.pacer import SimulationPacer, precise_sleep
from kelab.timing.timeline import ON_UPDATE_PRIORITY, Phase, Timeline, TimeRunner

__all__ = [
    "ON_UPDATE_PRIORITY",
    "ClockState",
    "FixedStepClock",
    "Phase",
    "RunMode",
    "SimulationPacer",
    "SimulationRunConfig",
    "SimulationTimingConfig",
    "TimeMode",
    "TimeRunner",
    "Timeline",
    "precise_sleep",
]
