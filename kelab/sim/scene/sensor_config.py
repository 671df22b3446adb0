"""How a sensor degrades its ideal signal: the settings a scene's sensors carry.

The description's half of the sensor pipeline (:mod:`kelab.sim.sensors` applies it at
run time): sample-and-hold, low-pass, noise and delay, all in simulation seconds. See
docs/sensors.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kelab._validate import check_number_or_none, check_positive
from kelab.sim.scene.fields import short_repr


@dataclass(frozen=True)
class SensorConfig:
    """How a sensor degrades its ideal signal, in simulation time.

    Attributes:
        sample_interval: Seconds between samples (sample-and-hold); None samples every step.
        cutoff_hz: Cutoff of a first-order low-pass filter in Hz; None disables it.
        noise: Standard deviation of additive Gaussian noise, in the signal's units: one
            number for every value the sensor reports, or one per value (a joint
            sensor's ``(position, velocity)``, an IMU's four), a tuple as long as the
            sensor's width.
        delay: Seconds between a sample being taken and the sensor reporting it.

    Example:
        >>> SensorConfig(sample_interval=1 / 120, cutoff_hz=20, noise=0.005, delay=0.016)
        SensorConfig(sample_interval=0.008333333333333333, cutoff_hz=20, noise=0.005, delay=0.016)
        >>> SensorConfig(noise=(0.001, 0.05)).noise  # a joint: position, velocity
        (0.001, 0.05)

    """

    sample_interval: float | None = None
    cutoff_hz: float | None = None
    noise: float | tuple[float, ...] = 0.0
    delay: float = 0.0

    def __post_init__(self) -> None:
        for name in ("sample_interval", "cutoff_hz", "noise", "delay"):
            value = getattr(self, name)
            field = f"SensorConfig.{name}"
            if name == "noise" and isinstance(value, (tuple, list, np.ndarray)):
                object.__setattr__(self, name, _per_value(value))
                continue
            if name in ("sample_interval", "cutoff_hz"):
                number = check_number_or_none(value, field, low=0.0, low_open=True)
            else:
                number = check_positive(value, field, allow_zero=True)
            if not isinstance(value, (int, float, type(None))):  # numpy scalars, Fractions
                object.__setattr__(self, name, number)

    @property
    def noisy(self) -> bool:
        """Whether any value gets noise (a sample draws random numbers)."""
        if isinstance(self.noise, tuple):
            return any(n > 0 for n in self.noise)
        return self.noise > 0


def _per_value(value: tuple | list | np.ndarray) -> tuple[float, ...]:
    """Check per-value noise: a non-empty sequence of finite numbers >= 0, as floats."""
    items = list(value) if not isinstance(value, np.ndarray) or value.ndim == 1 else None
    if not items:
        got = f"an array of shape {value.shape}" if isinstance(value, np.ndarray) else value
        raise ValueError(
            "SensorConfig.noise must be one number >= 0, or a non-empty tuple of them (one "
            f"per value), got {short_repr(got) if got is value else got}; e.g. "
            "noise=(0.001, 0.05) for a joint's position and velocity"
        )
    return tuple(
        check_positive(v, f"SensorConfig.noise[{i}]", allow_zero=True) + 0.0
        for i, v in enumerate(items)
    )
