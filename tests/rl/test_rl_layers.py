"""rl and tasks use other objects only through their public names (#26: no reach-ins)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import source_trees

import kelab as ke
from kelab.tasks.cartpole import CartPoleTask

KELAB = Path(__file__).resolve().parents[2] / "kelab"
NAMEDTUPLE_API = {"_fields", "_replace", "_asdict", "_make"}  # public, despite the "_"


def private(name: object) -> bool:
    return isinstance(name, str) and name.startswith("_") and not name.startswith("__")


def reach_ins(source: str) -> list[str]:
    """Private names used on an object other than ``self`` / ``cls``: ``x._name``,
    ``getattr(x, "_name")`` and ``x.__dict__["_name"]``."""
    found = []
    for node in source_trees.nodes_of(source):
        if isinstance(node, ast.Attribute):
            target, name = node.value, node.attr
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) in (
            "getattr",
            "setattr",
            "hasattr",
        ):
            if len(node.args) < 2 or not isinstance(node.args[1], ast.Constant):
                continue
            target, name = node.args[0], node.args[1].value
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            if not (isinstance(node.value, ast.Attribute) and node.value.attr == "__dict__"):
                continue
            target, name = node.value.value, node.slice.value
        else:
            continue
        own = isinstance(target, ast.Name) and target.id in ("self", "cls")
        if private(name) and not own and name not in NAMEDTUPLE_API:
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_the_scan_finds_each_kind_of_reach_in():
    source = (
        "robot._bind(view)\n"
        "env._presenter.backend = 'gl'\n"
        "getattr(task, '_ball')\n"
        "task.__dict__['_ke_rule_context'] = ctx\n"
        "self._core.step()\nrows._replace(ids=ids)\nobj.public\n"
    )
    assert len(reach_ins(source)) == 4


@pytest.mark.parametrize("package", ["rl", "tasks"])
def test_rl_and_tasks_use_no_private_name_of_another_object(package):
    found = {
        str(path.relative_to(KELAB)): hits
        for path in sorted((KELAB / package).rglob("*.py"))
        if (hits := reach_ins(path.read_text()))
    }
    assert found == {}, f"use the objects' public names instead: {found}"


def test_a_robot_binds_its_runtime_view_through_a_public_method():
    robot = ke.Robot(asset=ke.Asset.from_registry("kelab/robot/cartpole:v1"))
    with pytest.raises(AttributeError, match="until an environment or World binds it"):
        robot.find_joints("slider_to_cart")

    class View:
        def find_joints(self, *names):
            return list(names)

    robot.bind_view(View())
    assert robot.find_joints("slider_to_cart") == ["slider_to_cart"]
    # an environment binds its task's robots the same way, before on_start
    task = CartPoleTask()
    env = ke.LearningEnv(task, num_envs=2)
    try:
        robots = [v for v in vars(task).values() if isinstance(v, ke.Robot)]
        assert robots
        for robot in robots:
            names = robot.description.joint_names
            assert robot.find_joints(list(names)).tolist() == list(range(len(names)))
    finally:
        env.close()
