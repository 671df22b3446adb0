"""Built-in robot descriptions and the Asset registry.

``Asset.from_registry("kelab/robot/cartpole:v1")`` returns an :class:`Asset` wrapping a
:class:`~kelab.sim.scene.RobotDescription`; ``Asset.register(name, description)`` adds
your own. Built-ins: ``kelab/robot/cartpole:v1``, ``kelab/robot/biped:v2`` (and the
older ``:v1``) and ``kelab/robot/pi:v1`` (see docs/scene.md for their geometry).

Example:
    >>> import kelab as ke
    >>> ke.Asset.from_registry("kelab/robot/biped:v2").description.joint_names
    ('hip_l', 'knee_l', 'ankle_l', 'hip_r', 'knee_r', 'ankle_r')
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kelab.sim.scene.assets import biped, cartpole, pi
from kelab.sim.scene.items import RobotDescription

_BUILTINS: dict[str, Callable[[], RobotDescription]] = {
    "kelab/robot/cartpole:v1": cartpole.description,
    "kelab/robot/biped:v1": biped.description_v1,
    "kelab/robot/biped:v2": biped.description,
    "kelab/robot/pi:v1": pi.description,
}
_REGISTRY: dict[str, RobotDescription] = {}


@dataclass(frozen=True)
class Asset:
    """A named robot description from the registry.

    Attributes:
        name: Registry name, e.g. ``"kelab/robot/cartpole:v1"``.
        description: The robot description.
    """

    name: str
    description: RobotDescription

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"Asset.name must be a non-empty string, got {self.name!r}")
        if not isinstance(self.description, RobotDescription):
            raise ValueError(
                f"Asset.description must be a ke.RobotDescription, got {self.description!r}"
            )

    @staticmethod
    def from_registry(name: str) -> Asset:
        """Return the registered asset called ``name``.

        Args:
            name: Registry name, e.g. ``"kelab/robot/cartpole:v1"``.

        Raises:
            KeyError: If no asset has that name; the message lists the known names.
        """
        if name in _REGISTRY:
            return Asset(name, _REGISTRY[name])
        if name in _BUILTINS:
            return Asset(name, _BUILTINS[name]())
        raise KeyError(
            f"no asset named {name!r}; known assets: {list(Asset.names())}. "
            "Register your own with ke.Asset.register(name, description)"
        )

    @staticmethod
    def register(name: str, description: RobotDescription) -> Asset:
        """Register a user robot description under ``name`` and return its Asset.

        Registering a name again with an equal description (a module imported twice, a
        notebook cell run again) does nothing and returns the registered Asset, as
        ``ke.register_task`` does; another description under a taken name is refused.

        Args:
            name: A new registry name, e.g. ``"me/robot/arm:v1"``.
            description: The robot description.

        Raises:
            ValueError: If the name is already registered to another description
                (built-ins included) or invalid.

        Example:
            >>> import kelab as ke
            >>> ball = ke.RobotDescription("ball", (ke.BodySpec("ball", (ke.Circle(0.1),)),))
            >>> ke.Asset.register("me/robot/ball:v1", ball).name
            'me/robot/ball:v1'
            >>> ke.Asset.register("me/robot/ball:v1", ball).name  # the same again: a no-op
            'me/robot/ball:v1'
            >>> ke.Asset.unregister("me/robot/ball:v1")
        """
        asset = Asset(name, description)
        if name in _REGISTRY or name in _BUILTINS:
            registered = Asset.from_registry(name)
            if registered.description == description:
                return registered
            raise ValueError(
                f"an asset named {name!r} is already registered to another description "
                f"({registered.description.name!r}, {len(registered.description.bodies)} "
                "bodies); pick a new name or version (e.g. ':v2'), or Asset.unregister it "
                "first"
            )
        _REGISTRY[name] = description
        return asset

    @staticmethod
    def unregister(name: str) -> None:
        """Remove a user-registered asset.

        Raises:
            KeyError: If ``name`` is not a user-registered asset.
            ValueError: If ``name`` is a built-in asset.
        """
        if name in _BUILTINS:
            raise ValueError(f"{name!r} is a built-in asset and cannot be unregistered")
        if name not in _REGISTRY:
            raise KeyError(f"no user asset named {name!r}; user assets: {sorted(_REGISTRY)}")
        del _REGISTRY[name]

    @staticmethod
    def names() -> tuple[str, ...]:
        """Return every registered name (built-ins and user assets), sorted."""
        return tuple(sorted({*_BUILTINS, *_REGISTRY}))


__all__ = ["Asset"]
