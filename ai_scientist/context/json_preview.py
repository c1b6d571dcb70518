"""JSON-aware preview of large tool / execution outputs (seed 001, generalised).

The preview keeps the structure of the payload and is always valid JSON:

* every list longer than ``list_head + 1`` — at any depth, not only ``results`` —
  keeps its first ``list_head`` items and its LAST item, with a marker string
  between them saying how many were omitted and the total;
* a list is never shown with no item while it has one: past ``max_depth`` it
  keeps its first item in outline (an object's keys, a list's length) and a count;
* repeated structures are shown once with a count: a list whose items are all
  equal shows one and says ``N x``; a shortened list of objects with the same keys
  names them once in its marker (``N x {keys}``);
* strings longer than ``string_cap`` are cut at the end (head kept, marker with the
  cut length), except log-like fields (stdout, stderr, traceback, log, error, ...),
  which keep their first third and last two thirds (logs put errors last);
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
# fields whose text ends with what matters (the error, the final result): cut in the middle
TAIL_KEYS = frozenset(
    {
        "stdout", "stderr", "stdout_tail", "stderr_tail", "output", "outputs", "log", "logs",
        "traceback", "error", "errors", "exception", "message",
    }
)  # fmt: skip
_PREVIEW_NOTE = (
    "preview of a larger JSON payload; long lists show their first items and their last item, "
    "repeated structures once with a count"
)


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
            except (json.JSONDecodeError, RecursionError):  # "[[[[..." deeper than Python recurses
                return None
            return parsed if isinstance(parsed, (dict, list)) else None
    return None


class _Walker:
    def __init__(self, params: PreviewParams):
        self.p = params
        self.lists: dict[str, int] = {}
        self.strings_capped = 0

    def walk(self, node: Any, path: str, meta: bool, depth: int, tail: bool = False) -> Any:
        if isinstance(node, dict):
            if depth >= self.p.max_depth and node:
                return _outline(node)
            return {
                k: self.walk(
                    v,
                    f"{path}.{k}",
                    meta or str(k).lower() in METADATA_KEYS,
                    depth + 1,
                    tail or str(k).lower() in TAIL_KEYS,
                )
                for k, v in node.items()
            }
        if isinstance(node, list):
            return self._list(node, path, meta, depth, tail)
        if isinstance(node, str):
            return self._string(node, meta, tail)
        return node

    def _string(self, node: str, meta: bool, tail: bool) -> str:
        cap = self.p.string_cap * (4 if meta else 1)
        if len(node) <= cap:
            return node
        self.strings_capped += 1
        if not tail:  # a name, a description, a value: its start says what it is
            return f"{node[:cap]} [... {len(node) - cap} more chars cut]"
        head = cap // 3  # keep both ends: logs put the error last
        return f"{node[:head]} [... {len(node) - cap} chars cut ...] {node[len(node) - (cap - head) :]}"

    def _list(self, node: list[Any], path: str, meta: bool, depth: int, tail: bool) -> Any:
        n = len(node)

        def item(i: int) -> Any:
            return self.walk(node[i], f"{path}[{i}]", meta, depth + 1, tail)

        if depth >= self.p.max_depth and n:
            # out of depth: still one item, in outline, never an empty-looking list
            self.lists[path] = n
            first = node[0]
            if isinstance(first, (dict, list)):
                shown = _outline(first)
            else:
                shown = self._string(first, meta, tail) if isinstance(first, str) else first
            return [shown] if n == 1 else [shown, f"... {n - 1} more items ({n} total) ..."]
        if n >= 2 and _all_equal(node):
            self.lists[path] = n
            return [item(0), f"... {n} x the item above: all identical ({n} total) ..."]
        head = max(self.p.list_head, 8) if meta else self.p.list_head
        if n <= head + 1:
            return [item(i) for i in range(n)]
        self.lists[path] = n
        keys = _same_keys(node)
        if keys is not None:  # a table of records: the marker gives their shape and count
            shape = ", ".join(keys[:12]) + (", ..." if len(keys) > 12 else "")
            marker = (
                f"... {n} x {{{shape}}}: {n - head - 1} more items with these keys omitted ({n} total) ..."
            )
        else:
            marker = f"... {n - head - 1} more items omitted ({n} total) ..."
        return [*(item(i) for i in range(head)), marker, item(n - 1)]


def _outline(node: dict[str, Any] | list[Any]) -> str:
    """A container past the preview's depth, in one string that still says what it holds."""
    if isinstance(node, list):
        return f"[... list of {len(node)} items ...]"
    keys = [str(k) for k in node]
    shown = ", ".join(keys[:8]) + (f", ... ({len(keys)} keys)" if len(keys) > 8 else "")
    return f"{{... object with keys {shown} ...}}"


def _all_equal(node: list[Any]) -> bool:
    first = node[0]
    if not isinstance(first, (dict, list)) and not (isinstance(first, str) and len(first) > 40):
        return False  # a run of equal numbers or short words is cheap to show and says little
    return all(x == first for x in node[1:])


def _same_keys(node: list[Any]) -> list[str] | None:
    """The keys every item shares when all items are objects with the same keys, else None."""
    if not node or not all(isinstance(x, dict) and x for x in node):
        return None
    keys = list(node[0])
    return keys if all(list(x) == keys for x in node[1:]) else None


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
