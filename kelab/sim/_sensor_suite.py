"""A World's sensors: their ideal values from the body states, and their pipelines.

:class:`SensorSuite` computes what each sensor of the scene would report without noise
(:meth:`SensorSuite.ideals`: IMU, joint, contact, pose, rangefinder) from rows of body
states, and feeds the :class:`~kelab.sim.sensors.SensorPipeline` of each sensor (rate,
delay, filter, noise) after every step. The pipelines need dt: they exist from the first
step on. The World reads the states and hands them in (kelab.sim internal).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from kelab.sim._backend import Backend
from kelab.sim._compile import Layout
from kelab.sim.kinematics import joint_state
from kelab.sim.scene import Scene
from kelab.sim.sensors import SensorPipeline

#: Values each sensor kind reports per copy.
SENSOR_WIDTH = {"imu": 4, "joint": 2, "contact": 2, "rangefinder": 1, "pose": 3}


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

    def new_pipelines(self, dt: float) -> dict[str, SensorPipeline]:
        """Fresh pipelines for a step of ``dt``, by sensor name (not installed)."""
        return {
            s.name: SensorPipeline(s.config, self.n, SENSOR_WIDTH[s.kind], dt, self.rngs)
            for s in self.sensors
        }

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
        self, name: str, every: np.ndarray, fresh: Callable[[np.ndarray], np.ndarray]
    ) -> np.ndarray:
        """What sensor ``name`` reports now, ``(num_envs, k)`` (``World.read_sensor``).

        Before the first step (no pipelines yet) the ideal present value, from the body
        states ``fresh(every)`` gives.

        Raises:
            KeyError: If no sensor has that name (the message lists the known ones).
        """
        spec = self.specs.get(name)
        if spec is None:
            raise KeyError(f"no sensor {name!r}; known sensors: {sorted(self.specs)}")
        pipe = self.pipelines.get(name)
        if pipe is None:  # no step yet (the pipelines need dt): the ideal present value
            ideals = self.ideals(every, fresh(every), after_step=False)
            return np.array(ideals[name], dtype=np.float64)
        return pipe.read()

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
        index, jindex = self._body_index, self._joint_index
        jstate = None
        g = self.gravity
        out: dict[str, np.ndarray] = {}
        for s in self.sensors:
            if s.kind == "imu":
                b = index[s.target]
                a = raw[:, b, 2]
                if after_step:
                    assert dt is not None
                    acc = (raw[:, b, 3:5] - self.v_prev[ids, b]) / dt - g
                else:
                    acc = np.broadcast_to(-g, (ids.size, 2))
                ca, sa = np.cos(a), np.sin(a)
                ideal = np.stack(
                    [
                        raw[:, b, 5],
                        ca * acc[:, 0] + sa * acc[:, 1],
                        -sa * acc[:, 0] + ca * acc[:, 1],
                        a,
                    ],
                    axis=1,
                )
            elif s.kind == "joint":
                if jstate is None:
                    jstate = joint_state(self.layout, raw)
                k = jindex[s.target]
                ideal = np.stack([jstate[0][:, k], jstate[1][:, k]], axis=1)
            elif s.kind == "contact":
                if after_step:
                    assert contacts is not None
                    ideal = contacts()[ids, index[s.target], :]
                else:
                    ideal = np.zeros((ids.size, 2))
            elif s.kind == "pose":
                ideal = raw[:, index[s.target], 0:3]
            else:
                ideal = self._rangefinder(s, raw, index[s.target], ids)
            out[s.name] = ideal
        return out

    def _rangefinder(self, s: Any, raw: np.ndarray, b: int, ids: np.ndarray) -> np.ndarray:
        """Ray casts, one ``segment_query_first`` per copy (pymunk has no batched query)."""
        offset = s.param("offset")
        max_range = float(s.param("max_range"))
        ang = float(s.param("angle"))
        a = raw[:, b, 2]
        ca, sa = np.cos(a), np.sin(a)
        sx = raw[:, b, 0] + ca * offset.x - sa * offset.y
        sy = raw[:, b, 1] + sa * offset.x + ca * offset.y
        d = a + offset.angle + ang
        ex = sx + max_range * np.cos(d)
        ey = sy + max_range * np.sin(d)
        alpha = self.backend.segment_first(
            b, np.stack([sx, sy], axis=1), np.stack([ex, ey], axis=1), ids
        )
        return np.where(np.isnan(alpha), max_range, alpha * max_range)[:, None]
