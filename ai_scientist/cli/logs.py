"""``ai-scientist logs RUN_DIR ...``: the seeds' diagnostic commands, read from the run directory.

Everything printed comes from files the run wrote — ``journal.jsonl`` (latest
record per node), ``nodes/<id>/state.md``, ``nodes/<id>/prompt_logs/*.json`` and
``cost.json``. No prompt is ever rebuilt: ``show-prompt`` prints the messages
exactly as they were sent. Every subcommand accepts ``--json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.artifacts import Plan, read_artifact
from ..base.errors import UsageError
from ..base.fileio import read_json, read_jsonl
from ..base.paths import GRADE_FILE, PLAN_FILE, RunPaths, file_number
from ..promptlog.record import call_counts, list_records, read_records
from ..promptlog.render import content_text as _content_text
from ..promptlog.render import ledger_lines, record_sections, response_lines

if TYPE_CHECKING:
    import argparse

INSPECT_TAIL_CHARS = 500


# ------------------------------------------------------------------ reading ----


def _run_dir(path: str) -> Path:
    run = Path(path)
    if not run.is_dir():
        raise UsageError(f"run directory {path!r} does not exist")
    if not RunPaths(run).journal.exists() and not RunPaths(run).nodes.is_dir():
        raise UsageError(f"{path!r} is not a run directory (no journal.jsonl and no nodes/)")
    return run


def load_nodes(run: Path) -> dict[str, dict[str, Any]]:
    """Latest journal record per node id, in creation order."""
    nodes: dict[str, dict[str, Any]] = {}
    for rec in read_jsonl(RunPaths(run).journal):
        node = rec.get("node") or {}
        if node.get("id"):
            nodes[node["id"]] = node
    return nodes


def _resolve_node(run: Path, nodes: dict[str, dict[str, Any]], node_id: str) -> str:
    if node_id in nodes or (node_id == "run" and RunPaths(run).node("run").root.is_dir()):
        return node_id
    if node_id.isdigit() and f"n{int(node_id):04d}" in nodes:
        return f"n{int(node_id):04d}"
    known = ", ".join(list(nodes)[:10]) or "none"
    raise UsageError(f"node {node_id!r} is not in {run}/journal.jsonl (known: {known})")


def _state(run: Path, node_id: str) -> str | None:
    path = RunPaths(run).node(node_id).state_md
    return path.read_text(encoding="utf-8") if path.exists() else None


def _record(run: Path, node_id: str, call: int | None) -> dict[str, Any]:
    files = list_records(run, node_id)
    if not files:
        raise UsageError(
            f"node {node_id!r} has no prompt logs under {RunPaths(run).node(node_id).prompt_logs}"
        )
    if call is None:
        path = files[-1]
    else:
        matches = [f for f in files if file_number(f) == call]
        if not matches:
            have = ", ".join(str(file_number(f)) for f in files)
            raise UsageError(f"node {node_id!r} has no call {call} (calls: {have})")
        path = matches[0]
    rec = read_json(path)
    rec.setdefault("path", str(path))
    return rec


def llm_line(counts: dict[str, Any]) -> str:
    """One line of LLM counts (see ``runlog.call_counts`` for what a call and an attempt are)."""
    models = ", ".join(counts["models"]) or "-"
    return (
        f"LLM: {counts['calls']} calls, {counts['attempts']} attempts ({counts['failed_attempts']} failed), "
        f"tokens {counts['prompt_tokens']} prompt + {counts['completion_tokens']} completion, models: {models}"
    )


def run_counts(run: Path) -> dict[str, Any]:
    """``call_counts`` over every prompt-log folder of the run (nodes and ``run``-level calls)."""
    records: list[dict[str, Any]] = []
    for node_id in RunPaths(run).node_ids():
        records += read_records(run, node_id)
    return call_counts(records)


def _metric_text(metric: dict[str, Any] | None) -> str:
    if not metric or metric.get("value") is None:
        return "-"
    arrow = {"maximize": "↑", "minimize": "↓"}.get(metric.get("direction", ""), "")
    return f"{metric.get('name', 'metric')}={metric['value']:.4g}{arrow}"


def _emit(args: argparse.Namespace, data: Any, text: str) -> int:
    if getattr(args, "json", False):
        sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


# ------------------------------------------------------------ nodes / state ----


def _children(nodes: dict[str, dict[str, Any]]) -> dict[str | None, list[str]]:
    kids: dict[str | None, list[str]] = {}
    for nid, node in nodes.items():
        parent = node.get("parent_id") if node.get("parent_id") in nodes else None
        kids.setdefault(parent, []).append(nid)
    return kids


def _status(node: dict[str, Any]) -> str:
    """The node's status as shown: ``incomparable`` for a working node that changed its stage's
    evaluation protocol (``Node.incomparable``), never ranked against the others."""
    if node.get("status") == "good" and node.get("incomparable"):
        return "incomparable"
    return str(node.get("status", "?"))


def _node_line(node: dict[str, Any]) -> str:
    return (
        f"{node['id']}  stage {node.get('stage', '?')}  {node.get('operation', '?'):<9} "
        f"{_status(node):<7} {_metric_text(node.get('metric')):<18} "
        f"state:{node.get('state_op') or '-'}"
    )


def stage_choices(run: Path) -> list[dict[str, Any]]:
    """Each ended stage's choice of its best (``state.json`` ``stages.<N>.best``): the node, how it
    was chosen and why, with the re-ranking over seeds when the stage made one."""
    try:
        state = read_json(RunPaths(run).state, default={}) or {}
    except ValueError:
        return []
    out = []
    for key, info in sorted((state.get("stages") or {}).items(), key=lambda kv: int(kv[0])):
        best = (info or {}).get("best") or {}
        out.append(
            {
                "stage": int(key),
                "node_id": best.get("node_id"),
                "method": best.get("method"),
                "reason": best.get("reason"),
                "seed_rerank": (best.get("evidence") or {}).get("seed_rerank"),
            }
        )
    return out


def _stage_lines(choices: list[dict[str, Any]]) -> list[str]:
    from ..runloop.stage_facts import rerank_lines

    lines = []
    for c in choices:
        lines.append(f"stage {c['stage']} best: {c['node_id'] or '-'} ({c['method']}: {c['reason']})")
        lines += [f"  {line}" for line in rerank_lines(c["seed_rerank"])]
    return lines


def cmd_nodes(run: Path, args: argparse.Namespace) -> int:
    nodes = load_nodes(run)
    kids = _children(nodes)
    lines: list[str] = []

    def walk(nid: str, depth: int) -> None:
        lines.append("  " * depth + ("└─ " if depth else "") + _node_line(nodes[nid]))
        for child in kids.get(nid, []):
            walk(child, depth + 1)

    for root in kids.get(None, []):
        walk(root, 0)
    good = sum(1 for n in nodes.values() if _status(n) == "good")
    other = sum(1 for n in nodes.values() if _status(n) == "incomparable")
    changed = f", {other} not comparable (changed the evaluation protocol)" if other else ""
    lines.append(f"{len(nodes)} nodes, {good} good{changed}")
    for c in stage_choices(run):  # one line each; `logs RUN stages` gives the evidence
        rerank = c["seed_rerank"] or {}
        how = f"re-ranked over seeds, over {rerank['node_id']}" if rerank.get("changed") else c["method"]
        lines.append(f"stage {c['stage']} best: {c['node_id'] or '-'} ({how})")
    lines.append(f"whole run (nodes and run-level calls) {llm_line(run_counts(run))}")
    data = [
        {**n, "children": kids.get(nid, []), "llm": call_counts(read_records(run, nid))}
        for nid, n in nodes.items()
    ]
    return _emit(args, data, "\n".join(lines))


def cmd_stages(run: Path, args: argparse.Namespace) -> int:
    """Each ended stage's best node, how it was chosen (re-ranking over seeds with its evidence),
    and the stage's nodes that changed the evaluation protocol, with why."""
    nodes = load_nodes(run)
    choices = stage_choices(run)
    for c in choices:
        c["incomparable"] = {
            nid: n["incomparable"]
            for nid, n in nodes.items()
            if n.get("stage") == c["stage"] and _status(n) == "incomparable"
        }
    lines = []
    for c in choices:
        lines += _stage_lines([c])
        lines += [f"  not comparable: {nid}: {why}" for nid, why in c["incomparable"].items()]
    if not choices:
        lines.append("no stage has ended yet (state.json has no stages)")
    return _emit(args, choices, "\n".join(lines))


def cmd_inspect(run: Path, args: argparse.Namespace, full: bool) -> int:
    nodes = load_nodes(run)
    nid = _resolve_node(run, nodes, args.node)
    node, state = nodes.get(nid, {"id": nid}), _state(run, nid)
    counts = call_counts(read_records(run, nid))
    shown = state if full or state is None else state[-INSPECT_TAIL_CHARS:]
    head = [
        _node_line(node) if "operation" in node else nid,
        f"parent: {node.get('parent_id') or '-'}  depth: {node.get('depth', '-')}",
        llm_line(counts),
    ]
    if node.get("idea"):
        head.append(f"idea: {node['idea']}")
    if node.get("error"):
        head.append(f"error: {node['error']}")
    if node.get("incomparable"):
        head.append(f"not comparable (never ranked): {node['incomparable']}")
    if node.get("summary"):
        head.append(f"summary: {node['summary']}")
    grade = _grade(run, nid)
    if grade is not None:
        head.append(_grade_line(grade))
    plan = _plan(run, nid)
    if plan is not None:
        head.append(_plan_line(plan))
    if state is None:
        head.append("state: (no state.md written for this node)")
    else:
        what = (
            "full state" if full or len(state) <= INSPECT_TAIL_CHARS else f"last {INSPECT_TAIL_CHARS} chars"
        )
        head += [f"state: {len(state)} chars ({what})", "-" * 60, shown or ""]
    data = {
        "node": node,
        "plan": plan.to_json() if plan else None,
        "state_chars": None if state is None else len(state),
        **counts,
    }
    if grade is not None:
        data["grade"] = grade
    data["state" if full else "state_tail"] = shown
    return _emit(args, data, "\n".join(head))


def _grade(run: Path, node_id: str) -> dict[str, Any] | None:
    """The grader's verdict on the node (``grade.json``), None without a grader."""
    try:
        data = read_json(RunPaths(run).node(node_id).file(GRADE_FILE))
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _grade_line(grade: dict[str, Any]) -> str:
    """One line: the graded metrics, or the grader's error, and each unconfirmed claim."""
    if grade.get("error"):
        return f"grader: failed: {str(grade['error'])[:300]}"
    graded = ", ".join(f"{m.get('name')}={m.get('value')}" for m in grade.get("graded") or [])
    claims = "; ".join(
        f"{m.get('name')} self-reported {m.get('self_reported')}, graded {m.get('graded')}"
        for m in grade.get("mismatches") or []
    )
    return f"grader: {graded}" + (f" | not confirmed: {claims}" if claims else "")


def _plan(run: Path, node_id: str) -> Plan | None:
    """The node's plan.json (its source says whence: own call, merged into the code answer, parent)."""
    try:
        return read_artifact(RunPaths(run).node(node_id).file(PLAN_FILE), Plan)
    except ValueError:
        return None


def _plan_line(plan: Plan) -> str:
    deps = plan.dependencies
    named = [("apt", deps.apt), ("pip", deps.pip), ("source", deps.source)]
    named += [(f"new ({m})", deps.new_names(m)) for m in ("pip", "apt")]
    dep_text = ", ".join(f"{k}: {' '.join(v)}" for k, v in named if v) or "none"
    return (
        f"plan ({plan.source or 'own'}): {plan.goal_summary}\n"
        f"  strategy: {plan.implementation_strategy}\n  dependencies: {dep_text}"
    )


def cmd_path(run: Path, args: argparse.Namespace) -> int:
    from ..context.state import STATE_OPS

    nodes = load_nodes(run)
    nid: str | None = _resolve_node(run, nodes, args.node)
    chain: list[dict[str, Any]] = []
    seen: set[str] = set()
    while nid and nid in nodes and nid not in seen:  # seen: a corrupt cyclic journal must not hang
        seen.add(nid)
        chain.append(nodes[nid])
        nid = nodes[nid].get("parent_id")
    chain.reverse()
    rows, lines = [], []
    for depth, node in enumerate(chain):
        op = node.get("state_op")
        declared = op is None
        op = op or STATE_OPS.get(node.get("operation", ""), "?")
        state = _state(run, node["id"])
        rows.append({**node, "state_op": op, "state_op_declared_only": declared,
                     "state_chars": None if state is None else len(state)})  # fmt: skip
        size = "-" if state is None else f"{len(state)} chars"
        note = " (declared; not in journal)" if declared else ""
        lines.append(
            f"{'  ' * depth}{node['id']}  {node.get('operation', '?'):<9} {op:<8}{note}  "
            f"{node.get('status', '?'):<7} {_metric_text(node.get('metric'))}  state {size}"
        )
    return _emit(args, rows, "\n".join(lines))


# ----------------------------------------------------------------- prompts ----


def cmd_show_prompt(run: Path, args: argparse.Namespace) -> int:
    nodes = load_nodes(run)
    nid = _resolve_node(run, nodes, args.node)
    rec = _record(run, nid, args.call)
    header = (
        f"call {rec.get('call') or rec.get('call_id')} attempt {rec.get('attempt') or 1} "
        f"(file {rec.get('call_id')})  {rec.get('phase')}/{rec.get('label')}  model {rec.get('model')}"
        f"  ({Path(rec['path']).name})"
    )
    if args.layer:
        entry = next((e for e in rec.get("ledger") or [] if e.get("layer") == args.layer), None)
        if entry is None:
            names = ", ".join(e.get("layer", "?") for e in rec.get("ledger") or []) or "none"
            raise UsageError(f"call {rec.get('call_id')} has no layer {args.layer!r} (layers: {names})")
        text = record_sections(rec).get(args.layer)
        info = (
            f"layer {args.layer}: {entry['action']} by {entry.get('policy')}  "
            f"tokens {entry.get('tokens_before')} -> {entry.get('tokens_after')}  "
            f"chars {entry.get('chars_before')} -> {entry.get('chars_after')}  ({entry.get('reason')})"
        )
        body = text if text is not None else "(not in the prompt)"
        data = {"call_id": rec.get("call_id"), "layer": args.layer, "ledger": entry, "text": text}
        return _emit(args, data, f"{header}\n{info}\n{'-' * 60}\n{body}")
    parts = [header, "", *ledger_lines(rec.get("ledger") or []), ""]
    for i, msg in enumerate(rec.get("messages") or []):
        parts.append(f"===== message {i} ({msg.get('role')}) =====")
        parts.append(_content_text(msg.get("content")))
    parts += ["", *response_lines(rec)]
    keys = ("call_id", "call", "attempt", "node_id", "phase", "label", "model", "messages", "ledger",
            "response", "usage", "error")  # fmt: skip
    data = {k: rec.get(k) for k in keys}
    return _emit(args, data, "\n".join(parts))


def diff_records(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """Layer-by-layer change from record ``a`` to record ``b`` (ledger sizes + section texts)."""
    la = {e["layer"]: e for e in a.get("ledger") or [] if e.get("action") != "dropped"}
    lb = {e["layer"]: e for e in b.get("ledger") or [] if e.get("action") != "dropped"}
    sa, sb = record_sections(a), record_sections(b)
    order = [e["layer"] for e in b.get("ledger") or []] + [e["layer"] for e in a.get("ledger") or []]
    rows = []
    for layer in dict.fromkeys(order):
        ea, eb = la.get(layer), lb.get(layer)
        if ea is None and eb is None:
            continue
        ta, tb = (ea or {}).get("tokens_after", 0), (eb or {}).get("tokens_after", 0)
        ca, cb = (ea or {}).get("chars_after", 0), (eb or {}).get("chars_after", 0)
        if ea is None:
            change = "entered"
        elif eb is None:
            change = "left"
        elif tb > ta or (tb == ta and cb > ca):
            change = "grew"
        elif tb < ta or cb < ca:
            change = "shrank"
        else:
            change = "changed" if sa.get(layer) != sb.get(layer) else "same"
        rows.append({
            "layer": layer, "change": change, "tokens_a": ta, "tokens_b": tb, "tokens_delta": tb - ta,
            "chars_a": ca, "chars_b": cb, "chars_delta": cb - ca,
            "action_a": (ea or {}).get("action"), "action_b": (eb or {}).get("action"),
        })  # fmt: skip
    return rows


def pick_pair(recs_a: list[dict[str, Any]], recs_b: list[dict[str, Any]]) -> tuple[dict, dict, str]:
    """The two records ``logs diff`` compares, and why: the latest call of B whose phase/label A
    also has, against A's latest of that phase/label (like with like); when they share none, the
    last call of each, said so."""
    latest_a = {(r.get("phase"), r.get("label")): r for r in recs_a}
    for rec in reversed(recs_b):
        other = latest_a.get((rec.get("phase"), rec.get("label")))
        if other is not None:
            return other, rec, f"the latest {rec.get('phase')}/{rec.get('label')} call of each node"
    return recs_a[-1], recs_b[-1], "the nodes share no phase/label: the last call of each (unlike prompts)"


def cmd_diff(run: Path, args: argparse.Namespace) -> int:
    nodes = load_nodes(run)
    na, nb = _resolve_node(run, nodes, args.node_a), _resolve_node(run, nodes, args.node_b)
    for nid in (na, nb):
        _record(run, nid, None)  # a node without prompt logs is a usage error
    a, b, why = pick_pair(read_records(run, na), read_records(run, nb))
    rows = diff_records(a, b)
    lines = [
        f"comparing {why}:",
        f"{a.get('call_id')} ({a.get('phase')}/{a.get('label')}) -> {b.get('call_id')} ({b.get('phase')}/{b.get('label')})",
        f"{'layer':<18} {'change':<8} {'tokens A -> B':>18} {'delta':>7} {'chars A -> B':>20}  actions",
    ]
    for r in rows:
        lines.append(
            f"{r['layer']:<18} {r['change']:<8} {r['tokens_a']:>8} -> {r['tokens_b']:<7} {r['tokens_delta']:>+7}"
            f" {r['chars_a']:>9} -> {r['chars_b']:<8}  {r['action_a'] or '-'} -> {r['action_b'] or '-'}"
        )
    data = {"a": a.get("call_id"), "b": b.get("call_id"), "compared": why, "layers": rows}
    return _emit(args, data, "\n".join(lines))


# ------------------------------------------------------------- cost, memory ----


def _flat_rows(obj: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(obj, dict):
        rows: list[tuple[str, Any]] = []
        for k, v in obj.items():
            rows += _flat_rows(v, f"{prefix}.{k}" if prefix else str(k))
        return rows
    return [(prefix, obj)]


def cmd_cost(run: Path, args: argparse.Namespace) -> int:
    cost = read_json(RunPaths(run).cost)
    if cost is None:
        raise UsageError(f"{run}/cost.json does not exist (no LLM call has been recorded yet)")
    from ..llm.cost import format_cost

    if not getattr(args, "json", False):
        return _emit(args, cost, format_cost(cost))
    lines = [f"{key:<50} {value}" for key, value in _flat_rows(cost)]
    return _emit(args, cost, "\n".join(lines) or "(empty cost.json)")


def cmd_memory(run: Path, args: argparse.Namespace) -> int:
    try:
        from ..memory.inspection import cmd_memory as memory_cmd
    except ImportError:
        raise UsageError(
            "memory inspection is not available in this build (ai_scientist.memory.inspection is missing)"
        ) from None
    return int(memory_cmd(args) or 0)


# ------------------------------------------------------------------ handler ----


def cmd_logs(args: argparse.Namespace) -> int:
    """Entry point of ``ai-scientist logs`` (see ``cli.py``); returns the exit code."""
    run = _run_dir(args.run_dir)
    what = args.logs_command
    if what == "nodes":
        return cmd_nodes(run, args)
    if what in ("inspect", "inspect-full"):
        return cmd_inspect(run, args, full=what == "inspect-full")
    if what == "path":
        return cmd_path(run, args)
    if what == "show-prompt":
        return cmd_show_prompt(run, args)
    if what == "diff":
        return cmd_diff(run, args)
    if what == "cost":
        return cmd_cost(run, args)
    if what == "stages":
        return cmd_stages(run, args)
    if what == "memory":
        return cmd_memory(run, args)
    raise UsageError(f"unknown logs command {what!r}")
