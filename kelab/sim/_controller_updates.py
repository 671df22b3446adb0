"""How a World's PD controllers update their torques: every step, or held (internal).

:class:`ControllerUpdates` is the part of ``World``'s public API that switches between
the two (``World.controller_updates``), takes an update (``World.update_controllers``)
and reads the held torques (``World.controller_efforts``). It is mixed into ``World``
and works on the World's helpers only (its held controls, history and body states); the
logic lives in ``_controls.Controls.pd_torques`` and ``_history.History``. See
docs/world.md, "Controller updates".
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from kelab.sim._args import check_open
from kelab.sim._controls import Controls
from kelab.sim._history import CONTROLLER_UPDATES, History
from kelab.sim._states import BodyStates


class ControllerUpdates:
    """``World``'s controller updates (a mixin: the World's own attributes below)."""

    _ctl: Controls
    _history: History
    _states: BodyStates
    _steps: int
    _closed: bool
    _ids: Callable[[npt.ArrayLike | None], np.ndarray]

    @property
    def controller_updates(self) -> str:
        """How PD actuators' torques are updated: ``"every_step"`` (default) or ``"held"``.

        ``"every_step"``: every physics step recomputes each PD joint's torque
        ``kp * (target - q) - kd * qd`` (clipped to its effort limit) from the present
        state. ``"held"``: a digital controller's zero-order hold, the torque computed at
        the last :meth:`update_controllers` call is applied until the next one. Setting
        ``"held"`` takes one update at once (the torque starts from the present state);
        the switch and every update are logged, so snapshots stay exact. A reset zeroes
        the reset copies' held torques (their joints go limp until the next update).

        Raises:
            ValueError: On setting anything but ``"every_step"`` or ``"held"``.

        Example:
            >>> import kelab as ke
            >>> world = ke.World(ke.SceneBuilder().build())
            >>> world.controller_updates = "held"
            >>> world.controller_updates
            'held'
        """
        return CONTROLLER_UPDATES[self._ctl.pd_held]

    @controller_updates.setter
    def controller_updates(self, mode: str) -> None:
        check_open(self._closed)
        if self._history.set_controller_updates(mode, self._steps):
            self.update_controllers()

    def update_controllers(self, env_ids: npt.ArrayLike | None = None) -> None:
        """Recompute the held PD torques of copies from their present state (``"held"``).

        One tick of the robots' joint controllers: each PD joint's torque
        ``kp * (target - q) - kd * qd`` is computed from the present joint state and
        targets, clipped to its effort limit, and held by every physics step until the
        next call (:attr:`controller_efforts`). Logged, so snapshots stay exact.

        Args:
            env_ids: Copies to update (indices or a bool mask); None means all.

        Raises:
            ValueError: If :attr:`controller_updates` is ``"every_step"``, or on bad ids.
        """
        ids = self._ids(env_ids)
        self._history.update_controllers(ids, self._states.fresh(ids), self._steps)

    @property
    def controller_efforts(self) -> np.ndarray:
        """PD torques held by the controllers, ``(num_envs, n_joints)`` (0: other joints).

        In ``"held"`` updates, what every step applies to the PD joints; set by
        :meth:`update_controllers`, zeroed by resets.
        """
        return self._ctl.pd_efforts.copy()
