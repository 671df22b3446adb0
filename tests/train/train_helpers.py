"""Helpers the training tests import (a module of its own, not ``conftest``).

Several folders of the suite have a ``conftest.py``; ``from conftest import ...`` finds
whichever was imported first when folders run together, so shared helpers live here
under a name no other folder uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kelab.train.config import TrainConfig
    from kelab.train.records import IterationRow

#: Built-in tasks that ship no trained policy yet, each with why. The tests of shipped
#: policies run over every other built-in task, and test_player.py checks each entry here
#: really ships none (an entry is removed when its policy lands).
NOT_YET_SHIPPED: dict[str, str] = {}


def shipped_task_ids() -> list[str]:
    """The built-in task ids that ship a policy, sorted (all but `NOT_YET_SHIPPED`)."""
    from kelab.tasks import TASK_IDS

    return sorted(set(TASK_IDS) - set(NOT_YET_SHIPPED))


#: The smallest TrainConfig fields that still train for real (the tests' default).
TINY: dict[str, Any] = {
    "num_envs": 16,
    "num_steps_per_env": 8,
    "actor_hidden_dims": (16, 16),
    "critic_hidden_dims": (16, 16),
    "num_learning_epochs": 2,
    "num_mini_batches": 2,
    "success_window": 20,
    "checkpoint_every": 2,
}


def tiny_config(**changes: Any) -> TrainConfig:
    """A `TrainConfig` of the `TINY` fields with ``changes`` applied."""
    from kelab.train.config import TrainConfig

    return TrainConfig(**{**TINY, **changes})


def metrics_row(**fields: Any) -> IterationRow:
    """An `IterationRow` of ``fields``, the others None (left empty in metrics.csv)."""
    import dataclasses

    from kelab.train.records import IterationRow

    empty = {f.name: None for f in dataclasses.fields(IterationRow)}
    return IterationRow(**{**empty, **fields})
