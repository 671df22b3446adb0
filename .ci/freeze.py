"""Print .ci/constraints.txt: the exact versions of kelab[dev] and everything it pulls in.

Run it in the environment the test suite passed in (kelab installed editable with the dev
extra): ``python .ci/freeze.py > .ci/constraints.txt``. It walks the installed
distributions' own requirements from kelab[dev] down (markers evaluated here), so the
file holds the packages CI needs and nothing else the machine happens to have.
"""

from __future__ import annotations

import importlib.metadata as metadata
import platform
import sys

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name


def _requirements(dist: str, extras: set[str]) -> list[Requirement]:
    out = []
    for line in metadata.requires(dist) or []:
        req = Requirement(line)
        if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in extras | {""}):
            out.append(req)
    return out


def closure(root: str, extras: set[str]) -> dict[str, str]:
    """Installed name -> version for ``root[extras]`` and its requirements, recursively."""
    seen: dict[str, set[str]] = {}
    versions: dict[str, str] = {}
    todo = [(root, extras)]
    while todo:
        name, want = todo.pop()
        key = canonicalize_name(name)
        if key in seen and want <= seen[key]:
            continue
        seen[key] = seen.get(key, set()) | want
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            sys.exit(f"{name} is required but not installed; install kelab[dev] first")
        versions[dist.metadata["Name"]] = dist.version
        for req in _requirements(name, seen[key]):
            todo.append((req.name, set(req.extras)))
    versions.pop("kelab", None)
    return versions


def main() -> None:
    """Print the constraints file."""
    print(
        "# The exact set .ci/run installs (#42): kelab[dev] and its requirements, as the\n"
        f"# test suite passed with them (Python {platform.python_version()}, "
        f"{platform.machine()} {sys.platform}).\n"
        "# Regenerate: python .ci/freeze.py > .ci/constraints.txt\n"
        "# torch: on a CPU-only machine install the CPU build first (README.md); 2.13.0 is\n"
        "# satisfied by 2.13.0+cpu."
    )
    for name, version in sorted(closure("kelab", {"dev"}).items(), key=lambda kv: kv[0].lower()):
        print(f"{name}=={version.split('+')[0]}")


if __name__ == "__main__":
    main()
