#!/usr/bin/env bash
# The test suite on the lowest versions kelab declares (#42): a fresh virtual environment
# with every dependency of kelab[dev] at the lower bound of its range in pyproject.toml
# (.ci/lowest.py), then the README's test command. docs/install.md records the last run.
#
#   .ci/lowest.sh                 # the whole suite
#   .ci/lowest.sh tests/train -x  # arguments go to pytest
#
# On a CPU-only machine the CPU build of the lowest torch is installed first, as
# README.md says (set TORCH_INDEX="" to take torch from the ordinary index instead).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${LOWEST_VENV:-.ci-lowest-venv}"
TORCH_INDEX="${TORCH_INDEX-https://download.pytorch.org/whl/cpu}"

python3 -m venv --clear "$VENV"
. "$VENV/bin/activate"
pip install -q packaging
python .ci/lowest.py > "$VENV/lowest-constraints.txt"
torch_pin="$(grep '^torch==' "$VENV/lowest-constraints.txt")"
if [ -n "$TORCH_INDEX" ]; then
  # a torch already on a find-links path (or a local wheel) is used as it is
  pip install -q "$torch_pin" --extra-index-url "$TORCH_INDEX" || pip install -q "$torch_pin"
fi
# not editable (an editable build would copy its C extension over the one in the tree,
# under the feet of any process using it): the tests and the processes they start import
# the source tree all the same, through PYTHONPATH
pip install -q -c "$VENV/lowest-constraints.txt" ".[dev]"
if ! ls kelab/sim/physics/_native*.so >/dev/null 2>&1; then  # a fresh checkout: build it
  python setup.py -q build_ext --inplace
fi
pip list --format=freeze > "$VENV/installed.txt"
python .ci/lowest.py --installed
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" python -m pytest "$@"
