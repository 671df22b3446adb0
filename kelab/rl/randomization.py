"""Domain randomization a task declares: what is drawn, when, from which range.

A task lists :class:`Randomize` terms as plain data in its ``randomization`` class
attribute (like its ``training_config``); each term is checked where it is declared.
The environment's :class:`Randomizer` draws them from each copy's own Generator
(``task.rngs``: deterministic for a seed, saved by snapshots) and writes them into the
World's per-copy parameters (docs/world.md, "Per-copy parameters"): body masses and
friction, gravity, actuator strength, sensor noise, and pushes (velocity kicks). It
records, per copy, the values its episode runs with; an episode's end reports them
(``info["randomization"]``, ``ke.evaluate``'s report). See docs/tasks.md, "Domain
randomization".

Example:
    >>> import kelab as ke
    >>> from kelab.tasks.cartpole import CartPoleTask
    >>> class Robust(CartPoleTask):
    ...     randomization = (
    ...         ke.Randomize("mass_scale", 0.5, 2.0, bodies=("/World/Robot/pole",)),
    ...         ke.Randomize("push", (-0.5, 0.0), (0.5, 0.0), when="interval",
    ...                      interval_s=(1.0, 2.0), bodies=("/World/Robot/pole",)),
    ...     )
    >>> env = ke.LearningEnv(Robust(), num_envs=2, seed=0)
    >>> _ = env.reset(seed=0)
    >>> env.world.body_masses[:, 2].round(3).tolist()
    [0.193, 0.175]
    >>> env.close()
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

import numpy as np

from kelab._validate import is_number, show
from kelab.errors import UserError
from kelab.rl.errors import TaskError
from kelab.sim.scene.shapes import GRAVITY_MAX

if TYPE_CHECKING:
    from kelab.sim.world import World

__all__ = ["KINDS", "Randomize", "Randomizer"]

KINDS: dict[str, tuple[int, str]] = {
    "mass_scale": (1, "a factor on each chosen body's scene mass (moments scale with it)"),
    "friction_scale": (1, "a factor on each chosen body's static and dynamic friction"),
    "gravity": (2, "an offset (gx, gy) m/s^2 added to the scene's gravity"),
    "actuator_strength": (1, "a factor on each chosen actuator's output"),
    "push": (2, "a velocity kick (vx, vy) m/s added to the chosen bodies"),
    "sensor_noise_scale": (1, "a factor on every sensor's noise std"),
}
"""What a term can randomize: values drawn per copy (per body or joint where chosen)."""
WHEN = ("startup", "reset", "interval")
#: The kinds that act on bodies (``bodies=``).
BODY_KINDS = ("mass_scale", "friction_scale", "push")
DISTRIBUTIONS = ("uniform", "log_uniform", "normal")
#: What a scale may reach (the World's bounds on what it scales are checked as well).
SCALE_MAX = 100.0
#: The largest gravity offset: a scene's gravity and a copy's are within ±GRAVITY_MAX.
OFFSET_MAX = 2.0 * GRAVITY_MAX
#: Per kind, the World setter its values are written with (and checked by).
SETTERS = {
    "mass_scale": "set_body_masses",
    "friction_scale": "set_body_friction",
    "gravity": "set_gravity",
    "actuator_strength": "set_actuator_strength",
    "push": "set_body_velocities",
    "sensor_noise_scale": "set_sensor_noise_scale",
}
#: Where a refused range's message sends the user: the World's bounds.
_BOUNDS = 'the World\'s bounds: docs/world.md, "Per-copy parameters"'


def _example(what: str) -> str:
    """A declaration of a ``what`` term that works, for an error message's fix."""
    if what == "gravity":
        return "Randomize('gravity', (-0.5, -1.0), (0.5, 1.0))"
    if what == "push":
        return "Randomize('push', (-0.5, 0.0), (0.5, 0.0))"
    return f"Randomize({what!r}, 0.8, 1.2)"


def _pair(value: Any, width: int, name: str, what: str) -> tuple[float, ...]:
    """``value`` as ``width`` finite floats (a number or a sequence of them)."""
    field = f"Randomize({what!r}).{name}"
    if name == "interval_s":
        example = "interval_s=(2.0, 4.0)"
    else:
        example = _example(what)
    if width == 1 and is_number(value):
        items: Sequence[Any] = (value,)
    elif isinstance(value, (tuple, list)) and len(value) == width:
        items = value
    else:
        if width == 1:
            shape = "a number (one factor for all it acts on)"
        elif name == "interval_s":
            shape = "2 numbers (shortest, longest) seconds"
        else:
            shape = "2 numbers (x, y)"
        raise UserError(f"{field} must be {shape}, got {show(value)}; e.g. {example}")
    out = []
    for v in items:
        if not is_number(v) or not math.isfinite(float(v)):
            raise UserError(
                f"{field} must hold finite numbers, got {show(value)}; give real numbers "
                f"(NaN and inf bound no range), e.g. {example}"
            )
        out.append(float(v))
    return tuple(out)


@dataclass(frozen=True)
class Randomize:
    """One randomized quantity of a task: what, its range and distribution, and when.

    Attributes:
        what: One of :data:`KINDS`: ``"mass_scale"``, ``"friction_scale"``,
            ``"gravity"``, ``"actuator_strength"``, ``"push"``, ``"sensor_noise_scale"``.
        low: The range's low end: a number, or ``(x, y)`` for gravity and push.
        high: The high end (>= low, per component); ``low == high`` holds a fixed value.
        distribution: ``"uniform"``; ``"log_uniform"`` (scales: uniform in log, low > 0);
            ``"normal"``: mean at the middle, std a quarter of the range, clipped to it.
        when: ``"startup"`` (once per copy: its first episode, and again when the env is
            re-seeded), ``"reset"`` (every episode start) or ``"interval"`` (every
            ``interval_s`` of simulated time within an episode, drawn per copy).
        interval_s: ``(shortest, longest)`` seconds between two draws (``"interval"``
            only); the first comes that long after the episode starts.
        bodies: Body paths or glob patterns (``"/World/Robot/*"``) the term acts on; None
            means every body it can (the moving ones; with mass for ``mass_scale``).
        joints: Joint paths or patterns for ``actuator_strength``; None: every actuated one.

    Raises:
        UserError: When declared, naming the field, the value and the fix.
    """

    what: str
    low: float | tuple[float, ...]
    high: float | tuple[float, ...]
    distribution: str = "uniform"
    when: str = "reset"
    interval_s: tuple[float, float] | None = None
    bodies: tuple[str, ...] | None = None
    joints: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.what, str) or self.what not in KINDS:
            raise UserError(
                f"Randomize.what must be one of {tuple(KINDS)}, got {show(self.what)}; "
                "pick the one to vary: " + "; ".join(f"{k}: {d}" for k, (_, d) in KINDS.items())
            )
        what = self.what
        width = KINDS[what][0]
        low, high = _pair(self.low, width, "low", what), _pair(self.high, width, "high", what)
        if any(a > b for a, b in zip(low, high, strict=True)):
            small = tuple(map(min, low, high))
            big = tuple(map(max, low, high))
            lo, hi = (small[0], big[0]) if width == 1 else (small, big)
            raise UserError(
                f"Randomize({what!r}).low must be <= high per component, got low "
                f"{show(self.low)} > high {show(self.high)}; give the smaller end first: "
                f"Randomize({what!r}, {lo}, {hi})"
            )
        scale = what.endswith(("_scale", "_strength"))
        if scale and (low[0] < 0.0 or high[0] > SCALE_MAX):
            raise UserError(
                f"Randomize({what!r}) draws a factor: low and high must be in "
                f"[0, {SCALE_MAX:g}], got {low[0]:g}..{high[0]:g}; give factors in that "
                "range (1 keeps the scene's value)"
            )
        if self.what == "gravity" and max(abs(x) for x in low + high) > OFFSET_MAX:
            raise UserError(
                f"Randomize('gravity') offsets must be within ±{OFFSET_MAX:g} m/s^2 (the "
                f"scene's gravity and a copy's are within ±{GRAVITY_MAX:g}), got low {low}, "
                f"high {high}; give a smaller offset"
            )
        if self.distribution not in DISTRIBUTIONS:
            raise UserError(
                f"Randomize.distribution must be one of {DISTRIBUTIONS}, got "
                f"{show(self.distribution)}; e.g. distribution='log_uniform' for a scale"
            )
        if self.distribution == "log_uniform" and min(low) <= 0.0:
            raise UserError(
                f"Randomize({what!r}).low must be > 0 for distribution 'log_uniform', got "
                f"{show(self.low)}; use 'uniform' for a range that reaches 0"
            )
        if self.when not in WHEN:
            raise UserError(
                f"Randomize.when must be one of {WHEN}, got {show(self.when)}; e.g. "
                "when='reset' (every episode start, the default)"
            )
        if self.what == "push" and self.when == "startup":
            raise UserError(
                "Randomize('push') kicks bodies: when must be 'reset' or 'interval', got "
                "'startup'; use when='reset' for a kick at every episode start"
            )
        interval = None
        if self.when == "interval":
            if self.interval_s is None:
                raise UserError(
                    "Randomize.interval_s must be (shortest, longest) seconds for "
                    "when='interval', got None; e.g. interval_s=(2.0, 4.0)"
                )
            interval = _pair(self.interval_s, 2, "interval_s", what)
            if not 0.0 < interval[0] <= interval[1]:
                a, b = sorted(interval)
                fix = (
                    f"give the shortest first: interval_s={(a, b)!r}"
                    if a > 0.0
                    else "give positive seconds, e.g. interval_s=(2.0, 4.0)"
                )
                raise UserError(
                    f"Randomize.interval_s must be 0 < shortest <= longest seconds, got "
                    f"{show(self.interval_s)}; {fix}"
                )
        elif self.interval_s is not None:
            raise UserError(
                f"Randomize.interval_s must be None with when={self.when!r} (it is for "
                f"when='interval'), got {show(self.interval_s)}; leave it None, or draw on "
                "an interval with when='interval'"
            )
        for field in ("bodies", "joints"):
            value = getattr(self, field)
            if value is None:
                continue
            if isinstance(value, str) or not (
                isinstance(value, (tuple, list))
                and value
                and all(isinstance(v, str) for v in value)
            ):
                raise UserError(
                    f"Randomize.{field} must be a tuple of paths or patterns, got {show(value)}; "
                    f"e.g. {field}=('/World/Robot/*',)"
                )
            object.__setattr__(self, field, tuple(value))
        if self.joints is not None and what != "actuator_strength":
            fix = (
                "choose bodies with bodies=('/World/Robot/*',)"
                if what in BODY_KINDS
                else "leave it None"
            )
            raise UserError(
                f"Randomize({what!r}).joints must be None (it is for 'actuator_strength'), got "
                f"{self.joints!r}; {fix}"
            )
        if self.bodies is not None and what not in BODY_KINDS:
            fix = (
                "choose joints with joints=('/World/Robot/*',)"
                if what == "actuator_strength"
                else "leave it None"
            )
            raise UserError(
                f"Randomize({what!r}).bodies must be None (it is for {', '.join(BODY_KINDS)}), "
                f"got {self.bodies!r}; {fix}"
            )
        object.__setattr__(self, "low", low if width > 1 else low[0])
        object.__setattr__(self, "high", high if width > 1 else high[0])
        object.__setattr__(self, "interval_s", interval)

    @property
    def label(self) -> str:
        """A short description: ``"mass_scale U(0.5, 2) at reset"``."""
        dist = {"uniform": "U", "log_uniform": "logU", "normal": "N"}[self.distribution]
        when = (
            f"every {self.interval_s[0]:g}-{self.interval_s[1]:g} s"
            if self.interval_s
            else (f"at {self.when}")
        )
        return f"{self.what} {dist}({self.low}, {self.high}) {when}"


def declared(task: object) -> tuple[Randomize, ...]:
    """A task's ``randomization`` attribute, checked: a sequence of :class:`Randomize`.

    Raises:
        TaskError: Naming the task and what it holds instead.
    """
    terms = getattr(task, "randomization", ())
    if terms is None:
        return ()
    name = type(task).__name__
    if isinstance(terms, Randomize):
        terms = (terms,)
    if not isinstance(terms, (tuple, list)) or not all(isinstance(t, Randomize) for t in terms):
        raise TaskError(
            f"{name}.randomization must be a tuple of ke.Randomize terms, got "
            f"{show(terms)}; e.g. randomization = (ke.Randomize('mass_scale', 0.8, 1.2),)"
        )
    return tuple(terms)


@dataclass(frozen=True)
class EpisodeDraws:
    """The values every copy's episode runs with (:meth:`Randomizer.episode`)."""

    labels: tuple[str, ...]
    """What each row is (:attr:`Randomizer.labels`)."""
    table: np.ndarray
    """``(len(labels), num_envs)``: a row per label, a column per copy."""

    def of(self, copy: int) -> dict[str, float]:
        """One copy's values by label."""
        return dict(zip(self.labels, self.table[:, copy].tolist(), strict=True))


class _Term:
    """A declared term bound to a World: its columns, what it acts on, its draws."""

    def __init__(self, spec: Randomize, index: int, world: World, step_dt: float) -> None:
        self.spec = spec
        self.index = index
        kind = spec.what
        lay_names = world.body_names
        self.rows: np.ndarray = np.zeros(0, dtype=np.int64)  # bodies or joints acted on
        if kind in BODY_KINDS:
            can = world.body_masses[0] > 0.0  # the bodies that move by forces (dynamic)
            self.rows = _select(spec.bodies, lay_names, can, "dynamic bodies", "body")
        elif kind == "actuator_strength":
            can = np.array([j.actuator != "none" for j in world.joint_layouts], dtype=bool)
            self.rows = _select(spec.joints, world.joint_names, can, "actuated joints", "joint")
        width = KINDS[kind][0]
        per = self.rows.size if kind in ("mass_scale", "friction_scale", "actuator_strength") else 1
        #: values drawn per copy (per body or joint, or one vector)
        self.count = per * width if kind != "push" else width
        names = lay_names if kind != "actuator_strength" else world.joint_names
        if kind == "push":
            self.labels = ("push count", "push vx", "push vy")
        elif kind == "gravity":
            self.labels = ("gravity dx", "gravity dy")
        elif kind == "sensor_noise_scale":
            self.labels = ("sensor_noise_scale",)
        else:
            self.labels = tuple(f"{kind} {names[r]}" for r in self.rows.tolist())
        on = [names[r] for r in self.rows.tolist()]
        more = f" and {len(on) - 4} more" if len(on) > 5 else ""
        #: The bodies or joints it acts on, for :meth:`Randomizer.describe`.
        self.on = f" on {', '.join(on if not more else on[:4])}{more}" if on else ""
        #: Which term it is in an error message: ``randomization[k] (label on ...)``.
        self.name = f"randomization[{index}] ({spec.label}{self.on})"
        #: :attr:`rows` as a selector (a slice where they are consecutive: cheaper numpy)
        self.sel = _selector(self.rows)
        #: ``(num_envs, ...)`` what the term's draws scale or offset, per copy (set by the
        #: :class:`Randomizer`: the World's values when it was made)
        self.base: np.ndarray = np.zeros(0)
        self.low = np.resize(np.asarray(spec.low, dtype=np.float64), self.count)
        self.high = np.resize(np.asarray(spec.high, dtype=np.float64), self.count)
        if spec.interval_s is not None:
            self.steps = (
                max(1, round(spec.interval_s[0] / step_dt)),
                max(1, round(spec.interval_s[1] / step_dt)),
            )

    def draw(self, rngs: list[np.random.Generator], ids: np.ndarray) -> np.ndarray:
        """``(len(ids), count)`` values from each copy's own Generator (one call per copy)."""
        normal = self.spec.distribution == "normal"
        out = np.empty((ids.size, self.count))
        for k, i in enumerate(ids.tolist()):
            if normal:
                rngs[i].standard_normal(out=out[k])
            else:
                rngs[i].random(out=out[k])
        return self.shape(out)

    def shape(self, raw: np.ndarray) -> np.ndarray:
        """Draws ``raw`` as values of the term's distribution and range.

        ``raw``: uniform in [0, 1), or standard normal for ``"normal"``.
        """
        lo, hi = self.low, self.high
        if self.spec.distribution == "normal":  # mean at the middle, std a quarter of the
            return np.clip((lo + hi) / 2.0 + raw * ((hi - lo) / 4.0), lo, hi)  # range, clipped
        if self.spec.distribution == "log_uniform":
            return np.exp(np.log(lo) + raw * (np.log(hi) - np.log(lo)))
        return lo + raw * (hi - lo)

    def interval(self, rngs: list[np.random.Generator], ids: np.ndarray) -> np.ndarray:
        """Env steps until the next draw, per copy of ``ids`` (uniform in the interval)."""
        return self.steps_from(np.array([rngs[i].random() for i in ids.tolist()]))

    def steps_from(self, u: np.ndarray) -> np.ndarray:
        """:meth:`interval` from its uniform draws ``u`` in [0, 1), one per copy."""
        a, b = self.steps
        return a + np.minimum((u * (b - a + 1)).astype(np.int64), b - a)


class _Plan:
    """The draws of some terms for a batch of copies, fused.

    Per copy, one Generator call for each run of uniform draws (``random``; a normal
    term's ``standard_normal`` stays its own call), in the order of ``steps``. A
    Generator's stream is consumed in order, so per copy these are the values the terms'
    own calls (:meth:`_Term.draw`, :meth:`_Term.interval`) would draw one after another.

    Args:
        steps: ``(term, timer)``: the term's values, or (``timer``) its interval's draw.
    """

    def __init__(self, steps: Sequence[tuple[_Term, bool]]) -> None:
        self.steps = list(steps)
        self.spans: list[slice] = []  # each step's columns of the draws
        self.calls: list[tuple[bool, slice]] = []  # (normal, columns) per Generator call
        at = 0
        for term, timer in self.steps:
            size = 1 if timer else term.count
            normal = not timer and term.spec.distribution == "normal"
            span = slice(at, at + size)
            if self.calls and not normal and not self.calls[-1][0]:
                self.calls[-1] = (False, slice(self.calls[-1][1].start, span.stop))
            else:
                self.calls.append((normal, span))
            self.spans.append(span)
            at += size
        self.width = at

    def draw(self, rngs: list[np.random.Generator], ids: np.ndarray) -> list[np.ndarray]:
        """Per step, the values for copies ``ids``.

        ``(len(ids), count)`` for a term, the env steps ``(len(ids),)`` until the next
        draw for a timer.
        """
        raw = np.empty((ids.size, self.width))
        if len(self.calls) == 1 and not self.calls[0][0]:
            for k, i in enumerate(ids.tolist()):
                rngs[i].random(out=raw[k])
        else:
            for k, i in enumerate(ids.tolist()):
                row, rng = raw[k], rngs[i]
                for normal, cols in self.calls:
                    if normal:
                        rng.standard_normal(out=row[cols])
                    else:
                        rng.random(out=row[cols])
        return [
            term.steps_from(raw[:, span.start]) if timer else term.shape(raw[:, span])
            for (term, timer), span in zip(self.steps, self.spans, strict=True)
        ]


def _selector(index: np.ndarray) -> slice | np.ndarray:
    """Sorted distinct indices as a slice where they are consecutive, else as they are."""
    if index.size and index[-1] - index[0] == index.size - 1:
        return slice(int(index[0]), int(index[-1]) + 1)
    return index


def _select(
    patterns: tuple[str, ...] | None,
    names: tuple[str, ...],
    can: np.ndarray,
    what: str,
    type_name: str,
) -> np.ndarray:
    """Indices of ``names`` the patterns match (None: every one ``can`` allows)."""
    if patterns is None:
        return np.flatnonzero(can)
    picked = np.zeros(len(names), dtype=bool)
    for pattern in patterns:
        hit = np.array([fnmatchcase(n, pattern) for n in names], dtype=bool)
        if not (hit & can).any():
            allowed = [n for n, c in zip(names, can, strict=True) if c]
            raise TaskError(
                f"Randomize pattern {pattern!r} must match a {type_name} it can act on "
                f"({what}: {allowed[:12]}), got none; give a path or pattern of one of them"
            )
        picked |= hit & can
    return np.flatnonzero(picked)


class Randomizer:
    """A task's :class:`Randomize` terms bound to its environment's World.

    Draws each term from the copies' own Generators (``rngs``: the task's), writes the
    values into the World's per-copy parameters and keeps, per copy, the values its
    episode runs with (:attr:`values`, labelled by :attr:`labels`). The environment calls
    :meth:`begin` after a copy's World reset and before the task's ``reset_idx`` (startup
    and reset terms, the interval timers), :meth:`after_reset` after it (pushes at the
    episode start) and :meth:`tick` once per env step before the physics (interval
    terms). Per copy, the draws come in the order the terms are declared.

    Args:
        terms: The task's declared terms (:func:`declared`).
        world: The environment's World; the scales multiply its values as they are now.
        rngs: One Generator per copy (the task's).
        step_dt: Seconds per env step (interval terms count env steps).

    Raises:
        TaskError: Where a term names bodies or joints the World does not have, or where
            an end of its range gives values the World refuses (:meth:`World.check_parameter`).
    """

    def __init__(
        self,
        terms: Sequence[Randomize],
        world: World,
        rngs: list[np.random.Generator],
        step_dt: float,
    ) -> None:
        self.world = world
        self.rngs = rngs
        self.terms = [_Term(t, k, world, step_dt) for k, t in enumerate(terms)]
        self._check_overlaps()
        pushes = [t for t in self.terms if t.spec.what == "push"]
        if len(pushes) > 1:  # each its own record: "push#1 count"..., in declared order
            for j, t in enumerate(pushes, 1):
                t.labels = tuple(label.replace("push", f"push#{j}", 1) for label in t.labels)
        n = world.num_envs
        # what the scales multiply and the offsets add to (the World's values now), per
        # term: only the columns it draws
        base = {
            "mass_scale": lambda t: world.body_masses[:, t.sel],
            "friction_scale": lambda t: world.body_friction[:, t.sel, 0:2],
            "gravity": lambda t: world.gravity,
            "actuator_strength": lambda t: world.actuator_strength[:, t.sel],
            "sensor_noise_scale": lambda t: world.sensor_noise_scale,
        }
        for term in self.terms:
            if term.spec.what in base:
                term.base = np.ascontiguousarray(base[term.spec.what](term))
            self._check_range(term)
        labels: list[str] = []
        self._cols: list[slice] = []
        for term in self.terms:
            self._cols.append(slice(len(labels), len(labels) + len(term.labels)))
            labels.extend(term.labels)
        #: The name of each column of :attr:`values`.
        self.labels: tuple[str, ...] = tuple(labels)
        #: ``(num_envs, len(labels))`` the values each copy's episode runs with (a push
        #: term: how many kicks so far this episode and the last one, 0 before any).
        self.values = np.zeros((n, len(labels)))
        #: ``(num_envs,)`` copies whose startup terms are due (first episode, re-seeded).
        self.pending = np.ones(n, dtype=bool)
        self._interval = [t for t in self.terms if t.spec.when == "interval"]
        #: ``(num_envs, interval terms)`` env steps until each interval term draws again.
        self.timers = np.zeros((n, len(self._interval)), dtype=np.int64)
        # the terms by when they draw (in declaration order), and the push terms' columns
        self._startup = [t for t in self.terms if t.spec.when == "startup"]
        self._at_reset = [t for t in self.terms if t.spec.when == "reset" and t.spec.what != "push"]
        self._push_at_reset = [
            t for t in self.terms if t.spec.when == "reset" and t.spec.what == "push"
        ]
        # the fused draws (_Plan) of an episode start and of each interval term's time
        self._begin_plan = _Plan(
            [(t, False) for t in self._at_reset] + [(t, True) for t in self._interval]
        )
        self._tick_plans = [_Plan([(t, False), (t, True)]) for t in self._interval]
        self._push_cols = np.array(
            [c for t in self.terms if t.spec.what == "push"
             for c in range(self._cols[t.index].start, self._cols[t.index].stop)],
            dtype=np.int64,
        )  # fmt: skip

    def describe(self) -> list[str]:
        """One line per term: what it draws, how, when and on what."""
        out = []
        for t in self.terms:
            on = ""
            if t.rows.size:
                names = (
                    self.world.joint_names
                    if t.spec.what == "actuator_strength"
                    else (self.world.body_names)
                )
                on = f" on {', '.join(names[r] for r in t.rows.tolist())}"
            out.append(t.spec.label + on)
        return out

    def _check_overlaps(self) -> None:
        """Refuse two terms that set the same parameter (pushes add up: they compose).

        The later one's draws would replace the earlier's: one of them would do nothing
        for the bodies or joints they share, and the record would hold both labels.

        Raises:
            TaskError: Naming both terms, what they share and the fix.
        """
        for k, a in enumerate(self.terms):
            for b in self.terms[k + 1 :]:
                kind = a.spec.what
                if b.spec.what != kind or kind == "push":
                    continue
                if kind in ("gravity", "sensor_noise_scale"):  # one per copy
                    raise TaskError(
                        f"{a.name} and {b.name} must be one term (each copy has one {kind}), "
                        f"got two {kind} terms; combine them into one term (the later's "
                        "draws would replace the earlier's)"
                    )
                both = np.intersect1d(a.rows, b.rows)
                if both.size:
                    joints = kind == "actuator_strength"
                    names = self.world.joint_names if joints else self.world.body_names
                    shared = ", ".join(names[r] for r in both[:4].tolist())
                    more = f" and {both.size - 4} more" if both.size > 4 else ""
                    raise TaskError(
                        f"{a.name} and {b.name} must act on different "
                        f"{'joints' if joints else 'bodies'}, got both on {shared}{more}; "
                        f"combine them into one term, or narrow their "
                        f"{'joints' if joints else 'bodies'}= apart (the later's draws would "
                        "replace the earlier's)"
                    )

    def _check_range(self, term: _Term) -> None:
        """Refuse a term whose range ends in values the World does not take (any copy).

        A drawn value lies between the range's ends, and what the World is given moves
        with it (a scale times the World's value, an offset plus it), so the ends bound
        every draw. A push is checked as a kick from rest: the velocities it adds to vary.

        Raises:
            TaskError: Naming the term, the end, the World's refusal and the fix.
        """
        n = self.world.num_envs
        for end, at in (("low", term.low), ("high", term.high)):
            v = np.broadcast_to(at, (n, term.count))
            if term.spec.what == "push":
                rows = np.zeros((n, len(self.world.body_names), 3))
                rows[:, term.sel, 0:2] = v[:, None, :]
            else:
                rows = self._rows(term, np.arange(n), v)
            try:
                self.world.check_parameter(SETTERS[term.spec.what], rows)
            except UserError as err:
                raise TaskError(
                    f"{term.name} must draw values the World takes, got its {end} end "
                    f"{show(getattr(term.spec, end))} refused ({err}); narrow the range "
                    f"({_BOUNDS})"
                ) from err

    def reseeded(self, ids: np.ndarray | None) -> None:
        """The copies' Generators were re-seeded: their startup terms are drawn again."""
        self.pending[slice(None) if ids is None else ids] = True

    def begin(self, ids: np.ndarray) -> None:
        """Copies ``ids`` start an episode (their World is reset, ``reset_idx`` is next)."""
        if self._push_cols.size:
            self.values[ids[:, None], self._push_cols] = 0.0
        start = ids[self.pending[ids]] if self._startup else ids[:0]
        if start.size:  # per copy, its draws come in the order the terms are declared
            for term in self.terms:
                if term.spec.when == "startup":
                    self._apply(term, start)
                elif term in self._at_reset:
                    self._apply(term, ids)
            for j, term in enumerate(self._interval):
                self.timers[ids, j] = term.interval(self.rngs, ids)
        else:  # the reset terms' and the timers' draws, one Generator call per copy
            drawn = self._begin_plan.draw(self.rngs, ids)
            for term, v in zip(self._at_reset, drawn, strict=False):
                self._apply(term, ids, v)
            for j, steps in enumerate(drawn[len(self._at_reset) :]):
                self.timers[ids, j] = steps
        self.pending[ids] = False

    def after_reset(self, ids: np.ndarray) -> None:
        """After ``reset_idx`` of copies ``ids``: the pushes that start their episodes."""
        for term in self._push_at_reset:
            self._apply(term, ids)

    def tick(self) -> None:
        """One env step: the interval terms whose time has come draw (before the physics)."""
        if not self._interval:
            return
        self.timers -= 1
        for j, term in enumerate(self._interval):
            due = np.flatnonzero(self.timers[:, j] <= 0)
            if due.size:  # the term's values, then its next interval: one call per copy
                v, steps = self._tick_plans[j].draw(self.rngs, due)
                self._apply(term, due, v)
                self.timers[due, j] = steps

    def _rows(self, term: _Term, ids: np.ndarray, v: np.ndarray) -> np.ndarray:
        """What ``term``'s values ``v`` for copies ``ids`` give its setter (:data:`SETTERS`)."""
        w, kind, sel = self.world, term.spec.what, term.sel
        if kind == "mass_scale":
            rows = w.body_masses[ids]
            rows[:, sel] = term.base[ids] * v
        elif kind == "friction_scale":
            rows = w.body_friction[ids]
            rows[:, sel, 0:2] = term.base[ids] * v[:, :, None]
        elif kind == "gravity":
            rows = term.base[ids] + v
        elif kind == "actuator_strength":
            rows = w.actuator_strength[ids]
            rows[:, sel] = term.base[ids] * v
        elif kind == "sensor_noise_scale":
            rows = term.base[ids] * v[:, 0]
        else:  # push: the same kick for every chosen body (a rigid push of a robot)
            rows = w.body_velocities[ids]
            rows[:, sel, 0:2] += v[:, None, :]
        return rows

    def _apply(self, term: _Term, ids: np.ndarray, v: np.ndarray | None = None) -> None:
        """Write ``term``'s values ``v`` (None: drawn now) for copies ``ids`` into the World.

        Raises:
            TaskError: Where the World refuses them (naming the term and the fix); the
                World is unchanged by this term.
        """
        if v is None:
            v = term.draw(self.rngs, ids)
        kind = term.spec.what
        try:
            getattr(self.world, SETTERS[kind])(self._rows(term, ids, v), ids)
        except UserError as err:
            raise TaskError(
                f"{term.name} must draw values the World takes, got a draw for copies "
                f"{ids[:8].tolist()} refused ({err}); narrow the range ({_BOUNDS})"
            ) from err
        cols = self._cols[term.index]
        if kind == "push":  # how many kicks so far, and the last one
            count = self.values[ids, cols.start] + 1.0
            v = np.concatenate([count[:, None], v], axis=1)
        self.values[ids, cols] = v

    def episode(self) -> EpisodeDraws:
        """Every copy's values by label (a copy: an episode's record)."""
        return EpisodeDraws(self.labels, self.values.T.copy())

    # ---------------------------------------------------------------- snapshots
    def state_dict(self) -> dict[str, np.ndarray]:
        """What an env snapshot keeps (``env/randomization/...``)."""
        return {
            "values": self.values.copy(),
            "pending": self.pending.copy(),
            "timers": self.timers.copy(),
        }

    def check_state(self, state: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """A snapshot's state, checked against this randomizer (nothing changes).

        Raises:
            ValueError: Naming the array and what it must be.
        """
        want = {
            "values": (self.values.shape, "f"),
            "pending": (self.pending.shape, "b"),
            "timers": (self.timers.shape, "iu"),
        }
        if set(state) != set(want):
            raise ValueError(
                f"snapshot arrays 'env/randomization/*' must be {sorted(want)}, got "
                f"{sorted(state)}; restore a snapshot this env made, unchanged"
            )
        for key, (shape, kinds) in want.items():
            a = state[key]
            ok = a.shape == shape and a.dtype.kind in kinds
            if ok and key == "values":
                ok = bool(np.isfinite(a).all())
            if ok and key == "timers":
                ok = bool((a >= 0).all())
            if not ok:
                raise ValueError(
                    f"snapshot array 'env/randomization/{key}' must be {shape} of kind "
                    f"{kinds!r} (finite, timers >= 0), got {a.dtype} {a.shape}; restore a "
                    "snapshot this env made, unchanged"
                )
        return {k: np.array(v) for k, v in state.items()}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        """Put back a checked state."""
        self.values[...] = state["values"]
        self.pending[...] = state["pending"]
        self.timers[...] = state["timers"]
