"""The engine's own systems on the timeline, and what each call costs (``app.systems``).

The App binds its own systems (the mouse drag spring, the robots' joint controllers, the
World's physics step, the sync points) through `EngineSystems.add`: each is a bound
`Binding` like any script callback (rebind it, turn it off), and each call is timed with
one `time.perf_counter_ns` pair, kept as the last and the mean time per call
(`SystemCost`). The Settings panel's Subsystems page rebinds them and its Time Manager
page lists them per phase with their runner, rate and cost. `RobotControllers` is the
``robot_controllers`` system: the PD joint controllers at their binding's rate
(docs/app.md, "Robot controllers").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from time import perf_counter_ns
from typing import TYPE_CHECKING, NamedTuple

from kelab.timing.timeline import Binding, Phase, Timeline

if TYPE_CHECKING:
    from kelab.sim.world import World

__all__ = [
    "CONTROLLERS_PRIORITY",
    "EngineSystem",
    "EngineSystems",
    "RobotControllers",
    "SystemCost",
    "TimeManagerRow",
]

#: Priority of ``robot_controllers`` in the CONTROL phase: after the scripts' default
#: priority (0), so a tick uses the targets they set in the same step.
CONTROLLERS_PRIORITY = 100


class SystemCost:
    """The time per call of one engine system (wall time, `time.perf_counter_ns`).

    Attributes:
        calls: Calls timed so far.
        last_ns: The last call's time in nanoseconds (0 before the first).
        total_ns: Every timed call's time together, in nanoseconds.
    """

    __slots__ = ("calls", "last_ns", "total_ns")

    def __init__(self) -> None:
        self.calls = 0
        self.last_ns = 0
        self.total_ns = 0

    def add(self, ns: int) -> None:
        """Count one call that took ``ns`` nanoseconds."""
        self.calls += 1
        self.last_ns = ns
        self.total_ns += ns

    @property
    def last_s(self) -> float | None:
        """The last call's time in seconds (None before the first call)."""
        return self.last_ns * 1e-9 if self.calls else None

    @property
    def mean_s(self) -> float | None:
        """The mean time per call in seconds (None before the first call)."""
        return self.total_ns * 1e-9 / self.calls if self.calls else None

    def reset(self) -> None:
        """Forget every call counted so far."""
        self.calls = self.last_ns = self.total_ns = 0

    def __repr__(self) -> str:
        return f"SystemCost(calls={self.calls}, last_ns={self.last_ns}, total_ns={self.total_ns})"


class EngineSystem:
    """One engine system: the timed callable its binding calls with ``ts``.

    Args:
        name: The binding's name (``world.step``...).
        label: What the panel calls it.
        fn: The system's work, called with its runner's ``ts``.
    """

    __slots__ = ("binding", "cost", "fn", "label", "name")

    def __init__(self, name: str, label: str, fn: Callable[[float], object]) -> None:
        self.name = name
        self.label = label
        self.fn = fn
        self.cost = SystemCost()
        self.binding: Binding | None = None

    def __call__(self, ts: float) -> None:
        """Run the system once and count its time (also when it raises)."""
        start = perf_counter_ns()
        try:
            self.fn(ts)
        finally:
            self.cost.add(perf_counter_ns() - start)

    def __repr__(self) -> str:
        return f"EngineSystem({self.name!r}, {self.cost!r})"


class TimeManagerRow(NamedTuple):
    """One engine system on the Time Manager page.

    Attributes:
        phase: The phase it runs in.
        priority: Its priority within the phase (lower runs first).
        name: The binding's name.
        label: What the panel calls it.
        runner: Its runner's name.
        hz: Its runner's rate.
        enabled: Whether it runs.
        calls: Calls timed so far.
        last_s: The last call's time in seconds (None before the first call).
        mean_s: The mean time per call in seconds (None before the first call).
    """

    phase: Phase
    priority: int
    name: str
    label: str
    runner: str
    hz: float
    enabled: bool
    calls: int
    last_s: float | None
    mean_s: float | None


class EngineSystems:
    """The engine's own systems of one App, bound on its timeline and timed.

    Args:
        timeline: The App's timeline.
    """

    def __init__(self, timeline: Timeline) -> None:
        self._timeline = timeline
        self._systems: dict[str, EngineSystem] = {}

    def add(
        self,
        name: str,
        label: str,
        fn: Callable[[float], object],
        runner: str,
        phase: Phase,
        priority: int,
    ) -> Binding:
        """Bind a timed engine system (`Timeline.bind`) and return its binding.

        Raises:
            ValueError: When a system of that name exists (names are unique).
        """
        if name in self._systems:
            raise ValueError(f"engine system {name!r} exists; give the new one another name")
        system = EngineSystem(name, label, fn)
        system.binding = self._timeline.bind(system, runner, phase, priority, name=name)
        self._systems[name] = system
        return system.binding

    def __getitem__(self, name: str) -> EngineSystem:
        """The system named ``name``.

        Raises:
            KeyError: Naming the systems there are.
        """
        if name not in self._systems:
            raise KeyError(f"no engine system {name!r}; the systems are {list(self._systems)}")
        return self._systems[name]

    def __contains__(self, name: object) -> bool:
        return name in self._systems

    def __iter__(self) -> Iterator[EngineSystem]:
        return iter(self._systems.values())

    def __len__(self) -> int:
        return len(self._systems)

    def owns(self, binding: Binding) -> bool:
        """Whether ``binding`` is one of these systems' (and still calls it)."""
        system = self._systems.get(binding.name)
        return system is not None and system.binding is binding and binding.callback is system

    def rows(self) -> list[TimeManagerRow]:
        """Every bound system by phase and priority, with its runner, rate and cost."""
        runners = self._timeline.runners
        bound = [s for s in self._systems.values() if s.binding is not None and s.binding.bound]
        bound.sort(key=lambda s: (s.binding.phase, s.binding.priority, s.binding.order))
        return [
            TimeManagerRow(
                b.phase,
                b.priority,
                s.name,
                s.label,
                b.runner,
                runners[b.runner].hz_float,
                b.enabled,
                s.cost.calls,
                s.cost.last_s,
                s.cost.mean_s,
            )  # fmt: skip
            for s in bound
            if (b := s.binding) is not None
        ]


class RobotControllers:
    """The robots' PD joint controllers as the engine system ``robot_controllers``.

    Bound (CONTROL phase, :data:`CONTROLLERS_PRIORITY`) only for a World with PD
    actuators. On the runner of ``world.step`` and enabled, the World recomputes the PD
    torques in every physics step (``World.controller_updates = "every_step"``, exactly
    as without the App). On another runner it is a digital controller: the World holds
    the torques (``"held"``) and each call of this system is one tick
    (``World.update_controllers``), so the torque is held between ticks; when a tick and
    a physics step coincide, phase and priority put the tick first. Disabled, the World
    holds the last torques and nothing updates them.

    Args:
        systems: The App's engine systems (``world.step`` is looked up there).
        world: The App's World, or None (then nothing is bound).
    """

    NAME = "robot_controllers"

    def __init__(self, systems: EngineSystems, world: World | None) -> None:
        self._systems = systems
        self._world = world
        self._binding: Binding | None = None

    def bind(self, runner: str) -> list[Binding]:
        """Bind the system on ``runner`` when the World has PD actuators; its bindings."""
        world = self._world
        if world is None or not any(j.actuator == "pd" for j in world.joint_layouts):
            return []
        label = "Robot controllers (PD)"
        self._binding = self._systems.add(
            self.NAME, label, self.tick, runner, Phase.CONTROL, CONTROLLERS_PRIORITY
        )
        return [self._binding]

    @property
    def mode(self) -> str:
        """The ``World.controller_updates`` the binding asks for: ``"every_step"``, ``"held"``."""
        b = self._binding
        if b is None or self.NAME not in self._systems:
            return "every_step"
        step = self._systems["world.step"].binding if "world.step" in self._systems else None
        shared = step is not None and b.bound and b.enabled and b.runner == step.runner
        return "every_step" if shared else "held"

    def sync(self) -> None:
        """Put the World in the mode the binding asks for (before each physics step)."""
        world = self._world
        if self._binding is not None and world is not None:
            mode = self.mode
            if world.controller_updates != mode:
                world.controller_updates = mode

    def tick(self, ts: float) -> None:
        """One tick of the controllers: in ``"held"`` mode, new torques from the state."""
        self.sync()
        world = self._world
        if world is not None and world.controller_updates == "held":
            world.update_controllers()
