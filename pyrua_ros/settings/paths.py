"""The check of a file or folder a setting names (``--replay``, ``--guides-dir``, a policy, a card, instance
files): shared by :mod:`pyrua_ros.agent.run.validate` and the runtimes' own ``check_config``."""

from __future__ import annotations

import pathlib

from pyrua_ros.settings.schema import SettingError


def check_input_path(flag: str, path: pathlib.Path | None, *, kind: str = "file", suffixes: tuple[str, ...] = (),
                     ) -> None:
    """``path`` exists and is a ``kind`` (``file``, ``dir`` or ``any``) that can be read."""
    if path is None:
        return
    p = pathlib.Path(path)
    if not p.exists():
        raise SettingError(f"{flag} {path}: no such {'folder' if kind == 'dir' else 'file'}")
    if kind == "file" and not p.is_file():
        raise SettingError(f"{flag} {path}: not a file")
    if kind == "dir" and not p.is_dir():
        raise SettingError(f"{flag} {path}: not a folder")
    if p.is_file():
        if suffixes and p.suffix not in suffixes:
            raise SettingError(f"{flag} {path}: expected a {' or '.join(suffixes)} file")
        try:
            with open(p, "rb") as handle:
                handle.read(1)
        except OSError as exc:
            raise SettingError(f"{flag} {path}: cannot be read ({exc.strerror})") from None
