"""CoreBackedEnv: what both environments read from their step engine and Presenter (internal)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kelab.rl._contract import check_success_rule

if TYPE_CHECKING:
    from kelab.render.renderer import Renderer
    from kelab.rl._core import EnvCore
    from kelab.rl._presenter import Presenter
    from kelab.rl.config import EnvConfig
    from kelab.rl.randomization import Randomizer
    from kelab.rl.success import SuccessRule
    from kelab.timing.pacer import SimulationPacer

__all__ = ["CoreBackedEnv"]


class CoreBackedEnv:
    """The properties both environments (`DirectRLEnv`, `LearningEnv`) read from their core.

    Subclasses set ``_config`` (their `EnvConfig`), ``_core`` (an `EnvCore`) and
    ``_presenter`` (a `Presenter`).
    """

    _core: EnvCore
    _presenter: Presenter
    _config: EnvConfig

    @property
    def max_episode_length(self) -> int:
        """Env steps in an episode that reaches its time limit."""
        return self._core.max_episode_length

    @property
    def success_rule(self) -> SuccessRule | None:
        """The rule judging finished episodes (``info["is_success"]``), or None."""
        return self._core.success_rule

    @success_rule.setter
    def success_rule(self, rule: SuccessRule | None) -> None:
        self._core.success_rule = check_success_rule(rule)

    @property
    def randomizer(self) -> Randomizer | None:
        """The task's domain randomization bound to this env (None: the task declares none).

        ``randomizer.describe()`` says what each term draws; ``randomizer.values`` holds
        what every copy's episode runs with (labels ``randomizer.labels``).
        """
        return self._core.randomizer

    @property
    def condition_names(self) -> tuple[str, ...]:
        """The task's termination condition names, in ``get_dones()`` order.

        The task's first ``get_dones()`` fixes them: ``()`` until the first step.
        """
        return self._core.validator.names or ()

    @property
    def pacer(self) -> SimulationPacer | None:
        """The PACED pacer (None in other modes)."""
        return self._presenter.pacer

    @property
    def window_closed(self) -> bool:
        """True once the user closed the PACED window."""
        return self._presenter.window_closed

    @property
    def renderer(self) -> Renderer | None:
        """The renderer drawing this env's frames, or None.

        None until the first draw, after close, and in HEADLESS_FAST. Read its camera,
        canvas or pixels, e.g. ``env.renderer.read_rgb_pixels()`` for a ``"human"``
        window's frame.
        """
        return self._presenter.renderer

    @property
    def frame_count(self) -> int:
        """Frames this env has drawn (0 in HEADLESS_FAST and before the first draw).

        ``"human"`` draws after each reset and step (and an episode's last frame);
        ``"rgb_array"`` draws when `render` is called (and, once it has been, an
        episode's last frame). Read-only; it keeps its value after `close`.
        """
        return self._presenter.frames

    @property
    def config(self) -> EnvConfig:
        """The validated `EnvConfig` this environment was made with (its timing complete)."""
        return self._config
