"""EnvConfig: one frozen, validated description of how an environment runs its task.

`LearningEnv`, `DirectRLEnv` and `RayLearningEnv` take ``config=ke.EnvConfig(...)``:
copies, seed, timing, rendering, layout and threads, checked once, with one default
layout (``"isolated"``) everywhere. Each field is declared once with its doc and check
(`kelab._settings.setting`). The environments also take every field as a keyword, and the
older ones (``dt``, ``physics_steps_per_action``, ``headless``, ``run_config``): the list
is declared once too (`EnvKeywords`), and they are folded into the config here
(`env_config`), so every environment resolves them in one place and in one way.
Gymnasium's ``render_mode=`` keyword (what ``gymnasium.make`` passes) is the config's own
field. See docs/rl.md, "Environment config".
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from kelab._settings import check_settings, setting
from kelab._validate import (
    LAYOUTS,
    NUM_ENVS_FIX,
    SEED_FIX,
    check_bool,
    check_choice,
    check_int,
    check_layout,
    check_number,
    check_seed,
    must,
)
from kelab.errors import UserError
from kelab.timing.config import (
    MAX_DECIMATION,
    RENDER_MODE_FIX,
    SIM_DT_RANGE,
    RunMode,
    SimulationRunConfig,
    SimulationTimingConfig,
)

if TYPE_CHECKING:
    from kelab.rl.task import Task

__all__ = [
    "DEFAULT_LAYOUT",
    "RENDER_BACKENDS",
    "RENDER_MODES",
    "ENV_ALIASES",
    "EnvConfig",
    "EnvKeywords",
    "check_fields",
    "env_config",
    "resolve_run_config",
    "resolve_timing",
]

DEFAULT_LAYOUT = "isolated"
"""The one default World layout of every environment (and of ``ke.World``): copy ``i`` is
bit-identical to a lone copy, so a default LearningEnv's copy ``i`` matches a default
DirectRLEnv with the same seed. ``"packed"`` is the opt-in speed layout (TrainConfig
chooses it for training)."""

RENDER_BACKENDS = ("pygame", "gl")
"""Renderer backends an environment can draw with."""

RENDER_MODES = (None, "rgb_array", "human")
"""Gymnasium render modes an environment accepts (None never draws)."""


def _check_num_envs(value: object, name: str) -> int:
    return check_int(value, name, low=1, fix=NUM_ENVS_FIX)


def _check_seed(value: object, name: str) -> int:
    return check_seed(value, name, fix=SEED_FIX)


def _check_timing(value: object, name: str) -> SimulationTimingConfig | None:
    if value is None or isinstance(value, SimulationTimingConfig):
        return value
    raise UserError(
        f"{name} must be a ke.SimulationTimingConfig or None, got {value!r}; leave it None "
        "to use the task's own timing"
    )


def _check_render_mode(value: object, name: str) -> object:
    if value is None or (isinstance(value, str) and value in RENDER_MODES):
        return value
    raise UserError(must(name, "None, 'rgb_array' or 'human'", value, RENDER_MODE_FIX))


def _check_num_threads(value: object, name: str) -> int:
    return check_int(
        value,
        name,
        low=1,
        fix="results are bit-identical for every value; num_threads=1 steps every copy on the "
        "calling thread",
    )


def _check_env_spacing(value: object, name: str) -> float:
    return check_number(
        value, name, low=0.0, unit="metres", fix="it spaces the copies for display, e.g. 4.0"
    )


def _check_render_backend(value: object, name: str) -> str:
    return check_choice(  # type: ignore[return-value]  # one of RENDER_BACKENDS: a str
        value, name, RENDER_BACKENDS, fix="'pygame' draws on the CPU, 'gl' with moderngl"
    )


def _check_copy_offset(value: object, name: str) -> int:
    return check_seed(value, name, fix="leave it 0 unless this env is a slice of a larger one")


@dataclass(frozen=True)
class EnvConfig:
    """How an environment runs its task; validated when made (``ValueError`` names the field).

    Each field is declared once with its doc and check (`kelab._settings.setting`);
    docs/rl.md's table of the fields is generated from them.

    Example:
        >>> import kelab as ke
        >>> from kelab.tasks.cartpole import CartPoleTask
        >>> cfg = ke.EnvConfig(num_envs=4, seed=1, layout="packed")
        >>> env = ke.LearningEnv(CartPoleTask(), config=cfg)
        >>> env.num_envs, env.world.layout, env.config.render_mode
        (4, 'packed', None)
        >>> env.close()
    """

    num_envs: int = setting(1, "Copies of the task run side by side (>= 1).", _check_num_envs)
    seed: int = setting(
        0, "Seed of every per-copy random Generator: an int in [0, 2**64).", _check_seed
    )
    timing: SimulationTimingConfig | None = setting(
        None,
        "Physics step, decimation and episode length (a ke.SimulationTimingConfig); None: the "
        "task's sim_dt, decimation and episode_length_s (a timing with episode_length_s=None "
        "keeps the task's episode length).",
        _check_timing,
    )
    render_mode: str | None = setting(
        None,
        "Gymnasium's render mode, which picks the run mode: None -> HEADLESS_FAST (never "
        "draws), 'rgb_array' -> OFFSCREEN_FAST (render() returns frames), 'human' -> PACED (a "
        "window, real-time pacing).",
        _check_render_mode,
        choices=RENDER_MODES,
    )
    layout: str = setting(
        DEFAULT_LAYOUT,
        "World layout: 'isolated' (one pymunk space per copy, each copy exact against a lone "
        "copy) or 'packed' (copies share a space per thread shard: several times faster for "
        "many copies, same-seed runs still bit-identical; docs/world.md, Layouts).",
        check_layout,
        choices=LAYOUTS,
    )
    num_threads: int = setting(
        1, "Threads stepping the copies (results are bit-identical for every value).",
        _check_num_threads,
    )  # fmt: skip
    env_spacing: float = setting(
        4.0,
        "Metres between copy origins along x (display only; packed rounds it up to a power of "
        "two).",
        _check_env_spacing,
    )
    render_backend: str = setting(
        "pygame",
        "Renderer used when the run mode draws: 'pygame' (software drawing) or 'gl' (moderngl, "
        "drawn on the GPU).",
        _check_render_backend,
        choices=RENDER_BACKENDS,
    )
    copy_offset: int = setting(
        0,
        "Global index of copy 0: copy i draws from the random streams of copy copy_offset + i "
        "of a larger env with the same seed (RayLearningEnv's workers; docs/scale.md).",
        _check_copy_offset,
    )

    def __post_init__(self) -> None:
        names = [f.name for f in dataclasses.fields(self)]
        checked = check_settings({n: getattr(self, n) for n in names}, EnvConfig, "EnvConfig.")
        for name, value in checked.items():
            object.__setattr__(self, name, value)

    @property
    def run_config(self) -> SimulationRunConfig:
        """The run mode ``render_mode`` picks (`SimulationRunConfig`)."""
        return SimulationRunConfig.from_render_mode(self.render_mode)

    @property
    def headless(self) -> bool:
        """Whether no window opens (every run mode but PACED)."""
        return self.run_config.mode is not RunMode.PACED


class EnvKeywords(TypedDict, total=False):
    """The settings every environment takes as keywords (``**settings``), declared once.

    ``LearningEnv``, ``DirectRLEnv`` and ``RayLearningEnv`` take ``num_envs`` (but
    ``DirectRLEnv``), ``seed`` and ``config`` by name, and these as ``**settings``: every
    other `EnvConfig` field, overriding the config's (None keeps it), and the older
    aliases (:data:`ENV_ALIASES`). `env_config` folds them into one config.
    tests/rl/test_env_keywords.py checks that they are exactly EnvConfig's fields and the
    aliases.
    """

    timing: SimulationTimingConfig | None
    """`EnvConfig.timing`."""
    render_mode: str | None
    """`EnvConfig.render_mode` (Gymnasium's keyword: what ``gymnasium.make`` passes; it must
    agree with ``config.render_mode``)."""
    layout: str | None
    """`EnvConfig.layout`."""
    num_threads: int | None
    """`EnvConfig.num_threads`."""
    env_spacing: float | None
    """`EnvConfig.env_spacing`."""
    render_backend: str | None
    """`EnvConfig.render_backend`."""
    copy_offset: int | None
    """`EnvConfig.copy_offset`."""
    dt: float | None
    """Older alias: overrides the timing's physics step (``sim_dt``)."""
    physics_steps_per_action: int | None
    """Older alias: overrides the timing's ``decimation``."""
    run_config: SimulationRunConfig | None
    """Older alias of ``render_mode`` (a ``ke.SimulationRunConfig``): must match it."""
    headless: bool | None
    """Older check: True refuses ``render_mode="human"`` (no window opens in the other
    modes anyway)."""


ENV_ALIASES = ("dt", "physics_steps_per_action", "run_config", "headless")
"""The environments' older keywords that are not `EnvConfig` fields (see `EnvKeywords`)."""


def check_fields(values: dict[str, object], prefix: str = "") -> dict[str, object]:
    """Check `EnvConfig` fields by their declared checks, each error naming ``prefix + field``.

    ``EnvConfig`` checks its own fields with ``prefix="EnvConfig."``; `env_config` checks
    the keywords an environment was given under the names the user passed them by.

    Args:
        values: Field name -> value (names other than EnvConfig's fields pass through).
        prefix: Put before each field's name in an error.

    Returns:
        The values converted (numpy ints to ``int``, numbers to ``float``).

    Raises:
        UserError: ``"EnvConfig.seed must be an int >= 0, got -1; pass ..."``, for the
            first bad field, with what to do instead.
    """
    return check_settings(values, EnvConfig, prefix)


def resolve_run_config(
    render_mode: str | None, run_config: SimulationRunConfig | None
) -> SimulationRunConfig:
    """Return the run config for a ``render_mode`` / ``run_config`` pair.

    Without a run config the mode follows ``render_mode`` (None -> HEADLESS_FAST,
    "human" -> PACED, "rgb_array" -> OFFSCREEN_FAST). An explicit run config must come
    with the render mode its mode requires.

    Args:
        render_mode: Gymnasium's render mode.
        run_config: An explicit run mode, or None.

    Returns:
        The run config.

    Raises:
        UserError: For an unknown render mode, or a pair that does not match, saying which
            render mode the run config requires.
    """
    if run_config is None:
        return SimulationRunConfig.from_render_mode(render_mode)
    if not isinstance(run_config, SimulationRunConfig):
        raise UserError(f"run_config must be a ke.SimulationRunConfig or None, got {run_config!r}")
    SimulationRunConfig.from_render_mode(render_mode)  # validates the render mode itself
    if run_config.render_mode != render_mode:
        raise UserError(
            f"run_config mode {run_config.mode.name} requires render_mode="
            f"{run_config.render_mode!r}, got render_mode={render_mode!r}; pass render_mode="
            f"{run_config.render_mode!r} with it (or leave run_config=None to choose the mode "
            "from render_mode)"
        )
    return run_config


def resolve_timing(
    task: Task,
    timing: SimulationTimingConfig | None = None,
    dt: float | None = None,
    physics_steps_per_action: int | None = None,
) -> SimulationTimingConfig:
    """Return the timing an environment runs ``task`` at.

    Defaults are the task's own ``sim_dt``, ``decimation`` and ``episode_length_s``; an
    explicit ``timing`` replaces them (its ``episode_length_s=None`` keeps the task's), and
    ``dt`` / ``physics_steps_per_action`` override the physics step / decimation of either.

    Args:
        task: The task.
        timing: An explicit timing, or None.
        dt: The older keyword for ``timing.sim_dt``, or None.
        physics_steps_per_action: The older keyword for ``timing.decimation``, or None.

    Returns:
        A timing with every field set.

    Raises:
        UserError: For a ``timing`` that is not a ``SimulationTimingConfig``, or a ``dt`` /
            ``physics_steps_per_action`` out of the config's ranges (named as passed).
    """
    if timing is None:
        timing = SimulationTimingConfig(
            sim_dt=task.sim_dt, decimation=task.decimation, episode_length_s=task.episode_length_s
        )
    elif not isinstance(timing, SimulationTimingConfig):
        raise UserError(f"timing must be a ke.SimulationTimingConfig or None, got {timing!r}")
    elif timing.episode_length_s is None:
        timing = dataclasses.replace(timing, episode_length_s=task.episode_length_s)
    if dt is not None:  # checked under the caller's name, by the config's own rule
        lo, hi = SIM_DT_RANGE
        dt = check_number(
            dt, "dt", low=lo, high=hi, unit="seconds", fix="for 120 Hz physics pass dt=1/120"
        )
        timing = dataclasses.replace(timing, sim_dt=dt)
    if physics_steps_per_action is not None:
        steps = check_int(
            physics_steps_per_action,
            "physics_steps_per_action",
            low=1,
            high=MAX_DECIMATION,
            fix="it counts physics steps per environment step",
        )
        timing = dataclasses.replace(timing, decimation=steps)
    return timing


def env_config(
    task: Task,
    config: EnvConfig | None,
    *,
    render_mode: str | None = None,
    run_config: SimulationRunConfig | None = None,
    headless: bool | None = None,
    timing: SimulationTimingConfig | None = None,
    dt: float | None = None,
    physics_steps_per_action: int | None = None,
    **fields: object,
) -> EnvConfig:
    """Fold an environment's keywords into one `EnvConfig` with its timing resolved.

    Every keyword left None keeps ``config``'s value (or EnvConfig's default). The older
    keywords are aliases: ``run_config`` must match ``render_mode`` (it picks the same
    run mode), ``headless`` must agree with it, ``dt`` / ``physics_steps_per_action``
    override the timing's physics step / decimation.

    Args:
        task: The task (its timing fills what is left open).
        config: A config, or None for the defaults.
        render_mode: Gymnasium's render mode (what ``gymnasium.make`` passes), or None.
        run_config: Older alias of ``render_mode``.
        headless: Older check: True refuses ``"human"``.
        timing: Overrides ``config.timing``.
        dt: Overrides the timing's ``sim_dt``.
        physics_steps_per_action: Overrides the timing's ``decimation``.
        **fields: Other EnvConfig fields (``num_envs``, ``seed``, ``layout``...) given as
            keywords; None keeps the config's.

    Returns:
        The config, its ``timing`` complete.

    Raises:
        UserError: For a config that is not an EnvConfig, a render mode that disagrees
            with ``config``, ``run_config`` or ``headless``, and any invalid field.
    """
    if config is None:
        config = EnvConfig()
    elif not isinstance(config, EnvConfig):
        raise UserError(f"config must be a ke.EnvConfig or None, got {config!r}")
    if render_mode is not None and config.render_mode not in (None, render_mode):
        raise UserError(
            f"render_mode={render_mode!r} disagrees with config.render_mode="
            f"{config.render_mode!r}; give the render mode once"
        )
    mode = render_mode if render_mode is not None else config.render_mode
    if run_config is not None:
        mode = resolve_run_config(mode, run_config).render_mode
    resolved = resolve_run_config(mode, None)
    if headless is not None:
        headless = check_bool(
            headless, "headless", fix="or leave it out (None) to follow render_mode"
        )
        if headless and resolved.mode is RunMode.PACED:
            raise UserError(
                "render_mode='human' opens a window, but headless=True; leave headless out "
                "(it follows render_mode) to watch the copies, or use render_mode='rgb_array' "
                "for offscreen frames"
            )
    given = {k: v for k, v in fields.items() if v is not None}
    unknown = sorted(set(given) - {f.name for f in dataclasses.fields(EnvConfig)})
    if unknown:
        raise TypeError(f"unknown environment setting(s) {unknown}")
    timing = resolve_timing(
        task, timing if timing is not None else config.timing, dt, physics_steps_per_action
    )
    given = check_fields(given)  # named as passed: LearningEnv(seed=-1) says "seed"
    return dataclasses.replace(config, render_mode=mode, timing=timing, **given)
