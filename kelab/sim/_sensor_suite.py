"""A World's sensors: their ideal values from the body states, and their pipelines.

:class:`SensorSuite` computes what each sensor of the scene would report without noise
(:meth:`SensorSuite.ideals`: IMU, joint, contact, pose, rangefinder, a camera's body
poses) from rows of body states, and feeds the :class:`~kelab.sim.sensors.SensorPipeline`
of each sensor (rate, delay, filter, noise) after every step; a camera's held poses become
its images when read (:mod:`kelab.sim.camera`). The pipelines need dt: they exist from the first
step on. The World reads the states and hands them in (kelab.sim internal).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping

import numpy as np

from kelab.sim.kinematics import joint_state
from kelab.sim.physics._backend import Backend
from kelab.sim.physics._compile import Layout
from kelab.sim.scene.instances import SensorSpec
from kelab.sim.scene.scene import Scene
from kelab.sim.scene.sensor_kinds import SENSOR_KINDS, WORLD_FRAME
from kelab.sim.sensors import SensorPipeline


class SensorSuite:
    """Every sensor of a scene for every copy.

    Args:
        scene: The scene (its sensors and gravity).
        layout: Its compiled form (body and joint order).
        rngs: One Generator per copy (sensor noise).
        backend: The World's layout (rangefinder ray casts).
    """

    def __init__(
        self, scene: Scene, layout: Layout, rngs: list[np.random.Generator], backend: Backend
    ) -> None:
        self.sensors = scene.sensors
        self.gravity = np.asarray(scene.gravity, dtype=np.float64)
        #: ``(num_envs, 2)`` each copy's gravity once one differs from the scene's
        #: (``World.set_gravity``; the IMU reads it), else None.
        self.copy_gravity: np.ndarray | None = None
        #: ``(num_envs,)`` a factor on each copy's sensor noise (``World.set_sensor_noise_scale``),
        #: shared by every pipeline, once one is not 1; else None.
        self.noise_scale: np.ndarray | None = None
        self.layout = layout
        self.rngs = rngs
        self.backend = backend
        self.n = len(rngs)
        #: The scene's sensors by name.
        self.specs = {s.name: s for s in scene.sensors}
        #: The pipeline of each sensor by name; empty until the first step sets dt.
        self.pipelines: dict[str, SensorPipeline] = {}
        #: ``(num_envs, nb, 2)`` body velocities after the previous step (IMU acceleration).
        self.v_prev = np.zeros((self.n, len(layout.body_paths), 2))
        self._body_index = {p: i for i, p in enumerate(layout.body_paths)}
        self._joint_index = {p: i for i, p in enumerate(layout.joint_paths)}
        #: Per sensor: its kind's ideal-value function, target index and parameters.
        self._ideal = [
            (s.name, SENSOR_KINDS[s.kind].ideal, self._target(s), dict(s.params))
            for s in scene.sensors
        ]
        #: What turns a sensor's held values into its reading (a camera's images), by name.
        self.readings: dict[str, Callable[[np.ndarray], np.ndarray]] = {}
        for s in scene.sensors:
            reading = SENSOR_KINDS[s.kind].reading
            if reading is not None:
                module, _, name = reading.partition(":")
                cls = getattr(importlib.import_module(module), name)
                self.readings[s.name] = cls(scene, layout.body_paths, s, self.n)

    def _target(self, spec: SensorSpec) -> int:
        """The body (or joint) index a sensor targets; -1 for the copy's own frame."""
        target = SENSOR_KINDS[spec.kind].target
        if target == "frame" and spec.target == WORLD_FRAME:
            return -1
        return (self._joint_index if target == "joint" else self._body_index)[spec.target]

    def new_pipelines(self, dt: float) -> dict[str, SensorPipeline]:
        """Fresh pipelines for a step of ``dt``, by sensor name (not installed)."""
        nb = len(self.layout.body_paths)
        pipes = {
            s.name: SensorPipeline(
                s.config, self.n, SENSOR_KINDS[s.kind].held_width(nb), dt, self.rngs
            )
            for s in self.sensors
        }
        for p in pipes.values():
            p.noise_scale = self.noise_scale
        return pipes

    def set_noise_scale(self, scale: np.ndarray | None) -> None:
        """Share a ``(num_envs,)`` noise factor with every pipeline (None: 1 for all)."""
        self.noise_scale = scale
        for p in self.pipelines.values():
            p.noise_scale = scale

    def pipelines_for(self, dt: float, current_dt: float | None) -> dict[str, SensorPipeline]:
        """The installed pipelines when they run at ``dt`` (``current_dt``), else new ones."""
        if self.pipelines and current_dt == dt:
            return self.pipelines
        return self.new_pipelines(dt)

    def restore(
        self,
        pipelines: dict[str, SensorPipeline],
        states: Mapping[str, Mapping[str, np.ndarray]],
    ) -> None:
        """Install a restored snapshot's pipelines with their checked states."""
        self.pipelines = pipelines
        for name, p in pipelines.items():
            p.set_state(states[name])

    def read(
        self,
        name: str,
        every: np.ndarray,
        fresh: Callable[[np.ndarray], np.ndarray],
        ids: np.ndarray | None = None,
    ) -> np.ndarray:
        """What sensor ``name`` reports now, ``(num_envs, k)`` (``World.read_sensor``).

        Before the first step (no pipelines yet) the ideal present value, from the body
        states ``fresh(every)`` gives. A kind with a reading (a camera) turns the held
        values into it: ``(num_envs, height, width, channels)`` uint8 images. With ``ids``
        only those copies' rows (a camera draws only them).

        Raises:
            KeyError: If no sensor has that name (the message lists the known ones).
        """
        spec = self.specs.get(name)
        if spec is None:
            raise KeyError(f"no sensor {name!r}; known sensors: {sorted(self.specs)}")
        pipe = self.pipelines.get(name)
        if pipe is None:  # no step yet (the pipelines need dt): the ideal present value
            ideals = self.ideals(every, fresh(every), after_step=False)
            held = np.array(ideals[name], dtype=np.float64)
        else:
            held = pipe.read()
        if ids is not None:
            held = held[ids]
        reading = self.readings.get(name)
        return held if reading is None else reading(held)

    def prime(self, ids: np.ndarray, raw: np.ndarray) -> None:
        """Reset the pipelines of copies ``ids`` primed with their present ideal values.

        ``raw``: the copies' fresh body states ``(len(ids), nb, 6)``.
        """
        ideals = self.ideals(ids, raw, after_step=False)
        for name, p in self.pipelines.items():
            p.reset(ids, ideal=ideals[name])

    def update(
        self, every: np.ndarray, raw: np.ndarray, dt: float, contacts: Callable[[], np.ndarray]
    ) -> None:
        """Feed every pipeline the ideal values right after a step of ``dt``.

        ``every``: every copy's index; ``raw``: their fresh body states ``(num_envs, nb,
        6)``; ``contacts``: the step's contact force sums ``(num_envs, nb, 2)`` (asked
        for only by contact sensors).
        """
        ideals = self.ideals(every, raw, after_step=True, dt=dt, contacts=contacts)
        for name, p in self.pipelines.items():
            p.update(ideals[name])
        self.v_prev[:] = raw[:, :, 3:5]

    def ideals(
        self,
        ids: np.ndarray,
        raw: np.ndarray,
        after_step: bool,
        dt: float | None = None,
        contacts: Callable[[], np.ndarray] | None = None,
    ) -> dict[str, np.ndarray]:
        """Ideal (true) value of every sensor for copies ``ids``, ``{name: (len(ids), k)}``.

        ``raw``: the copies' fresh body states ``(len(ids), nb, 6)``. ``after_step``: the
        values right after a physics step of ``dt`` (IMU acceleration from the velocity
        change, contact forces of that step, from ``contacts``). Otherwise the values of
        the present state as if it had been held: zero linear acceleration (the IMU reads
        -gravity in its frame) and no contact force (nothing has touched since a rebuild).
        """
        inputs = _Inputs(self, ids, raw, after_step, dt, contacts)
        return {name: ideal(inputs, k, params) for name, ideal, k, params in self._ideal}


class _Inputs:
    """What the sensor kinds' ideal-value functions read (``sensor_kinds.SensorInputs``)."""

    def __init__(
        self,
        suite: SensorSuite,
        ids: np.ndarray,
        raw: np.ndarray,
        after_step: bool,
        dt: float | None,
        contacts: Callable[[], np.ndarray] | None,
    ) -> None:
        self.ids, self.raw, self.after_step, self.dt = ids, raw, after_step, dt
        g = suite.copy_gravity
        self.gravity = suite.gravity if g is None else g[ids]
        self.v_prev = suite.v_prev
        self._layout = suite.layout
        self._contacts = contacts
        self.segment_first = suite.backend.segment_first
        self._jstate: tuple[np.ndarray, np.ndarray] | None = None

    def joint_state(self) -> tuple[np.ndarray, np.ndarray]:
        if self._jstate is None:
            self._jstate = joint_state(self._layout, self.raw)
        return self._jstate

    def contacts(self) -> np.ndarray:
        assert self._contacts is not None
        return self._contacts()
