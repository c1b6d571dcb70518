"""Vision-model analysis of plots: per-node critique and a final figure/caption review.

Images travel as OpenAI-compatible ``image_url`` parts (pillow-resized, MIME
type from the real format). A model without vision is detected up front (the
local llama.cpp backend, or a client that says so) or from the server's
refusal (``VisionUnsupported`` or an error saying images are unsupported);
the step is then skipped with the reason recorded in ``figures/vlm.json``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.fileio import atomic_write_json, read_json
from ..base.paths import NodePaths, RunPaths
from ..llm.types import CallContext, LLMError
from . import prompts
from .errors import StepSkipped
from .images import image_part
from .runread import load_run

if TYPE_CHECKING:
    from ..base.config import Config
    from ..llm.client import LLMClient

MAX_PLOTS_PER_NODE = 4
# refusals seen from OpenAI ("image_url is only supported by certain models"), llama.cpp server
# ("image input is not supported"), vLLM ("is not a multimodal model"), Ollama ("does not support images")
_NO_VISION = re.compile(
    r"(image|vision|multimodal|image_url).{0,80}(not supported|unsupported|only supported by|does not support|cannot)"
    r"|(not support|unsupported|does not support|no support for).{0,40}(image|vision|multimodal)"
    r"|not a multimodal model",
    re.I | re.S,
)
CRITIQUE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "critiques": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "file": {"type": "string", "maxLength": 200},
                    "assessment": {"type": "string", "maxLength": 1500},
                    "issues": {
                        "type": "array",
                        "items": {"type": "string", "maxLength": 400},
                        "maxItems": 10,
                    },
                    "useful": {"type": "boolean"},
                },
                "required": ["file", "assessment", "issues", "useful"],
                "additionalProperties": False,
            },
            "maxItems": 30,
        }
    },
    "required": ["critiques"],
    "additionalProperties": False,
}
FIGURE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "description": {"type": "string", "maxLength": 1500},
        "caption_matches": {"type": "boolean"},
        "issues": {"type": "array", "items": {"type": "string", "maxLength": 400}, "maxItems": 10},
        "suggested_caption": {"type": "string", "maxLength": 600},
        "score": {"type": "integer", "minimum": 1, "maximum": 10},
    },
    "required": ["description", "caption_matches", "issues", "suggested_caption", "score"],
    "additionalProperties": False,
}


class NoVision(StepSkipped):
    """The configured model cannot read images."""


def vision_skip_reason(cfg: Config, client: LLMClient) -> str | None:
    """Why the ``vlm_feedback`` model cannot see images, or None when it may."""
    model = cfg.model_for("vlm_feedback")
    flag = getattr(client, "supports_vision", None)
    if callable(flag):
        flag = flag(model)
    if flag is False:
        return f"model {model!r} has no image input (the LLM client reports no vision support)"
    backend = getattr(getattr(client, "backend", None), "name", None) or cfg.llm.backend
    if backend == "local":
        return "the local llama.cpp backend has no image input; configure an OpenAI-compatible vision model"
    return None


def is_vision_refusal(exc: BaseException) -> bool:
    """True when an LLM error means 'this model/server does not accept images'."""
    if type(exc).__name__ == "VisionUnsupported":
        return True
    return isinstance(exc, LLMError) and bool(_NO_VISION.search(str(exc)))


def _vision_call(client: LLMClient, messages: list, schema: dict, ctx: CallContext) -> dict[str, Any]:
    try:
        return client.complete(messages, role="vlm_feedback", ctx=ctx, schema=schema).parsed
    except LLMError as exc:
        if is_vision_refusal(exc):
            raise NoVision(f"the model refused image input: {exc}") from exc
        raise


def _with_images(text: str, paths: list[Path]) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}] + [image_part(p) for p in paths]


def critique_node_plots(run_dir: Path, cfg: Config, client: LLMClient) -> dict[str, Any]:
    """Critique the plots of each stage's best node; {node_id: {critiques | error}}."""
    view = load_run(run_dir)
    out: dict[str, Any] = {}
    for stage, node in view.best_per_stage().items():
        nid = str(node["id"])
        plots = sorted(NodePaths(view.node_dir(nid)).plots.glob("*.png"))[:MAX_PLOTS_PER_NODE]
        if not plots:
            continue
        text = prompts.render(
            "vlm_node_user.j2",
            node=node,
            stage=stage,
            files=[p.name for p in plots],
            metrics=view.metrics(nid),
        )
        msgs = [
            {"role": "system", "content": prompts.render("vlm_system.j2")},
            {"role": "user", "content": _with_images(text, plots)},
        ]
        ctx = CallContext(node_id=nid, stage=str(stage), phase="vlm", label="plot_critique")
        try:
            out[nid] = _vision_call(client, msgs, CRITIQUE_SCHEMA, ctx)
        except NoVision:
            raise
        except LLMError as exc:
            out[nid] = {"error": f"critique of {nid} failed: {exc}"}
    return out


def review_figures(
    run_dir: Path, cfg: Config, client: LLMClient, figures: list[dict[str, Any]], phase: str = "vlm"
) -> dict[str, Any]:
    """Check each figure against its caption; {file: review | {error}}."""
    fig_dir = RunPaths(run_dir).figures
    out: dict[str, Any] = {}
    for fig in figures:
        path = fig_dir / fig["file"]
        text = prompts.render("vlm_figure_user.j2", file=fig["file"], caption=fig.get("caption", ""))
        msgs = [
            {"role": "system", "content": prompts.render("vlm_system.j2")},
            {"role": "user", "content": _with_images(text, [path])},
        ]
        ctx = CallContext(node_id="run", phase=phase, label=f"figure_{path.stem}"[:40])
        try:
            out[fig["file"]] = _vision_call(client, msgs, FIGURE_SCHEMA, ctx)
        except NoVision:
            raise
        except (LLMError, OSError) as exc:
            out[fig["file"]] = {"error": f"review of {fig['file']} failed: {exc}"}
    return out


def run_vlm(run_dir: Path, cfg: Config, client: LLMClient) -> dict[str, Any]:
    """Both VLM passes; writes ``figures/vlm.json``. Raises NoVision (a StepSkipped) when blind."""
    path = RunPaths(run_dir).vlm_json
    reason = vision_skip_reason(cfg, client)
    result: dict[str, Any] = {"model": cfg.model_for("vlm_feedback")}
    try:
        if reason:
            raise NoVision(reason)
        figures = (read_json(RunPaths(run_dir).figures_json, default={}) or {}).get("figures", [])
        result["nodes"] = critique_node_plots(run_dir, cfg, client)
        result["figures"] = review_figures(run_dir, cfg, client, figures)
    except NoVision as exc:
        result["skipped"] = str(exc)
        atomic_write_json(path, result)
        raise
    atomic_write_json(path, result)
    return result
