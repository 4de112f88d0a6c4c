#!/usr/bin/env bash
# Set up (idempotent) and run the whole test suite. Extra arguments go to pytest.
# The loopback DDS environment is set by test/conftest.py inside every test process; this script sets it too
# so that nothing started here (outside pytest) could multicast.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
cd "$ROOT"
exec .venv/bin/python -m pytest "$@"
