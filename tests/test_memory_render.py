"""Rendering within budget (ledger, snapshot), pipeline events, digest and `logs memory`."""

from __future__ import annotations

import argparse
import json

import pytest

from ai_scientist.base.config import MemoryConfig
from ai_scientist.memory import MemoryStore, digest_markdown, events, query_for, render_memory
from ai_scientist.memory.inspection import cmd_memory
from ai_scientist.promptlog.record import PromptLogger

LEDGER_KEYS = {
    "layer",
    "action",
    "policy",
    "chars_before",
    "chars_after",
    "tokens_before",
    "tokens_after",
    "tokens_exact",
    "reason",
    "handle",
}


def make(tmp_path, **cfg):
    s = MemoryStore(tmp_path / "memory.sqlite", MemoryConfig(**cfg))
    s.fork(None, "n0001")
    return s


def test_render_shows_all_sections_with_limits(tmp_path):
    s = make(tmp_path, recall_max_events=3, core_max_chars=500)
    s.core_set("n0001", "env.threads", "8", importance=4)
    s.core_set("n0001", "env.compiler", "gcc-12")
    s.core_set("n0001", "best_lr", "0.001")
    for i in range(8):
        s.recall_append("n0001", "metric", f"run {i}: val_acc={0.5 + i / 100}")
    # 8 events > 2 x 3: the oldest range r1..r4 was consolidated automatically
    lesson = s.archival_write("n0001", "val_acc plateaus unless the learning rate decays")
    view = render_memory(
        s,
        "n0001",
        query_for(metric="val_acc plateau", plan="decay learning rate"),
        resource_memory="dataset: /data/cifar (50k images)",
    )
    t = view.text
    assert "### Core memory (" in t and "/500 chars)" in t
    assert "[env] " in t and "/500 chars" in t  # per-group chars_current/limit
    assert "- r8 [metric]" in t and "- r5 [metric]" not in t  # last recall_max_events events only
    assert "summary of r1..r4" in t  # the consolidated range cites the events it replaces
    assert lesson in t
    assert "/data/cifar" in t
    assert [e["layer"] for e in view.ledger] == [
        "memory.core",
        "memory.recall",
        "memory.archival",
        "memory.resource",
    ]
    assert all(set(e) == LEDGER_KEYS and e["action"] == "kept" for e in view.ledger)
    snap = view.snapshot
    assert snap["recall_ids"] == ["r6", "r7", "r8"]
    assert lesson in snap["archival_ids"] and {c["key"] for c in snap["core"]} == {
        "env.threads",
        "env.compiler",
        "best_lr",
    }
    json.dumps(snap)  # JSON-able


def test_recall_is_shown_oldest_first_so_a_child_extends_its_parents_text(tmp_path):
    """Issue 14 (prefix cache): a child's recall section is its parent's plus its own events (its
    own creation left out: siblings see the same bytes), and a cut still drops the oldest first."""
    s = make(tmp_path, recall_max_events=20)
    for i in range(3):
        s.recall_append("n0001", "metric", f"parent event {i}")
    parent = render_memory(s, "n0001", "").text
    s.fork("n0001", "n0002")
    s.recall_append("n0002", "error", "child event")
    child = render_memory(s, "n0002", "").text
    assert child.startswith(parent) and child.index("parent event 2") < child.index("child event")
    # a node's own creation is in its prompt's node_brief, not in its recall: two siblings see the
    # same recall, their parent's; a grandchild sees its parent's creation among its lineage's events
    for nid in ("n0003", "n0004"):
        s.fork("n0001", nid)
        events.node_created(s, nid, {"id": nid, "operation": "tune", "stage": 2, "parent_id": "n0001"})
    sibling_a, sibling_b = (render_memory(s, nid, "").text for nid in ("n0003", "n0004"))
    assert sibling_a == sibling_b == parent
    s.fork("n0003", "n0005")
    assert "node n0003 (tune, stage 2)" in render_memory(s, "n0005", "").text
    tight = MemoryStore(
        tmp_path / "tight.sqlite", MemoryConfig(recall_max_events=20, memory_budget_chars=240)
    )
    tight.fork(None, "n0001")
    for i in range(6):
        tight.recall_append("n0001", "note", f"event number {i} " + "x" * 20)
    view = render_memory(tight, "n0001", "")
    shown = [i for i in range(6) if f"event number {i} " in view.text]
    assert shown and shown == list(range(6 - len(shown), 6)) and len(shown) < 6  # the newest kept
    assert view.snapshot["recall_ids"] == sorted(view.snapshot["recall_ids"], key=lambda r: int(r[1:]))


def test_render_respects_budget_and_ledgers_every_cut(tmp_path):
    s = make(tmp_path, memory_budget_chars=600, recall_max_events=20, archival_snippet_budget_chars=300)
    for i in range(20):
        s.recall_append("n0001", "error", f"attempt {i} failed: " + "stack frame " * 20)
    for i in range(5):
        s.archival_write("n0001", f"lesson {i} about failed attempts " + "detail " * 40)
    view = render_memory(s, "n0001", "failed attempts lesson", resource_memory="r" * 2000)
    assert len(view.text) <= 600
    cut = [e for e in view.ledger if e["action"] in ("truncated", "dropped")]
    assert cut and all(e["chars_after"] < e["chars_before"] and e["reason"] for e in cut)
    assert any(e["handle"] and "r" in e["handle"] for e in cut)  # cut ids are named for expand()
    assert view.snapshot["chars"] == len(view.text)
    shown = set(view.snapshot["recall_ids"])
    assert all(f"{i} [error]" in view.text for i in shown)


def test_render_without_query_skips_archival_and_writes_nothing(tmp_path):
    s = make(tmp_path)
    s.archival_write("n0001", "something")
    before = s.db.read(lambda c: c.execute("SELECT count(*) FROM recall").fetchone()[0])
    view = render_memory(s, "n0001", "")
    assert "Archival" not in view.text and view.snapshot["archival_ids"] == []
    assert s.db.read(lambda c: c.execute("SELECT count(*) FROM recall").fetchone()[0]) == before


def test_events_are_recorded_without_noise(tmp_path):
    s = make(tmp_path)
    b = "n0001"
    assert events.node_created(s, b, {"id": "n0001", "operation": "draft", "stage": 1, "parent_id": None})
    assert events.phase_result(s, b, "n0001", "phase3", False, "compile failed")
    assert events.error(
        s, b, "n0001", "phase3", "undefined reference to `omp_get_num_threads`", cause="missing -fopenmp"
    )
    assert events.metric(s, b, "n0001", "val_acc", 0.8123, "maximize", "cifar10")
    assert events.decision(s, b, "n0001", "debug n0001", "it is the most promising buggy leaf")
    assert events.record_event(s, b, "note", "memory injected into prompt") is None
    assert events.record_event(s, b, "memory_render", "rendered 3 sections") is None
    assert (
        events.decision(s, b, "n0001", "debug n0001", "it is the most promising buggy leaf") is None
    )  # repeat
    assert events.record_event(s, b, "note", "   ") is None
    evs = s.recall_events(b)
    assert [e.kind for e in evs] == ["node_created", "phase", "error", "metric", "decision"]
    assert "cause: missing -fopenmp" in evs[2].text and "val_acc on cifar10 = 0.8123" in evs[3].text
    assert events.record_event(s, "no-such-branch", "note", "x") is None  # logged, never raised


def test_digest_markdown(tmp_path):
    s = make(tmp_path)
    s.core_set("n0001", "best_lr", "0.001", importance=5)
    events.metric(s, "n0001", "n0001", "val_acc", 0.9, "maximize")
    s.archival_write("n0001", "Lesson: cosine decay helps")
    s.fork(None, "n0002")
    s.archival_write("n0002", "Lesson from a sibling")
    md = digest_markdown(s, "n0001")
    assert md.startswith("# Memory digest for n0001")
    assert "**best_lr**: 0.001" in md and "val_acc = 0.9" in md and "cosine decay" in md
    assert "sibling" not in md and "1 further lesson" in md
    assert len(digest_markdown(s, "n0001", max_chars=200)) <= 200
    # a lineage without lessons has no lessons section, and no count of lessons it cannot show
    bare = digest_markdown(s, "n0002")
    assert "Lesson from a sibling" in bare
    s.fork(None, "n0003")
    none = digest_markdown(s, "n0003")
    assert "Lessons recorded" not in none and "further lesson" not in none


def test_logs_memory_shows_what_the_node_saw(tmp_path, capsys):
    s = make(tmp_path)
    s.core_set("n0001", "env.threads", "8")
    events.phase_result(s, "n0001", "n0001", "phase4", True, "ran in 3s")
    s.archival_write("n0001", "threads beyond 8 do not help")
    view = render_memory(s, "n0001", query_for(plan="tune threads"))
    PromptLogger(tmp_path, write_markdown=False).write(
        {
            "node_id": "n0001",
            "phase": "phase0",
            "label": "plan",
            "messages": [],
            "memory_snapshot": view.snapshot,
        }
    )
    s.close()
    assert cmd_memory(argparse.Namespace(run_dir=str(tmp_path), node="n0001", json=False)) == 0
    out = capsys.readouterr().out
    assert "env.threads = 8" in out and "phase4 succeeded" in out and "threads beyond 8" in out
    assert cmd_memory(argparse.Namespace(run_dir=str(tmp_path), node="n0001", json=True)) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["snapshot_call"] == "n0001/001" and rep["archival_seen"][0]["text"].startswith("threads")


def test_logs_memory_errors_are_usage_errors(tmp_path):
    from ai_scientist.cli.main import UsageError

    with pytest.raises(UsageError, match="no memory database"):
        cmd_memory(argparse.Namespace(run_dir=str(tmp_path), node="n0001", json=False))
    make(tmp_path).close()
    with pytest.raises(UsageError, match="no memory branch"):
        cmd_memory(argparse.Namespace(run_dir=str(tmp_path), node="n0042", json=False))


def test_disabled_memory_renders_nothing_and_applies_nothing(tmp_path):
    from ai_scientist.memory import handle_response

    s = make(tmp_path, enabled=False)
    s.core_set("n0001", "a", "1")
    view = render_memory(s, "n0001", "anything")
    assert view.text == "" and view.ledger == [] and view.snapshot["enabled"] is False
    ex = handle_response(
        s, "n0001", '<memory_update>{"op":"core_set","key":"b","value":"2"}</memory_update>ok', None
    )
    assert ex.final_text == "ok" and s.core_get("n0001", "b") is None


def test_events_outside_the_window_are_announced_not_hidden(tmp_path):
    s = make(tmp_path, recall_max_events=4)
    for i in range(10):  # 10 > 2 x 4 at the 9th: r1..r5 consolidated, r6..r10 visible
        s.recall_append("n0001", "note", f"step {i}")
    text = render_memory(s, "n0001").text
    assert "- r6: 1 older event(s) not shown" in text
    assert "summary of r1..r5 (consolidated, 5 events)" in text


def test_open_run_uses_the_run_directory(tmp_path):
    from ai_scientist.base.config import load_config

    cfg = load_config(overrides=["memory.embedding.backend=none", "memory.retrieval_k=3"])
    s = MemoryStore.open_run(tmp_path, cfg)
    assert s.path == tmp_path / "memory.sqlite" and s.path.exists()
    assert s.cfg.retrieval_k == 3 and s.embedder is None
