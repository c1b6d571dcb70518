"""Can the ``vlm_feedback`` model see images? Decided up front, or from the server's refusal.

A model without vision is detected before any call (the local llama.cpp backend, or a
client that says so) or from the server's answer (``VisionUnsupported`` or an error
saying images are unsupported). Both the per-node plot critique (phases) and the
run's figure review (reporting) skip with the reason these functions give.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from .call import LLMError
from .client import backend_name

if TYPE_CHECKING:
    from ..base.config import Config

# refusals seen from OpenAI ("image_url is only supported by certain models"), llama.cpp server
# ("image input is not supported"), vLLM ("is not a multimodal model"), Ollama ("does not support images")
_NO_VISION = re.compile(
    r"(image|vision|multimodal|image_url).{0,80}(not supported|unsupported|only supported by|does not support|cannot)"
    r"|(not support|unsupported|does not support|no support for).{0,40}(image|vision|multimodal)"
    r"|not a multimodal model",
    re.I | re.S,
)


def vision_skip_reason(cfg: Config, client: Any) -> str | None:
    """Why the ``vlm_feedback`` model cannot see images, or None when it may."""
    model = cfg.model_for("vlm_feedback")
    flag = getattr(client, "supports_vision", None)
    if callable(flag):
        flag = flag(model)
    if flag is False:
        return f"model {model!r} has no image input (the LLM client reports no vision support)"
    backend = backend_name(client) or cfg.llm.backend
    if backend == "local":
        return "the local llama.cpp backend has no image input; configure an OpenAI-compatible vision model"
    return None


def is_vision_refusal(exc: BaseException) -> bool:
    """True when an LLM error means 'this model/server does not accept images'."""
    if type(exc).__name__ == "VisionUnsupported":
        return True
    return isinstance(exc, LLMError) and bool(_NO_VISION.search(str(exc)))
