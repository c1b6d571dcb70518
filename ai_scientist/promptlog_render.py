"""Markdown rendering of a prompt-log record: one section per message and per ledger layer."""

from __future__ import annotations

import json
from typing import Any


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if part.get("type") == "text":
                parts.append(part.get("text", ""))
            elif part.get("type") == "image_url":
                url = part.get("image_url", {}).get("url", "")
                parts.append(f"[image: {url[:40]}... ({len(url)} chars)]")
        return "\n".join(parts)
    return json.dumps(content, ensure_ascii=False)


def render_markdown(rec: dict[str, Any]) -> str:
    out = [
        f"# {rec.get('call_id')} — {rec.get('phase')} / {rec.get('label')}",
        "",
        f"- node: `{rec.get('node_id')}`  stage: `{rec.get('stage')}`  role: `{rec.get('role')}`",
        f"- backend: `{rec.get('backend')}`  model: `{rec.get('model')}`  attempt: {rec.get('attempt')}",
        f"- usage: {json.dumps(rec.get('usage'))}  cost: ${rec.get('cost_usd') or 0:.6f}"
        f"  latency: {rec.get('latency_s') or 0:.2f}s",
    ]
    if rec.get("error"):
        out.append(f"- **error**: {rec['error']}")
    ledger = rec.get("ledger") or []
    if ledger:
        out += ["", "## Ledger", "", "| layer | action | tokens before → after | chars before → after | why |",
                "|---|---|---|---|---|"]
        for e in ledger:
            out.append(
                f"| {e.get('layer')} | {e.get('action')} | {e.get('tokens_before')} → {e.get('tokens_after')}"
                f" | {e.get('chars_before')} → {e.get('chars_after')} | {e.get('reason', '')} |"
            )
    for i, msg in enumerate(rec.get("messages") or []):
        out += ["", f"## Message {i} ({msg.get('role')})", "", "````", _content_text(msg.get("content")), "````"]
    resp = rec.get("response") or {}
    out += ["", "## Response (raw)", "", "````", str(resp.get("raw", "")), "````"]
    if resp.get("context") is not None and resp.get("context") != resp.get("raw"):
        out += ["", "## Response (as later prompts see it)", "", "````", str(resp.get("context")), "````"]
    return "\n".join(out) + "\n"
