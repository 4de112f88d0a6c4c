#!/usr/bin/env bash
# Set up (idempotent) and run the main job: one LIBERO-PRO episode on the embedded default runtime (replay of the
# packaged program for libero_goal task 8, "put the bowl on the plate"), no model server needed. The sim node
# and the agent run on this machine, on loopback DDS and a ROS domain of their own.
# Extra arguments go to `pyrualean play` (e.g. --task 1 for "put the bowl on the stove"); PYRUA_DEMO_OUT sets the
# run directory (default runs/demo-<time>).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
cd "$ROOT"
export ROS_AUTOMATIC_DISCOVERY_RANGE="${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}"
OUT="${PYRUA_DEMO_OUT:-runs/demo-$(date +%Y%m%d-%H%M%S)}"
.venv/bin/pyrualean play --robot libero --arm cells --suite libero_goal --task 8 --seed 0 --out "$OUT" "$@"
.venv/bin/pyrualean summarize "$OUT"
