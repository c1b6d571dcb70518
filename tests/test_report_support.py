"""Shared helpers for the reporting tests: a scripted LLM, a fake S2 server, a test figure.

The reporting tests start from a run the pipeline wrote (``run_copy`` in tests/conftest.py, or a
scripted run of their own through ``pipeline_support.start_run``), never a hand-made run directory.

The LLM double is a real object with the client's ``complete`` signature that
answers through a responder function and records every call, so tests can
assert what was (or was not) asked.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from ai_scientist.base.config import validate
from ai_scientist.llm.call import CallContext, LLMError, LLMResult


class ScriptedClient:
    """Answers ``complete`` with ``responder(messages, schema, ctx, role) -> str`` (JSON text)."""

    def __init__(self, responder, supports_vision: bool | None = None):
        self.responder = responder
        self.calls: list[dict[str, Any]] = []
        if supports_vision is not None:
            self.supports_vision = supports_vision

    def complete(self, messages, *, role: str, ctx: CallContext, schema=None, validator=None) -> LLMResult:
        self.calls.append({"messages": messages, "role": role, "ctx": ctx, "schema": schema})
        text = self.responder(messages, schema, ctx, role)
        parsed = json.loads(text) if schema is not None else None
        return LLMResult(text=text, raw=text, parsed=parsed)

    def roles(self) -> list[str]:
        return [c["role"] for c in self.calls]


def report_cfg(tmp: Path, **report: Any):
    data = {
        "exec": {"python": sys.executable, "timeout": 120},
        # writeup_reflections 0: tests count the writer's calls; reflection has its own tests
        "report": {
            "num_reviews": 2,
            "num_reflections": 1,
            "compile_fix_rounds": 2,
            "writeup_reflections": 0,
            **report,
        },
        "llm": {"backend": "openai"},
    }
    return validate(data)


def _plot_png(path: Path, seed: int) -> None:
    img = Image.new("RGB", (320, 240), "white")
    draw = ImageDraw.Draw(img)
    rng = np.random.default_rng(seed)
    pts = [(20 + i * 14, int(200 - 150 * v)) for i, v in enumerate(np.sort(rng.random(20))[::-1])]
    draw.line(pts, fill=(30, 90, 200), width=3)
    draw.line([(20, 210), (300, 210)], fill="black", width=2)
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path)


PLOT_SCRIPT = """
import glob, json, os
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(5, 3.5))
for path in sorted(glob.glob("data/*/results.json")):  # every curve a node saved
    for key, values in json.load(open(path)).items():
        if isinstance(values, list) and len(values) > 2:
            ax.plot(values, label=path.split(os.sep)[1] + " " + key)
ax.set_xlabel("epoch"); ax.set_ylabel("value"); ax.legend(fontsize=6)
fig.savefig("loss_all.png", dpi=100)
plt.close(fig)
"""

BLANK_SCRIPT = """
from PIL import Image
Image.new("RGB", (400, 300), "white").save("empty.png")
"""

SECTIONS = {
    "title": "Linear warm-up & 100% better_loss",
    "abstract": "We test warm-up with $\\alpha = 0.1$ and find 50% lower loss {really}.",
    "introduction": "Warm-up matters \\cite{KEY}. See Figure \\ref{fig:1}.\n\nSecond paragraph #1.",
    "related_work": "Prior work \\cite{KEY} studied this; \\input{/etc/passwd} is escaped.",
    "method": "We minimise $\\mathcal{L}(\\theta)$ over $\\theta \\in \\mathbb{R}^d$.",
    "experiments": "Five seeds, stages 1-4.",
    "results": "Best val_loss 0.25 (stage 3).",
    "conclusion": "Warm-up helps a little.",
}

REVIEW = {
    "summary": "A small study.", "strengths": ["clear"], "weaknesses": ["tiny"], "originality": 2,
    "quality": 2, "clarity": 3, "significance": 2, "questions": ["why?"], "limitations": ["one dataset"],
    "ethical_concerns": False, "soundness": 2, "presentation": 3, "contribution": 2, "overall": 4,
    "confidence": 3, "decision": "Reject",
}  # fmt: skip


def has_image(messages) -> bool:
    for m in messages:
        if isinstance(m.get("content"), list):
            for part in m["content"]:
                if part.get("type") == "image_url" and part["image_url"]["url"].startswith(
                    "data:image/png;base64,"
                ):
                    return True
    return False


def default_responder(plot_scripts=(PLOT_SCRIPT,), sections=(SECTIONS,)):
    """A responder answering every reporting role with schema-valid JSON."""
    plots = list(plot_scripts)
    secs = list(sections)

    def respond(messages, schema, ctx, role):
        if role == "plotting":
            script = plots.pop(0) if len(plots) > 1 else plots[0]
            name = "empty.png" if "empty.png" in script else "loss_all.png"
            return json.dumps({"script": script, "figures": [{"file": name, "caption": "Validation loss."}]})
        if role == "vlm_feedback":
            if not has_image(messages):
                raise AssertionError("vision call without an image part")
            if "critiques" in schema["properties"]:
                return json.dumps(
                    {
                        "critiques": [
                            {"file": "loss_curve.png", "assessment": "a curve", "issues": [], "useful": True}
                        ]
                    }
                )
            return json.dumps({"description": "loss curves", "caption_matches": False, "issues": ["no title"],
                               "suggested_caption": "Validation loss per node over 20 epochs.", "score": 6})  # fmt: skip
        if role == "citation":
            return json.dumps({"queries": ["learning rate warm-up"]})
        if role == "writeup":
            text = json.dumps(secs.pop(0) if len(secs) > 1 else secs[0])
            user = messages[-1]["content"]
            found = re.search(r"# Citation keys you may use[^\n]*\n- ([a-z0-9]+):", user)
            key = found.group(1) if found else "missing"
            return text.replace("KEY", key)
        if role == "review":
            return json.dumps(REVIEW)
        raise AssertionError(f"unexpected role {role}")

    return respond


class FakeS2:
    """A Semantic Scholar stand-in on 127.0.0.1; ``throttle`` first answers 429 with Retry-After."""

    def __init__(self, throttle: int = 0):
        self.requests: list[dict[str, Any]] = []
        self.throttle = throttle
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                outer.requests.append({"path": self.path, "key": self.headers.get("x-api-key")})
                if outer.throttle > 0:
                    outer.throttle -= 1
                    self.send_response(429)
                    self.send_header("Retry-After", "7")
                    self.end_headers()
                    return
                body = json.dumps({"total": 1, "data": [{
                    "paperId": "abc123", "title": "On {Warm-up} & Learning_Rates", "year": 2019,
                    "venue": "ICLR", "abstract": "We study warm-up.", "url": "https://example.org/p",
                    "authors": [{"name": "Liyuan Liu"}, {"name": "Jiawei Han"}]}]}).encode()  # fmt: skip
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def unreachable_url() -> str:
    """A loopback URL nothing listens on (port bound then released)."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    time.sleep(0.01)
    return f"http://127.0.0.1:{port}"


def refusing_responder(messages, schema, ctx, role):
    if role == "vlm_feedback":
        raise LLMError("Error code: 400 - image input is not supported by this model")
    return default_responder()(messages, schema, ctx, role)


def role_of(ctx) -> str:
    """The role a reporting call uses, from its context (ScriptedBackend's responder has no role)."""
    if ctx.phase == "plots":
        return "plotting"
    if ctx.phase == "vlm" or ctx.label.startswith("figure_"):
        return "vlm_feedback"
    if ctx.label == "citation_queries":
        return "citation"
    return "writeup" if ctx.phase == "writeup" else "review"


def real_client(run: Path, cfg, responder):
    """The project's LLMClient over a ScriptedBackend: prompt logs and cost.json are really written."""
    from ai_scientist.llm.factory import make_client
    from ai_scientist.llm.scripted_backend import ScriptedBackend

    backend = ScriptedBackend(lambda messages, schema, ctx: responder(messages, schema, ctx, role_of(ctx)))
    return make_client(cfg, run, None, backend=backend), backend
