"""Open a page of ours in headless Chromium, offline, and say what a reader would see go wrong (tests only).

:func:`open_offline` loads a ``file://`` page with every host name resolving to nothing (so a fetch from the
network fails and Chromium logs it), a fresh profile, and background networking, updates and sync off; it gives
back the DOM after scripts ran, the console messages (a Content-Security-Policy refusal or a failed load is one),
the page's ``data-video`` state (the viewer's script writes ``loaded <duration>`` once the video's metadata loaded)
and :func:`broken_links` of the DOM: every ``href`` / ``src`` that is neither an inline ``data:`` URI, an anchor of
the page, nor a file or folder that exists relative to the page.
"""

from __future__ import annotations

import dataclasses
import html
import re
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import unquote, urlsplit

from pyrua_ros.reports.report import chromium_command

NO_NETWORK = ("--host-resolver-rules=MAP * ~NOTFOUND", "--enable-logging=stderr", "--v=0")
_CONSOLE = re.compile(r":CONSOLE[:(]\d*\)?\]? ?(.*)")
_LINK = re.compile(r"""\b(href|src)\s*=\s*("([^"]*)"|'([^']*)')""", re.IGNORECASE)
_IDS = re.compile(r"""\bid\s*=\s*["']([^"']+)["']""")


@dataclasses.dataclass(frozen=True)
class PageCheck:
    """What Chromium made of a page: ``dom`` (after scripts), ``console`` messages, the body's ``video`` state,
    ``broken`` links and ``external`` ones (anything on a network)."""

    dom: str
    console: tuple[str, ...]
    video: str | None
    broken: tuple[str, ...]
    external: tuple[str, ...]


def links(dom: str) -> list[str]:
    """Every ``href`` / ``src`` value in ``dom``, unescaped."""
    return [html.unescape(m.group(3) if m.group(3) is not None else m.group(4)) for m in _LINK.finditer(dom)]


def broken_links(dom: str, page: Path) -> tuple[list[str], list[str]]:
    """(links that lead nowhere, links to a network) of ``dom``, a page at ``page``."""
    ids = set(_IDS.findall(dom))
    broken, external = [], []
    for link in links(dom):
        parts = urlsplit(link)
        if parts.scheme == "data":
            continue
        if parts.scheme in ("http", "https", "ftp", "ws", "wss") or link.startswith("//"):
            external.append(link)
            continue
        if parts.scheme == "file":
            target = Path(unquote(parts.path))
        elif parts.scheme:
            broken.append(link)   # javascript:, blob: ... nothing a page of ours needs
            continue
        elif not parts.path:
            if parts.fragment and parts.fragment not in ids:
                broken.append(link)
            continue
        else:
            target = page.parent / unquote(parts.path)
        if not target.exists():
            broken.append(link)
    return broken, external


def open_offline(page: Path, *, timeout_s: float = 120.0, budget_ms: int = 5000) -> PageCheck:
    """Load ``page`` in headless Chromium without a network and report (see the module docstring)."""
    page = Path(page).resolve()
    with tempfile.TemporaryDirectory(prefix="pyrua_browser_") as profile:
        argv = chromium_command([*NO_NETWORK, f"--virtual-time-budget={budget_ms}", "--dump-dom"], page,
                                Path(profile))
        proc = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=timeout_s,
                              start_new_session=True)
    if proc.returncode != 0:
        raise RuntimeError(f"Chromium failed on {page} (exit {proc.returncode}): {proc.stderr[-1000:]}")
    console = tuple(m.group(1) for line in proc.stderr.splitlines() if (m := _CONSOLE.search(line)))
    video = re.search(r'<body[^>]*\bdata-video="([^"]*)"', proc.stdout)
    broken, external = broken_links(proc.stdout, page)
    return PageCheck(dom=proc.stdout, console=console, video=video.group(1) if video else None,
                     broken=tuple(broken), external=tuple(external))


__all__ = ["PageCheck", "broken_links", "links", "open_offline"]
