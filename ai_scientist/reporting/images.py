"""Image helpers shared by aggregation, the VLM steps and the viewer.

``check_figure`` says precisely why a figure is unusable (missing, not an
image, blank); ``image_data_url`` builds the OpenAI-compatible image part with
the MIME type of the image's real format (not its file extension), downsized
with pillow so a vision call never ships a 20-megapixel PNG.
"""

from __future__ import annotations

import base64
import io
from pathlib import Path

from PIL import Image, ImageStat, UnidentifiedImageError

# Below this per-channel pixel variance a figure is one flat colour: a plot
# whose data never got drawn (the classic empty aggregated figure).
BLANK_VARIANCE = 4.0
MAX_SIDE = 1024
_MIME = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}


def check_figure(path: Path, min_variance: float = BLANK_VARIANCE) -> str | None:
    """``None`` when ``path`` is a non-blank image, else the reason it is rejected."""
    if not path.exists():
        return f"{path.name}: file was not written by the script"
    if path.stat().st_size == 0:
        return f"{path.name}: file is empty (0 bytes)"
    try:
        with Image.open(path) as img:
            img.load()
            rgb = img.convert("RGB")
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        return f"{path.name}: not a readable image ({exc})"
    if rgb.width < 16 or rgb.height < 16:
        return f"{path.name}: image is only {rgb.width}x{rgb.height} px"
    variance = max(ImageStat.Stat(rgb).var)
    if variance < min_variance:
        return (
            f"{path.name}: image is blank (pixel variance {variance:.2f} < {min_variance}); "
            "nothing was drawn — check that the data arrays are non-empty and plotted before saving"
        )
    return None


def image_data_url(path: Path, max_side: int = MAX_SIDE) -> str:
    """``data:<mime>;base64,...`` for ``path``, resized so its longer side is <= ``max_side``.

    Formats other than PNG/JPEG/GIF/WEBP are re-encoded as PNG, so the MIME
    type always matches the bytes.
    """
    with Image.open(path) as img:
        img.load()
        fmt = (img.format or "").upper()
        if max(img.size) > max_side or fmt not in _MIME:
            img = img.copy()
            img.thumbnail((max_side, max_side))
            if fmt not in _MIME or (fmt == "JPEG" and img.mode not in ("RGB", "L")):
                fmt = "PNG"
            buf = io.BytesIO()
            img.save(buf, format=fmt)
            data = buf.getvalue()
        else:
            data = path.read_bytes()
    return f"data:{_MIME[fmt]};base64,{base64.b64encode(data).decode('ascii')}"


def image_part(path: Path, max_side: int = MAX_SIDE) -> dict:
    """One OpenAI chat content part holding the image."""
    return {"type": "image_url", "image_url": {"url": image_data_url(path, max_side)}}


# Perceptual hash: a figure saved twice (same data, other file name, size or format) hashes to
# (nearly) the same bits, while two plots of different data differ in many of the 256 bits.
HASH_SIDE = 16
DUPLICATE_MAX_BITS = 6  # of HASH_SIDE**2 = 256: a re-rendered copy differs by <= 4, distinct plots by >= 11


def dhash(path: Path, side: int = HASH_SIDE) -> int:
    """Difference hash: ``side``x``side`` bits, each 'is this pixel brighter than its right neighbour'."""
    with Image.open(path) as img:
        gray = img.convert("L").resize((side + 1, side), Image.Resampling.LANCZOS)
    px = gray.tobytes()  # one byte per pixel in mode L
    bits = 0
    for row in range(side):
        for col in range(side):
            left, right = px[row * (side + 1) + col], px[row * (side + 1) + col + 1]
            bits = (bits << 1) | (left > right)
    return bits


def duplicate_figures(paths: list[Path], max_bits: int = DUPLICATE_MAX_BITS) -> list[tuple[Path, Path, int]]:
    """(earlier, later, differing bits) for each figure that repeats an earlier one of ``paths``."""
    hashes: list[tuple[Path, int]] = []
    out = []
    for path in paths:
        try:
            h = dhash(path)
        except (UnidentifiedImageError, OSError, ValueError):
            continue  # an unreadable figure is check_figure's business, not a duplicate
        match = next(
            ((p, bin(h ^ g).count("1")) for p, g in hashes if bin(h ^ g).count("1") <= max_bits), None
        )
        if match is not None:
            out.append((match[0], path, match[1]))
        else:
            hashes.append((path, h))
    return out
