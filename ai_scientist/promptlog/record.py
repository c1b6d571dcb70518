"""Prompt logs: one JSON record per attempt of an LLM call, written atomically.

Layout: ``<run>/nodes/<node_id>/prompt_logs/NNN_<phase>_<label>.json`` (+ ``.md``), numbered
and named by :mod:`ai_scientist.base.paths` (one slug rule, one numbering).
The record holds exactly the messages sent; inspection commands print from these
files and never rebuild a prompt.

One definition of a call and an attempt, used by every command: an **attempt** is one
request sent to the backend — one file, answered or failed (``error`` set), its
``call_id`` being ``<node>/<NNN>``; a **call** is one logical ``LLMClient.complete``:
its attempts (retries and the repair round included) share ``call``, the ``call_id``
of its first attempt, and number ``attempt`` 1, 2, ... ``call_counts`` counts them.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

from ..base.fileio import atomic_write_json, atomic_write_text
from ..base.paths import RunPaths, claim_numbered
from ..base.redact import Redactor

KEY_PARAMS = ("model", "temperature", "max_tokens", "schema")


def request_key(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
    """sha256 hex of canonical JSON of ``messages`` and the keyed ``params``."""
    body = {"messages": messages, "params": {k: params.get(k) for k in KEY_PARAMS}}
    canon = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()


RECORD_FIELDS = (
    "call_id",
    "call",
    "node_id",
    "stage",
    "phase",
    "label",
    "role",
    "backend",
    "model",
    "params",
    "messages",
    "response",
    "usage",
    "cost_usd",
    "latency_s",
    "attempt",
    "error",
    "ledger",
)


class PromptLogger:
    """Writes prompt-log records under a run directory; safe across threads and processes."""

    def __init__(
        self,
        run_dir: str | Path,
        redactor: Redactor | None = None,
        write_markdown: bool = True,
    ):
        self.run_dir = Path(run_dir)
        self.paths = RunPaths(run_dir)
        self.redactor = redactor or Redactor()
        self.write_markdown = write_markdown
        self._lock = threading.Lock()

    def write(self, record: dict[str, Any]) -> dict[str, Any]:
        """Redact, number and write one record; returns it with ``call_id`` and ``path`` set."""
        node_id = record.get("node_id") or "run"
        folder = self.paths.node(node_id).prompt_logs
        with self._lock:  # claim_numbered is safe alone; this keeps our own threads off its flock
            n, path = claim_numbered(folder, record.get("phase") or "", record.get("label") or "")
        rec = {k: record.get(k) for k in RECORD_FIELDS}
        rec.update({k: v for k, v in record.items() if k not in rec})
        rec["call_id"] = f"{node_id}/{n:03d}"
        rec["node_id"] = node_id
        if rec.get("call") is None:
            rec["call"] = rec["call_id"]  # the first attempt opens its call
        rec = self.redactor.redact_obj(rec)
        # compact (json's C encoder) and not fsync'd (kill -9 safe; see util.io); the .md is for reading
        atomic_write_json(path, rec, durable=False, compact=True)
        if self.write_markdown:
            from .render import render_markdown

            atomic_write_text(path.with_suffix(".md"), render_markdown(rec), durable=False)
        rec["path"] = str(path)
        return rec


def list_records(run_dir: str | Path, node_id: str) -> list[Path]:
    """The prompt-log JSON files of a node, in call order."""
    return RunPaths(run_dir).node(node_id).prompt_log_files()


def call_counts(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Calls, attempts, failed attempts, tokens and models of prompt-log records — the numbers
    ``logs inspect``, ``logs nodes`` and ``logs cost`` (cost.json) all report."""
    calls: list[str] = []
    last = ""
    for rec in records:
        # records written before ``call`` existed: attempt 1 opens a call, later ones join it
        if rec.get("call"):
            last = str(rec["call"])
        elif (rec.get("attempt") or 1) == 1 or not last:
            last = str(rec.get("call_id"))
        if last not in calls:
            calls.append(last)
    usage = [rec.get("usage") or {} for rec in records]
    return {
        "calls": len(calls),
        "attempts": len(records),
        "failed_attempts": sum(1 for rec in records if rec.get("error")),
        "prompt_tokens": sum(int(u.get("prompt_tokens") or 0) for u in usage),
        "completion_tokens": sum(int(u.get("completion_tokens") or 0) for u in usage),
        "models": sorted({str(rec.get("model")) for rec in records if rec.get("model")}),
    }


def read_records(run_dir: str | Path, node_id: str) -> list[dict[str, Any]]:
    """The prompt-log records of a node, in call order (a file claimed but never written, by a
    process killed in between, is skipped)."""
    out = []
    for path in list_records(run_dir, node_id):
        try:
            out.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return out
