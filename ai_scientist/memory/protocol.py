"""The ``<memory_update>`` protocol: parse memory operations out of an LLM response and apply them.

A response may hold one or more ``<memory_update ...>`` blocks whose body is JSON: a list of
operations, one operation, ``{"ops": [...]}``, ``{"core_set": {...}}`` or the section form
``{"core": {key: value}, "archival": [...], "recall": [...]}``. Code fences, tag attributes,
trailing prose, trailing commas and Python-style literals are tolerated.

Nothing here raises into the caller: problems come back as :class:`ParseIssue` values with the
precise location and what to do, so the caller can re-ask the model once with them.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .store import MemoryStore

OPS: dict[str, dict[str, Any]] = {
    # op name: required fields, optional fields (with expected type names)
    "core_set": {"req": {"key": str, "value": str}, "opt": {"importance": int, "ttl": float}},
    "core_get": {"req": {"key": str}, "opt": {}},
    "core_delete": {"req": {"key": str}, "opt": {}},
    "recall_append": {"req": {"text": str}, "opt": {"kind": str}},
    "recall_search": {"req": {"query": str}, "opt": {"k": int}},
    "recall_evict": {"req": {"ids": list}, "opt": {}},
    "archival_write": {"req": {"text": str}, "opt": {"tags": list, "source_ref": str}},
    "archival_search": {"req": {"query": str}, "opt": {"k": int}},
    "archival_update": {"req": {"id": str}, "opt": {"text": str, "tags": list}},
    "consolidate": {"req": {}, "opt": {"from_id": str, "to_id": str}},
    "expand": {"req": {"id": str}, "opt": {}},
}
# Bounds of each field when operations are asked for as JSON (the ``memory_update`` answer field):
# grammar-constrained decoding stops a repeating model at these instead of at max_tokens.
_FIELD_BOUNDS = {"key": 80, "value": 800, "text": 800, "query": 200, "kind": 40, "id": 20,
                 "source_ref": 200, "from_id": 20, "to_id": 20}  # fmt: skip
MAX_OPS = 8  # operations per answer
_LIST_ITEMS, _LIST_ITEM_CHARS = 10, 40  # ids / tags


def _field_schema(name: str, kind: type) -> dict[str, Any]:
    if kind is str:
        return {"type": "string", "maxLength": _FIELD_BOUNDS.get(name, 200)}
    if kind is list:
        return {
            "type": "array",
            "items": {"type": "string", "maxLength": _LIST_ITEM_CHARS},
            "maxItems": _LIST_ITEMS,
        }
    return {"type": "integer" if kind is int else "number"}


def memory_update_schema() -> dict[str, Any]:
    """JSON schema of a list of operations (every field of every op, each bounded)."""
    fields: dict[str, Any] = {}
    for spec in OPS.values():
        for name, kind in {**spec["req"], **spec["opt"]}.items():
            fields.setdefault(name, _field_schema(name, kind))
    item = {
        "type": "object",
        "properties": {"op": {"type": "string", "enum": list(OPS)}, **fields},
        "required": ["op"],
        "additionalProperties": False,
    }
    return {"type": "array", "items": item, "maxItems": MAX_OPS}


READ_OPS = frozenset({"core_get", "recall_search", "archival_search", "expand"})
ALIASES = {
    "core_update": "core_set",
    "core_write": "core_set",
    "core_put": "core_set",
    "set": "core_set",
    "core_read": "core_get",
    "get": "core_get",
    "core_remove": "core_delete",
    "delete": "core_delete",
    "recall_add": "recall_append",
    "recall_write": "recall_append",
    "recall_insert": "recall_append",
    "recall_query": "recall_search",
    "recall_remove": "recall_evict",
    "archival_insert": "archival_write",
    "archival_add": "archival_write",
    "archival_append": "archival_write",
    "archival_query": "archival_search",
    "archival_edit": "archival_update",
    "recall_consolidate": "consolidate",
    "consolidate_recall": "consolidate",
}
FIELD_ALIASES = {
    "content": "text",
    "val": "value",
    "name": "key",
    "from": "from_id",
    "to": "to_id",
    "top_k": "k",
}

_BLOCK = re.compile(r"<memory_update\b[^>]*>(.*?)(?:</memory_update\s*>|\Z)", re.S | re.I)
_BLOCK_STRIP = re.compile(
    r"(?:```[\w-]*\s*)?<memory_update\b[^>]*>.*?(?:</memory_update\s*>|\Z)(?:\s*```)?", re.S | re.I
)
_RESULTS_STRIP = re.compile(r"<memory_results\b[^>]*>.*?(?:</memory_results\s*>|\Z)", re.S | re.I)
_FENCE = re.compile(r"```[\w-]*\s*\n?(.*?)```", re.S)


@dataclass
class MemoryOp:
    op: str
    args: dict[str, Any]


@dataclass
class ParseIssue:
    """One problem: ``where`` (block/op index), ``problem`` (precise), ``hint`` (what to do)."""

    where: str
    problem: str
    hint: str = ""

    def __str__(self) -> str:
        return f"{self.where}: {self.problem}" + (f" ({self.hint})" if self.hint else "")


@dataclass
class ParseResult:
    found: bool  # a <memory_update> block was present
    ops: list[MemoryOp] = field(default_factory=list)
    issues: list[ParseIssue] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.issues

    @property
    def error(self) -> str | None:
        return "; ".join(str(i) for i in self.issues) or None


def strip_memory_blocks(text: str) -> str:
    """``text`` without any ``<memory_update>`` / ``<memory_results>`` block (and their fences)."""
    out = _RESULTS_STRIP.sub("", _BLOCK_STRIP.sub("", text or ""))
    return out.strip()


def _load_json(body: str, where: str) -> tuple[Any, ParseIssue | None]:
    body = body.strip()
    fenced = _FENCE.search(body)
    if fenced:
        body = fenced.group(1).strip()
    body = body.replace("```", "").strip()
    if not body:
        return None, ParseIssue(where, "the block is empty", "put a JSON list of operations inside it")
    starts = [i for i in (body.find("["), body.find("{")) if i >= 0]
    if not starts:
        return None, ParseIssue(
            where,
            f"no JSON list or object found (starts with {body[:30]!r})",
            'write a JSON list like [{"op": "core_set", ...}]',
        )
    body = body[min(starts) :]
    dec = json.JSONDecoder()
    try:
        return dec.raw_decode(body)[0], None  # raw_decode ignores trailing prose
    except json.JSONDecodeError as exc:
        first = exc
    repaired = re.sub(r",\s*([\]}])", r"\1", body)  # trailing commas
    try:
        return dec.raw_decode(repaired)[0], None
    except json.JSONDecodeError:
        pass
    try:  # Python-style literals: single quotes, True/None
        return ast.literal_eval(_balanced_prefix(body)), None
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        pass
    line = body.splitlines()[first.lineno - 1] if body.splitlines() else ""
    return None, ParseIssue(
        where,
        f"invalid JSON at line {first.lineno} column {first.colno}: {first.msg} near {line.strip()[:60]!r}",
        "send valid JSON: double quotes, no trailing commas, no comments",
    )


def _balanced_prefix(s: str) -> str:
    """The shortest prefix of ``s`` whose brackets balance (outside strings)."""
    depth, quote, esc = 0, "", False
    for i, ch in enumerate(s):
        if quote:  # inside a string: skip an escaped character, stop at the closing quote
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == quote:
                quote = ""
            continue
        if ch in "\"'":
            quote = ch
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
            if depth == 0:
                return s[: i + 1]
    return s


def _raw_ops(data: Any) -> list[Any]:
    if isinstance(data, list):
        return data
    if not isinstance(data, dict):
        return [data]
    for key in ("ops", "operations", "updates", "memory_update"):
        if key in data and isinstance(data[key], (list, dict)):
            return _raw_ops(data[key])
    if any(k in data for k in ("op", "action", "type")):
        return [data]
    out: list[Any] = []
    for key, val in data.items():
        name = _norm(key)
        if name == "core" and isinstance(val, dict):
            out += [{"op": "core_set", "key": k, "value": v} for k, v in val.items()]
        elif name in ("archival", "recall") and isinstance(val, list):
            verb = "archival_write" if name == "archival" else "recall_append"
            out += [dict(v, op=verb) if isinstance(v, dict) else {"op": verb, "text": v} for v in val]
        elif isinstance(val, dict):
            out.append(dict(val, op=key))
        elif isinstance(val, list) and all(isinstance(v, dict) for v in val):
            out += [dict(v, op=key) for v in val]
        else:
            out.append({"op": key, "_value": val})
    return out


def _norm(name: Any) -> str:
    n = re.sub(r"[\s.\-/:]+", "_", str(name).strip().lower())
    return ALIASES.get(n, n)


def _check_op(raw: Any, where: str) -> tuple[MemoryOp | None, ParseIssue | None]:
    if not isinstance(raw, dict):
        return None, ParseIssue(where, f"an operation must be a JSON object, got {type(raw).__name__}")
    raw = {FIELD_ALIASES.get(k, k): v for k, v in raw.items()}
    name_raw = raw.pop("op", None) or raw.pop("action", None) or raw.pop("type", None)
    if not name_raw:
        return None, ParseIssue(where, 'missing "op"', f"one of: {', '.join(OPS)}")
    name = _norm(name_raw)
    spec = OPS.get(name)
    if spec is None:
        return None, ParseIssue(where, f"unknown op {name_raw!r}", f"one of: {', '.join(OPS)}")
    if "_value" in raw:
        return None, ParseIssue(where, f"op {name} needs an object of fields, got a bare value")
    if name == "recall_evict" and "ids" not in raw and "id" in raw:
        raw["ids"] = [raw.pop("id")]
    if name == "core_get" and "keys" in raw and "key" not in raw:
        raw["key"] = raw.pop("keys")
    args: dict[str, Any] = {}
    for fname, ftype in {**spec["req"], **spec["opt"]}.items():
        if fname not in raw or raw[fname] is None:
            if fname in spec["req"]:
                return None, ParseIssue(
                    where,
                    f"op {name} is missing field {fname!r}",
                    f"fields: {', '.join(spec['req']) or '-'} (+ optional {', '.join(spec['opt']) or '-'})",
                )
            continue
        val, err = _coerce(raw[fname], ftype, name, fname)
        if err:
            return None, ParseIssue(where, err)
        args[fname] = val
    return MemoryOp(name, args), None


def _coerce(val: Any, ftype: type, op: str, fname: str) -> tuple[Any, str | None]:
    if ftype is str:
        if isinstance(val, (dict, list)):
            if fname in ("value", "text"):
                return json.dumps(val, ensure_ascii=False), None  # structured values stored as JSON
            if fname == "key" and op == "core_get" and isinstance(val, list):
                return [str(v) for v in val], None
            return None, f"op {op} field {fname!r} must be a string, got {type(val).__name__}"
        return str(val), None
    if ftype is list:
        return (list(val) if isinstance(val, (list, tuple)) else [val]), None
    try:
        num = ftype(val)
    except (TypeError, ValueError):
        return None, f"op {op} field {fname!r} must be a number, got {val!r}"
    if fname == "importance" and not 1 <= num <= 5:
        return None, f"op {op} field 'importance' must be 1..5, got {val!r}"
    if fname in ("k", "ttl") and num <= 0:
        return None, f"op {op} field {fname!r} must be > 0, got {val!r}"
    return num, None


def parse_memory_update(text: str) -> ParseResult:
    """Every operation of every ``<memory_update>`` block in ``text``, or the precise issues."""
    try:
        blocks = _BLOCK.findall(text or "")
    except Exception as exc:  # pragma: no cover - regex on str does not fail; never raise anyway
        return ParseResult(True, issues=[ParseIssue("response", f"unreadable: {exc}")])
    if not blocks:
        return ParseResult(False)
    result = ParseResult(True)
    if re.search(r"<memory_update\b[^>]*>(?:(?!</memory_update).)*\Z", text, re.S | re.I):
        result.issues.append(
            ParseIssue(
                f"block {len(blocks)}",
                "missing closing tag </memory_update>",
                "close the block before the rest of the answer",
            )
        )
    for b, body in enumerate(blocks, 1):
        where = f"block {b}"
        data, issue = _load_json(body, where)
        if issue:
            result.issues.append(issue)
            continue
        raw_ops = _raw_ops(data)
        if not raw_ops:
            result.issues.append(ParseIssue(where, "the operation list is empty"))
        for i, raw in enumerate(raw_ops, 1):
            op, issue = _check_op(raw, f"{where} op {i}")
            if issue:
                result.issues.append(issue)
            elif op is not None:
                result.ops.append(op)
    return result


# --------------------------------------------------------------------------------- applying --


@dataclass
class OpResult:
    op: str
    ok: bool
    args: dict[str, Any]
    result: Any = None
    error: str | None = None


@dataclass
class ApplyResult:
    """What one round of operations did; ``results_block()`` is the ``<memory_results>`` text."""

    results: list[OpResult]
    read_round: int
    reads_served: bool

    @property
    def reads(self) -> list[OpResult]:
        return [r for r in self.results if r.op in READ_OPS]

    @property
    def errors(self) -> list[str]:
        return [f"{r.op}: {r.error}" for r in self.results if not r.ok]

    def results_block(self) -> str:
        from ..base.templates import render

        return render("memory/results.j2", results=[_jsonable(r) for r in self.reads])

    def to_dict(self) -> dict[str, Any]:
        return {
            "read_round": self.read_round,
            "reads_served": self.reads_served,
            "results": [_jsonable(r) for r in self.results],
        }


def _jsonable(r: OpResult) -> dict[str, Any]:
    return {"op": r.op, "ok": r.ok, "args": r.args, "result": r.result, "error": r.error}


def _hits(hits: list[Any]) -> list[dict[str, Any]]:
    return [{"id": h.id, "text": h.text, "branch": h.branch, "lanes": h.lanes} for h in hits]


def _run_op(store: MemoryStore, branch: str, op: MemoryOp, node_id: str | None) -> Any:
    a = op.args
    if op.op == "core_set":
        w = store.core_set(branch, a["key"], a["value"], a.get("importance", 3), a.get("ttl"))
        return {"key": w.key, "evicted": [e.__dict__ for e in w.evicted]}
    if op.op == "core_get":
        keys = a["key"] if isinstance(a["key"], list) else [a["key"]]
        return {k: (e.value if (e := store.core_get(branch, k)) else None) for k in keys}
    if op.op == "core_delete":
        return {"deleted": store.core_delete(branch, a["key"])}
    if op.op == "recall_append":
        return {"id": store.recall_append(branch, a.get("kind", "note"), a["text"], node_id)}
    if op.op == "recall_search":
        evs = store.recall_search(branch, a["query"], a.get("k", 5))
        return [{"id": e.id, "kind": e.kind, "text": e.text} for e in evs]
    if op.op == "recall_evict":
        return {"evicted": store.recall_evict(branch, a["ids"])}
    if op.op == "archival_write":
        return {"id": store.archival_write(branch, a["text"], a.get("tags", []), a.get("source_ref"))}
    if op.op == "archival_search":
        return _hits(store.archival_search(a["query"], a.get("k", 5), branch=branch))
    if op.op == "archival_update":
        return {"id": store.archival_update(branch, a["id"], a.get("text"), a.get("tags"))}
    if op.op == "consolidate":
        c = store.consolidate(branch, a.get("from_id"), a.get("to_id"))
        return {"archival_id": c.archival_id, "replaces": c.event_ids}
    if op.op == "expand":
        return {"id": a["id"], "text": store.expand(a["id"])}
    raise ValueError(f"unknown op {op.op}")  # unreachable: parse validated the name


def apply_updates(
    store: MemoryStore,
    branch: str,
    ops: list[MemoryOp],
    max_read_rounds: int = 2,
    read_round: int = 0,
    node_id: str | None = None,
) -> ApplyResult:
    """Apply ``ops`` on ``branch`` in order. Writes always apply; reads are served only while
    ``read_round < max_read_rounds``. Each op's failure is a value in its :class:`OpResult`."""
    serve_reads = read_round < max_read_rounds
    results = []
    for op in ops:
        if op.op in READ_OPS and not serve_reads:
            msg = f"memory read rounds exhausted ({max_read_rounds}); answer with what you have"
            results.append(OpResult(op.op, False, op.args, error=msg))
            continue
        try:
            results.append(OpResult(op.op, True, op.args, _run_op(store, branch, op, node_id)))
        except Exception as exc:  # an op's failure is reported back, never raised into the node
            results.append(OpResult(op.op, False, op.args, error=f"{type(exc).__name__}: {exc}"))
    return ApplyResult(results, read_round, serve_reads and any(o.op in READ_OPS for o in ops))


@dataclass
class MemoryExchange:
    """The outcome of handling one response: the final text (memory blocks stripped), what was
    applied per turn, and how many extra LLM calls (one re-ask, read rounds) were made."""

    final_text: str
    turns: list[dict[str, Any]] = field(default_factory=list)
    extra_calls: int = 0
    errors: list[str] = field(default_factory=list)


def handle_response(
    store: MemoryStore,
    branch: str,
    response: str,
    ask: Callable[[str], Any],
    max_read_rounds: int = 2,
    node_id: str | None = None,
) -> MemoryExchange:
    """Run the protocol on ``response``; ``ask(text) -> str`` sends a follow-up user message.

    An invalid block is re-asked once with its precise error (a second invalid block applies
    its valid ops and records the rest); reads are answered in ``<memory_results>`` for at most
    ``max_read_rounds`` follow-ups. Never raises: a failing ``ask`` ends the exchange with the
    last response and the error recorded.
    """
    from ..base.templates import render

    ex = MemoryExchange(final_text=strip_memory_blocks(response))
    if not getattr(getattr(store, "cfg", None), "enabled", True):
        return ex  # memory.enabled=false: blocks are only stripped, never applied
    text, reasked, read_round = response, False, 0
    while True:
        pr = parse_memory_update(text)
        turn: dict[str, Any] = {"found": pr.found, "issues": [str(i) for i in pr.issues]}
        ex.turns.append(turn)
        if pr.issues and not reasked:
            reasked = True
            follow = render("memory/reask.j2", error=pr.error, ops=list(OPS))
        else:
            ex.errors += [str(i) for i in pr.issues]
            res = apply_updates(store, branch, pr.ops, max_read_rounds, read_round, node_id)
            turn["applied"] = res.to_dict()
            ex.errors += res.errors
            if not res.reads_served:
                break
            read_round += 1
            follow = res.results_block()
        try:
            text = str(ask(follow))
        except Exception as exc:
            ex.errors.append(f"follow-up call failed: {type(exc).__name__}: {exc}")
            break
        ex.extra_calls += 1
        ex.final_text = strip_memory_blocks(text)
    return ex


def protocol_instructions(cfg_memory: Any) -> str:
    """The protocol explanation for the model (``prompt/memory/protocol.j2``) with this config's limits."""
    from ..base.templates import render

    return render(
        "memory/protocol.j2",
        core_max_chars=cfg_memory.core_max_chars,
        max_read_rounds=cfg_memory.max_memory_read_rounds,
    )
