"""Command-line options generated from a config's fields, so options and configs cannot drift.

A subcommand that sets a config (``kelab train`` and ``TrainConfig``, ``kelab preview``
and ``EnvConfig``...) declares a :class:`ConfigOptions`: the config class, the fields it
has no option for (each with the reason) and the few options whose name or default
differ from the field's. Every other field becomes an option: ``--learning-rate`` for
``learning_rate``, its help the field's doc (`kelab._settings.setting`), its value
checked on the command line by the field's own check (the config's words, the option's
name: ``argument --num-envs: num-envs must be an int >= 1, got 0``). Integer options also
have a top bound (:data:`~kelab.cli.args.COUNT_MAX` unless declared), as every integer
option of ``kelab`` does. tests/test_config_options.py checks that every field of every
declared config has an option or a reason, and that each option's help is its field's doc.

Example:
    >>> from kelab.cli.args import KelabArgumentParser
    >>> from kelab.train.config import TrainConfig
    >>> options = ConfigOptions(
    ...     TrainConfig, excluded={"max_iterations": "--iterations sets it"}, overrides=True
    ... )
    >>> parser = KelabArgumentParser(prog="train")
    >>> options.add_to(parser)
    >>> args = parser.parse_args(["--learning-rate", "3e-4", "--actor-hidden-dims", "32", "32"])
    >>> options.given(args)
    {'actor_hidden_dims': (32, 32), 'learning_rate': 0.0003}
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kelab._settings import Check, Setting, settings
from kelab.cli.args import COUNT_MAX, at_most, converter

__all__ = ["ConfigOptions"]


class _CheckedTuple(argparse.Action):
    """``nargs="+"``: the items as a tuple, checked whole by the field's check."""

    def __init__(self, *args: Any, check: Check, label: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.check = check
        self.label = label

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        try:
            value = self.check(tuple(values or ()), self.label)
        except ValueError as err:
            raise argparse.ArgumentError(self, str(err)) from None
        setattr(namespace, self.dest, value)


@dataclass(frozen=True)
class ConfigOptions:
    """The options a subcommand generates from a config class's fields.

    Attributes:
        config: The config dataclass (every field declared with `kelab._settings.setting`).
        excluded: Field -> why the subcommand has no option for it. Every other field
            gets one.
        names: Field -> the option's name (without ``--``) where it is not the field's
            name with dashes (``{"render_backend": "backend"}``).
        defaults: Field -> the subcommand's default where it is not the config's.
        overrides: False: each option's default is the config's (or ``defaults``'), shown
            by ``--help``. True: the options change what the subcommand starts from (a
            task's training config), so one left out is not applied (its value is None);
            say so in the options' group description.
        highs: Integer field -> ``(largest value, why)`` where it is not
            :data:`~kelab.cli.args.COUNT_MAX`.
    """

    config: type
    excluded: Mapping[str, str] = field(default_factory=dict)
    names: Mapping[str, str] = field(default_factory=dict)
    defaults: Mapping[str, object] = field(default_factory=dict)
    overrides: bool = False
    highs: Mapping[str, tuple[int, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        known = set(settings(self.config))
        for what, names in (("excluded", self.excluded), ("names", self.names),
                            ("defaults", self.defaults), ("highs", self.highs)):  # fmt: skip
            unknown = sorted(set(names) - known)
            if unknown:
                raise ValueError(
                    f"ConfigOptions.{what} names {unknown}, which are not fields of "
                    f"{self.config.__name__}; use its field names"
                )
        for name, why in self.excluded.items():
            if not isinstance(why, str) or not why.strip():
                raise ValueError(
                    f"ConfigOptions.excluded[{name!r}] must say why {name} has no option, "
                    f"got {why!r}"
                )
        both = sorted(set(self.excluded) & (set(self.names) | set(self.defaults)))
        if both:
            raise ValueError(f"ConfigOptions: {both} are excluded but named or given a default")

    @property
    def fields(self) -> tuple[str, ...]:
        """The fields that have an option, in declaration order."""
        return tuple(n for n in settings(self.config) if n not in self.excluded)

    def option(self, name: str) -> str:
        """The option of field ``name``: ``"--num-envs"``."""
        return "--" + self.names.get(name, name).replace("_", "-")

    def dest(self, name: str) -> str:
        """Where argparse puts field ``name``'s value: ``"num_envs"``."""
        return self.option(name)[2:].replace("-", "_")

    def help(self, name: str) -> str:
        """The help of field ``name``'s option: the field's doc."""
        return settings(self.config)[name].doc

    def add_to(self, parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
        """Add an option for every field not excluded (to a parser or one of its groups).

        Raises:
            TypeError: For a field whose type makes no option (only bool, int, float,
                str and tuple[int, ...] do): exclude it, with the reason.
        """
        hints = typing.get_type_hints(self.config)
        declared = settings(self.config)
        defaults = {f.name: f.default for f in dataclasses.fields(self.config)}
        for name in self.fields:
            default = None if self.overrides else self.defaults.get(name, defaults[name])
            kwargs = self._kind(name, hints[name], declared[name])
            text = self.help(name).replace("%", "%%")  # argparse formats help with %
            parser.add_argument(self.option(name), default=default, help=text, **kwargs)

    def _kind(self, name: str, hint: object, declared: Setting) -> dict[str, Any]:
        """The ``type`` / ``action`` / ``nargs`` / ``metavar`` for a field."""
        label = self.option(name)[2:]
        check = declared.check or (lambda value, _name: value)
        high, why = self.highs.get(name, (COUNT_MAX, "the most this command takes"))
        if hint is bool:
            return {"action": argparse.BooleanOptionalAction}
        if hint is int:

            def check_int(value: object) -> object:
                return at_most(check(value, label), label, high, why)

            return {"type": converter(label, int, check_int), "metavar": "N"}
        if hint is float:
            return {"type": converter(label, float, lambda v: check(v, label)), "metavar": "X"}
        if hint is str and declared.choices:  # argparse's own check: "invalid choice: ..."
            return {"choices": declared.choices}
        if hint is str:
            return {"type": converter(label, str, lambda v: check(v, label)), "metavar": "S"}
        if typing.get_origin(hint) is tuple and typing.get_args(hint) == (int, Ellipsis):
            return {  # each item an int (text stays text for the check's message), bounded
                "nargs": "+",
                "type": converter(label, int, lambda v: at_most(v, label, high, why)),
                "action": _CheckedTuple,
                "check": check,
                "label": label,
                "metavar": "N",
            }
        raise TypeError(
            f"{self.config.__name__}.{name} has type {hint}, which makes no command-line "
            "option; exclude it (ConfigOptions.excluded) with the reason"
        )

    def given(self, args: argparse.Namespace) -> dict[str, object]:
        """Field -> value of the options given on the command line, in declaration order.

        Without ``overrides`` every option is there (each has its default).
        """
        values = {name: getattr(args, self.dest(name)) for name in self.fields}
        if not self.overrides:
            return values
        return {name: value for name, value in values.items() if value is not None}
