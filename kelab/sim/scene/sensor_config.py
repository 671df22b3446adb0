"""How a sensor degrades its ideal signal: the settings a scene's sensors carry.

The description's half of the sensor pipeline (:mod:`kelab.sim.sensors` applies it at
run time): sample-and-hold, low-pass, noise and delay, all in simulation seconds. See
docs/sensors.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from kelab._validate import check_number_or_none, check_positive


@dataclass(frozen=True)
class SensorConfig:
    """How a sensor degrades its ideal signal, in simulation time.

    Attributes:
        sample_interval: Seconds between samples (sample-and-hold); None samples every step.
        cutoff_hz: Cutoff of a first-order low-pass filter in Hz; None disables it.
        noise: Standard deviation of additive Gaussian noise, in the signal's units.
        delay: Seconds between a sample being taken and the sensor reporting it.

    Example:
        >>> SensorConfig(sample_interval=1 / 120, cutoff_hz=20, noise=0.005, delay=0.016)
        SensorConfig(sample_interval=0.008333333333333333, cutoff_hz=20, noise=0.005, delay=0.016)

    """

    sample_interval: float | None = None
    cutoff_hz: float | None = None
    noise: float = 0.0
    delay: float = 0.0

    def __post_init__(self) -> None:
        for name in ("sample_interval", "cutoff_hz", "noise", "delay"):
            value = getattr(self, name)
            field = f"SensorConfig.{name}"
            if name in ("sample_interval", "cutoff_hz"):
                number = check_number_or_none(value, field, low=0.0, low_open=True)
            else:
                number = check_positive(value, field, allow_zero=True)
            if not isinstance(value, (int, float, type(None))):  # numpy scalars, Fractions
                object.__setattr__(self, name, number)
