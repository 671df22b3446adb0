"""The World's state limits: how far and how fast a body may be (a World refuses more).

They live in the physics room because the layouts check reads against them (the packed
layout's shard steps in C check every value against :data:`STATE_BOUND`);
:mod:`kelab.sim._values` re-exports them for the World's checks.

Example:
    >>> float(STATE_BOUND), bool(STATE_LIMITS[2] == float("inf"))
    (10000000.0, True)
"""

from __future__ import annotations

import numpy as np

__all__ = ["DT_MAX", "STATE_BOUND", "STATE_LIMITS", "STATE_POSITION_MAX", "STATE_SPEED_MAX"]

STATE_POSITION_MAX = 1e7
"""Largest ``|x|``, ``|y|`` (m) a body may have: written (set_body_states, a snapshot's
log) or after a step (World.step raises past it). 100x the scene coordinate range
(``shapes.COORD_MAX``). Chipmunk's spatial hash (the packed layout's index) turns a
coordinate into a C ``int`` cell index: past ``2**31`` cells (``2**31 * cell`` m, 134e6 m
for the smallest cell) the index wraps and the hash walks ~2**32 cells, a step that never
returns. A body within these limits cannot get there in one step of at most ``DT_MAX``."""
STATE_SPEED_MAX = 1e7
"""Largest ``|vx|``, ``|vy|`` (m/s) and ``|w|`` (rad/s) a body may have, written or after
a step (see ``STATE_POSITION_MAX``)."""
DT_MAX = 1.0
"""Largest physics step (s) World.step takes: a body at ``STATE_SPEED_MAX`` then moves at
most ``1e7`` m in a step, which keeps every body inside the spatial hash's range."""
STATE_LIMITS = np.array([STATE_POSITION_MAX] * 2 + [np.inf] + [STATE_SPEED_MAX] * 3)
"""Bound of each body state column (x, y, angle, vx, vy, w); the angle is unbounded."""
STATE_BOUND = min(STATE_POSITION_MAX, STATE_SPEED_MAX)
"""One bound every column of a state within the limits stays under: the fast check of a
read (a state with every value in ``[-STATE_BOUND, STATE_BOUND]`` is within the limits)."""
