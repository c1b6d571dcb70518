"""SQLite connection handling for the memory store: WAL, one connection per thread, lock retries.

Callers may rely on: every write runs in ``BEGIN IMMEDIATE`` (so writers queue on the busy
handler instead of failing on a read-to-write upgrade), a busy database is retried with
backoff for up to ``lock_timeout_s`` seconds, and only after that does a
:class:`MemoryStoreError` (never a raw "database is locked") reach the caller.
Connections are per thread and per process: a forked worker never reuses its parent's.
``transaction()`` groups the writes of one thread into one transaction: after a kill -9 either
all of them are in the database or none is.
"""

from __future__ import annotations

import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from ..base.fileio import create_private

T = TypeVar("T")

SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS branches (
    id TEXT PRIMARY KEY,
    parent_id TEXT REFERENCES branches(id),
    node_id TEXT,
    depth INTEGER NOT NULL,
    core_upto INTEGER NOT NULL,     -- snapshot: ancestor core rows with seq <= this are visible
    recall_upto INTEGER NOT NULL,   -- snapshot: ancestor recall rows with id <= this are visible
    mask_upto INTEGER NOT NULL,     -- snapshot: ancestor recall masks with id <= this apply
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS core (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    branch TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    importance INTEGER NOT NULL DEFAULT 3,
    expires_at REAL,                -- NULL: never expires
    deleted INTEGER NOT NULL DEFAULT 0,   -- 1: tombstone (delete or eviction)
    evicted_to INTEGER,             -- archival id holding the full text of an evicted entry
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS core_branch_key ON core(branch, key, seq);
CREATE TABLE IF NOT EXISTS recall (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    branch TEXT NOT NULL,
    kind TEXT NOT NULL,
    text TEXT NOT NULL,
    node_id TEXT,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS recall_branch ON recall(branch, id);
-- per-branch hiding of recall events (consolidation or eviction); lineage-scoped like recall
CREATE TABLE IF NOT EXISTS recall_masks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    branch TEXT NOT NULL,
    event_id INTEGER NOT NULL,
    archival_id INTEGER,            -- consolidated_into / evicted_to
    reason TEXT NOT NULL,           -- 'consolidated' | 'evicted'
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS recall_masks_branch ON recall_masks(branch, id);
-- nodes whose outcome events (metric or error) are recorded: a resumed run records the missing ones
CREATE TABLE IF NOT EXISTS outcomes (node_id TEXT PRIMARY KEY, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS archival (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    text TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '',  -- space-separated
    source_ref TEXT,
    kind TEXT NOT NULL DEFAULT 'note',
    branch TEXT,
    created REAL NOT NULL,
    updated REAL
);
CREATE TABLE IF NOT EXISTS archival_history (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    archival_id INTEGER NOT NULL,
    text TEXT NOT NULL,
    tags TEXT NOT NULL,
    branch TEXT,
    replaced REAL NOT NULL
);
CREATE VIRTUAL TABLE IF NOT EXISTS archival_fts USING fts5(
    text, tags, content='archival', content_rowid='id',
    tokenize="unicode61 remove_diacritics 2 tokenchars '_'"
);
CREATE TRIGGER IF NOT EXISTS archival_ai AFTER INSERT ON archival BEGIN
    INSERT INTO archival_fts(rowid, text, tags) VALUES (new.id, new.text, new.tags);
END;
CREATE TRIGGER IF NOT EXISTS archival_au AFTER UPDATE ON archival BEGIN
    INSERT INTO archival_fts(archival_fts, rowid, text, tags) VALUES ('delete', old.id, old.text, old.tags);
    INSERT INTO archival_fts(rowid, text, tags) VALUES (new.id, new.text, new.tags);
END;
-- embeddings; vseq orders changes so every process can sync its faiss index incrementally
CREATE TABLE IF NOT EXISTS archival_vec (
    vseq INTEGER PRIMARY KEY AUTOINCREMENT,
    archival_id INTEGER NOT NULL UNIQUE,
    model TEXT NOT NULL,
    dim INTEGER NOT NULL,
    vec BLOB NOT NULL
);
"""

_LOCK_WORDS = ("locked", "busy")


class MemoryStoreError(Exception):
    """A memory operation failed for a reason the caller should report (message says what/where)."""


def inserted_id(cur: sqlite3.Cursor) -> int:
    """The id of the row an INSERT just made (sqlite sets it for every row it inserts)."""
    if cur.lastrowid is None:
        raise MemoryStoreError("an INSERT returned no row id")
    return cur.lastrowid


def _is_lock_error(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and any(w in str(exc).lower() for w in _LOCK_WORDS)


class Database:
    """Thread-local, process-aware SQLite connections to one memory database file."""

    def __init__(self, path: str | Path, lock_timeout_s: float = 120.0):
        self.path = Path(path)
        create_private(self.path)  # 0600: no other user reads a run's memory
        self.lock_timeout_s = lock_timeout_s
        self._local = threading.local()
        self.with_retry(self._init_schema)

    def _init_schema(self) -> None:
        conn = self.conn()
        had_outcomes = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'outcomes'"
        ).fetchone()
        had_recall = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'recall'").fetchone()
        conn.executescript(SCHEMA)
        if had_recall and not had_outcomes:
            # a database written before outcomes were marked: a node whose metric or error event
            # is on its own branch had its outcome recorded
            conn.execute(
                "INSERT OR IGNORE INTO outcomes SELECT DISTINCT node_id, created FROM recall"
                " WHERE kind IN ('metric', 'error') AND node_id = branch"
            )
        conn.execute(
            "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
        )

    def conn(self) -> sqlite3.Connection:
        """This thread's connection (opened on first use; reopened after a fork)."""
        c = getattr(self._local, "conn", None)
        if c is not None and self._local.pid == os.getpid():
            return c
        # SQLite's own busy handler sleeps 1, 2, 5, 10... ms between polls, which serialises
        # short transactions of several workers badly; with_retry polls with sub-ms jitter instead
        c = sqlite3.connect(self.path, timeout=0.0, isolation_level=None, check_same_thread=True)
        c.row_factory = sqlite3.Row
        mode = c.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise MemoryStoreError(f"{self.path}: cannot enable WAL mode (got {mode!r}); is it on NFS?")
        # NORMAL is durable across process crashes in WAL mode; only power loss can drop the tail
        c.execute("PRAGMA synchronous = NORMAL")
        self._local.conn = c
        self._local.pid = os.getpid()
        return c

    def close(self) -> None:
        c = getattr(self._local, "conn", None)
        if c is not None and self._local.pid == os.getpid():
            c.close()
        self._local.conn = None

    def with_retry(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` and retry it while the database is locked, up to ``lock_timeout_s``."""
        deadline = time.monotonic() + self.lock_timeout_s
        delay = 0.0002
        while True:
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                if not _is_lock_error(exc):
                    raise MemoryStoreError(f"{self.path}: SQLite error: {exc}") from exc
                if time.monotonic() >= deadline:
                    raise MemoryStoreError(
                        f"{self.path}: still locked after {self.lock_timeout_s:.0f}s of retries; "
                        "another process holds a write transaction (is a worker hung?)"
                    ) from exc
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 1.5, 0.02)

    def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` inside one ``BEGIN IMMEDIATE`` transaction, retried on lock; inside
        :meth:`transaction` it joins that transaction (and commits with it)."""
        if getattr(self._local, "depth", 0) and self._local.pid == os.getpid():
            return fn(self.conn())

        def attempt() -> T:
            c = self.conn()
            c.execute("BEGIN IMMEDIATE")
            try:
                result = fn(c)
                c.execute("COMMIT")
            except BaseException:
                if c.in_transaction:  # also after a failed COMMIT, so a retry can BEGIN again
                    c.execute("ROLLBACK")
                raise
            return result

        return self.with_retry(attempt)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Every write of this thread inside the block commits together at its end, or not at
        all (an exception rolls all of them back; a kill -9 leaves none). Re-entrant. Reads
        inside see the block's own writes. Other writers wait while the block runs: keep it short."""
        if getattr(self._local, "depth", 0) and self._local.pid == os.getpid():
            self._local.depth += 1
            try:
                yield
            finally:
                self._local.depth -= 1
            return
        c = self.conn()
        self.with_retry(lambda: c.execute("BEGIN IMMEDIATE"))
        self._local.depth = 1
        try:
            yield
            c.execute("COMMIT")
        except BaseException:
            if c.in_transaction:
                c.execute("ROLLBACK")
            raise
        finally:
            self._local.depth = 0

    def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` (autocommit reads see every committed write), retried on lock."""
        return self.with_retry(lambda: fn(self.conn()))
