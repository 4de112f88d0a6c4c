"""Images and arrays as bytes: PNG for colour, compressed npz for depth and world maps.
"""

from __future__ import annotations

import io

import numpy as np

from pyrua_ros import cputime


def encode_png(rgb: np.ndarray) -> bytes:
    """PNG bytes of an (H, W, 3) or (H, W) image (other dtypes are clipped to uint8)."""
    from PIL import Image  # noqa: PLC0415 (PIL)

    arr = np.asarray(rgb)
    if arr.dtype != np.uint8:
        arr = np.clip(arr, 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    with cputime.section("images: PNG encode"):
        Image.fromarray(arr).save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def decode_png(data: bytes) -> np.ndarray:
    """(H, W, 3) uint8 RGB array of PNG (or any PIL-readable) bytes."""
    from PIL import Image  # noqa: PLC0415 (PIL)

    with cputime.section("images: PNG decode"), Image.open(io.BytesIO(data)) as img:
        return np.asarray(img.convert("RGB"), dtype=np.uint8).copy()


def encode_npz(array: np.ndarray) -> bytes:
    """Compressed ``.npz`` bytes holding one array named ``array``."""
    buf = io.BytesIO()
    with cputime.section("images: npz encode"):
        np.savez_compressed(buf, array=np.asarray(array))
    return buf.getvalue()


def decode_npz(data: bytes) -> np.ndarray:
    """The array named ``array`` (else the first member) of ``.npz`` bytes, or a bare ``.npy``."""
    with np.load(io.BytesIO(data), allow_pickle=False) as loaded:
        if isinstance(loaded, np.ndarray):
            return loaded
        key = "array" if "array" in loaded.files else loaded.files[0]
        return loaded[key]
