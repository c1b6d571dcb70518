"""Node / Metric values and the append-only journal: round trips, views, torn-line recovery,
thread safety, deterministic ids."""

from __future__ import annotations

import json
import math
import threading

import pytest

from ai_scientist.treesearch import Journal, JournalError, JournalView, Metric, Node, NodeError, load
from ai_scientist.treesearch.node import IncomparableMetrics, node_sort_key


def node(nid, parent=None, stage=1, op="draft", status="good", value=None, direction="maximize", **kw):
    metric = Metric("acc", value, direction, "val") if value is not None else None
    return Node(id=nid, parent_id=parent, stage=stage, operation=op, status=status, metric=metric, **kw)


# ------------------------------------------------------------------ Metric --


def test_metric_comparison_respects_direction():
    assert Metric("acc", 0.9).better_than(Metric("acc", 0.8))
    assert not Metric("acc", 0.8).better_than(Metric("acc", 0.9))
    assert Metric("loss", 0.1, "minimize").better_than(Metric("loss", 0.2, "minimize"))
    assert not Metric("loss", 0.2, "minimize").better_than(Metric("loss", 0.1, "minimize"))
    # within tolerance is not "better"
    assert not Metric("acc", 0.9000001).better_than(Metric("acc", 0.9), rel_tol=1e-3)


def test_metric_never_compares_across_name_direction_or_dataset():
    with pytest.raises(IncomparableMetrics):
        Metric("acc", 0.9).better_than(Metric("loss", 0.1))
    with pytest.raises(IncomparableMetrics):
        Metric("acc", 0.9, "maximize").better_than(Metric("acc", 0.9, "minimize"))
    with pytest.raises(IncomparableMetrics):
        Metric("acc", 0.9, dataset="val").better_than(Metric("acc", 0.9, dataset="test"))


def test_invalid_metric_values_never_win():
    nan = Metric("acc", math.nan)
    assert not nan.better_than(Metric("acc", 0.1))
    assert Metric("acc", 0.1).better_than(nan)
    assert nan.score == -math.inf
    with pytest.raises(NodeError, match="direction"):
        Metric("acc", 1.0, "up")
    with pytest.raises(NodeError, match="number"):
        Metric("acc", "high")


# -------------------------------------------------------------------- Node --


def test_node_round_trip_and_contract_fields():
    n = node(
        "n0003",
        "n0001",
        stage=2,
        op="tune",
        value=0.5,
        metrics=(Metric("acc", 0.5, dataset="val"), Metric("loss", 1.2, "minimize")),
        idea="lr 0.01",
        seed=4,
        depth=1,
        tree=1,
        phases_done=("phase0", "phase1"),
        created_at=1.5,
    )
    d = n.to_dict()
    assert list(d) == [
        "id",
        "parent_id",
        "stage",
        "operation",
        "status",
        "metric",
        "metrics",
        "error",
        "summary",
        "idea",
        "seed",
        "depth",
        "tree",
        "phases_done",
        "state_op",
        "created_at",
        "finished_at",
        "incomparable",
    ]
    assert d["metric"] == {"name": "acc", "value": 0.5, "direction": "maximize", "dataset": "val"}
    back = Node.from_dict(json.loads(json.dumps(d)))
    assert back == n
    assert back.is_good and not back.is_buggy and back.is_finished and not back.in_flight


def test_node_validation_names_the_field():
    with pytest.raises(NodeError, match="n0001.*status"):
        node("n0001", status="done")
    with pytest.raises(NodeError, match="operation"):
        node("n0001", op="explore")
    with pytest.raises(NodeError, match="stage"):
        node("n0001", stage=5)
    with pytest.raises(NodeError, match="unknown field"):
        Node.from_dict({**node("n0001").to_dict(), "extra": 1})
    with pytest.raises(NodeError, match="id of a node cannot change"):
        node("n0001").with_changes(id="n0002")


def test_node_ids_sort_in_creation_order_past_9999():
    assert sorted(["n10000", "n0002", "n9999"], key=node_sort_key) == ["n0002", "n9999", "n10000"]


# ----------------------------------------------------------------- Journal --


def build(tmp_path):
    j = Journal(tmp_path / "journal.jsonl")
    a = j.new_node(stage=1, operation="draft", now=1.0)
    b = j.new_node(stage=1, operation="draft", now=1.0)
    j.update(a.id, status="buggy", error="boom")
    c = j.new_node(stage=1, operation="debug", parent_id=a.id, now=1.0)
    j.update(c.id, status="good", metric=Metric("acc", 0.7))
    j.update(b.id, status="good", metric=Metric("acc", 0.6))
    d = j.new_node(stage=1, operation="improve", parent_id=c.id, now=1.0)
    return j, (a, b, c, d)


def test_journal_views(tmp_path):
    j, (a, b, c, d) = build(tmp_path)
    assert [n.id for n in j.nodes] == ["n0001", "n0002", "n0003", "n0004"]
    assert j.next_node_id() == "n0005"
    assert [n.id for n in j.draft_nodes(1)] == ["n0001", "n0002"]
    assert [n.id for n in j.buggy_nodes(1)] == ["n0001"]
    assert [n.id for n in j.good_nodes(1)] == ["n0002", "n0003"]
    assert [n.id for n in j.children("n0001")] == ["n0003"]
    assert [n.id for n in j.leaves] == ["n0002", "n0004"]
    assert [n.id for n in j.ancestors("n0004")] == ["n0003", "n0001"]
    assert j.root_of("n0004").id == "n0001"
    assert j.get("n0004").depth == 2 and j.get("n0003").tree == 0
    assert j.debug_depth("n0003") == 1 and j.debug_depth("n0004") == 0
    assert j.best_node(1).id == "n0003"
    assert [n.id for n in j.in_flight()] == ["n0004"]
    with pytest.raises(KeyError, match="n0099"):
        j.get("n0099")


def test_journal_records_follow_the_contract(tmp_path):
    build(tmp_path)
    lines = (tmp_path / "journal.jsonl").read_text().splitlines()
    recs = [json.loads(x) for x in lines]
    assert [r["seq"] for r in recs] == list(range(1, 8))
    assert {tuple(r) for r in recs} == {("seq", "ts", "type", "node")}
    assert [r["type"] for r in recs][:3] == ["node_created", "node_created", "node_updated"]


def test_load_rebuilds_the_latest_state(tmp_path):
    j, _ = build(tmp_path)
    again = load(tmp_path / "journal.jsonl")
    assert [n.to_dict() for n in again.nodes] == [n.to_dict() for n in j.nodes]
    assert again.last_seq == j.last_seq == 7
    assert again.recovered is None
    again.new_node(stage=1, operation="draft")  # continues numbering and seq
    assert again.last_seq == 8 and again.nodes[-1].id == "n0005"
    with pytest.raises(FileNotFoundError, match="no journal"):
        load(tmp_path / "missing.jsonl")


@pytest.mark.parametrize("tail", [b'{"seq": 8, "ts": 1.0, "type": "node_upd', b'{"seq": 8, "ts"\x00\x00\n'])
def test_torn_last_line_is_dropped_and_appends_continue(tmp_path, tail):
    j, _ = build(tmp_path)
    path = tmp_path / "journal.jsonl"
    good_size = path.stat().st_size
    with path.open("ab") as fh:
        fh.write(tail)
    again = Journal(path)
    assert again.recovered is not None and again.recovered.bytes_dropped == len(tail)
    assert again.recovered.line == 8
    assert path.stat().st_size == good_size  # truncated, so the next append starts a fresh line
    assert [n.to_dict() for n in again.nodes] == [n.to_dict() for n in j.nodes]
    again.update("n0004", status="good", metric=Metric("acc", 0.9))
    third = load(path)
    assert third.get("n0004").metric.value == 0.9 and third.recovered is None


def test_damage_before_the_last_line_is_an_error(tmp_path):
    build(tmp_path)
    path = tmp_path / "journal.jsonl"
    lines = path.read_bytes().split(b"\n")
    lines[2] = b"{garbage"
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(JournalError, match=r"journal.jsonl:3: unreadable"):
        load(path)


def test_inconsistent_writes_are_refused(tmp_path):
    j, _ = build(tmp_path)
    with pytest.raises(JournalError, match="out of order"):
        j.create(node("n0009"))
    with pytest.raises(JournalError, match="parent n0042"):
        j.create(node("n0005", parent="n0042"))
    with pytest.raises(JournalError, match="never created"):
        j.put(node("n0077"))
    with pytest.raises(JournalError, match="parent_id is fixed at creation"):
        j.put(j.get("n0004").with_changes(parent_id="n0002"))
    assert len(load(tmp_path / "journal.jsonl")) == 4  # nothing refused reached the file


def test_concurrent_writers_get_distinct_ids_and_a_consistent_file(tmp_path):
    path = tmp_path / "journal.jsonl"
    j = Journal(path)
    root = j.new_node(stage=1, operation="draft")
    errors = []

    def worker(w):
        try:
            for i in range(25):
                n = j.new_node(stage=1, operation="improve", parent_id=root.id, idea=f"w{w}-{i}")
                j.update(n.id, status="running")
                j.update(n.id, status="good", metric=Metric("acc", w + i / 100))
                j.snapshot().good_nodes()  # reads while others write
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(j) == 1 + 8 * 25
    ids = [n.id for n in j.nodes]
    assert ids == [f"n{i:04d}" for i in range(1, 202)]
    recs = [json.loads(x) for x in path.read_text().splitlines()]
    assert [r["seq"] for r in recs] == list(range(1, len(recs) + 1))  # file order == seq order
    again = load(path)
    assert [n.to_dict() for n in again.nodes] == [n.to_dict() for n in j.nodes]
    assert all(n.is_good for n in again.nodes[1:])
    assert len(j.children(root.id)) == 200


def test_next_node_id_is_deterministic_and_replayable(tmp_path):
    ids = []
    for run in ("a", "b"):
        j = Journal(tmp_path / f"{run}.jsonl")
        for _ in range(3):
            j.new_node(stage=1, operation="draft")
        ids.append([n.id for n in j.nodes] + [j.next_node_id()])
    assert ids[0] == ids[1] == ["n0001", "n0002", "n0003", "n0004"]
    view = JournalView([node("n0001"), node("n0002", "n0001", op="improve")])
    assert view.next_node_id() == "n0003"


def test_snapshot_does_not_change_after_writes(tmp_path):
    j, _ = build(tmp_path)
    snap = j.snapshot()
    j.update("n0004", status="buggy")
    j.new_node(stage=1, operation="draft")
    assert snap.get("n0004").status == "pending" and len(snap) == 4
    assert j.get("n0004").status == "buggy" and len(j) == 5
