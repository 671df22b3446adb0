"""The training layer's place in the import graph, and its rooms' sizes (#26).

Layers: sim/render/timing <- rl <- tasks <- train <- cli. Tasks sit below train, so no
module of ``kelab.tasks`` imports ``kelab.train`` (at any depth: module level, inside a
function or under ``if TYPE_CHECKING:``); each task's tuned settings are plain data that
train reads (``kelab.train.config.training_config_of``).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
import source_trees

import kelab.tasks
import kelab.train
from kelab.train.config import TrainConfig, training_config_of

TASKS_DIR = Path(kelab.tasks.__file__).parent
TRAIN_DIR = Path(kelab.train.__file__).parent


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """Every import in ``path`` (all depths): (absolute module, names imported)."""
    package = ".".join(["kelab", *path.relative_to(TRAIN_DIR.parent).parent.parts])
    found = []
    for node in source_trees.nodes(path):
        if isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join(base + ([module] if module else []))
            found.append((module, [a.name for a in node.names]))
    return found


def test_tasks_never_import_train() -> None:
    upward = [
        f"{path.name}: {module}"
        for path in sorted(TASKS_DIR.rglob("*.py"))
        for module, names in _imports(path)
        if module == "kelab.train"
        or module.startswith("kelab.train.")
        or (module == "kelab" and "train" in names)
    ]
    assert upward == []


def test_train_modules_stay_under_800_lines() -> None:
    sizes = {p.name: len(p.read_text().splitlines()) for p in TRAIN_DIR.rglob("*.py")}
    assert {name: n for name, n in sizes.items() if n > 800} == {}


def test_train_imports_no_private_name_of_another_module() -> None:
    private = [
        f"{path.name}: {module}.{name}"
        for path in sorted(TRAIN_DIR.rglob("*.py"))
        for module, names in _imports(path)
        if module.startswith("kelab")
        for name in names
        if name.startswith("_") and not name.startswith("__")
    ]
    assert private == []


def test_every_built_in_task_carries_plain_data_that_makes_a_train_config() -> None:
    from kelab.tasks import TASK_IDS
    from kelab.tasks.registry import task_class

    assert TASK_IDS
    for task_id in TASK_IDS:
        cls = task_class(TASK_IDS[task_id])
        data = cls.training_config
        assert isinstance(data, dict), task_id
        json.dumps(data)  # plain data: JSON-compatible values only
        config = training_config_of(cls)
        assert isinstance(config, TrainConfig)
        assert {k: getattr(config, k) for k in data} == {
            k: tuple(v) if isinstance(v, list) else v for k, v in data.items()
        }


def test_training_config_of_reads_a_mapping_a_config_or_nothing() -> None:
    class Tuned:
        training_config = {"num_envs": 32, "actor_hidden_dims": [8, 8]}

    class Typed:
        training_config = TrainConfig(num_envs=16)

    assert training_config_of(Tuned).num_envs == 32
    assert training_config_of(Tuned).actor_hidden_dims == (8, 8)
    assert training_config_of(Typed) is Typed.training_config
    assert training_config_of(object) == TrainConfig()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"num_envz": 3}, r"Bad\.training_config: unknown training config keys \['num_envz'\]"),
        ({"num_envs": 0}, r"Bad\.training_config: TrainConfig\.num_envs must be"),
        ([("num_envs", 3)], r"Bad\.training_config must be a mapping of TrainConfig fields"),
    ],
)
def test_training_config_of_names_the_task_on_bad_data(value: object, message: str) -> None:
    bad = type("Bad", (), {"training_config": value})
    with pytest.raises(ValueError, match=message):
        training_config_of(bad)


def test_one_default_layout_and_the_built_in_tasks_train_packed():
    # #26: one default layout (EnvConfig's) for World, the envs and TrainConfig; the
    # built-in tasks choose "packed" for speed in their own configs (their shipped weights)
    import kelab as ke
    from kelab.tasks import TASK_IDS
    from kelab.tasks.registry import task_class
    from kelab.train.config import TrainConfig, training_config_of

    assert TrainConfig().layout == ke.EnvConfig().layout == "isolated"
    for target in TASK_IDS.values():
        assert training_config_of(task_class(target)).layout == "packed", target
