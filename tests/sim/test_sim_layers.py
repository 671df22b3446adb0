"""The sim layer's rooms and their place in the import graph (#26).

Rooms, bottom to top: ``kelab.sim.scene`` (the description: no pymunk, no World),
``kelab.sim.physics`` (the layouts behind the Backend protocol, their shared batch
helpers, the scene compiler and pymunk's internals), then the runtime directly in
``kelab.sim`` (the World and its helpers). Every import (module level, inside a function
or under ``if TYPE_CHECKING:``) points down or sideways within a room, never up; the sim
modules import one another without a circle; no module imports another module's private
name. (Module sizes: tests/test_layers.py counts every module's lines of code.)
"""

from __future__ import annotations

import ast
from pathlib import Path

import source_trees

import kelab.sim

SIM_DIR = Path(kelab.sim.__file__).parent
ROOMS = {"scene": 0, "physics": 1}  # every other sim module is runtime (2)


def _modules() -> dict[str, Path]:
    """Every sim module: its Python files and the C sources of its extension modules."""
    found = {}
    for path in sorted([*SIM_DIR.rglob("*.py"), *SIM_DIR.rglob("*.c")]):
        parts = ["kelab", "sim", *path.relative_to(SIM_DIR).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _owner(name: str) -> str | None:
    """The sim module that ``name`` (a module or a module's attribute) lives in."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> list[tuple[str, str | None]]:
    """Every kelab.sim import of ``module``: (imported module, name taken from it)."""
    path = MODULES[module]
    if path.suffix == ".c":  # an extension module imports nothing from kelab
        return []
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[str, str | None]] = []
    for node in source_trees.nodes(path):
        if isinstance(node, ast.Import):
            found += [(a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(parts + ([base] if base else []))
            for a in node.names:
                sub = f"{base}.{a.name}"
                found.append((sub, None) if sub in MODULES else (base, a.name))
    return [(m, n) for m, n in found if m.startswith("kelab.sim")]


def _room(module: str) -> int:
    parts = module.split(".")
    return ROOMS.get(parts[2], 2) if len(parts) > 2 else 2


def _edges() -> dict[str, set[str]]:
    edges = {m: set() for m in MODULES}
    for m in MODULES:
        for target, _ in _imports(m):
            owner = _owner(target)
            if owner and owner != m:
                edges[m].add(owner)
    return edges


def test_the_rooms_exist() -> None:
    assert {"kelab.sim.scene", "kelab.sim.physics", "kelab.sim.world"} <= set(MODULES)
    assert "kelab.sim.scene.assets" in MODULES


def test_no_import_points_up_a_room() -> None:
    up = [f"{m} -> {t}" for m, ts in _edges().items() for t in sorted(ts) if _room(t) > _room(m)]
    assert up == []


def test_sim_modules_import_one_another_without_a_circle() -> None:
    edges = _edges()
    state: dict[str, int] = {}  # 1: on the path, 2: done
    circles = []

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for t in sorted(edges[m]):
            if state.get(t) == 1:
                circles.append(" -> ".join([*path[path.index(t) :], t]))
            elif t not in state:
                visit(t, [*path, t])
        state[m] = 2

    for m in sorted(MODULES):
        if m not in state:
            visit(m, [m])
    assert circles == []


def test_sim_imports_no_private_name_of_another_module() -> None:
    private = [
        f"{m}: {t}.{n}"
        for m in MODULES
        for t, n in _imports(m)
        if n and n.startswith("_") and not n.startswith("__")
    ]
    assert private == []


def test_the_world_has_every_member_a_robot_view_reads() -> None:
    """RobotView names what it needs of its World (WorldAccess) instead of importing it."""
    import inspect

    from kelab.sim.robot_view import WorldAccess
    from kelab.sim.world import World

    members = [n for n, _ in inspect.getmembers(WorldAccess) if not n.startswith("_")]
    assert len(members) >= 10
    assert [n for n in members if not hasattr(World, n)] == []
    for name in members:
        wanted = getattr(WorldAccess, name)
        if isinstance(wanted, property):
            assert isinstance(getattr(World, name), property), name
        else:
            want = list(inspect.signature(wanted).parameters)
            assert list(inspect.signature(getattr(World, name)).parameters) == want, name
