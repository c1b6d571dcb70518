"""JSON-aware preview of large tool / execution outputs (seed 001, generalised).

The preview keeps the structure of the payload and is always valid JSON:

* every list longer than ``list_head + 1`` — at any depth, not only ``results`` —
  keeps its first ``list_head`` items and its LAST item, with a marker string
  between them saying how many were omitted and the total;
* strings longer than ``string_cap`` keep their first third and last two thirds
  around a marker giving the cut length (stdout/stderr put errors last);
* metadata fields (freshness, confidence, sources, status, errors, ...) keep
  more: 4x the string cap and at least 8 list items;
* a top-level ``_preview`` object records the original size, the ``handle`` of
  the full payload (prompt-log / archival id given by the caller) and the total
  length of every shortened list by its JSON path (``$.results``, ``$.a[0].b``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

METADATA_KEYS = frozenset(
    {
        "metadata", "meta", "freshness", "confidence", "sources", "source", "citations",
        "status", "error", "errors", "exit_code", "returncode", "count", "total", "id",
        "name", "title", "url", "timestamp", "version", "note", "metric", "metrics",
    }
)  # fmt: skip
_PREVIEW_NOTE = "preview of a larger JSON payload; long lists show their first items and their last item"


@dataclass(frozen=True)
class PreviewParams:
    list_head: int = 2
    string_cap: int = 500
    max_depth: int = 16


def parse_json(value: Any) -> Any | None:
    """The JSON structure of ``value`` (a dict/list, or text holding one), else None."""
    if isinstance(value, (dict, list)):
        return value
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in ("{", "["):
            try:
                parsed = json.loads(text)
            except json.JSONDecodeError:
                return None
            return parsed if isinstance(parsed, (dict, list)) else None
    return None


class _Walker:
    def __init__(self, params: PreviewParams):
        self.p = params
        self.lists: dict[str, int] = {}
        self.strings_capped = 0

    def walk(self, node: Any, path: str, meta: bool, depth: int) -> Any:
        if isinstance(node, dict):
            if depth >= self.p.max_depth and node:
                return f"{{... object with {len(node)} keys omitted ...}}"
            return {
                k: self.walk(v, f"{path}.{k}", meta or str(k).lower() in METADATA_KEYS, depth + 1)
                for k, v in node.items()
            }
        if isinstance(node, list):
            return self._list(node, path, meta, depth)
        if isinstance(node, str):
            cap = self.p.string_cap * (4 if meta else 1)
            if len(node) > cap:  # keep both ends: logs put the error last
                self.strings_capped += 1
                head = cap // 3
                return (
                    f"{node[:head]} [... {len(node) - cap} chars cut ...] {node[len(node) - (cap - head) :]}"
                )
        return node

    def _list(self, node: list[Any], path: str, meta: bool, depth: int) -> Any:
        n = len(node)
        if depth >= self.p.max_depth and n:
            self.lists[path] = n
            return [f"... {n} items omitted ({n} total) ..."]
        head = max(self.p.list_head, 8) if meta else self.p.list_head
        if n <= head + 1:
            return [self.walk(x, f"{path}[{i}]", meta, depth + 1) for i, x in enumerate(node)]
        self.lists[path] = n
        kept = [self.walk(x, f"{path}[{i}]", meta, depth + 1) for i, x in enumerate(node[:head])]
        kept.append(f"... {n - head - 1} more items omitted ({n} total) ...")
        kept.append(self.walk(node[-1], f"{path}[{n - 1}]", meta, depth + 1))
        return kept


def preview_json(data: Any, params: PreviewParams, handle: str | None = None, original_chars: int = 0) -> str:
    """A valid-JSON preview of ``data`` (a dict or list) under ``params``; see module doc."""
    walker = _Walker(params)
    body = walker.walk(data, "$", False, 0)
    meta = {
        "note": _PREVIEW_NOTE,
        "original_chars": original_chars or len(json.dumps(data, ensure_ascii=False)),
        "handle": handle,
        "list_totals": walker.lists,
        "strings_capped": walker.strings_capped,
    }
    if isinstance(body, dict) and "_preview" not in body:
        out: dict[str, Any] = {"_preview": meta, **body}
    else:
        out = {"_preview": meta, "data": body}
    return json.dumps(out, ensure_ascii=False)


def minimal_preview(data: Any, handle: str | None, original_chars: int) -> str:
    """The smallest honest preview: sizes and top-level shape only, still valid JSON."""
    shape: dict[str, Any]
    if isinstance(data, dict):
        shape = {"top_level_keys": list(data)[:20], "key_count": len(data)}
    else:
        shape = {"item_count": len(data)}
    meta = {"note": "payload too large to preview here; fetch it by handle", "original_chars": original_chars}
    return json.dumps({"_preview": {**meta, "handle": handle, **shape}}, ensure_ascii=False)


def preview_ladder(params: PreviewParams) -> list[PreviewParams]:
    """Ever smaller preview settings, tried in order until one fits a budget."""
    k, cap = params.list_head, params.string_cap
    steps = [
        params,
        replace(params, string_cap=max(20, cap // 2)),
        replace(params, list_head=min(k, 1), string_cap=max(20, cap // 4)),
        replace(params, list_head=0, string_cap=max(20, cap // 8)),
        replace(params, list_head=0, string_cap=20, max_depth=6),
        replace(params, list_head=0, string_cap=20, max_depth=3),
        replace(params, list_head=0, string_cap=20, max_depth=1),
    ]
    out: list[PreviewParams] = []
    for s in steps:
        if s not in out:
            out.append(s)
    return out
