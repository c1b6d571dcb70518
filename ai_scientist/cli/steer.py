"""``ai-scientist steer RUN ACTION``: steer a run from the command line (the serve page's actions).

Each action writes one request into ``RUN/steer/pending/`` (runloop/steering.py); the run's
orchestrator applies it at its next safe point, or at the next ``resume`` when no process runs.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..base.errors import UsageError
from ..base.fileio import read_json
from ..base.paths import RunPaths

USAGE = {
    "pause": "start no new node; the nodes in flight finish, then the run waits for `resume`",
    "resume": "end a pause",
    "note": "a note to the model: shown in the plan, code and idea prompts of later nodes",
    "withdraw": "withdraw a note (its id: `steer RUN status`)",
    "block": "do not expand this node",
    "unblock": "expand this node again when the search picks it",
    "expand": "expand this node at the next decision",
    "approve": "pass an approval gate (default: the gate the run stopped at), then `resume`",
    "status": "what the steering events say so far, and the requests not yet applied",
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir")
    p.add_argument("action", choices=list(USAGE), help="; ".join(f"{k}: {v}" for k, v in USAGE.items()))
    p.add_argument("value", nargs="?", default=None, help="the note's text, a node id, a note id or a gate")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def cmd_steer(args: argparse.Namespace) -> int:
    from ..runloop.steering import make_request, summary, write_request

    run = Path(args.run_dir)
    if not (RunPaths(run).journal.exists() or RunPaths(run).config.exists()):
        raise UsageError(f"{run}: not a run directory (no journal.jsonl, no config.resolved.yaml)")
    if args.action == "status":
        info = summary(run)
        if args.json:
            print(json.dumps(info, indent=1))
        else:
            print(_status_text(info))
        return 0
    value = args.value
    if args.action == "approve" and value is None:
        value = (read_json(RunPaths(run).state, default={}) or {}).get("awaiting_gate")
        if not value:
            raise UsageError(
                f"{run} is not stopped at a gate: name one, e.g. `steer RUN approve stage_end:1`"
            )
    # the request field the positional value fills, per action
    key = {"note": "text", "withdraw": "note", "block": "node", "unblock": "node", "expand": "node",
           "approve": "gate"}.get(args.action)  # fmt: skip
    req = make_request(args.action, **({key: value} if key else {}), source="cli")
    path = write_request(run, req)
    if args.json:
        print(json.dumps({**req, "file": str(path)}))
    else:
        nxt = f"; now: ai-scientist resume {run}" if args.action == "approve" else ""
        print(f"{args.action} requested ({req['id']}); the run applies it at its next decision{nxt}")
    return 0


def _status_text(info: dict) -> str:
    lines = [f"paused: {'yes' if info['paused'] else 'no'}"]
    if info["awaiting_gate"]:
        lines.append(f"stopped at gate {info['awaiting_gate']} (approve, then resume)")
    lines.append("notes: " + ("none" if not info["notes"] else ""))
    lines += [f"  {n['id']}: {n['text']}" for n in info["notes"]]
    lines.append(f"not to expand: {', '.join(info['blocked']) or 'none'}")
    lines.append(f"expand next: {', '.join(info['expand_next']) or 'none'}")
    lines.append(f"approved gates: {', '.join(info['approved']) or 'none'}")
    lines.append(f"pending requests: {len(info['pending'])}")
    lines += [f"  {r['id']}: {r['action']} {r.get('text') or r.get('node') or r.get('gate') or r.get('note') or ''}"
              for r in info["pending"]]  # fmt: skip
    return "\n".join(lines)
