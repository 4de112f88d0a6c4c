#!/usr/bin/env bash
# Set up (idempotent, with the Jazzy venv of the cross-distro tests) and run the whole test suite.
# Extra arguments go to pytest (e.g. -m unit: the fast lane, under a minute).
# The loopback DDS environment is set by test/conftest.py inside every test process; this script sets it too
# so that nothing started here (outside pytest) could multicast.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh" --jazzy
# The cross-distro tests must run here: a missing .venv-jazzy fails them instead of skipping them.
export PYRUA_REQUIRE_JAZZY=1
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
# The suite starts a few hundred Python processes (workers, nodes, CLIs, kernels): with bytecode caches
# (__pycache__, git-ignored) each source file compiles once per checkout, not once per process; an environment
# that sets PYTHONDONTWRITEBYTECODE made every process compile pyrua_ros and every worker re-rewrite the test files.
unset PYTHONDONTWRITEBYTECODE
cd "$ROOT"
# pytest-xdist: whole files per worker (module fixtures such as a sim node stay in one process), longest files
# first (test/file_costs.json, pyrua_ros/testing/file_order.py; --no-loadscope-reorder keeps that order); many tests
# wait on processes and DDS, so four workers keep two cores busy. PYRUA_TEST_WORKERS=0 runs serially.
WORKERS="${PYRUA_TEST_WORKERS:-4}"
PARALLEL=()
if [[ "$WORKERS" != "0" ]]; then PARALLEL=(-n "$WORKERS" --dist loadfile --no-loadscope-reorder); fi
exec .venv/bin/python -m pytest -c "$ROOT/pytest.ini" "${PARALLEL[@]}" "$@"
