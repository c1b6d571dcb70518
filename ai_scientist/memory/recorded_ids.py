"""A replay gives each memory row the id it had in the recording.

Recall and archival ids (``r12``, ``a7``) are shown in prompts, and a replay answers a prompt
only if it is byte for byte the recorded one. With several workers, the ids are handed out in
the order the writes happened: a node's own notes (``memory_update`` operations of its answers,
written by its worker thread) interleave with the other workers' by timing, so the same note
may be ``r8`` in the recording and ``r6`` in its replay, and the replay stops at that prompt.
What a node *sees* does not depend on timing (its recall window is its own lineage, written by
threads that never overlap: an ancestor finished before its child was selected), only the
numbers do. So a replay looks each new row up in the recording's ``memory.sqlite`` by what it
is (table, branch, node, kind, text, and how many such rows it already wrote) and inserts it
with the recorded id; a row the recording does not have gets the next free id as usual (the
replay is diverging anyway, and says so at the next prompt).
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

_KEYS = {  # what a row is, per table: the columns a replay writes identically
    "recall": ("branch", "node_id", "kind", "text"),
    "archival": ("branch", "kind", "text"),
}


def _where(table: str) -> str:
    return " AND ".join(f"{col} IS ?" for col in _KEYS[table])


class RecordedIds:
    """The ids of a recorded run's memory rows, looked up by content (thread-safe, read-only)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
        self._lock = threading.Lock()

    @classmethod
    def of_replay(cls, replay_dir: str | Path | None) -> RecordedIds | None:
        """The recording's ids, when ``replay_dir`` is a run with a memory database."""
        from ..base.paths import RunPaths

        if not replay_dir:
            return None
        path = RunPaths(Path(replay_dir)).memory
        return cls(path) if path.is_file() else None

    def id_for(self, c: sqlite3.Connection, table: str, key: tuple) -> int | None:
        """Inside the inserting transaction ``c``: the id the recording gave the next row ``key``
        of ``table`` (the n-th such row, n = how many this database already holds), if that id
        is still free here; else None (the next free id). Counting in ``c`` makes a retried
        transaction and a resumed replay ask for the same row again."""
        where = _where(table)
        nth = c.execute(f"SELECT count(*) FROM {table} WHERE {where}", key).fetchone()[0]  # noqa: S608
        with self._lock:
            try:
                row = self._conn.execute(
                    f"SELECT id FROM {table} WHERE {where} ORDER BY id LIMIT 1 OFFSET ?",  # noqa: S608
                    (*key, nth),
                ).fetchone()
            except sqlite3.Error:  # an older recording's schema: ids as they come
                return None
        if row is None or c.execute(f"SELECT 1 FROM {table} WHERE id = ?", (row[0],)).fetchone():  # noqa: S608
            return None
        return int(row[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()
