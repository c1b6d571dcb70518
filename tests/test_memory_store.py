"""MemoryStore: branch isolation, ancestor reads, TTL, eviction without loss, expand, redaction."""

from __future__ import annotations

import pytest

from ai_scientist.base.config import MemoryConfig
from ai_scientist.base.redact import Redactor
from ai_scientist.memory import MemoryStore


class Clock:
    def __init__(self) -> None:
        self.t = 1_000_000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(tmp_path, clock) -> MemoryStore:
    s = MemoryStore(
        tmp_path / "memory.sqlite", MemoryConfig(core_max_chars=200, recall_max_events=5), clock=clock
    )
    yield s
    s.close()


def test_siblings_never_see_each_other(store):
    p = store.fork(None, "n0001")
    store.core_set(p, "lr", "0.1")
    a, b = store.fork(p, "n0002"), store.fork(p, "n0003")
    store.core_set(a, "lr", "0.01")
    store.core_set(b, "batch", "32")
    store.recall_append(a, "error", "OOM in a")
    assert store.core_get(a, "lr").value == "0.01"
    assert store.core_get(b, "lr").value == "0.1"  # ancestor value, not the sibling's
    assert store.core_get(a, "batch") is None
    assert [e.text for e in store.recall_events(b)] == []
    assert store.core_get(p, "lr").value == "0.1"  # the parent does not see its children


def test_cousins_isolated_and_ancestor_reads(store):
    root = store.fork(None, "n1")
    store.core_set(root, "dataset", "cifar")
    store.recall_append(root, "phase", "phase0 ok")
    l1, r1 = store.fork(root, "n2"), store.fork(root, "n3")
    store.core_set(l1, "model", "resnet")
    l2, r2 = store.fork(l1, "n4"), store.fork(r1, "n5")
    store.core_set(r2, "model", "vit")
    assert store.core_get(l2, "model").value == "resnet"
    assert store.core_get(r2, "model").value == "vit"
    assert store.core_get(l2, "dataset").value == "cifar"  # grandparent read
    assert [e.text for e in store.recall_events(r2)] == ["phase0 ok"]
    assert store.lineage(l2) == ["n4", "n2", "n1", "root"]


def test_depth_50_chain_reads_and_overrides(store):
    b = store.fork(None, "d0")
    store.core_set(b, "k0", "v0")
    branches = [b]
    for i in range(1, 51):
        b = store.fork(b, f"d{i}")
        store.core_set(b, f"k{i % 5}", f"v{i}")
        store.recall_append(b, "note", f"event {i}")
        branches.append(b)
    side = store.fork(branches[25], "side")
    deep = branches[-1]
    assert len(store.lineage(deep)) == 52
    assert store.core_get(deep, "k0").value == "v50"
    assert store.core_get(deep, "k1").value == "v46"
    assert store.core_get(side, "k0").value == "v25"  # fork at depth 25 sees depth 25's state
    assert store.core_get(side, "k1").value == "v21"
    assert all(e.text != "event 26" for e in store.recall_events(side))
    assert store.recall_events(deep)[-1].text == "event 50"


def test_fork_is_a_snapshot_of_the_parent(store):
    p = store.fork(None, "p")
    store.core_set(p, "a", "1")
    c = store.fork(p, "c")
    store.core_set(p, "a", "2")  # written after the fork
    store.core_set(p, "b", "x")
    assert store.core_get(c, "a").value == "1"
    assert store.core_get(c, "b") is None


def test_delete_is_a_tombstone_on_the_branch_only(store):
    p = store.fork(None, "p")
    store.core_set(p, "a", "1")
    c1, c2 = store.fork(p, "c1"), store.fork(p, "c2")
    assert store.core_delete(c1, "a") is True
    assert store.core_get(c1, "a") is None
    assert store.core_get(c2, "a").value == "1"
    assert store.core_delete(c1, "a") is False


def test_ttl_enforced_on_read(store, clock):
    b = store.fork(None, "n1")
    store.core_set(b, "base", "kept")
    store.core_set(b, "tmp", "soon gone", ttl=60)
    c = store.fork(b, "n2")
    store.core_set(c, "base", "override", ttl=10)
    assert store.core_get(b, "tmp").value == "soon gone"
    clock.t += 11
    assert store.core_get(c, "base").value == "kept"  # the expired override no longer hides it
    clock.t += 60
    assert store.core_get(b, "tmp") is None
    assert "tmp" not in [e.key for e in store.core_entries(b)]
    with pytest.raises(ValueError):
        store.core_set(b, "x", "y", ttl=0)


def test_core_overflow_evicts_lowest_importance_then_oldest_without_loss(store):
    b = store.fork(None, "n1")
    store.core_set(b, "keep.important", "A" * 60, importance=5)
    store.core_set(b, "old.low", "B" * 60, importance=1)
    w = store.core_set(b, "new.low", "C" * 60, importance=1)  # 208 chars > 200: one low entry goes
    assert [e.key for e in w.evicted] == ["old.low"]  # lowest importance, then oldest
    w2 = store.core_set(b, "mid", "D" * 40, importance=3)
    assert [e.key for e in w2.evicted] == []
    keys = {e.key for e in store.core_entries(b)}
    assert keys == {"keep.important", "new.low", "mid"}
    assert sum(e.chars for e in store.core_entries(b)) <= 200
    full = store.expand(w.evicted[0].archival_id)
    assert "B" * 60 in full and "old.low" in full
    hit = store.archival_get(w.evicted[0].archival_id)
    assert hit.kind == "evicted_core" and hit.source_ref == "core:old.low@n1"


def test_oversized_value_goes_to_archival_whole(store):
    b = store.fork(None, "n1")
    w = store.core_set(b, "huge", "x" * 500)
    assert [e.key for e in w.evicted] == ["huge"]
    assert "x" * 500 in store.expand(w.evicted[0].archival_id)


def test_consolidate_and_expand_return_originals(store):
    b = store.fork(None, "n1")
    ids = [store.recall_append(b, "note", f"event {i} path /tmp/f{i}.txt " + "z" * 300) for i in range(4)]
    c = store.consolidate(b, ids[0], ids[2])
    assert c.event_ids == ids[:3]
    assert [e.id for e in store.recall_events(b)] == [ids[3]]
    assert store.expand(ids[1]).startswith("event 1 path /tmp/f1.txt")
    assert "/tmp/f0.txt" in store.expand(c.archival_id)
    assert [x.event_ids for x in store.consolidations(b)] == [ids[:3]]
    with pytest.raises(KeyError):
        store.expand("r999")


def test_consolidation_is_lineage_scoped(store):
    p = store.fork(None, "p")
    ids = [store.recall_append(p, "note", f"e{i}") for i in range(3)]
    a, b = store.fork(p, "a"), store.fork(p, "b")
    store.consolidate(a)
    assert store.recall_events(a) == []
    assert [e.id for e in store.recall_events(b)] == ids


def test_recall_window_auto_consolidates_nothing_lost(store):
    b = store.fork(None, "n1")
    ids = [store.recall_append(b, "metric", f"acc={i}") for i in range(12)]  # limit 5: folds at > 10
    visible = [e.id for e in store.recall_events(b)]
    folded = [i for c in store.consolidations(b) for i in c.event_ids]
    assert sorted(visible + folded, key=lambda s: int(s[1:])) == ids
    assert len(visible) <= 10 and folded


def test_recall_evict_and_search(store):
    b = store.fork(None, "n1")
    r1 = store.recall_append(b, "error", "ImportError: no module named torch")
    store.recall_append(b, "metric", "accuracy 0.91 on validation")
    assert [e.id for e in store.recall_search(b, "torch import failed")] == [r1]
    assert store.recall_evict(b, [r1]) == [r1]
    assert r1 not in [e.id for e in store.recall_events(b)]
    assert "torch" in store.expand(r1)


def test_archival_is_global_and_marked_with_its_branch(store):
    p = store.fork(None, "p")
    a, b = store.fork(p, "a"), store.fork(p, "b")
    aid = store.archival_write(a, "Lesson: lr 0.1 diverges for this transformer", tags=["lr"])
    hits = store.archival_search("lr diverges transformer", 3, branch=b)
    assert hits and hits[0].id == aid and hits[0].branch == "a"
    assert store.archival_search("lr diverges transformer", 3, branch=b, scope="lineage") == []


def test_archival_update_keeps_history(store):
    b = store.fork(None, "n1")
    aid = store.archival_write(b, "batch 64 fits in memory")
    store.archival_update(b, aid, text="batch 64 fits in memory only with fp16")
    assert store.expand(aid).endswith("fp16")
    old = store.db.read(lambda c: c.execute("SELECT text FROM archival_history").fetchall())
    assert [r[0] for r in old] == ["batch 64 fits in memory"]
    assert store.archival_search("fp16", 1)[0].id == aid


def test_every_write_is_redacted(tmp_path):
    red = Redactor(["MY_API_KEY"], {"MY_API_KEY": "supersecretvalue123"})
    s = MemoryStore(tmp_path / "m.sqlite", redactor=red)
    b = s.fork(None, "n1")
    s.core_set(b, "key", "token supersecretvalue123")
    r = s.recall_append(b, "error", "auth failed with sk-abcdefghijklmnopqrstuvwx")
    a = s.archival_write(b, "uses supersecretvalue123", tags=["supersecretvalue123"])
    dump = "\n".join(s.db.conn().iterdump())
    assert "supersecretvalue123" not in dump and "sk-abcdefghijklmnop" not in dump
    assert "[REDACTED:MY_API_KEY]" in s.core_get(b, "key").value
    assert "[REDACTED]" in s.expand(r) and "REDACTED" in s.expand(a)


def test_unknown_branch_and_bad_fork_are_clear_errors(store):
    with pytest.raises(KeyError, match="fork"):
        store.core_set("nope", "a", "b")
    with pytest.raises(KeyError, match="unknown parent"):
        store.fork("ghost", "n9")
    p = store.fork(None, "n1")
    assert store.fork(None, "n1") == p  # idempotent (resume)
    with pytest.raises(ValueError, match="already exists"):
        store.fork(store.fork(None, "n2"), "n1")


def test_reopen_sees_everything(tmp_path):
    s = MemoryStore(tmp_path / "m.sqlite")
    b = s.fork(None, "n1")
    s.core_set(b, "a", "1")
    s.close()
    s2 = MemoryStore(tmp_path / "m.sqlite")
    assert s2.core_get("n1", "a").value == "1"


def test_a_transaction_commits_its_writes_together_or_not_at_all(store):
    with store.transaction():
        b = store.fork(None, "n0001")
        store.recall_append(b, "node_created", "node n0001")
        with store.transaction():  # re-entrant: joins the outer block
            store.mark_outcome("n0001")
        assert [e.text for e in store.recall_events(b)] == ["node n0001"]  # reads see the block
    assert store.outcome_recorded("n0001")
    with pytest.raises(RuntimeError), store.transaction():
        b2 = store.fork(None, "n0002")
        store.recall_append(b2, "node_created", "node n0002")
        store.mark_outcome("n0002")
        raise RuntimeError("interrupted")
    assert not store.has_branch("n0002") and not store.outcome_recorded("n0002")
    assert [e.text for e in store.recall_events("n0001")] == ["node n0001"]
    # nothing of the rolled-back block is cached: the branch can be created again, elsewhere
    assert store.fork("n0001", "n0002") == "n0002" and store.lineage("n0002") == ["n0002", "n0001", "root"]


_KILL_INSIDE = """
import os, signal, sys
from ai_scientist.memory import MemoryStore
s = MemoryStore(sys.argv[1])
s.fork(None, "n0001")
with s.transaction():
    s.recall_append(s.fork("n0001", "n0002"), "node_created", "node n0002")
    s.recall_append("n0001", "metric", "loss = 1")
    s.mark_outcome("n0001")
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_kill_inside_a_transaction_leaves_none_of_it(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "memory.sqlite"
    res = subprocess.run([sys.executable, "-c", _KILL_INSIDE, str(path)], capture_output=True, text=True)
    assert res.returncode == -9, res.stderr
    s = MemoryStore(path)
    assert s.has_branch("n0001") and not s.has_branch("n0002")
    assert s.recall_events("n0001") == [] and s.unrecorded_outcomes(["n0001", "n0002"]) == ["n0001"]
    assert s.recall_append("n0001", "metric", "loss = 1") == "r1"  # the id the killed write had taken
    s.close()


def test_unrecorded_outcomes_and_a_database_from_before_the_marks(tmp_path):
    import sqlite3

    path = tmp_path / "memory.sqlite"
    s = MemoryStore(path)
    for nid in ("n0001", "n0002", "n0003"):
        s.fork(None, nid)
    s.recall_append("n0001", "metric", "loss = 1", "n0001")
    s.recall_append("n0002", "metric", "a note the model filed under metric", "n0001")  # not n0002's own
    s.mark_outcome("n0003")
    assert s.unrecorded_outcomes(["n0003", "n0002", "n0001", "n0009"]) == ["n0001", "n0002"]
    s.close()
    with sqlite3.connect(path) as c:  # as written before outcomes were marked
        c.execute("DROP TABLE outcomes")
    s = MemoryStore(path)  # marks the nodes whose own metric / error event is on their branch
    assert s.unrecorded_outcomes(["n0001", "n0002", "n0003"]) == ["n0002", "n0003"]
    s.close()
