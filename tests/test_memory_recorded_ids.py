"""A replay's memory rows get the ids they had in the recording (ai_scientist/memory/recorded_ids.py).

The recording is a real memory database written in one order; the replay writes the same rows
in another (as worker threads interleave differently) and must end with the same ids, a row the
recording never had gets a fresh id, and a row written twice maps to the recording's two rows.
"""

from __future__ import annotations

import sqlite3

from ai_scientist.memory.recorded_ids import RecordedIds
from ai_scientist.memory.store import MemoryStore


def _ids(path, table: str) -> dict[tuple, list[int]]:
    cols = "branch, node_id, kind, text" if table == "recall" else "branch, kind, text"
    out: dict[tuple, list[int]] = {}
    with sqlite3.connect(path) as c:
        for row in c.execute(f"SELECT id, {cols} FROM {table} ORDER BY id"):
            out.setdefault(tuple(row[1:]), []).append(row[0])
    return out


def _writes(store: MemoryStore, order: list[str]) -> None:
    for nid in order:
        store.recall_append(nid, "note", f"note by {nid}", node_id=nid)
        store.archival_write(nid, f"lesson from {nid}")
        store.recall_append(nid, "note", "same text twice", node_id=nid)


def test_a_replay_writing_in_another_order_gets_the_recorded_ids(tmp_path):
    rec = MemoryStore(tmp_path / "rec.sqlite")
    for nid in ("n1", "n2", "n3"):
        rec.fork(None, nid)
    _writes(rec, ["n1", "n2", "n3", "n1"])  # n1 writes again: the same texts a second time
    rec.close()

    rep = MemoryStore(tmp_path / "rep.sqlite", recorded_ids=RecordedIds(tmp_path / "rec.sqlite"))
    for nid in ("n1", "n2", "n3"):
        rep.fork(None, nid)
    _writes(rep, ["n3", "n1", "n2", "n1"])
    extra = rep.recall_append("n2", "note", "never recorded", node_id="n2")
    rep.close()

    for table in ("recall", "archival"):
        recorded, replayed = _ids(tmp_path / "rec.sqlite", table), _ids(tmp_path / "rep.sqlite", table)
        key = ("n2", "n2", "note", "never recorded")
        assert {k: v for k, v in replayed.items() if k != key} == recorded, table
    fresh = int(extra.lstrip("r"))
    assert fresh not in {i for ids in _ids(tmp_path / "rec.sqlite", "recall").values() for i in ids}
