"""Build the ROS 2 interface packages that PyPI does not carry into a pip-made venv.

Each folder under ``interfaces/`` holds ``msg/``, ``srv/`` and ``action/`` definitions and a ``deps.txt``;
a definition that differs between ROS 2 distros lives in ``<distro>/msg|srv|action/`` inside it instead, once per
distro (``interfaces/distros.yaml`` names the distros and the upstream release each one matches). For the
``--distro`` asked for, this script writes a throw-away ament_cmake package around each folder (package.xml and
CMakeLists.txt are generated here, under the build folder, so the repository never holds a second ROS package),
then runs cmake to generate and install the C, C++ and Python type support into the venv prefix.

The kilted message wheels were built with Python at ``/opt/python/cp311-cp311``; their exported cmake
files name that interpreter's include folders. They are rewritten to this venv's include folders first.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig

PACKAGE_XML = """<?xml version="1.0"?>
<package format="3">
  <name>{name}</name>
  <version>{version}</version>
  <description>{name} types ({distro}) built by pyrua_ros for a pip-only ROS 2 environment</description>
  <maintainer email="pyrua-ros@example.invalid">pyrua_ros</maintainer>
  <license>Apache-2.0</license>
  <buildtool_depend>ament_cmake</buildtool_depend>
  <buildtool_depend>rosidl_default_generators</buildtool_depend>
{deps}
  <exec_depend>rosidl_default_runtime</exec_depend>
  <member_of_group>rosidl_interface_packages</member_of_group>
  <export><build_type>ament_cmake</build_type></export>
</package>
"""

CMAKE = """cmake_minimum_required(VERSION 3.16)
project({name})
find_package(ament_cmake REQUIRED)
find_package(rosidl_default_generators REQUIRED)
{find_deps}
rosidl_generate_interfaces(${{PROJECT_NAME}}
{files}
  DEPENDENCIES {deps}
)
ament_export_dependencies(rosidl_default_runtime)
ament_package()
"""


def patch_cmake_exports(venv: pathlib.Path) -> int:
    """Point the wheels' exported cmake files at this venv's Python and NumPy include folders."""
    import numpy  # noqa: PLC0415 (numpy: this step only)

    py_inc = sysconfig.get_paths()["include"]
    np_inc = numpy.get_include()
    builder_py = re.compile(r"/opt/python/cp3\d+-cp3\d+/include/python3\.\d+")
    builder_np = re.compile(r"/opt/python/cp3\d+-cp3\d+/lib/python3\.\d+/site-packages/numpy/_core/include")
    changed = 0
    for path in (venv / "share").rglob("*.cmake"):
        text = path.read_text(errors="replace")
        new = builder_np.sub(np_inc, text)
        new = builder_py.sub(py_inc, new)
        if new != text:
            path.write_text(new)
            changed += 1
    return changed


KINDS = ("msg", "srv", "action")


def load_distros(src: pathlib.Path) -> dict:
    """``interfaces/distros.yaml``: per distro, the upstream package releases matched and their type hashes."""
    import yaml  # noqa: PLC0415 (yaml: this step only)

    return yaml.safe_load((src / "distros.yaml").read_text())


def definitions(src: pathlib.Path, distro: str, distros: dict) -> dict[str, pathlib.Path]:
    """``{"msg/Name.msg": path}`` of one interface folder for ``distro``: the shared files, then the distro's own.

    A file may not be both shared and distro-specific, and a distro folder must exist for every distro the
    package has any distro folder for (so no distro silently builds a missing definition)."""
    files = {f"{kind}/{p.name}": p for kind in KINDS if (src / kind).is_dir() for p in sorted((src / kind).iterdir())}
    split = [d for d in distros if (src / d).is_dir()]
    unknown = sorted(p.name for p in src.iterdir() if p.is_dir() and p.name not in KINDS and p.name not in distros)
    if unknown:
        raise SystemExit(f"{src}: folders {unknown} are neither msg/srv/action nor a distro of distros.yaml")
    if split and distro not in split:
        raise SystemExit(f"{src}: has definitions for {split} but none for {distro}")
    for kind in KINDS:
        folder = src / distro / kind
        for p in sorted(folder.iterdir()) if folder.is_dir() else ():
            key = f"{kind}/{p.name}"
            if key in files:
                raise SystemExit(f"{p}: {key} is also a shared definition of {src.name}")
            files[key] = p
    return files


def write_package(src: pathlib.Path, dst: pathlib.Path, distro: str, distros: dict) -> str:
    """Lay out one temporary ament_cmake package in ``dst`` from the definitions in ``src`` for ``distro``."""
    name = src.name
    deps = [d.strip() for d in (src / "deps.txt").read_text().split() if d.strip()]
    version = str((distros[distro].get("packages") or {}).get(name, "0.0.0"))
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    chosen = definitions(src, distro, distros)
    for rel, path in chosen.items():
        (dst / rel).parent.mkdir(exist_ok=True)
        shutil.copyfile(path, dst / rel)
    files = sorted(chosen)
    dep_xml = "\n".join(f"  <depend>{d}</depend>" for d in deps)
    (dst / "package.xml").write_text(PACKAGE_XML.format(name=name, deps=dep_xml, version=version, distro=distro))
    (dst / "CMakeLists.txt").write_text(
        CMAKE.format(
            name=name,
            find_deps="\n".join(f"find_package({d} REQUIRED)" for d in deps),
            files="\n".join(f'  "{f}"' for f in files),
            deps=" ".join(deps),
        )
    )
    return name


def build(pkg: pathlib.Path, build_dir: pathlib.Path, venv: pathlib.Path, jobs: int) -> None:
    """Configure, build and install one package into the venv prefix."""
    env = dict(os.environ, AMENT_PREFIX_PATH=str(venv), CMAKE_PREFIX_PATH=str(venv))
    py = str(venv / "bin" / "python")
    subprocess.run(
        ["cmake", "-S", str(pkg), "-B", str(build_dir), f"-DCMAKE_PREFIX_PATH={venv}",
         f"-DCMAKE_INSTALL_PREFIX={venv}", f"-DPython3_EXECUTABLE={py}", "-DBUILD_TESTING=OFF",
         "-DCMAKE_BUILD_TYPE=Release", "-Wno-dev"],
        check=True, env=env, stdout=subprocess.DEVNULL,
    )
    subprocess.run(["cmake", "--build", str(build_dir), f"-j{jobs}"], check=True, env=env,
                   stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--install", str(build_dir)], check=True, env=env, stdout=subprocess.DEVNULL)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--venv", type=pathlib.Path, required=True)
    ap.add_argument("--src", type=pathlib.Path, required=True, help="folder of interface definition folders")
    ap.add_argument("--distro", required=True, help="ROS 2 distro of the venv's wheels (a key of distros.yaml)")
    ap.add_argument("--build", type=pathlib.Path, required=True, help="scratch build folder")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args(argv)
    distros = load_distros(args.src)
    if args.distro not in distros:
        ap.error(f"--distro {args.distro!r}: interfaces/distros.yaml knows {sorted(distros)}")
    n = patch_cmake_exports(args.venv)
    print(f"  patched {n} exported cmake file(s)")
    for src in sorted(p for p in args.src.iterdir() if (p / "deps.txt").is_file()):
        pkg = write_package(src, args.build / args.distro / "src" / src.name, args.distro, distros)
        build(args.build / args.distro / "src" / src.name, args.build / args.distro / "cmake" / src.name, args.venv,
              args.jobs)
        print(f"  built {pkg} for {args.distro}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
