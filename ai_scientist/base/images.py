"""Image checks and encodings, shared by a node's plots, the run's figures, the VLM and the viewer.

``check_figure`` says precisely why a figure is unusable (missing, empty, not an
image, too small, blank); ``image_data_url`` builds the OpenAI-compatible image
part with the MIME type of the image's real format (not its file extension),
downsized with pillow so a vision call never ships a 20-megapixel PNG.
"""

from __future__ import annotations

import base64
import io
import re
from pathlib import Path
from typing import Any

from PIL import Image, ImageStat, UnidentifiedImageError

# Below this per-channel pixel variance a figure is one flat colour: a plot
# whose data never got drawn (the classic empty aggregated figure).
BLANK_VARIANCE = 4.0
MAX_SIDE = 1024
# a plotting answer (a node's plots and the run's aggregated figures): the script and each figure's
# file name (a plain PNG name, SAFE_FIGURE_NAME) and caption
SAFE_FIGURE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,80}\.png$")
PLOT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "script": {"type": "string", "maxLength": 30_000},
        "figures": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "file": {"type": "string", "maxLength": 100},
                    "caption": {"type": "string", "maxLength": 600},
                },
                "required": ["file", "caption"],
                "additionalProperties": False,
            },
            "maxItems": 12,
        },
    },
    "required": ["script", "figures"],
    "additionalProperties": False,
}


def plot_schema(max_figures: int) -> dict[str, Any]:
    """The plotting answer's schema with at most ``max_figures`` figures (the number the
    instructions state: agent.plots.max_figures for a node, report.max_figures for the report)."""
    figures = {**PLOT_SCHEMA["properties"]["figures"], "maxItems": max_figures}
    return {**PLOT_SCHEMA, "properties": {**PLOT_SCHEMA["properties"], "figures": figures}}


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
