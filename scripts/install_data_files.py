"""Install pyrua_ros's data files into a venv prefix, for editable installs.

``pip install -e`` does not install ``data_files``; ``ros2 run``, launch_ros and
``get_package_share_directory('pyrua_ros')`` need them under the prefix. This links each file of
``setup.data_files()`` into the prefix (symlinks, so edits to launch/ and config/ show at once) and removes
links that no longer belong to the list.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import runpy
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prefix", type=pathlib.Path, required=True)
    args = ap.parse_args(argv)
    root = pathlib.Path(__file__).resolve().parent.parent
    os.chdir(root)
    entries = runpy.run_path(str(root / "setup.py"), run_name="pyrua_ros_setup")["data_files"]()
    wanted = set()
    for dest, files in entries:
        folder = args.prefix / dest
        folder.mkdir(parents=True, exist_ok=True)
        for f in files:
            link = folder / pathlib.Path(f).name
            wanted.add(link)
            target = root / f
            if link.is_symlink() and pathlib.Path(os.readlink(link)) == target:
                continue
            if link.exists() or link.is_symlink():
                link.unlink()
            link.symlink_to(target)
    for folder in {args.prefix / d for d, _ in entries}:
        for link in folder.iterdir():
            if link.is_symlink() and link not in wanted and str(os.readlink(link)).startswith(str(root)):
                link.unlink()
    print(f"  linked {len(wanted)} data file(s) into {args.prefix}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
