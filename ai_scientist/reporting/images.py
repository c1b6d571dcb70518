"""Image helpers of reporting: duplicate detection by perceptual hash.

``check_figure`` (why a figure is unusable) and ``image_data_url`` / ``image_part``
(the OpenAI-compatible image part) live in :mod:`ai_scientist.base.images`, since a
node's own plots use them too; they are re-exported here.
"""

from __future__ import annotations

from pathlib import Path

from PIL import Image, UnidentifiedImageError

# the checks and encodings live in base/ (a node's plots use them too); re-exported here
from ..base.images import BLANK_VARIANCE, MAX_SIDE, check_figure, image_data_url, image_part

__all__ = [
    "BLANK_VARIANCE",
    "MAX_SIDE",
    "check_figure",
    "dhash",
    "duplicate_figures",
    "image_data_url",
    "image_part",
]


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
