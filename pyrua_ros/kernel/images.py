"""Images a cell shows with ``display()``: only a real PNG or JPEG within the pixel limit is accepted, scaled
down to the side the model gets.

The bytes are the kernel's, so they are decoded in the agent process only after a walk of their structure that
bounds the work of every decoder stage: a progressive JPEG of 20000 empty scans (0.6 MiB) took 22-48 s to decode,
and a flood of tiny JPEG segments or PNG chunks costs Pillow's Python-level parsers seconds per image. Refused:
more than ``JPEG_MAX_SCANS`` scans, ``JPEG_MAX_SEGMENTS`` segments before the first scan, ``PNG_MAX_CHUNKS``
chunks, ``IMAGE_MAX_PIXELS`` pixels. What remains costs well under a second per image at the pixel limit; the
kernel host decodes none after the cell's deadline (``host.Kernel``).
"""

from __future__ import annotations

import io
import re
import struct

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
IMAGE_MAX_PIXELS = 4096 * 4096   # decoded size limit of a display() image
IMAGE_MAX_SIDE = 1024            # images are down-scaled to this longest side before they reach the model
JPEG_MAX_SCANS = 100             # a progressive JPEG has about 10 (libjpeg's default script)
JPEG_MAX_SEGMENTS = 256          # marker segments before the first scan (tables, APPn, COM)
PNG_MAX_CHUNKS = 8192            # a 16 MiB PNG of libpng's 8 KiB IDAT chunks has about 2000
_FILL = re.compile(rb"\xff+")


def structure_problem(data: bytes) -> str | None:
    """Why the PNG or JPEG ``data`` would cost a decoder more than the bounds above (or is not well formed), or
    None. Walks chunk and segment headers only; never decodes."""
    if data.startswith(PNG_SIGNATURE):
        pos, chunks = len(PNG_SIGNATURE), 0
        while pos + 12 <= len(data):
            length, kind = struct.unpack_from(">I4s", data, pos)
            chunks += 1
            if chunks > PNG_MAX_CHUNKS:
                return f"more than {PNG_MAX_CHUNKS} PNG chunks"
            if kind == b"IEND":
                return None
            pos += 12 + length
        return "a PNG without its end chunk"
    pos, segments = 2, 0
    while pos + 4 <= len(data):
        if data[pos] != 0xFF:
            return "a JPEG marker is missing where one was expected"
        pos = _FILL.match(data, pos).end() - 1   # (any number of fill bytes before a marker)
        if pos + 1 >= len(data):
            break
        marker = data[pos + 1]
        segments += 1
        if segments > JPEG_MAX_SEGMENTS:
            return f"more than {JPEG_MAX_SEGMENTS} JPEG segments before the first scan"
        if marker == 0xDA:
            scans = data.count(b"\xff\xda", pos)   # (every start-of-scan marker; an embedded one counts too)
            return f"{scans} JPEG scans is over the {JPEG_MAX_SCANS} scan limit" if scans > JPEG_MAX_SCANS else None
        if 0xD0 <= marker <= 0xD9 or marker == 0x01:   # markers without a length
            pos += 2
            continue
        if pos + 4 > len(data):
            break
        pos += 2 + struct.unpack_from(">H", data, pos + 2)[0]
    return "a JPEG without image data"


def accept_image(data: bytes, max_bytes: int) -> tuple[bytes | None, str | None]:
    """(PNG bytes ready for the model, None) for a real PNG or JPEG of at most ``IMAGE_MAX_PIXELS`` pixels
    (down-scaled to ``IMAGE_MAX_SIDE``), or (None, why it was refused)."""
    if len(data) > max_bytes:
        return None, f"{len(data)} bytes is over the {max_bytes} byte limit"
    if not data.startswith((PNG_SIGNATURE, b"\xff\xd8\xff")):
        return None, "not a PNG or JPEG image"
    problem = structure_problem(data)
    if problem is not None:
        return None, problem

    from PIL import Image  # noqa: PLC0415 (PIL)

    try:
        with Image.open(io.BytesIO(data)) as img:
            if img.format not in ("PNG", "JPEG"):
                return None, f"format {img.format} is not PNG or JPEG"
            width, height = img.size
            if width * height > IMAGE_MAX_PIXELS or width <= 0 or height <= 0:
                return None, f"{width}x{height} pixels is over the {IMAGE_MAX_PIXELS} pixel limit"
            if img.format == "JPEG":   # (libjpeg decodes at the smallest 1/8 scale that is still big enough)
                img.draft(img.mode, (IMAGE_MAX_SIDE, IMAGE_MAX_SIDE))
            img.load()
            rgb = img.convert("RGBA" if img.mode in ("RGBA", "LA", "P") else "RGB")
    except Exception as exc:  # a broken or hostile file: refused, never fatal
        return None, f"cannot be decoded ({type(exc).__name__})"
    if max(width, height) > IMAGE_MAX_SIDE:
        rgb.thumbnail((IMAGE_MAX_SIDE, IMAGE_MAX_SIDE))
    buf = io.BytesIO()
    rgb.save(buf, format="PNG")
    return buf.getvalue(), None
