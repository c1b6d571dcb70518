"""``ai-scientist view RUN_DIR [--html FILE]``: one self-contained, offline HTML file of a run.

Every stage and node: tree per stage; each node's plan, code, outputs,
metrics, plots with the VLM's critique, every LLM call with its layer ledger, memory snapshot and
cost. The page has no external reference at all (inline CSS/JS, images as
data URLs under a size cap). Node content is untrusted LLM output, so the
data travels as JSON inside ``<script type="application/json">`` (``</``
escaped) and the page renders it with ``textContent`` only; every string is
passed through the secrets redactor first.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..base.artifacts import A, Critique, Plan, PlotsRecord, read_artifact
from ..base.fileio import atomic_write_text, read_json, read_jsonl, regular_file_inside
from ..base.paths import GRADE_FILE, PLAN_FILE, PLOTS_FILE, VLM_FILE, NodePaths, RunPaths, numbered_files
from ..base.redact import Redactor, redactor_for
from .images import image_data_url
from .runread import RunView, load_run, read_text

TEMPLATE = Path(__file__).with_name("viewer_template.html")
TEXT_CAP = 20_000
CODE_SUFFIXES = {".py", ".sh", ".txt", ".md", ".yaml", ".yml", ".cfg", ".toml"}
MAX_PLOTS_PER_NODE = 6
IMAGE_SIDE = 900
IMAGE_BUDGET = 25_000_000  # total bytes of inlined images; past it images are listed, not shown
# Prompt text inlined for the LLM calls of the whole page. A large run (thousands of calls with
# long prompts) would otherwise make a page of hundreds of MB: the per-message cap shrinks so the
# calls share this budget, never below MIN_MESSAGE_CAP. The full text stays one click away in the
# linked prompt log.
TEXT_BUDGET = 24_000_000
MIN_MESSAGE_CAP = 1_500
MESSAGES_PER_CALL = 3  # system, user, answer: what one call usually inlines


class _Images:
    """Inlines images as data URLs until the page's image budget is spent."""

    def __init__(self, budget: int = IMAGE_BUDGET):
        self.left = budget

    def url(self, path: Path) -> dict[str, Any]:
        try:
            url = image_data_url(path, IMAGE_SIDE)
        except OSError as exc:
            return {"name": path.name, "omitted": f"unreadable image: {exc}"}
        if len(url) > self.left:
            return {"name": path.name, "omitted": "not inlined: the page's image size cap was reached"}
        self.left -= len(url)
        return {"name": path.name, "url": url}


def _cap(text: Any, n: int = TEXT_CAP, where: str = "") -> str:
    text = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False, indent=1, default=str)
    return text if len(text) <= n else text[:n] + f"\n[... {len(text) - n} more chars not shown{where}]"


def message_cap(n_calls: int, budget: int | None = None) -> int:
    """Characters inlined per message when ``n_calls`` calls share the page's text budget."""
    budget = TEXT_BUDGET if budget is None else budget
    share = budget // max(1, n_calls * MESSAGES_PER_CALL)
    return max(MIN_MESSAGE_CAP, min(TEXT_CAP, share))


def _prompt_logs(node_dir: Path) -> list[Path]:
    return NodePaths(node_dir).prompt_log_files()


def _content(content: Any) -> str:
    """A chat message content as text (image parts become a placeholder)."""
    if isinstance(content, list):
        parts = [
            p.get("text", "") if p.get("type") == "text" else "[image]"
            for p in content
            if isinstance(p, dict)
        ]
        return "\n".join(parts)
    return str(content or "")


def _href(path: Path, page_dir: Path | None) -> str | None:
    """Relative link from the page to a run file (None when the page is elsewhere on another root)."""
    if page_dir is None:
        return None
    try:
        return Path(os.path.relpath(path.resolve(), page_dir.resolve())).as_posix()
    except ValueError:
        return None


def _calls(logs: list[Path], page_dir: Path | None = None, cap: int = TEXT_CAP) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    where = "; the full text is in the linked prompt log"
    for path in logs:
        try:
            rec = read_json(path, default={}) or {}
        except ValueError:
            out.append({"file": path.name, "error": "unreadable prompt log (invalid JSON)"})
            continue
        resp = rec.get("response") or {}
        out.append(
            {
                "file": path.name,
                "href": _href(path.with_suffix(".md") if path.with_suffix(".md").exists() else path, page_dir),
                **{k: rec.get(k) for k in ("phase", "label", "role", "model", "usage", "cost_usd", "latency_s", "error")},
                "messages": [{"role": m.get("role"), "content": _cap(_content(m.get("content")), cap, where)} for m in rec.get("messages") or []],
                "response": _cap(resp.get("raw") if isinstance(resp, dict) else resp, cap, where),
                "ledger": rec.get("ledger") or [],
                "memory_snapshot": rec.get("memory_snapshot"),
            }
        )  # fmt: skip
    return out


def _outputs(node_dir: Path) -> list[dict[str, Any]]:
    out = []
    for path in numbered_files(NodePaths(node_dir).exec):
        try:
            rec = read_json(path, default={}) or {}
        except ValueError:
            continue
        keep = ("command", "exit_code", "duration_s", "killed_by", "reason")
        out.append({"file": path.name, **{k: rec.get(k) for k in keep}, "stdout": _cap(rec.get("stdout") or "", 8000), "stderr": _cap(rec.get("stderr") or "", 8000)})  # fmt: skip
    return out


def _artifact(node_dir: Path, name: str, kind: type[A]) -> A | None:
    """A node's typed artifact through its one reader (None when missing, torn or malformed)."""
    try:
        return read_artifact(NodePaths(node_dir).file(name), kind)
    except ValueError:
        return None


def _node_json(node_dir: Path, name: str) -> dict[str, Any]:
    """A node artifact as a dict ({} when missing, torn or not an object)."""
    try:
        data = read_json(NodePaths(node_dir).file(name), default={})
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _review_shown(review: dict[str, Any]) -> dict[str, Any] | None:
    """The meta-review, or the one review when there was a single reviewer (no meta-review)."""
    if review.get("meta_review"):
        return review["meta_review"]
    reviews = review.get("reviews") or []
    return reviews[0] if len(reviews) == 1 else None


def _plan(node: dict[str, Any], node_dir: Path, calls: list[dict[str, Any]]) -> str:
    """The node's plan: ``plan.json`` (phase 0 writes it whether the plan came from its own call,
    inside the code answer, the default, or from the parent), else an older run's records."""
    plan = _artifact(node_dir, PLAN_FILE, Plan)
    if plan is not None and plan.data:
        return _cap(_plan_text(plan.to_json()))
    meta = read_json(NodePaths(node_dir).node_json, default={}) or {}
    for source in (meta, node):
        if source.get("plan"):
            return _cap(source["plan"])
    first = next((c for c in calls if c.get("phase") == "phase0"), None)
    return first["response"] if first else ""


_PLAN_SOURCES = {
    "merged": "from the code answer",
    "own": "from its planning call",
    "parent": "reused from the parent",
}


def _plan_text(plan: dict[str, Any]) -> str:
    """plan.json as readable text: where it came from, then each field."""
    source = _PLAN_SOURCES.get(str(plan.get("plan_source")), str(plan.get("plan_source") or ""))
    lines = [f"(plan {source})"] if source else []
    for k, v in plan.items():
        if k == "plan_source":
            continue
        shown = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
        lines.append(f"{k}: {shown}")
    return "\n".join(lines)


def node_view(
    view: RunView,
    node: dict[str, Any],
    logs: list[Path],
    images: _Images,
    page_dir: Path | None = None,
    cap: int = TEXT_CAP,
) -> dict[str, Any]:
    """Everything the page shows for one node; ``logs`` are its prompt-log files."""
    nd = view.node_dir(node["id"])
    ws = NodePaths(nd).workspace
    code: list[dict[str, str]] = []
    if ws.is_dir():
        for p in sorted(ws.rglob("*"))[:200]:
            # written by generated code: a symlink out (e.g. to /proc/self/environ) is not followed
            if p.suffix in CODE_SUFFIXES and len(code) < 10 and regular_file_inside(ws, p):
                code.append({"name": str(p.relative_to(ws)), "text": read_text(p, TEXT_CAP)})
    calls = _calls(logs, page_dir, cap)
    plot_rec, critique = _artifact(nd, PLOTS_FILE, PlotsRecord), _artifact(nd, VLM_FILE, Critique)
    plot_json = plot_rec.to_json() if plot_rec is not None else {}
    vlm_rec = critique.to_json() if critique is not None else {}
    grade_rec = _node_json(nd, GRADE_FILE)
    captions = {f.file: f.caption for f in plot_rec.figures} if plot_rec is not None else {}
    plots = [
        {**images.url(p), "caption": captions.get(p.name, "")}
        for p in sorted(NodePaths(nd).plots.glob("*.png"))[:MAX_PLOTS_PER_NODE]
    ]
    usage = [c.get("usage") or {} for c in calls]
    return {
        **{k: node.get(k) for k in ("id", "parent_id", "stage", "operation", "status", "metric", "error", "summary", "idea", "seed", "depth", "tree")},
        # worked but changed the stage's evaluation protocol: shown apart, never as "good"
        **({"status": "incomparable", "incomparable": node["incomparable"]} if node.get("incomparable") else {}),
        "metrics": view.metrics(node["id"]),
        "plan": _plan(node, nd, calls),
        "code": code,
        "outputs": _outputs(nd),
        "plots": plots,
        # the node's plotting step (figures rejected with the reason) and the VLM critique of its figures
        "plot_step": {k: plot_json[k] for k in ("attempts", "rejected", "error")} if plot_json else None,
        "vlm": {k: vlm_rec[k] for k in ("model", "critique", "skipped", "error") if k in vlm_rec} or None,
        # the grader's verdict (grader.dir): graded vs self-reported values, mismatches, its error
        "grade": {k: grade_rec.get(k) for k in ("graded", "self_reported", "mismatches", "tolerance", "error")} if grade_rec else None,
        "calls": calls,
        "state": read_text(NodePaths(nd).state_md, TEXT_CAP),
        "memory_snapshot": next((c["memory_snapshot"] for c in reversed(calls) if c.get("memory_snapshot")), None),
        "cost": {
            "usd": round(sum(float(c.get("cost_usd") or 0) for c in calls), 6),
            "prompt_tokens": sum(int(u.get("prompt_tokens") or 0) for u in usage),
            "completion_tokens": sum(int(u.get("completion_tokens") or 0) for u in usage),
            "calls": len(calls),
        },
    }  # fmt: skip


def build_view_data(run_dir: Path, page_dir: Path | None = None) -> dict[str, Any]:
    """The JSON the page renders (not yet redacted); links are relative to ``page_dir``."""
    view = load_run(run_dir)
    paths = RunPaths(run_dir)
    images = _Images()
    figures = (read_json(paths.figures_json, default={}) or {}).get("figures", [])
    events = list(read_jsonl(paths.events))[-300:]
    logs = {nid: _prompt_logs(view.node_dir(nid)) for nid in view.nodes}
    cap = message_cap(sum(map(len, logs.values())))
    return {
        "run": {
            "name": run_dir.resolve().name,
            "idea": read_text(paths.idea_md, TEXT_CAP),
            "cost": read_json(paths.cost, default=None),
            "events": events,
            "figures": [
                {**images.url(paths.figures / f["file"]), "caption": f.get("caption", "")} for f in figures
            ],
            "review": _review_shown(read_json(paths.review, default={}) or {}),
            "message_cap": cap,
        },
        "stages": {str(s): [n["id"] for n in nodes] for s, nodes in view.by_stage().items()},
        "nodes": {
            nid: node_view(view, node, logs[nid], images, page_dir, cap) for nid, node in view.nodes.items()
        },
    }


def script_json(data: Any) -> str:
    """JSON safe inside a <script> element: every '<' is written as \\u003c, so no tag can open or close."""
    text = json.dumps(data, ensure_ascii=False, default=str)
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def render_html(data: dict[str, Any], redactor: Redactor) -> str:
    """The page: template + redacted data."""
    page = TEMPLATE.read_text(encoding="utf-8")
    return page.replace("__RUN_DATA_JSON__", script_json(redactor.redact_obj(data)), 1)


def _redactor(run_dir: Path) -> Redactor:
    cfg_path = RunPaths(run_dir).config
    if cfg_path.exists():
        from ..base.config import ConfigError, load_config

        try:
            return redactor_for(load_config(cfg_path))
        except ConfigError:
            pass  # an unreadable saved config still gets the default redaction below
    return Redactor()


def write_view(run_dir: Path, html_path: Path | None = None) -> Path:
    """Write the page (default ``RUN_DIR/tree.html``); returns its path."""
    run_dir = Path(run_dir)
    out = Path(html_path) if html_path else RunPaths(run_dir).tree_html
    atomic_write_text(out, render_html(build_view_data(run_dir, out.parent), _redactor(run_dir)))
    return out
