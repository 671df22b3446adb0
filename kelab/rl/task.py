"""The Task base class: a learning problem that an environment runs in many copies.

A task declares its scene in :meth:`Task.build`, and per step applies actions, computes
named episode endings, rewards and observations, and resets the copies whose episode
ended. Everything is batched numpy, one row per environment copy. See docs/rl.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from kelab._validate import check_int, check_number, is_int, must
from kelab.rl.errors import TaskError
from kelab.rl.rule_context import RULE_CONTEXT_KEY
from kelab.sim.random_rows import uniform_rows
from kelab.timing.config import MAX_EPISODE_LENGTH_S

if TYPE_CHECKING:
    from kelab.render.canvas import Canvas
    from kelab.rl.rule_context import RuleContext
    from kelab.sim.scene.builder import SceneBuilder
    from kelab.sim.world import World

__all__ = ["MAX_DIM", "Task", "TaskEnv", "TaskError"]

#: The largest observation_dim / action_dim a task may declare.
MAX_DIM = 1_000_000

_DRAWS = {"random": "task.uniform", "standard_normal": "task.normal"}
"""Who draws with each Generator method, for `check_env_ids`'s messages."""


class TaskEnv(Protocol):
    """What every environment that runs a task offers it (``task.env``, ``on_start(env)``).

    :class:`~kelab.rl.env.LearningEnv` and :class:`~kelab.rl.direct.DirectRLEnv` both
    satisfy it; a task that needs more of its own environment annotates ``on_start`` with
    that class (tasks sit above the environments, so they may import them).
    """

    @property
    def task(self) -> Task:
        """The task this environment runs."""
        ...

    @property
    def world(self) -> World:
        """The World holding every copy."""
        ...

    @property
    def step_dt(self) -> float:
        """Simulated seconds per env step."""
        ...

    @property
    def max_episode_length(self) -> int:
        """Env steps in an episode that reaches its time limit."""
        ...


# names the environment binds on the task; reading one before binding gives a clear error
_RUNTIME_NAMES = frozenset(
    {
        "num_envs",
        "episode_length_buf",
        "max_episode_length",
        "step_dt",
        "sim_dt",
        "decimation",
        "rngs",
        "world",
        "env",
        "device",
    }
)


class Task:
    """A learning problem: scene, observations, reward, episode endings and resets.

    Subclass it, set the three class attributes and implement the methods. The
    environment (:class:`~kelab.rl.env.LearningEnv` or :class:`~kelab.rl.direct.DirectRLEnv`)
    calls them in a fixed order; see docs/rl.md. Once bound, the task can read
    ``num_envs``, ``episode_length_buf`` (int64 ``(num_envs,)``: env steps of the current
    episode completed before the step being computed, so ``0`` on an episode's first
    step), ``max_episode_length`` (steps per episode), ``step_dt``, ``sim_dt``,
    ``decimation``, ``sim_time``, ``world`` and ``rngs`` (one seeded
    ``numpy.random.Generator`` per copy; use :meth:`uniform` / :meth:`normal` for
    per-copy draws).

    Attributes:
        observation_dim: Size of one copy's observation vector (int >= 1); for an image
            task, the size of its image (``height * width * channels``).
        observation_shape: None for a float vector of ``observation_dim`` values; an image
            task's ``(height, width, channels)``: ``get_observations()`` returns uint8
            ``(num_envs, height, width, channels)`` and the observation space is
            Gymnasium's ``Box(0, 255, (height, width, channels), uint8)`` (docs/rl.md).
        action_dim: Size of one copy's action vector (int >= 1). Actions arrive in [-1, 1].
        episode_length_s: The episode's time limit in simulated seconds (> 0).
        sim_dt: Preferred physics step (used by DirectRLEnv and the registered tasks).
        decimation: Preferred physics steps per action.
        success_rule: The task's default success rule (a ``@ke.success`` function) or None.
        render_size: ``(width, height)`` of rendered frames in pixels.
        render_zoom: Pixels per metre of rendered frames.

    Example:
        >>> import numpy as np
        >>> import kelab as ke
        >>> class Hold(ke.Task):
        ...     observation_dim, action_dim, episode_length_s = 1, 1, 1.0
        ...     def build(self, scene):
        ...         scene.add(ke.Prop(ke.Circle(0.1), initial_pose=ke.Pose(0.0, 1.0)), at="/Ball")
        ...     def apply_actions(self, actions): pass
        ...     def get_observations(self): return np.zeros((self.num_envs, 1), np.float32)
        ...     def get_rewards(self): return np.ones(self.num_envs, np.float32)
        ...     def get_dones(self):
        ...         return {}, self.episode_length_buf >= self.max_episode_length - 1
        ...     def reset_idx(self, env_ids): pass
        >>> env = ke.LearningEnv(Hold(), num_envs=2)
        >>> obs, info = env.reset()
        >>> obs.shape
        (2, 1)
        >>> env.close()
    """

    observation_dim: int = 0
    observation_shape: tuple[int, int, int] | None = None
    action_dim: int = 0
    episode_length_s: float = 0.0
    sim_dt: float = 1.0 / 120.0
    decimation: int = 2
    success_rule: Callable[[Task], np.ndarray] | None = None
    """A ``@ke.success`` rule (a `kelab.rl.success.SuccessRule`), or None."""
    render_size: tuple[int, int] = (640, 480)
    render_zoom: float = 100.0

    # set by the environment when it binds the task (reading one earlier is a clear error)
    num_envs: int
    """Copies the environment runs."""
    episode_length_buf: np.ndarray
    """int64 ``(num_envs,)``: env steps of each copy's episode done before this step."""
    max_episode_length: int
    """Env steps per episode (``episode_length_s / step_dt``)."""
    step_dt: float
    """Seconds of simulated time per env step (``sim_dt * decimation``)."""
    rngs: list[np.random.Generator]
    """One seeded Generator per copy (draw through :meth:`uniform` / :meth:`normal`)."""
    world: World
    """The :class:`~kelab.sim.world.World` holding every copy."""
    env: TaskEnv
    """The environment running the task."""
    device: str
    """Where the batches live (``"cpu"``)."""

    # ---------------------------------------------------------------- lifecycle (override)
    def build(self, scene: SceneBuilder) -> None:
        """Declare what exists: ground, the robot, props, sensors (called once).

        Args:
            scene: The builder to add items to (``scene.add(robot, at="/World/Robot")``).
        """
        raise NotImplementedError(f"{type(self).__name__} must implement build(scene)")

    def on_start(self, env: TaskEnv) -> None:
        """Look up joint indices and anything else that needs the live world (called once).

        Args:
            env: The environment that runs this task.
        """

    def get_observations(self) -> np.ndarray:
        """Return the observation batch, float ``(num_envs, observation_dim)``.

        An image task (``observation_shape`` set) returns uint8 ``(num_envs, height, width,
        channels)``.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement get_observations()")

    def get_rewards(self) -> np.ndarray:
        """Return one reward per copy, float ``(num_envs,)``."""
        raise NotImplementedError(f"{type(self).__name__} must implement get_rewards()")

    def get_dones(self) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Return ``(terminated, truncated)``.

        ``terminated`` maps a short past-tense name ("pole fell") to a bool ``(num_envs,)``
        array; ``truncated`` is a bool ``(num_envs,)`` array (usually the time limit).
        """
        raise NotImplementedError(f"{type(self).__name__} must implement get_dones()")

    def apply_actions(self, actions: np.ndarray) -> None:
        """Apply the policy's actions (the task's own float32 copy, safe to scale in place).

        Args:
            actions: ``(num_envs, action_dim)`` float32 in [-1, 1].
        """
        raise NotImplementedError(f"{type(self).__name__} must implement apply_actions()")

    def on_post_physics_step(self) -> None:
        """Optional work done exactly once per step, after physics, before get_dones()."""

    def reset_idx(self, env_ids: np.ndarray) -> None:
        """Reset only the copies listed in ``env_ids`` (sorted int64 indices).

        Args:
            env_ids: The copies whose episode starts now.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement reset_idx(env_ids)")

    # ---------------------------------------------------------------- optional render hooks
    def camera_center(self) -> tuple[float, float] | None:
        """Return the world point rendered frames centre on, or None for the default.

        The default follows the first robot's root of copy 0 horizontally.
        """
        return None

    def draw(self, canvas: Canvas, env_ids: np.ndarray, origins: np.ndarray) -> None:
        """Draw task-specific markers (goals, commands) over a rendered frame.

        Args:
            canvas: The ``ke.Canvas`` of the frame (world units).
            env_ids: The copies being drawn.
            origins: ``(len(env_ids), 2)`` world offsets of those copies.
        """

    # ---------------------------------------------------------------- runtime state
    @property
    def sim_time(self) -> float:
        """Simulated seconds since the world started (read from the world)."""
        return float(self.world.sim_time)

    def __getattr__(self, name: str) -> Any:
        # only called when normal lookup fails
        if name in _RUNTIME_NAMES:
            raise AttributeError(
                f"{type(self).__name__}.{name} is set when the task is bound to an environment; "
                "create ke.LearningEnv(task=...) or ke.DirectRLEnv(task) first"
            )
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # ---------------------------------------------------------------- per-copy randomness
    def uniform(
        self,
        env_ids: Sequence[int] | np.ndarray,
        low: float | np.ndarray = 0.0,
        high: float | np.ndarray = 1.0,
        size: int | tuple[int, ...] = (),
    ) -> np.ndarray:
        """Draw uniform numbers from each listed copy's own Generator.

        Copy ``i``'s numbers depend only on its seed and its own past draws, so resetting
        one copy never changes what another copy draws. Each copy draws its ``size``
        numbers in one go, so ``uniform(ids, [a, c], [b, d], size=2)`` gives exactly what
        ``uniform(ids, a, b)`` followed by ``uniform(ids, c, d)`` gives, with one pass over
        the copies instead of two (values equal ``Generator.uniform`` bit for bit).

        Args:
            env_ids: The copies to draw for.
            low: Lower bound (broadcast to ``size``).
            high: Upper bound (broadcast to ``size``).
            size: Shape drawn per copy.

        Returns:
            float64 array ``(len(env_ids), *size)``.

        Raises:
            ValueError: If ``low``/``high`` do not broadcast to ``size`` or ``high - low``
                is not finite.
        """
        shape = _shape(size)
        if type(low) is float and type(high) is float and math.isfinite(high - low):
            # two floats (a reset's usual bounds): the values the arrays below give, bit
            # for bit, without building and checking them (#40: ~4 us a call), scaled as
            # they are drawn (uniform_rows: two numpy calls fewer)
            return self._uniform(env_ids, shape, low, high - low)
        lo = np.asarray(low, dtype=np.float64)
        span = np.asarray(high, dtype=np.float64) - lo
        _check_broadcast("uniform", shape, lo, span)
        if not (math.isfinite(span) if span.ndim == 0 else np.isfinite(span).all()):
            raise ValueError(
                f"task.uniform: high - low must be finite, got {span.tolist()}; pass finite bounds"
            )
        out = self._uniform(env_ids, shape, 0.0, 1.0)
        out *= span
        out += lo
        return out

    def normal(
        self,
        env_ids: Sequence[int] | np.ndarray,
        mean: float | np.ndarray = 0.0,
        std: float | np.ndarray = 1.0,
        size: int | tuple[int, ...] = (),
    ) -> np.ndarray:
        """Draw Gaussian numbers from each listed copy's own Generator.

        Values equal ``Generator.normal(mean, std, size)`` bit for bit, copy by copy.

        Args:
            env_ids: The copies to draw for.
            mean: Mean (broadcast to ``size``).
            std: Standard deviation, >= 0 (broadcast to ``size``).
            size: Shape drawn per copy.

        Returns:
            float64 array ``(len(env_ids), *size)``.

        Raises:
            ValueError: If ``mean``/``std`` do not broadcast to ``size`` or ``std < 0``.
        """
        shape = _shape(size)
        mu = np.asarray(mean, dtype=np.float64)
        sigma = np.asarray(std, dtype=np.float64)
        _check_broadcast("normal", shape, mu, sigma)
        if (sigma < 0).any():
            raise ValueError(f"task.normal: std must be >= 0, got {std!r}")
        out = self._fill(env_ids, shape, "standard_normal")
        out *= sigma
        out += mu
        return out

    def _uniform(
        self, env_ids: Sequence[int] | np.ndarray, shape: tuple[int, ...], low: float, span: float
    ) -> np.ndarray:
        """``(len(env_ids), *shape)``: each copy's next standard uniforms ``* span + low``.

        All the listed copies in one C call where it can (kelab/sim/random_rows.py; #40:
        Task.uniform in a Humanoid x256 env step, thread CPU, ~45-50 -> ~22-27 us), the same
        bits as a ``Generator.random`` call per copy then ``out *= span; out += low``.
        """
        rngs = self.rngs
        ids = check_env_ids(env_ids, len(rngs), _DRAWS["random"])
        out = np.empty((ids.size, *shape), dtype=np.float64)
        if out.size:
            uniform_rows(rngs, ids, out, low, span)
        return out

    def _fill(
        self, env_ids: Sequence[int] | np.ndarray, shape: tuple[int, ...], method: str
    ) -> np.ndarray:
        """Fill ``(len(env_ids), *shape)`` with each copy's next standard draws."""
        rngs = self.rngs
        ids = check_env_ids(env_ids, len(rngs), _DRAWS[method])
        out = np.empty((ids.size, *shape), dtype=np.float64)
        if out.size:
            for row, i in zip(out.reshape(ids.size, -1), ids.tolist(), strict=True):
                getattr(rngs[i], method)(out=row)
        return out

    # ---------------------------------------------------------------- success-rule helpers
    def survived(self) -> np.ndarray:
        """Inside a success rule: did each copy survive to its real time limit?

        True where no named condition fired and the episode reached its real time limit
        (an ending the task cut short with ``truncated`` is not survival); bool
        ``(num_envs,)``.

        Raises:
            RuntimeError: Outside a ``@ke.success`` rule.
        """
        return _rule_context(self, "survived()").survived()

    def ended_by(self, name: str) -> np.ndarray:
        """Inside a success rule: was the named condition true on the final step?

        Returns bool ``(num_envs,)`` for a condition from ``get_dones()``;
        ``"time limit"`` and ``"cut short by the task"`` are also accepted.

        Args:
            name: A condition name returned by ``get_dones()``.

        Raises:
            RuntimeError: Outside a ``@ke.success`` rule.
            ValueError: For a name ``get_dones()`` never returned.
        """
        return _rule_context(self, "ended_by()").ended_by(name)

    def check(self, name: str, value: np.ndarray) -> np.ndarray:
        """Inside a success rule: record a named bool per copy for the report.

        Name checks so that a yes is good ("pole within 10 degrees of upright").

        Args:
            name: Unique (within the rule) non-empty name.
            value: bool ``(num_envs,)`` array.

        Returns:
            ``value`` unchanged.

        Raises:
            RuntimeError: Outside a ``@ke.success`` rule.
            ValueError: For a repeated name or a value that is not a bool ``(num_envs,)`` array.
        """
        return _rule_context(self, "check()").check(name, value)

    # ---------------------------------------------------------------- snapshot support
    def state_dict(self) -> dict[str, np.ndarray]:
        """Return copies of the task's own mutable state, for environment snapshots.

        The default collects every numpy array attribute and every object with a
        ``state_dict()`` method (such as :class:`~kelab.rl.success.DwellTimer`). Override
        it (and :meth:`load_state_dict`) for state kept in other forms.

        Returns:
            Named array copies.
        """
        out: dict[str, np.ndarray] = {}
        for key, value in vars(self).items():
            if key in _RUNTIME_NAMES or key.startswith("_ke_"):
                continue
            if isinstance(value, np.ndarray):
                out[key] = value.copy()
            elif hasattr(value, "state_dict") and hasattr(value, "load_state_dict"):
                for sub, arr in value.state_dict().items():
                    out[f"{key}/{sub}"] = np.array(arr, copy=True)
        return out

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        """Restore what :meth:`state_dict` returned (arrays are written in place).

        Args:
            state: The mapping from :meth:`state_dict`.
        """
        nested: dict[str, dict[str, np.ndarray]] = {}
        for key, arr in state.items():
            if "/" in key:
                owner, sub = key.split("/", 1)
                nested.setdefault(owner, {})[sub] = arr
                continue
            current = self.__dict__.get(key)
            if isinstance(current, np.ndarray) and current.shape == arr.shape:
                current[...] = arr
            else:
                self.__dict__[key] = np.array(arr, copy=True)
        for owner, sub_state in nested.items():
            self.__dict__[owner].load_state_dict(sub_state)


def check_env_ids(env_ids: object, num_envs: int, where: str) -> np.ndarray:
    """Validate copy indices given at the RL boundary and return them as int64 ``(k,)``.

    Args:
        env_ids: An int or a 1-D sequence/array of ints (numpy ints too).
        num_envs: The number of copies; every id must be in ``[0, num_envs)``.
        where: Who was called, for the message (``"task.uniform"``).

    Returns:
        The ids, in the given order.

    Raises:
        ValueError: For floats, strings, bools, other non-integers, a nested list, ids
            out of range or repeated ids, naming the offending values.
    """
    if (
        type(env_ids) is np.ndarray
        and env_ids.dtype == np.int64
        and env_ids.ndim == 1
        and 0 < env_ids.size <= 64
    ):  # an env's own ids (a step's resets): the checks below, in Python (#40: ~2 us)
        listed = env_ids.tolist()
        if min(listed) >= 0 and max(listed) < num_envs and len(set(listed)) == len(listed):
            return env_ids.copy()
        # else the checks below say what is wrong
    if isinstance(env_ids, (str, bytes)):
        raise ValueError(f"{where}: env_ids must be copy indices (ints), got {env_ids!r}")
    try:
        ids = np.asarray(env_ids)
    except (TypeError, ValueError):
        ids = np.asarray(None)
    if ids.size == 0 and ids.ndim == 1:
        return np.zeros(0, dtype=np.int64)
    if ids.dtype.kind not in "iu" or ids.ndim > 1:
        raise ValueError(
            f"{where}: env_ids must be an int or a 1-D sequence of ints (copy indices), got "
            f"{env_ids!r:.120}; floats, strings and bools are not copy indices"
        )
    ids = ids.astype(np.int64).reshape(-1)
    if ids.size <= 64:  # a few ids (a step's resets): Python's min, max and set are cheaper
        listed = ids.tolist()
        bad_range = bool(listed) and (min(listed) < 0 or max(listed) >= num_envs)
        repeated = len(set(listed)) != len(listed)
    else:
        bad_range = bool(((ids < 0) | (ids >= num_envs)).any())
        repeated = ids.size > 1 and np.unique(ids).size != ids.size
    if bad_range:
        out = (ids < 0) | (ids >= num_envs)
        raise ValueError(
            f"{where}: env_ids must be in [0, {num_envs}), got {ids[out].tolist()[:10]}"
        )
    if repeated:
        uniq, counts = np.unique(ids, return_counts=True)
        raise ValueError(
            f"{where}: env_ids must not repeat a copy, got {uniq[counts > 1].tolist()[:10]} "
            "more than once; list each copy once"
        )
    return ids


def _shape(size: int | tuple[int, ...]) -> tuple[int, ...]:
    if type(size) is int and size >= 0:  # the common cases, checked at once
        return (size,)
    if type(size) is tuple and not size:
        return ()
    try:
        shape = (size,) if is_int(size) else tuple(size)  # type: ignore[arg-type]
    except TypeError:  # not iterable: a float, a bool, None...
        shape = (None,)
    if any(not is_int(d) or d < 0 for d in shape):
        raise ValueError(must("size", "an int or a tuple of ints >= 0", size))
    return tuple(int(d) for d in shape)


def _check_broadcast(what: str, shape: tuple[int, ...], *params: np.ndarray) -> None:
    if all(p.ndim == 0 for p in params):  # scalars broadcast to every size
        return
    try:
        ok = np.broadcast_shapes(shape, *(p.shape for p in params)) == shape
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(
            f"task.{what}: parameters of shapes {[p.shape for p in params]} do not broadcast "
            f"to size {shape}; give size= the shape drawn per copy"
        )


def _rule_context(task: Task, what: str) -> RuleContext:
    ctx = task.__dict__.get(RULE_CONTEXT_KEY)
    if ctx is None:
        raise RuntimeError(
            f"task.{what} works only inside a @ke.success rule while the environment judges a "
            "finished episode; call it from your success rule, not from task methods"
        )
    return ctx


def _task_id_fix(task_id: str) -> str:
    """The fix for a task id passed where a Task goes: its class, or make it by id."""
    import gymnasium  # its registry holds the built-in ids (kelab.tasks registers them)

    for name in (task_id, f"kelab/{task_id}"):
        spec = gymnasium.registry.get(name)
        entry = spec.kwargs.get("task") if spec is not None else None
        if isinstance(entry, str) and ":" in entry:
            module, cls = entry.split(":", 1)
            return (
                f"; {name!r} is a task id: pass its task, {cls}() (from {module} import "
                f"{cls}), or make the env by id: gymnasium.make_vec({name!r}, num_envs=N, "
                f"vectorization_mode='vector_entry_point') (gymnasium.make({name!r}) for one "
                "copy)"
            )
    return (
        "; pass a Task instance (e.g. CartPoleTask() from kelab.tasks.cartpole), or make a "
        "registered id's env with gymnasium.make_vec(id, num_envs=N, "
        "vectorization_mode='vector_entry_point')"
    )


def validate_task_class(task: Task) -> None:
    """Check a task's class attributes before an environment is built.

    Args:
        task: The task instance.

    Raises:
        TaskError: Naming the attribute, the value seen and what is allowed.
    """
    if not isinstance(task, Task):
        fix = f"; pass an instance: {task.__name__}()" if isinstance(task, type) else ""
        if isinstance(task, str):
            fix = _task_id_fix(task)
        raise TaskError(f"task must be a ke.Task instance, got {task!r}{fix}")
    name = type(task).__name__
    try:
        for attr in ("observation_dim", "action_dim"):
            check_int(
                getattr(task, attr),
                f"{name}.{attr}",
                low=1,
                high=MAX_DIM,
                fix="set it as a class attribute",
            )
        shape = task.observation_shape
        if shape is not None:
            _check_image_shape(name, shape, task.observation_dim)
        check_number(
            task.episode_length_s,
            f"{name}.episode_length_s",
            low=0.0,
            high=MAX_EPISODE_LENGTH_S,
            low_open=True,
            unit="seconds",
            fix="the episode's time limit, set as a class attribute",
        )
    except ValueError as err:
        raise TaskError(str(err)) from None


def _check_image_shape(name: str, shape: object, dim: int) -> None:
    """An image task's ``observation_shape``: three ints >= 1 whose product is its dim."""
    ok = isinstance(shape, tuple) and len(shape) == 3 and all(is_int(v) and v >= 1 for v in shape)
    if not ok:
        raise TaskError(
            must(
                f"{name}.observation_shape",
                "None or (height, width, channels), three ints >= 1",
                shape,
                "set it as a class attribute",
            )
        )
    height, width, channels = (int(v) for v in shape)  # type: ignore[union-attr]
    if height * width * channels != dim:
        raise TaskError(
            f"{name}.observation_dim must be {height * width * channels}, the size of its "
            f"observation_shape {shape!r}, got {dim}; set observation_dim = "
            f"{height} * {width} * {channels}"
        )
