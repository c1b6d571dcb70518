"""Issue 28, relay runs s7 mm1 (the compiled-C blocked-matmul idea) and s7 ln1 (the bundled
label-noise idea), a capable model answering each request alone:

- mm1 013, 014, 017, 018: the execution review found a node's timings disturbed by machine load
  (its ``measurement`` caveat), but the same node's plotting call and figure critique did not get
  it, so each rediscovered it. Now both carry the review's caveat, once, when it gave one.
- ln1 024: the stage summary's seed tables repeated the parent's unchanged metrics for every
  child. Now a metric a child measured exactly as its parent did, on its search run and on every
  seed re-run, is shown once; another child's table says it in one line.

Each test derives what the prompts must say from the run's files (review.json, the journal, the
prompt logs), never from constants of its own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pipeline_support import journal_nodes, prompt_records, record_text, start_run
from test_relay_s7_nodes import ConditionsResponder

# the caveat a load-disturbed benchmark's review gave (relay s7 mm1 012), for every other node
LOAD = (
    "The run shared the machine with other jobs (load average 3.1 on 2 cores): the timings of the "
    "larger tiles vary by up to 2x between repetitions, so the speed-up is not comparable"
)


class LoadedResponder(ConditionsResponder):
    """Every other node's review gives a measurement caveat; the rest give none. The program
    (ConditionsResponder) also reports an in-run ablation whose value does not change with the
    seed or a tuned parameter: a child measures it exactly as its parent did."""

    def _exec_review(self, text: str, ctx: Any) -> str:
        review = json.loads(super()._exec_review(text, ctx))
        review["measurement"] = LOAD if int(ctx.node_id[1:]) % 2 == 0 else ""
        return json.dumps(review)


@pytest.fixture(scope="module")
def loaded(tmp_path_factory) -> Path:
    code, run_dir, _ = start_run(tmp_path_factory.mktemp("s7_t12_load"), responder=LoadedResponder())
    assert code == 0
    return run_dir


def _calls(run: Path, kind: str) -> list[tuple[str, str]]:
    """(node id, prompt text) of every ``kind`` call ("plot" or "critique") a node made."""
    out = []
    for rec in prompt_records(run):
        phase, label = rec.get("phase") or "", rec.get("label") or ""
        if kind == "plot" and phase == "phase5_plot" and label.startswith("plot"):
            out.append((rec["node_id"], record_text(rec)))
        elif kind == "critique" and phase == "phase5_vlm":
            out.append((rec["node_id"], record_text(rec)))
    return out


def test_plotting_and_critique_carry_the_reviews_measurement_caveat_once(loaded):
    """A node's plotting call and its figure critique carry its execution review's measurement
    caveat (as review.json has it) exactly once; a node whose review gave none gets no caveat line
    (relay s7 mm1 013/014, 017/018: each call rediscovered the machine load the review had found)."""
    with_caveat = without = 0
    for kind in ("plot", "critique"):
        calls = _calls(loaded, kind)
        assert calls, kind
        for node_id, text in calls:
            review = json.loads((loaded / "nodes" / node_id / "review.json").read_text())
            said = " ".join(str(review.get("measurement") or "").split())
            line = "with this caveat on its numbers"
            if said:
                assert text.count(said) == 1, (kind, node_id)
                assert text.count(line) == 1, (kind, node_id)
                # on the caveat's own line, so that it is read as the review's, about this node
                assert any(said in ln and line in ln for ln in text.splitlines()), (kind, node_id)
                with_caveat += 1
            else:
                assert line not in text, (kind, node_id)
                without += 1
    assert with_caveat >= 2 and without >= 2, (with_caveat, without)


def _metrics(node: dict[str, Any]) -> dict[tuple[str, Any], float]:
    return {(m["name"], m.get("dataset")): m["value"] for m in node.get("metrics") or []}


def _same_on_every_seed(nodes: dict[str, dict], child: str) -> list[tuple[str, Any]]:
    """The metrics (primary apart) ``child`` measured as its parent did, on its search run and on
    each of its good seed re-runs against the parent's re-run of that SEED, read from the journal."""
    node = nodes[child]
    parent = nodes.get(node.get("parent_id") or "")
    if parent is None:
        return []

    def reruns(nid: str) -> dict[Any, dict]:
        return {
            n["seed"]: n
            for n in nodes.values()
            if n["operation"] == "seed_eval" and n["parent_id"] == nid and n["status"] == "good"
        }

    mine, theirs = reruns(child), reruns(parent["id"])
    if not mine or set(mine) - set(theirs):
        return []
    primary = (node["metric"]["name"], node["metric"].get("dataset"))
    pairs = [(_metrics(mine[s]), _metrics(theirs[s])) for s in mine]
    return [
        k
        for k, v in _metrics(node).items()
        if k != primary
        and _metrics(parent).get(k) == v
        and all(k in a and b.get(k) == a[k] for a, b in pairs)
    ]


def _tables(text: str) -> dict[str, str]:
    """Node id -> its seed table (the heading line to the blank line after it) in a prompt."""
    out = {}
    for block in text.split("\n\n"):
        at = block.find("Seed re-runs of n")
        if at >= 0:
            out[block[at + len("Seed re-runs of ") :].split(" ")[0]] = block[at:]
    return out


def test_seed_tables_show_a_parents_unchanged_metrics_once(loaded):
    """In a stage summary's seed tables, a metric two children measured exactly as their parent
    (the journal's values: search run and every SEED) is a row in one table only; every other
    child's table says in one line that it is the parent's on every seed, naming it; a metric
    that differs stays a row in each table (relay s7 ln1 024: n0002's 14 unchanged metrics twice)."""
    nodes = journal_nodes(loaded)
    checked = 0
    for rec in prompt_records(loaded):
        if rec["node_id"] != "run" or rec.get("phase") != "summary":
            continue
        tables = _tables(record_text(rec))
        by_parent: dict[str, list[str]] = {}
        for nid in tables:
            if nodes[nid].get("parent_id"):
                by_parent.setdefault(nodes[nid]["parent_id"], []).append(nid)
        for parent, children in by_parent.items():
            alike = {c: set(_same_on_every_seed(nodes, c)) for c in children}
            shared = set.intersection(*alike.values())
            if len(children) < 2 or not shared:
                continue
            for name, dataset in shared:
                rows = [
                    c
                    for c in children
                    if f"| {name} |" in tables[c] or f"| {name} [{dataset}] |" in tables[c]
                ]
                assert len(rows) == (0 if parent in tables else 1), (name, rows)
                for c in children:
                    if c in rows:
                        continue
                    line = next(ln for ln in tables[c].splitlines() if ln.startswith("+"))
                    assert f"as {parent} on every seed" in line and name in line, line
                    assert f"in {rows[0] if rows else parent}'s seed table" in line, line
                checked += 1
            for c in children:  # what a child changed is still its own row
                primary = nodes[c]["metric"]["name"]
                assert f"| {primary} " in tables[c]
                for name, _ in set(_metrics(nodes[c])) - alike[c]:
                    assert f"| {name} " in tables[c], (c, name)
    assert checked >= 1, checked
