#!/usr/bin/env bash
# Set up (idempotent, with the Jazzy venv of the cross-distro tests) and run the whole test suite.
# Extra arguments go to pytest.
# The loopback DDS environment is set by test/conftest.py inside every test process; this script sets it too
# so that nothing started here (outside pytest) could multicast.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh" --jazzy
# The cross-distro tests must run here: a missing .venv-jazzy fails them instead of skipping them.
export PYRUA_REQUIRE_JAZZY=1
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
cd "$ROOT"
exec .venv/bin/python -m pytest "$@"
