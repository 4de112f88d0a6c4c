"""Images a cell shows with ``display()``: only a real PNG or JPEG within the pixel limit is accepted, scaled
down to the side the model gets.
"""

from __future__ import annotations

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
IMAGE_MAX_PIXELS = 4096 * 4096   # decoded size limit of a display() image
IMAGE_MAX_SIDE = 1024            # images are down-scaled to this longest side before they reach the model


def accept_image(data: bytes, max_bytes: int) -> tuple[bytes | None, str | None]:
    """(PNG bytes ready for the model, None) for a real PNG or JPEG of at most ``IMAGE_MAX_PIXELS`` pixels
    (down-scaled to ``IMAGE_MAX_SIDE``), or (None, why it was refused)."""
    if len(data) > max_bytes:
        return None, f"{len(data)} bytes is over the {max_bytes} byte limit"
    if not data.startswith((PNG_SIGNATURE, b"\xff\xd8\xff")):
        return None, "not a PNG or JPEG image"
    import io

    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as img:
            if img.format not in ("PNG", "JPEG"):
                return None, f"format {img.format} is not PNG or JPEG"
            width, height = img.size
            if width * height > IMAGE_MAX_PIXELS or width <= 0 or height <= 0:
                return None, f"{width}x{height} pixels is over the {IMAGE_MAX_PIXELS} pixel limit"
            img.load()
            rgb = img.convert("RGBA" if img.mode in ("RGBA", "LA", "P") else "RGB")
    except Exception as exc:  # a broken or hostile file: refused, never fatal
        return None, f"cannot be decoded ({type(exc).__name__})"
    if max(width, height) > IMAGE_MAX_SIDE:
        rgb.thumbnail((IMAGE_MAX_SIDE, IMAGE_MAX_SIDE))
    buf = io.BytesIO()
    rgb.save(buf, format="PNG")
    return buf.getvalue(), None
