"""Whether two run directories of one episode hold the same records: for before/after checks of a speed cut.

Usage::

    .venv/bin/python benchmarks/same_records.py RUN_A RUN_B

Compared: the per-step state digests of ``result.json``; the pixels of the card images (``card/*.png``) and of
every image in ``transcript.json`` where there is one (what the model saw, decoded, so PNG encoder settings do not
count); and every camera image in ``episode.mcap`` (streams and captures), by topic and header stamp: the pixels
of each image both recorded, and the stamps only one of them has (the re-publishing of an idle lockstep driver
depends on wall time, so the number of copies of a frame is not compared, only their content). Prints one line
per check and a JSON summary last; exits 1 when a check differs.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import pathlib
import sys


def _pixels(png: bytes) -> str:
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        return hashlib.sha256(image.mode.encode() + repr(image.size).encode() + image.tobytes()).hexdigest()[:16]


def _transcript_images(value, out: list[str]) -> list[str]:
    """Pixel digests of the base64 PNG images anywhere in a transcript, in order."""
    if isinstance(value, dict):
        for v in value.values():
            _transcript_images(v, out)
    elif isinstance(value, list):
        for v in value:
            _transcript_images(v, out)
    elif isinstance(value, str):
        data = value.split("base64,", 1)[1] if value.startswith("data:image/") else None
        if data is None and value.startswith("iVBORw0KGgo"):
            data = value
        if data is not None:
            out.append(_pixels(base64.b64decode(data)))
    return out


def _bag_images(mcap: pathlib.Path) -> dict[tuple[str, int], str]:
    """``{(topic, stamp ns): pixel digest}`` of the sensor_msgs/Image messages in ``mcap``."""
    from mcap.reader import make_reader

    from pyrua_ros.records.recorder import _cdr_time_ns

    out = {}
    with mcap.open("rb") as f:
        for schema, channel, message in make_reader(f).iter_messages():
            if schema is not None and schema.name == "sensor_msgs/msg/Image":
                # the CDR after the header's stamp: frame id, size, encoding and the pixels
                out[(channel.topic, _cdr_time_ns(message.data))] = hashlib.sha256(message.data[12:]).hexdigest()[:16]
    return out


def compare(a: pathlib.Path, b: pathlib.Path) -> dict:
    """The checks (see the module docstring); each ``{"same": bool, ...}``."""
    checks = {}
    ra, rb = (json.loads((d / "result.json").read_text()) for d in (a, b))
    da, db = ra.get("state_digest") or {}, rb.get("state_digest") or {}
    checks["state_digests"] = {"same": da.get("per_step") == db.get("per_step") and bool(da.get("per_step")),
                               "steps": [da.get("steps"), db.get("steps")], "final": [da.get("final"), db.get("final")]}
    cards = sorted({p.name for d in (a, b) for p in (d / "card").glob("*.png")})

    def card(d: pathlib.Path, name: str) -> str | None:
        return _pixels((d / "card" / name).read_bytes()) if (d / "card" / name).exists() else None

    checks["card_images"] = {"same": all(card(a, n) is not None and card(a, n) == card(b, n) for n in cards),
                             "images": len(cards)}
    ta, tb = (_transcript_images(json.loads((d / "transcript.json").read_text()), [])
              if (d / "transcript.json").exists() else None for d in (a, b))   # a program run has no transcript
    checks["model_images"] = {"same": ta == tb, "images": [None if t is None else len(t) for t in (ta, tb)]}
    ba, bb = _bag_images(a / "episode.mcap"), _bag_images(b / "episode.mcap")
    common = set(ba) & set(bb)
    differ = sorted(k for k in common if ba[k] != bb[k])
    checks["bag_images"] = {"same": not differ, "compared": len(common), "differ": [f"{t}@{s}" for t, s in differ][:10],
                            "only_a": len(set(ba) - set(bb)), "only_b": len(set(bb) - set(ba))}
    return checks


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: same_records.py RUN_A RUN_B", file=sys.stderr)
        return 2
    checks = compare(pathlib.Path(args[0]), pathlib.Path(args[1]))
    for name, check in checks.items():
        print(f"{name:14s} {'same' if check['same'] else 'DIFFERENT'}  "
              f"{ {k: v for k, v in check.items() if k != 'same'} }")
    print(json.dumps(checks))
    return 0 if all(c["same"] for c in checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
