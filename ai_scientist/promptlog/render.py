"""Markdown rendering of a prompt-log record: the ledger, then one section per layer.

``render_markdown(rec)`` is written next to every prompt-log JSON. The layer
sections are cut from the logged messages themselves (by their ``## <title>``
headings, in ledger order), so the .md never shows anything that was not sent.
"""

from __future__ import annotations

import json
from typing import Any


def content_text(content: Any) -> str:
    """A message content as text; image parts become a short placeholder."""
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


def _heading(layer: str) -> str:
    try:
        from ..context.spec import LAYERS
    except ImportError:  # rendering must never fail a run
        LAYERS = {}
    return LAYERS[layer].heading if layer in LAYERS else layer.replace("_", " ").capitalize()


def record_sections(rec: dict[str, Any]) -> dict[str, str]:
    """Each present layer's text as it appears in the logged messages.

    Layers appear in ledger order inside the system and user messages, each after
    a ``## <title>`` line (the ``system`` layer opens the system message without one).
    """
    present = [e["layer"] for e in rec.get("ledger") or [] if e.get("action") != "dropped"]
    messages = rec.get("messages") or []
    out: dict[str, str] = {}
    for i, msg in enumerate(messages[:2]):
        text = content_text(msg.get("content"))
        found: list[tuple[int, str]] = []
        pos = 0
        for layer in present:
            head = f"## {_heading(layer)}\n"
            if not found and text.startswith(head):
                at = 0
            else:
                at = text.find(f"\n\n{head}", pos)
                if at == -1:
                    continue
                at += 2
            found.append((at, layer))
            pos = at + len(head)
        if i == 0 and msg.get("role") == "system" and "system" in present:
            out["system"] = text[: found[0][0]].rstrip() if found else text
        for k, (at, layer) in enumerate(found):
            end = found[k + 1][0] if k + 1 < len(found) else len(text)
            out[layer] = text[at:end].rstrip("\n")
    if "conversation" in present and len(messages) > 2:
        out["conversation"] = "\n\n".join(
            f"[{m.get('role')}] {content_text(m.get('content'))}" for m in messages[2:]
        )
    return out


def ledger_lines(ledger: list[dict[str, Any]]) -> list[str]:
    """The ledger as a table (markdown, readable in a terminal): one row per layer."""
    if not ledger:
        return ["## Ledger", "", "(no ledger: this call was not assembled from layers)"]
    return _ledger_table(ledger)


def response_lines(rec: dict[str, Any]) -> list[str]:
    """What came back for one attempt: the error, or the answer (raw, then as later prompts see
    it when that differs), with its finish reason and usage."""
    if rec.get("error"):
        return ["## Response", "", f"no answer: {rec['error']}"]
    resp = rec.get("response") or {}
    finish = resp.get("finish_reason") or "not reported"
    out = [f"## Response (raw; finish reason: {finish}; usage: {json.dumps(rec.get('usage'))})", ""]
    out += ["````", str(resp.get("raw", "")), "````"]
    if resp.get("context") is not None and resp.get("context") != resp.get("raw"):
        out += ["", "## Response (as later prompts see it)", "", "````", str(resp.get("context")), "````"]
    if rec.get("structured_error"):
        out += ["", f"the answer was not usable: {rec['structured_error']}"]
    return out


def _ledger_table(ledger: list[dict[str, Any]]) -> list[str]:
    out = [
        "## Ledger",
        "",
        "| layer | action | policy | tokens before → after | chars before → after | why |",
        "|---|---|---|---|---|---|",
    ]
    for e in ledger:
        exact = "" if e.get("tokens_exact", True) else " (est.)"
        handle = f" — full payload: `{e['handle']}`" if e.get("handle") else ""
        out.append(
            f"| {e.get('layer')} | {e.get('action')} | {e.get('policy')} "
            f"| {e.get('tokens_before')} → {e.get('tokens_after')}{exact} "
            f"| {e.get('chars_before')} → {e.get('chars_after')} | {e.get('reason', '')}{handle} |"
        )
    return out


def render_markdown(rec: dict[str, Any]) -> str:
    """The record as markdown: header, ledger table, one section per layer, raw messages, response."""
    out = [
        f"# {rec.get('call_id')} — {rec.get('phase')} / {rec.get('label')}",
        "",
        f"- node: `{rec.get('node_id')}`  stage: `{rec.get('stage')}`  role: `{rec.get('role')}`",
        f"- backend: `{rec.get('backend')}`  model: `{rec.get('model')}`  attempt: {rec.get('attempt')} of call "
        f"`{rec.get('call') or rec.get('call_id')}`",
        f"- usage: {json.dumps(rec.get('usage'))}  cost: ${rec.get('cost_usd') or 0:.6f}"
        f"  latency: {rec.get('latency_s') or 0:.2f}s",
    ]
    if rec.get("error"):
        out.append(f"- **error**: {rec['error']}")
    budget = rec.get("budget")
    if budget:  # the limit the prompt was assembled under and what was sent, images included
        out.append(
            f"- budget: {rec.get('prompt_tokens_with_images')} of {budget.get('limit')} tokens sent "
            f"(images included); limit from {budget.get('source')}"
        )
    ledger = rec.get("ledger") or []
    sections = record_sections(rec) if ledger else {}
    if ledger:
        out += ["", *_ledger_table(ledger), "", "## Layers"]
        for e in ledger:
            layer = e.get("layer")
            out += ["", f"### {layer} — {e.get('action')} ({e.get('tokens_after')} tokens)", ""]
            if layer in sections:
                out += ["````", sections[layer], "````"]
            elif layer in ("budget", "images"):  # not a section: the whole request's numbers
                out.append(f"*{e.get('reason', '')}*")
            else:
                out.append(f"*not in the prompt: {e.get('reason', '')}*")
    out += ["", "## Messages as sent"]
    for i, msg in enumerate(rec.get("messages") or []):
        out += [
            "",
            f"### Message {i} ({msg.get('role')})",
            "",
            "````",
            content_text(msg.get("content")),
            "````",
        ]
    out += ["", *response_lines(rec)]
    return "\n".join(out) + "\n"
