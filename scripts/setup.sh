#!/usr/bin/env bash
# Set up pyrua_ros on a fresh Debian 12 machine, or bring an existing setup up to date.
#
# Creates .venv/ at the repository root with the pinned ROS 2 kilted wheels, LIBERO-PRO, the agent's
# dependencies and pyrua_ros itself (editable); builds the interface packages PyPI lacks (control_msgs,
# tf2_msgs) from interfaces/ into the venv; installs the apt packages headless EGL rendering, OpenCV and
# the interface build need, and the pinned agent CLIs (Codex, Claude Code) from npm into .venv/npm. Idempotent: every stage is skipped when its inputs did not change, so a
# second run takes seconds.
#
# Where ../shared/ros2-launch exists (beside the checkout), it also makes .venv-launch/: the real ros2 launch
# tooling (upstream launch, launch_ros, ros2cli verbs, built by that folder's build.sh on top of .venv) and colcon
# (colcon-core, colcon-ros: scripts/requirements-colcon.txt), for the tests that run the package as a ROS 2 user
# does (ros2 launch, colcon build, ros2 run). Without that folder those tests skip; a failed build fails setup.
#
# With --jazzy it also makes .venv-jazzy/: the ROS 2 Jazzy wheels (rclpy 7.1.6), the interface packages built
# with Jazzy's definitions, and pyrua_ros on its path (no LIBERO). The cross-distro tests drive a Kilted node
# from it and the reverse; scripts/test.sh asks for it.
#
# Usage: scripts/setup.sh [--jazzy]  (set PYRUA_SETUP_QUIET=1 for less output)
set -euo pipefail
shopt -s lastpipe

WITH_JAZZY=0
for arg in "$@"; do
  case "$arg" in
    --jazzy) WITH_JAZZY=1 ;;
    *) echo "setup: unknown argument $arg (usage: scripts/setup.sh [--jazzy])" >&2; exit 2 ;;
  esac
done
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
STAMPS="$VENV/.pyrua_setup"
PY="${PYRUA_PYTHON:-python3}"
APT_PACKAGES=(cmake g++ libegl1 libegl-mesa0 libgl1-mesa-dri libopengl0 libgl1 libglib2.0-0 bubblewrap chromium)
START=$(date +%s)

say() { printf '[setup %3ss] %s\n' "$(( $(date +%s) - START ))" "$*"; }
hash_of() { cat "$@" | sha256sum | cut -c1-16; }
stamp_ok() { [[ -f "$STAMPS/$1" && "$(cat "$STAMPS/$1")" == "$2" ]]; }
stamp_set() { mkdir -p "$STAMPS"; echo "$2" > "$STAMPS/$1"; }

# 1. Debian packages --------------------------------------------------------------------------------
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  say "apt: installing ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
else
  say "apt: all ${#APT_PACKAGES[@]} packages present"
fi

# 2. The venv (the ROS wheels are built for CPython 3.11 and only work inside a venv) ----------------
ver=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [[ "$ver" != "3.11" ]]; then
  echo "setup: the ROS 2 kilted wheels need CPython 3.11; $PY is $ver (set PYRUA_PYTHON)" >&2
  exit 2
fi
if [[ ! -x "$VENV/bin/python" ]]; then
  say "venv: creating $VENV"
  "$PY" -m venv "$VENV"
fi
# A child of another ROS venv inherits its bootstrap guard; strip it so this venv sets up its own paths.
unset _ROS_WHEELS_BOOTSTRAP_COMPLETE LD_LIBRARY_PATH || true
VPY="$VENV/bin/python"
PIP=("$VPY" -m pip --disable-pip-version-check -q)

# 3. Pinned Python packages -------------------------------------------------------------------------
req_hash=$(hash_of "$ROOT/scripts/requirements.txt" "$ROOT/scripts/requirements-nodeps.txt")
if ! stamp_ok requirements "$req_hash"; then
  say "pip: installing scripts/requirements.txt (first run downloads about 1 GB)"
  "${PIP[@]}" install -U "setuptools==84.2.1" "wheel==0.48.0" 2>/dev/null \
    || "${PIP[@]}" install -U pip setuptools wheel
  # pip warns about every missing local mirror folder of this machine's pip config; those lines are noise.
  "${PIP[@]}" install -r "$ROOT/scripts/requirements.txt" 2>&1 | { grep -v "is ignored: it is neither" || true; }
  "${PIP[@]}" install --no-deps -r "$ROOT/scripts/requirements-nodeps.txt" 2>&1 | { grep -v "is ignored: it is neither" || true; }
  rm -f "$STAMPS/interfaces"   # new wheels overwrite the cmake exports the interface build patches
  stamp_set requirements "$req_hash"
else
  say "pip: requirements unchanged"
fi

# 4. AMENT_PREFIX_PATH for the venv (ament index look-ups, get_package_share_directory) -------------
SITE=$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
PTH="$SITE/pyrua_ros_ament_prefix.pth"
want="import os; os.environ.setdefault('AMENT_PREFIX_PATH', '$VENV')"
if [[ ! -f "$PTH" || "$(cat "$PTH")" != "$want" ]]; then
  echo "$want" > "$PTH"
  say "pth: AMENT_PREFIX_PATH defaults to $VENV"
fi

# 5. Interface packages missing from PyPI -----------------------------------------------------------
if_hash=$(cd "$ROOT" && find interfaces scripts/build_interfaces.py -type f | sort | xargs cat | sha256sum | cut -c1-16)
if ! stamp_ok interfaces "$if_hash"; then
  say "interfaces: building control_msgs and tf2_msgs into the venv"
  "$VPY" "$ROOT/scripts/build_interfaces.py" --venv "$VENV" --src "$ROOT/interfaces" --distro kilted \
    --build "$ROOT/build/interfaces"
  stamp_set interfaces "$if_hash"
else
  say "interfaces: up to date"
fi

# 6. pyrua_ros itself (editable), with its ament index marker and node wrappers ----------------------
pkg_hash=$(cd "$ROOT" && cat setup.py setup.cfg package.xml | sha256sum | cut -c1-16)
if ! stamp_ok package "$pkg_hash" || [[ ! -x "$VENV/lib/pyrua_ros/sim_node" ]]; then
  say "pip: installing pyrua_ros (editable)"
  "${PIP[@]}" install --no-deps --no-build-isolation -e "$ROOT" 2>&1 | { grep -v "is ignored: it is neither" || true; }
  stamp_set package "$pkg_hash"
else
  say "pyrua_ros: installed"
fi

"$VPY" "$ROOT/scripts/install_data_files.py" --prefix "$VENV" >/dev/null

# 7. The agent CLIs of the codex / claude runtimes, pinned, from the npm registry into .venv/npm ---------------
# A project-local prefix (nothing global). Both packages carry their native binaries; the machine's Node.js
# (Debian's nodejs/npm when there is none) only runs npm and Codex's launcher.
if ! command -v npm >/dev/null; then
  say "apt: installing nodejs npm"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nodejs npm >/dev/null
fi
npm_hash=$(hash_of "$ROOT/scripts/npm-tools.txt")
NPM_PREFIX="$VENV/npm"
if ! stamp_ok npm "$npm_hash" || [[ ! -x "$NPM_PREFIX/node_modules/.bin/codex" || ! -x "$NPM_PREFIX/node_modules/.bin/claude" ]]; then
  say "npm: installing $(grep -v '^#' "$ROOT/scripts/npm-tools.txt" | xargs) into $NPM_PREFIX (about 800 MB)"
  mkdir -p "$NPM_PREFIX"
  grep -v '^#' "$ROOT/scripts/npm-tools.txt" | xargs npm install --prefix "$NPM_PREFIX" --no-audit --no-fund \
    --no-save --loglevel=error 2>&1 | { grep -v "EBADENGINE\|install-scripts\|^npm warn *$\|npm warn   \|npm warn }" || true; }
  stamp_set npm "$npm_hash"
else
  say "npm: agent CLIs unchanged"
fi
for tool in codex claude; do
  "$NPM_PREFIX/node_modules/.bin/$tool" --version >/dev/null || { echo "setup: $tool does not run" >&2; exit 1; }
done

# 8. Smoke check ------------------------------------------------------------------------------------
ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST "$VPY" -c \
  "import rclpy, control_msgs.action, tf2_msgs.msg, libero.libero, pyrua_ros" \
  || { echo "setup: import check failed" >&2; exit 1; }

# 8b. Caches every first run would otherwise build: robosuite's numba functions compile on their first call and
# cache beside their source, so without this every simulator that a test run (or an eval) starts in its first
# minute compiles them at once, about 10 s of CPU each. One control step of a LIBERO episode compiles them here,
# once; pyrua_ros's own bytecode likewise.
NUMBA_CACHE="$("$VPY" -c "import importlib.util, os; print(os.path.join(os.path.dirname(importlib.util.find_spec('robosuite').origin), 'utils', '__pycache__'))")"
if ! stamp_ok jit "$req_hash" || ! compgen -G "$NUMBA_CACHE/*.nbi" >/dev/null; then
  say "jit: compiling robosuite's numba functions (one LIBERO control step)"
  ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST "$VPY" -c "
import numpy as np
from pyrua_ros.sim.env import LiberoEpisode
episode = LiberoEpisode()
episode.reset('libero_goal', 8, 0, 10)
episode.step(np.zeros(7))
episode.close()" 2>&1 | { grep -v "robosuite WARNING" || true; }
  compgen -G "$NUMBA_CACHE/*.nbi" >/dev/null || { echo "setup: robosuite's numba cache was not written" >&2; exit 1; }
  stamp_set jit "$req_hash"
fi
"$VPY" -m compileall -q "$ROOT/pyrua_ros" >/dev/null
say "done: $(du -sh "$VENV" | cut -f1) in .venv"

# 9. The real ros2 launch tooling and colcon, where ../shared/ros2-launch provides their sources ----------------
# build.sh installs into a prefix of this checkout (shared/ may be read-only); colcon goes into <prefix>/colcon with
# --no-deps (the file pins it and what .venv lacks of its dependencies). Only the tests use them.
LAUNCH_SRC="$ROOT/../shared/ros2-launch"
LPREFIX="$ROOT/.venv-launch"
if [[ -f "$LAUNCH_SRC/build.sh" ]]; then
  launch_hash=$(hash_of "$LAUNCH_SRC"/build.sh "$LAUNCH_SRC"/src/*.tar.gz "$ROOT/scripts/requirements-colcon.txt")
  if ! stamp_ok ros2-launch "$launch_hash" || [[ ! -f "$LPREFIX/env.sh" || ! -x "$LPREFIX/colcon/bin/colcon" ]]; then
    say "ros2-launch: building launch, launch_ros, ros2cli and colcon into $LPREFIX (about 1-2 min)"
    rm -rf "$LPREFIX"
    bash "$LAUNCH_SRC/build.sh" "$VENV" "$LPREFIX" 2>&1 | { grep -v "is ignored: it is neither" || true; } \
      || { echo "setup: building the ros2 launch tooling from $LAUNCH_SRC failed" >&2; exit 1; }
    "${PIP[@]}" install --no-deps --no-compile --target "$LPREFIX/colcon" -r "$ROOT/scripts/requirements-colcon.txt" \
      2>&1 | { grep -v "is ignored: it is neither" || true; }
    # `colcon` on PATH once env.sh is sourced; its packages are on the path of colcon's process only
    printf '#!/bin/sh\nPYTHONPATH="%s${PYTHONPATH:+:$PYTHONPATH}" exec "%s" "$@"\n' \
      "$LPREFIX/colcon" "$LPREFIX/colcon/bin/colcon" > "$LPREFIX/bin/colcon"
    chmod +x "$LPREFIX/bin/colcon"
    (source "$LPREFIX/env.sh" && ros2 launch --help >/dev/null && colcon --help >/dev/null) \
      || { echo "setup: ros2 launch or colcon from $LPREFIX does not run" >&2; exit 1; }
    stamp_set ros2-launch "$launch_hash"
  else
    say "ros2-launch: up to date in $LPREFIX"
  fi
else
  say "ros2-launch: $LAUNCH_SRC not found: the ros2 launch / colcon tests will skip"
fi

# 10. On request: the Jazzy venv --------------------------------------------------------------------
if ((WITH_JAZZY)); then
  JVENV="$ROOT/.venv-jazzy"
  JSTAMPS="$JVENV/.pyrua_setup"
  jstamp_ok() { [[ -f "$JSTAMPS/$1" && "$(cat "$JSTAMPS/$1")" == "$2" ]]; }
  jstamp_set() { mkdir -p "$JSTAMPS"; echo "$2" > "$JSTAMPS/$1"; }
  [[ -x "$JVENV/bin/python" ]] || { say "jazzy: creating $JVENV"; "$PY" -m venv "$JVENV"; }
  JPY="$JVENV/bin/python"
  jreq_hash=$(hash_of "$ROOT/scripts/requirements-jazzy.txt")
  if ! jstamp_ok requirements "$jreq_hash"; then
    say "jazzy: installing scripts/requirements-jazzy.txt"
    "$JPY" -m pip --disable-pip-version-check -q install -U "setuptools==84.2.1" "wheel==0.48.0" 2>/dev/null \
      || "$JPY" -m pip --disable-pip-version-check -q install -U pip setuptools wheel
    "$JPY" -m pip --disable-pip-version-check -q install -r "$ROOT/scripts/requirements-jazzy.txt" 2>&1 \
      | { grep -v "is ignored: it is neither" || true; }
    rm -f "$JSTAMPS/interfaces"
    jstamp_set requirements "$jreq_hash"
  fi
  JSITE=$("$JPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  # pyrua_ros from this checkout (a path entry, like the editable install of .venv) and the ament prefix.
  echo "import os; os.environ.setdefault('AMENT_PREFIX_PATH', '$JVENV')" > "$JSITE/pyrua_ros_ament_prefix.pth"
  echo "$ROOT" > "$JSITE/pyrua_ros_source.pth"
  if ! jstamp_ok interfaces "$if_hash"; then
    say "jazzy: building control_msgs and tf2_msgs (Jazzy definitions) into $JVENV"
    "$JPY" "$ROOT/scripts/build_interfaces.py" --venv "$JVENV" --src "$ROOT/interfaces" --distro jazzy \
      --build "$ROOT/build/interfaces"
    jstamp_set interfaces "$if_hash"
  fi
  ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST "$JPY" -c "import rclpy, control_msgs.action, tf2_msgs.msg
from pyrua_ros.wire.distro import ros_distro
assert ros_distro() == 'jazzy', ros_distro()" || { echo "setup: jazzy import check failed" >&2; exit 1; }
  say "jazzy: done: $(du -sh "$JVENV" | cut -f1) in .venv-jazzy"
fi
