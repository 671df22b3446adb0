"""Sensor pipeline: ideal signal -> sample-and-hold -> low-pass -> noise -> delay.

All times are simulation seconds. See docs/sensors.md. The settings, :class:`SensorConfig`,
are part of the scene description (:mod:`kelab.sim.scene.sensor_config`); this module
applies them and re-exports the class, so ``from kelab.sim.sensors import SensorConfig``
works.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike

from kelab._validate import check_int, check_positive, must
from kelab.sim.scene.sensor_config import SensorConfig

__all__ = ["SensorConfig", "SensorPipeline", "StateDict"]

StateDict = dict[str, np.ndarray]


def _whole_steps(seconds: float, dt: float) -> int:
    """Round ``seconds`` to a whole number of ``dt`` steps, halves rounding up."""
    return int(math.floor(seconds / dt + 0.5))


class SensorPipeline:
    """Batched sensor signal chain for ``num_envs`` copies of a ``width``-channel sensor.

    Each physics step the World calls :meth:`update` with the ideal values of all copies;
    the policy side calls :meth:`read`. Everything runs in simulation time, counted in
    whole physics steps of ``dt`` seconds:

    1. **Sample-and-hold**: a copy takes a sample on the first update after its reset and
       then every ``sample_steps`` updates (``sample_interval / dt`` rounded to whole steps,
       at least 1; ``sample_interval=None`` samples every step). Between samples the
       measurement is held unchanged.
    2. **Low-pass**: at each sample the first-order filter ``y += alpha * (x - y)`` runs with
       ``alpha = 1 - exp(-2*pi*cutoff_hz*h)``, ``h = sample_steps * dt`` (the exact
       discretisation of ``tau*dy/dt = x - y`` for an input held over the sample period).
       The filter starts at the copy's first sample (or its primed value), so a reset does
       not produce a transient from zero. ``cutoff_hz=None`` passes samples through.
    3. **Noise**: at each sample, Gaussian noise of std ``noise`` is added after the
       filter (one std for every channel, or a tuple of one per channel); copy ``i`` draws
       ``width`` standard normals from ``rngs[i]`` (and only at its sample instants; no
       draw when every std is 0). The noisy value is what is held.
    4. **Delay**: every update pushes the held measurement into a ring buffer of
       ``delay_steps + 1`` slots (``delay / dt`` rounded to whole steps); :meth:`read`
       returns the measurement pushed ``delay_steps`` updates ago. Until a copy has
       pushed ``delay_steps + 1`` values since its reset, it returns the OLDEST value it has
       (zeros if it has none yet and was reset without a primed value).

    Random numbers: the pipeline keeps a reference to ``rngs`` (it does not copy it) and
    indexes it at each draw, so a World that swaps ``rngs[i]`` for a re-seeded Generator
    is seen at once. The Generators are NOT part of :meth:`get_state`: the World owns them
    and must snapshot/restore their state itself (``kelab.sim.snapshot.rng_state``); restore
    them in place (``set_rng_state``) or assign into the same list so references stay valid.

    Cost: one Python-level ``rng.standard_normal(out=row)`` call per sampling copy per
    update (~0.7 us per copy measured on a 2-core machine, 4096 copies -> ~2.8 ms). It is
    the only loop over copies and is unavoidable while each copy draws from its own
    Generator; prefetching blocks of noise would be ~10x cheaper but would make every
    snapshot carry the prefetched block. Put all channels that share a SensorConfig into
    one pipeline (larger ``width``) so that there is one draw per copy per step, not one per
    sensor.

    Args:
        config: How the signal is degraded.
        num_envs: Number of environment copies (rows), >= 1.
        width: Channels per copy (columns), >= 1.
        dt: Physics step in seconds, > 0.
        rngs: One ``numpy.random.Generator`` per copy (a list or any sequence of length
            ``num_envs``); may be None when ``config.noise`` is 0 (every value of it).

    Raises:
        ValueError: If an argument is out of range or ``rngs`` does not hold one Generator
            per copy.

    Example:
        >>> import numpy as np
        >>> cfg = SensorConfig(delay=2 / 100)
        >>> p = SensorPipeline(cfg, num_envs=1, width=1, dt=1 / 100, rngs=None)
        >>> out = []
        >>> for k in range(4):
        ...     p.update(np.array([[float(k)]]))
        ...     out.append(float(p.read()[0, 0]))
        >>> out  # two steps late; the oldest sample until the buffer has filled
        [0.0, 0.0, 0.0, 1.0]

    """

    def __init__(
        self,
        config: SensorConfig,
        num_envs: int,
        width: int,
        dt: float,
        rngs: Sequence[np.random.Generator] | None,
    ) -> None:
        if not isinstance(config, SensorConfig):
            raise ValueError(must("SensorPipeline config", "a SensorConfig", config))
        num_envs = check_int(num_envs, "SensorPipeline num_envs", low=1)
        width = check_int(width, "SensorPipeline width", low=1)
        dt = check_positive(dt, "SensorPipeline dt", unit="seconds")
        if isinstance(config.noise, tuple) and len(config.noise) != width:
            raise ValueError(
                f"SensorPipeline config.noise must be one number or {width} (one per channel), "
                f"got {len(config.noise)} numbers; give noise=(...) as long as the width"
            )
        if config.noisy or rngs is not None:
            if rngs is None:
                raise ValueError(
                    f"SensorPipeline needs rngs (one numpy Generator per copy) because "
                    f"config.noise={config.noise!r} > 0; got None"
                )
            try:
                n_rngs = len(rngs)
            except TypeError:
                raise ValueError(
                    f"SensorPipeline rngs must be a sequence of numpy Generators, got {rngs!r}"
                ) from None
            if n_rngs != num_envs:
                raise ValueError(
                    f"SensorPipeline rngs must hold one Generator per copy: expected "
                    f"{num_envs}, got {n_rngs}"
                )
            for i in range(n_rngs):
                if not isinstance(rngs[i], np.random.Generator):
                    raise ValueError(
                        f"SensorPipeline rngs[{i}] must be a numpy.random.Generator, "
                        f"got {type(rngs[i]).__name__}"
                    )
        self._config = config
        # the noise std: a float, or one per channel (a (width,) array)
        self._noise = (
            config.noise
            if not isinstance(config.noise, tuple)
            else np.array(config.noise, dtype=np.float64)
        )
        self._noisy = config.noisy
        self._num_envs = int(num_envs)
        self._width = int(width)
        self._dt = float(dt)
        self._rngs = rngs
        if config.sample_interval is None:
            self._sample_steps = 1
        else:
            self._sample_steps = max(1, _whole_steps(config.sample_interval, self._dt))
        self._delay_steps = _whole_steps(config.delay, self._dt)
        if config.cutoff_hz is None:
            self._alpha = 1.0
        else:
            h = self._sample_steps * self._dt
            self._alpha = -math.expm1(-2.0 * math.pi * config.cutoff_hz * h)
        n, w, length = self._num_envs, self._width, self._delay_steps + 1
        # --- the state (everything that affects the future, see get_state) ---
        self._phase = np.zeros(n, dtype=np.int64)  # updates since the last sample, mod S
        self._filter = np.zeros((n, w), dtype=np.float64)  # low-pass output y
        self._ready = np.zeros(n, dtype=bool)  # filter has been started since reset
        self._held = np.zeros((n, w), dtype=np.float64)  # held (filtered + noisy) sample
        self._ring = np.zeros((n, length, w), dtype=np.float64)
        self._head = np.zeros((), dtype=np.int64)  # ring slot written last (shared)
        self._fill = np.zeros(n, dtype=np.int64)  # values pushed since reset, capped
        #: ``(num_envs,)`` a factor on each copy's noise std (``World.set_sensor_noise_scale``:
        #: its owner's array, shared by its pipelines), or None: 1 for every copy.
        self.noise_scale: np.ndarray | None = None
        # scratch, not state
        self._noise_buf = np.zeros((n, w), dtype=np.float64)
        self._rows = np.arange(n)

    # ------------------------------------------------------------------ properties
    @property
    def config(self) -> SensorConfig:
        """The SensorConfig this pipeline applies."""
        return self._config

    @property
    def num_envs(self) -> int:
        """Number of environment copies (rows)."""
        return self._num_envs

    @property
    def width(self) -> int:
        """Channels per copy (columns)."""
        return self._width

    @property
    def dt(self) -> float:
        """Physics step in seconds."""
        return self._dt

    @property
    def sample_steps(self) -> int:
        """Physics steps between samples (``sample_interval / dt`` rounded, at least 1)."""
        return self._sample_steps

    @property
    def delay_steps(self) -> int:
        """Delay in physics steps (``delay / dt`` rounded to whole steps)."""
        return self._delay_steps

    @property
    def alpha(self) -> float:
        """Low-pass coefficient per sample, ``1 - exp(-2*pi*cutoff_hz*h)``; 1.0 when off."""
        return self._alpha

    # ------------------------------------------------------------------ stepping
    def update(self, ideal: np.ndarray) -> None:
        """Advance every copy by one physics step.

        Args:
            ideal: The ideal (true) signal of all copies after this physics step, shape
                ``(num_envs, width)``; any real dtype (computed in float64).

        Raises:
            ValueError: If ``ideal`` has the wrong shape.

        """
        x = self._as_signal(ideal, (self._num_envs, self._width), "update(ideal)")
        due = self._phase == 0
        if due.all():
            self._sample(slice(None), self._rows, x)
        elif due.any():
            idx = np.flatnonzero(due)
            self._sample(idx, idx, x[idx])
        if self._sample_steps > 1:
            self._phase += 1
            self._phase %= self._sample_steps
        length = self._delay_steps + 1
        self._head[()] = (int(self._head) + 1) % length
        self._ring[:, int(self._head), :] = self._held
        np.minimum(self._fill + 1, length, out=self._fill)

    def _sample(self, sel: slice | np.ndarray, idx: np.ndarray, x: np.ndarray) -> None:
        """Take a sample for the copies ``sel`` (== ``idx``); ``x`` holds their ideal rows."""
        if self._alpha == 1.0:
            y = x
        else:
            y = self._filter[sel]
            ready = self._ready[sel]
            if not ready.all():
                y[~ready] = x[~ready]  # start the filter at the first sample
            y += self._alpha * (x - y)
        self._filter[sel] = y
        self._ready[sel] = True
        if self._noisy:
            buf = self._noise_buf
            rngs = self._rngs
            for i in idx.tolist():
                rngs[i].standard_normal(out=buf[i])
            if self.noise_scale is None:
                self._held[sel] = y + self._noise * buf[sel]
            else:
                self._held[sel] = y + self._noise * buf[sel] * self.noise_scale[sel, None]
        else:
            self._held[sel] = y

    def read(self) -> np.ndarray:
        """Return what every copy's sensor reports now.

        Returns:
            A new float64 array ``(num_envs, width)``: for each copy the measurement pushed
            ``delay_steps`` updates ago, or the oldest one it has if fewer have been pushed
            since its reset (zeros if none and it was not primed).

        """
        length = self._delay_steps + 1
        if length == 1:
            return self._ring[:, 0, :].copy()
        lag = np.clip(self._fill - 1, 0, self._delay_steps)
        slots = (int(self._head) - lag) % length
        return self._ring[self._rows, slots, :]

    def reset(self, env_ids: ArrayLike, ideal: ArrayLike | None = None) -> None:
        """Forget the history of some copies; all other copies are left bit-identical.

        Clears the filter, the held sample, the sample phase (the next update takes a
        sample) and the delay buffer of ``env_ids``. With ``ideal`` the copies are primed as
        if they had been reading that constant value forever, noise-free: :meth:`read`
        returns it at once and the filter starts from it. Without ``ideal`` they read zeros
        until their first update. Draws no random numbers.

        Args:
            env_ids: Indices of the copies to reset (ints in ``[0, num_envs)``), or a bool
                mask of shape ``(num_envs,)``.
            ideal: Optional priming values, shape ``(len(env_ids), width)``, row ``k`` for
                copy ``env_ids[k]`` (for a mask: one row per True entry, in order).

        Raises:
            ValueError: If an index is out of range or ``ideal`` has the wrong shape.

        """
        ids = self._as_ids(env_ids)
        if ideal is not None:
            x = self._as_signal(ideal, (ids.size, self._width), "reset(ideal)")
        if ids.size == 0:
            return
        self._phase[ids] = 0
        if ideal is None:
            self._filter[ids] = 0.0
            self._ready[ids] = False
            self._held[ids] = 0.0
            self._ring[ids] = 0.0
            self._fill[ids] = 0
        else:
            self._filter[ids] = x
            self._ready[ids] = True
            self._held[ids] = x
            self._ring[ids] = x[:, None, :]
            self._fill[ids] = self._delay_steps + 1

    # ------------------------------------------------------------------ state
    def get_state(self) -> StateDict:
        """Return copies of everything that affects this pipeline's future.

        The keys are ``phase`` (int64 ``(num_envs,)``), ``filter`` and ``held`` (float64
        ``(num_envs, width)``), ``ready`` (bool ``(num_envs,)``), ``ring`` (float64
        ``(num_envs, delay_steps + 1, width)``), ``head`` (int64 ``()``) and ``fill`` (int64
        ``(num_envs,)``). The random Generators are NOT included: the World owns them and
        snapshots their state (see the class docstring).

        Returns:
            A dict of new numpy arrays, safe to keep and to store in a Snapshot.

        """
        return {name: getattr(self, "_" + name).copy() for name in _STATE_KEYS}

    def set_state(self, state: Mapping[str, np.ndarray]) -> None:
        """Restore a state returned by :meth:`get_state` of an identically shaped pipeline.

        After ``set_state(s)`` (and restoring the Generators to the same moment) the
        pipeline continues bit-identically to the one ``s`` was taken from.

        Args:
            state: Mapping with exactly the keys of :meth:`get_state`; values are copied.

        Raises:
            ValueError: If a key is missing or unknown, or an array has the wrong shape or
                dtype kind, or ``head``/``phase``/``fill`` are out of range.

        """
        new = self.check_state(state)
        for name in _STATE_KEYS:
            getattr(self, "_" + name)[...] = new[name]

    def check_state(self, state: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Validate a state for :meth:`set_state` without changing the pipeline.

        Args:
            state: Mapping with exactly the keys of :meth:`get_state`.

        Returns:
            The state's arrays by key (not copied).

        Raises:
            ValueError: As :meth:`set_state`, and if ``filter``/``held``/``ring`` hold NaN or
                infinite values (a pipeline fed finite signals never does).

        """
        if not isinstance(state, Mapping):
            raise ValueError(
                f"SensorPipeline.set_state: state must be a mapping, got {type(state).__name__}"
            )
        missing = sorted(set(_STATE_KEYS) - set(state))
        extra = sorted(set(state) - set(_STATE_KEYS))
        if missing or extra:
            raise ValueError(
                f"SensorPipeline.set_state: keys must be {sorted(_STATE_KEYS)}; "
                f"missing {missing}, unexpected {extra}"
            )
        new = {}
        for name in _STATE_KEYS:
            current = getattr(self, "_" + name)
            value = np.asarray(state[name])
            if value.shape != current.shape:
                raise ValueError(
                    f"SensorPipeline.set_state: {name!r} must have shape {current.shape}, "
                    f"got {value.shape} (was the state taken from a pipeline with other "
                    f"num_envs/width/delay?)"
                )
            if value.dtype != current.dtype:
                raise ValueError(
                    f"SensorPipeline.set_state: {name!r} must have dtype {current.dtype}, "
                    f"got {value.dtype}"
                )
            new[name] = value
        length = self._delay_steps + 1
        checks = (
            ("head", new["head"], length),
            ("phase", new["phase"], self._sample_steps),
            ("fill", new["fill"], length + 1),
        )
        for name, value, bound in checks:
            if value.size and (value.min() < 0 or value.max() >= bound):
                raise ValueError(
                    f"SensorPipeline.set_state: {name!r} values must lie in [0, {bound}), "
                    f"got range [{value.min()}, {value.max()}]"
                )
        for name in ("filter", "held", "ring"):
            if not np.isfinite(new[name]).all():
                raise ValueError(
                    f"SensorPipeline.set_state: {name!r} must hold finite values, got NaN or inf"
                )
        return new

    # ------------------------------------------------------------------ helpers
    def _as_signal(self, value: ArrayLike, shape: tuple[int, int], where: str) -> np.ndarray:
        arr = np.asarray(value)
        if arr.shape != shape:
            raise ValueError(
                f"SensorPipeline.{where}: expected shape {shape} (rows, width), got {arr.shape}"
            )
        if arr.dtype.kind not in "biuf":
            raise ValueError(
                f"SensorPipeline.{where}: expected a real numeric array, got dtype {arr.dtype}"
            )
        return arr.astype(np.float64, copy=False)

    def _as_ids(self, env_ids: ArrayLike) -> np.ndarray:
        ids = np.asarray(env_ids)
        if ids.dtype == bool:
            if ids.shape != (self._num_envs,):
                raise ValueError(
                    f"SensorPipeline.reset: a bool mask must have shape ({self._num_envs},), "
                    f"got {ids.shape}"
                )
            return np.flatnonzero(ids)
        ids = ids.reshape(-1)
        if ids.size == 0:
            return ids.astype(np.int64)
        if ids.dtype.kind not in "iu":
            raise ValueError(
                f"SensorPipeline.reset: env_ids must be integers or a bool mask, "
                f"got dtype {ids.dtype}"
            )
        if ids.min() < 0 or ids.max() >= self._num_envs:
            raise ValueError(
                f"SensorPipeline.reset: env_ids must lie in [0, {self._num_envs}), "
                f"got range [{ids.min()}, {ids.max()}]"
            )
        return ids.astype(np.int64)


_STATE_KEYS = ("phase", "filter", "ready", "held", "ring", "head", "fill")
