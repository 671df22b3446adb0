#!/usr/bin/env bash
# Run the packed layout's tests with KELab's C helper and pymunk built with
# AddressSanitizer + UndefinedBehaviorSanitizer (docs/world.md, "Checked with sanitizers").
#
#   tools/sanitize.sh            # build (once), then run the packed tests under the sanitizers
#   tools/sanitize.sh --quick    # the same, only the tests of the C helper itself
#   tools/sanitize.sh -- -k kept # extra arguments after -- go to pytest
#
# Everything is built in a scratch folder, $KELAB_SANITIZE_DIR (default
# /tmp/kelab-sanitize), never in the repository:
#   venv/   a virtual environment over this Python's packages (numpy, gymnasium, pytest, ...)
#           with pymunk rebuilt from its sdist (the version installed here) under the
#           sanitizers; pymunk's sdist is fetched with pip (or taken from $PYMUNK_SDIST);
#   src/    a copy of this working tree (tracked and untracked files, not ignored ones)
#           whose kelab/sim/physics/_native.c is built under the sanitizers.
# The tests then run from src/ with libasan preloaded (the Python binary is not
# instrumented), and any report stops them (halt_on_error) and fails the script.
# Needs gcc (or $CC) with libasan and libubsan, and pip access to pymunk's sdist.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
scratch="${KELAB_SANITIZE_DIR:-/tmp/kelab-sanitize}"
python="${PYTHON:-python3}"
cc="${CC:-gcc}"
quick=0
extra=()
while (($#)); do
    case "$1" in
        --quick) quick=1 ;;
        --) shift; extra=("$@"); break ;;
        *) echo "tools/sanitize.sh: unknown argument $1; use --quick or -- <pytest args>" >&2; exit 2 ;;
    esac
    shift
done

flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1"
libasan="$("$cc" -print-file-name=libasan.so)"
if [[ "$libasan" != /* ]]; then
    echo "tools/sanitize.sh: $cc has no libasan.so; install gcc's AddressSanitizer runtime" >&2
    exit 2
fi
mkdir -p "$scratch"

# 1. the virtual environment, pymunk rebuilt with the sanitizers (once per version)
version="$("$python" -c 'import pymunk; print(pymunk.version)')"
venv="$scratch/venv"
if [[ ! -x "$venv/bin/python" ]]; then
    # no pip or setuptools of its own: this Python's (newer) ones do the builds
    "$python" -m venv --system-site-packages --without-pip "$venv"
fi
# Chipmunk as pymunk releases it (NDEBUG: no debug banner or assertions of its own)
pymunk_flags="$flags -DNDEBUG"
stamp="$venv/pymunk-build.txt"
if [[ "$(cat "$stamp" 2>/dev/null)" != "$version $pymunk_flags" ]]; then
    sdist="${PYMUNK_SDIST:-}"
    if [[ -z "$sdist" ]]; then
        "$venv/bin/python" -m pip download --quiet --no-deps --no-binary :all: \
            -d "$scratch/sdist" "pymunk==$version"
        sdist="$(ls "$scratch"/sdist/pymunk-"$version".tar.gz)"
    fi
    echo "== building pymunk $version with $pymunk_flags"
    CC="$cc" CFLAGS="$pymunk_flags" LDFLAGS="-fsanitize=address,undefined" \
        "$venv/bin/python" -m pip install --quiet --force-reinstall --no-deps \
        --no-build-isolation --no-binary :all: "$sdist"
    echo "$version $pymunk_flags" >"$stamp"
fi

# 2. a copy of the working tree, its C helper built with the sanitizers
src="$scratch/src"
rm -rf "$src"
mkdir -p "$src"
(cd "$here" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$src" 2>/dev/null) \
    || { echo "tools/sanitize.sh: copying the working tree failed" >&2; exit 2; }
echo "== building kelab/sim/physics/_native.c with $flags"
(cd "$src" && CC="$cc" CFLAGS="$flags" LDFLAGS="-fsanitize=address,undefined" \
    "$venv/bin/python" setup.py --quiet build_ext --inplace >/dev/null)
ls "$src"/kelab/sim/physics/_native*.so >/dev/null

# 3. the tests, libasan first in the process (leaks: CPython keeps objects until exit)
if ((quick)); then
    tests=(tests/sim/test_packed_reset.py tests/sim/test_struct_guard.py tests/sim/test_chipmunk_facade.py
           tests/sim/test_friction_native.py tests/sim/test_world_params.py)
else
    tests=(tests/sim/test_packed_reset.py tests/sim/test_packed_fastpath.py
           tests/sim/test_world_packed.py tests/sim/test_world_resets.py
           tests/sim/test_world_full_reset.py tests/sim/test_world_lifetime.py
           tests/sim/test_struct_guard.py tests/sim/test_chipmunk_facade.py
           tests/sim/test_warm_rebase.py tests/sim/test_warm_rebase_probe.py
           tests/sim/test_determinism.py tests/sim/test_friction_native.py
           tests/sim/test_world_params.py)
fi
cd "$src"
run() {
    env PYTHONPATH="$src" KELAB_NO_NATIVE= \
        LD_PRELOAD="$libasan" \
        ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=1:strict_string_checks=1" \
        UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
        "$venv/bin/python" "$@"
}
# a negative control first: the helper reading past a 16-byte block must be reported
echo "== negative control: an out-of-bounds read in the C helper must be reported"
if run -c '
import numpy as np
from kelab.sim.physics import _guard
block = np.zeros(2)  # 16 bytes where the helper expects a cpBody
rows = np.zeros(1, np.int64)
_guard.native_module().read_rows(np.array([block.ctypes.data], np.uint64), np.zeros((1, 6)), rows, np.zeros(1))
' >"$scratch/control.log" 2>&1 || ! grep -q "AddressSanitizer: heap-buffer-overflow" "$scratch/control.log"; then
    echo "tools/sanitize.sh: the sanitizers did not report the control's overflow; see $scratch/control.log" >&2
    exit 1
fi
echo "== pytest ${tests[*]} ${extra[*]:-}"
run - "${tests[@]}" "${extra[@]}" <<'EOF'
import os
import sys

import pymunk

import kelab.sim.physics._guard as guard

# the instrumented builds are the ones in use, and the helper passed its checks
assert "/venv/" in pymunk.__file__, f"pymunk comes from {pymunk.__file__}, not the venv"
native = guard.native_module()
assert native is not None, "the sanitized C helper is not in use"
assert native.__file__.startswith(os.environ["PYTHONPATH"]), native.__file__
print(f"pymunk {pymunk.version} from {pymunk.__file__}\nhelper from {native.__file__}")

import pytest

sys.exit(pytest.main(["-p", "no:cacheprovider", "-q", *sys.argv[1:]]))
EOF
