"""``ai-scientist logs RUN memory NODE``: core / recall / archival as that node saw them.

Reads ``<run>/memory.sqlite`` (the node's branch) and the ``memory_snapshot`` of the node's
last prompt log that has one; never writes anything and never rebuilds a prompt.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.fileio import read_json
from ..base.paths import RunPaths
from ..promptlog.record import list_records

if TYPE_CHECKING:
    import argparse


def _usage_error(msg: str) -> Exception:
    from ..base.errors import UsageError

    return UsageError(msg)


def last_snapshot(run_dir: Path, node: str) -> tuple[dict[str, Any] | None, str | None]:
    """The ``memory_snapshot`` of the node's last prompt log carrying one, and that log's call id."""
    for path in reversed(list_records(run_dir, node)):
        try:
            rec = read_json(path) or {}
        except (OSError, ValueError):
            continue
        snap = rec.get("memory_snapshot")
        if snap:
            return snap, rec.get("call_id") or path.name
    return None, None


def memory_report(run_dir: str | Path, node: str) -> dict[str, Any]:
    """Everything ``logs memory`` prints, as JSON-able data."""
    from .store import MemoryStore

    run_dir = Path(run_dir)
    db = RunPaths(run_dir).memory
    if not db.exists():
        raise _usage_error(f"{db}: no memory database (was memory.enabled false for this run?)")
    store = MemoryStore(db)  # no embedder: inspection reads, it never searches by vector
    try:
        if not store.has_branch(node):
            raise _usage_error(f"node {node!r} has no memory branch in {db} (see `logs {run_dir} nodes`)")
        snap, call = last_snapshot(run_dir, node)
        seen_arch = []
        for a in (snap or {}).get("archival_ids", []):
            hit = store.archival_get(a)
            if hit is not None:
                seen_arch.append({"id": hit.id, "branch": hit.branch, "kind": hit.kind, "text": hit.text})
        return {
            "node": node,
            "lineage": store.lineage(node),
            "core": [e.__dict__ for e in store.core_entries(node)],
            "recall": [e.__dict__ for e in store.recall_events(node)],
            "consolidated": [c.__dict__ for c in store.consolidations(node)],
            "snapshot_call": call,
            "snapshot": snap,
            "archival_seen": seen_arch,
        }
    finally:
        store.db.close()


def _print_text(rep: dict[str, Any], out: Any) -> None:
    p = lambda s="": print(s, file=out)  # noqa: E731
    p(f"memory of {rep['node']}  (lineage: {' <- '.join(rep['lineage'])})")
    p("\n== core ==")
    for e in rep["core"]:
        p(f"  {e['key']} = {e['value']}  (importance {e['importance']}, written on {e['branch']})")
    if not rep["core"]:
        p("  (empty)")
    p("\n== recall ==")
    for e in rep["recall"]:
        p(f"  {e['id']} [{e['kind']}] {' '.join(e['text'].split())[:200]}")
    for c in rep["consolidated"]:
        p(f"  {c['archival_id']} {c['reason']} {c['event_ids'][0]}..{c['event_ids'][-1]}")
    if not rep["recall"] and not rep["consolidated"]:
        p("  (empty)")
    p("\n== archival (as seen in the last prompt) ==")
    if rep["snapshot"] is None:
        p("  (no prompt log of this node carries a memory_snapshot)")
    else:
        p(f"  from call {rep['snapshot_call']}, query: {rep['snapshot'].get('query', '')[:120]!r}")
        for h in rep["archival_seen"]:
            p(f"  {h['id']} ({h['kind']}, from {h['branch']}) {' '.join(h['text'].split())[:200]}")
        if not rep["archival_seen"]:
            p("  (none shown)")


def cmd_memory(args: argparse.Namespace) -> int:
    """Print the node's memory (``args.run_dir``, ``args.node``, ``args.json``); exit code 0."""
    rep = memory_report(args.run_dir, args.node)
    if getattr(args, "json", False):
        json.dump(rep, sys.stdout, indent=2, ensure_ascii=False, default=str)
        print()
    else:
        _print_text(rep, sys.stdout)
    return 0
