"""Issue 14: what the prompt logs of a whole scripted run say agrees with what was sent.

One run of the bundled example (scripted LLM, memory on, all four stages). Every expectation is
derived from the records' ``messages`` and the run's files, never from fields the test wrote:

* every call has a ledger and fits its budget (tokens of the messages, counted again);
* each layer the ledger marks as sent has its section in the messages, in ledger order (a budget
  cut never reorders), and each layer marked dropped has none; the memory ledger entries and the
  memory snapshot are there only when the memory section is;
* the stable layers (system message; the idea, the instructions and the response format) are
  byte-identical across all calls of one prompt and come before every volatile layer;
* ``logs path`` shows, for each node, whether its state really appended to or replaced its
  parent's (read from the ``state.md`` files).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pipeline_support import journal_nodes, start_run

from ai_scientist.base.config import load_config
from ai_scientist.cli.main import main
from ai_scientist.context import Budget, counter_for
from ai_scientist.context.spec import LAYERS, PROMPTS
from ai_scientist.context.tokens import messages_tokens

SENT = {"kept", "truncated", "previewed", "stripped", "appended", "replaced"}
STABLE = {"system", "domain", "environment", "task", "topic", "instructions", "response_format"}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("records")
    # no re-ranking over seeds: its choice of a stage's best (issue 30) would change the tree these
    # tests walk (children of stage-2 nodes whose recall extends their parent's)
    code, run_dir, _ = start_run(
        tmp,
        "memory.enabled=true",
        "agent.stages.stage3_max_iters=2",
        "agent.multi_seed_eval.rerank_candidates=0",
    )
    assert code == 0
    return run_dir


def _records(run_dir: Path) -> list[dict[str, Any]]:
    recs = [json.loads(p.read_text()) for p in sorted((run_dir / "nodes").glob("*/prompt_logs/*.json"))]
    assert recs
    return recs


def _content(msg: dict[str, Any]) -> str:
    content = msg.get("content")
    if isinstance(content, list):  # text and image parts (a figure critique): the text parts
        return "\n\n".join(p.get("text", "") for p in content if p.get("type") == "text")
    return str(content or "")


def _text(rec: dict[str, Any]) -> str:
    return "\n\n".join(_content(m) for m in rec["messages"])


def _layers(rec: dict[str, Any]) -> list[str]:
    """The prompt's layers in order, as its ledger lists them (a declared ``PROMPTS`` entry)."""
    layers = [e["layer"] for e in rec["ledger"] if e["layer"] in LAYERS]
    assert layers in PROMPTS.values(), (rec["call_id"], layers)
    return layers


def _heading(layer: str) -> str | None:
    return None if layer == "system" else f"## {LAYERS[layer].heading}\n"


def test_every_call_has_a_ledger_and_fits_its_budget(run_dir: Path):
    cfg = load_config(run_dir / "config.resolved.yaml")
    phases = set()
    for rec in _records(run_dir):
        assert rec["ledger"], rec["call_id"]
        counter = counter_for(rec["params"]["model"])
        limit = Budget.from_config(cfg.context).limit_for(counter)
        assert messages_tokens(rec["messages"], counter) <= limit, rec["call_id"]
        phases.add(rec["phase"])
    # (phase0 planning calls are gone with agent.merge_calls, the default: drafts and children plan
    # inside their code answer)
    assert {"phase2", "review"} <= phases, phases


def test_ledger_and_memory_snapshot_agree_with_the_messages(run_dir: Path):
    with_memory = without_memory = 0
    for rec in _records(run_dir):
        text = _text(rec)
        positions = []
        for e in rec["ledger"]:
            if e["layer"] not in LAYERS:
                continue
            heading = _heading(e["layer"])
            if heading is None:
                continue
            at = text.find(heading)
            if e["action"] in SENT:
                assert at != -1, (rec["call_id"], e["layer"], e["action"])
                positions.append(at)
            else:
                assert e["action"] == "dropped" and at == -1, (rec["call_id"], e["layer"])
        assert positions == sorted(positions), rec["call_id"]  # sections in ledger order
        memory = next((e for e in rec["ledger"] if e["layer"] == "memory"), None)
        sent = memory is not None and memory["action"] in SENT
        sub = [e for e in rec["ledger"] if e["layer"].startswith("memory.")]
        if sent:
            with_memory += 1
            assert rec.get("memory_snapshot"), rec["call_id"]
            assert sub, rec["call_id"]
            kept = [e for e in sub if e["action"] == "kept" and e["chars_after"]]
            if memory["action"] == "kept":  # the whole memory section went out: its parts did
                assert sum(e["chars_after"] for e in kept) <= memory["chars_after"]
        else:
            without_memory += 1
            assert not rec.get("memory_snapshot"), rec["call_id"]
            assert not sub, (rec["call_id"], sub)
            assert "## Memory\n" not in text
    assert with_memory and without_memory  # both kinds of call were checked


def _stable_prefix(rec: dict[str, Any]) -> str:
    """System message + the user message up to the first section after the stable layers."""
    system = next(_content(m) for m in rec["messages"] if m["role"] == "system")
    user = next(_content(m) for m in rec["messages"] if m["role"] == "user")
    order = [e["layer"] for e in rec["ledger"] if e["layer"] in LAYERS]
    volatile = [n for n in order if n not in STABLE]
    starts = []
    for e in rec["ledger"]:
        if e["layer"] in volatile and e["action"] in SENT:
            starts.append(user.find(f"\n\n## {LAYERS[e['layer']].heading}\n"))
    cut = min(starts) if starts else len(user)
    return system + "\x00" + user[:cut]


def test_stable_layers_are_byte_identical_and_come_first(run_dir: Path):
    prefixes: dict[str, set[str]] = {}
    systems = set()
    for rec in _records(run_dir):
        order = _layers(rec)
        name = f"{rec['phase']}:{'/'.join(order)}"  # one prompt of the run
        stable_at = [i for i, n in enumerate(order) if n in STABLE]
        volatile_at = [i for i, n in enumerate(order) if n not in STABLE]
        assert not volatile_at or max(stable_at) < min(volatile_at), name
        prefixes.setdefault(name, set()).add(_stable_prefix(rec))
        if "domain" in order:
            systems.add(rec["messages"][0]["content"])
    assert {"phase2", "review", "ideas"} <= {name.split(":", 1)[0] for name in prefixes}
    for name, seen in prefixes.items():
        assert len(seen) == 1, (name, len(seen))  # byte-identical across every call of the run
    assert len(systems) == 1  # every node prompt opens with the same system message


def test_logs_path_shows_what_each_state_did(run_dir: Path, capsys: pytest.CaptureFixture[str]):
    nodes = journal_nodes(run_dir)
    seen = set()
    for nid, node in nodes.items():
        parent = node.get("parent_id")
        state = run_dir / "nodes" / nid / "state.md"
        if not parent or not state.exists():
            continue
        parent_state = (run_dir / "nodes" / parent / "state.md").read_text(encoding="utf-8").rstrip()
        if not parent_state:
            continue
        did = "append" if state.read_text(encoding="utf-8").startswith(parent_state) else "replace"
        assert main(["logs", str(run_dir), "path", nid, "--json"]) == 0
        rows = json.loads(capsys.readouterr().out)
        assert rows[-1]["id"] == nid and rows[-1]["state_op"] == did, (nid, node["operation"], did)
        assert not rows[-1]["state_op_declared_only"]
        seen.add((node["status"], did))
    assert ("good", "replace") in seen and ("good", "append") in seen, seen


def _memory_span(user: str) -> tuple[int, int] | None:
    """Where the memory section of a user message starts and ends (the next layer's heading)."""
    start = user.find(f"\n\n## {LAYERS['memory'].heading}\n")
    if start < 0:
        return None
    end = user.find("\n\n## ", start + 2)
    return start, len(user) if end < 0 else end


def test_a_child_code_prompt_continues_its_parent_through_its_whole_recall(run_dir: Path):
    """Memory opens the lineage: a child's recall extends its parent's (its section starts with
    the parent's whole section), so within a stage the child's code prompt repeats its parent's
    byte for byte up to the end of the parent's recall (neither recall cut)."""
    nodes = journal_nodes(run_dir)
    first: dict[str, dict[str, Any]] = {}
    for rec in _records(run_dir):
        if rec["phase"] == "phase2" and rec["node_id"] not in first:
            first[rec["node_id"]] = rec
    extended = continued = 0
    for nid, rec in first.items():
        parent = nodes[nid].get("parent_id")
        prec = first.get(parent or "")
        if prec is None:
            continue  # a draft
        cut = {e["action"] for r in (rec, prec) for e in r["ledger"] if e["layer"] == "memory"} - {"kept"}
        puser = next(_content(m) for m in prec["messages"] if m["role"] == "user")
        user = next(_content(m) for m in rec["messages"] if m["role"] == "user")
        pspan, span = _memory_span(puser), _memory_span(user)
        if cut or pspan is None or span is None:
            continue
        assert user[span[0] :].startswith(puser[pspan[0] : pspan[1]]), (nid, parent)
        extended += 1
        seed = any(e["layer"] == "seed_code" and e["action"] in SENT for e in prec["ledger"])
        if nodes[parent]["stage"] == nodes[nid]["stage"] and not seed:  # same stage summaries
            assert user.startswith(puser[: pspan[1]]), (nid, parent)
            continued += 1
    assert extended, "no child whose recall could extend its parent's"
