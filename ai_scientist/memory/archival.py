"""Archival memory: global passages, their embeddings and hybrid search (mixed into MemoryStore).

Archival is global on purpose: a lesson learnt by a failed sibling must be findable by every
later node. Each passage records the branch that wrote it (``Hit.branch``), and
``archival_search(..., scope="lineage")`` keeps only the caller's lineage when that is wanted.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from . import search as S
from .db import inserted_id
from .records import aid, parse_id

if TYPE_CHECKING:
    import sqlite3

    from .db import Database
    from .embed import Embedder
    from .recorded_ids import RecordedIds

log = logging.getLogger(__name__)

MAX_QUERY_CHARS = 4000


class ArchivalMixin:
    """Archival operations of :class:`~ai_scientist.memory.store.MemoryStore` (uses its ``db``,
    ``embedder``, ``vectors``, ``clock`` and redactor)."""

    # set by MemoryStore.__init__; declared here for the type checker (the mixin holds no state)
    db: Database
    embedder: Embedder | None
    vectors: S.VectorIndex | None
    vector_errors: list[str]
    clock: Callable[[], float]
    _dfc: S.DocFreqCache
    recorded_ids: RecordedIds | None

    if TYPE_CHECKING:  # defined by MemoryStore

        def _red(self, text: str) -> str: ...

        def lineage(self, branch: str) -> list[str]: ...

    def _insert_archival(
        self,
        c: sqlite3.Connection,
        text: str,
        tags: Sequence[str],
        source_ref: str | None,
        kind: str,
        branch: str | None,
    ) -> int:
        wanted = self._recorded_id(c, "archival", (branch, kind, text))
        return inserted_id(
            c.execute(
                "INSERT INTO archival(id, text, tags, source_ref, kind, branch, created)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (wanted, text, " ".join(tags), source_ref, kind, branch, self.clock()),
            )
        )

    def _recorded_id(self, c: sqlite3.Connection, table: str, key: tuple) -> int | None:
        """A replay: the id this row had in the recording (see :mod:`.recorded_ids`); else None."""
        return self.recorded_ids.id_for(c, table, key) if self.recorded_ids is not None else None

    def archival_write(
        self,
        branch: str | None,
        text: str,
        tags: Sequence[str] = (),
        source_ref: str | None = None,
        kind: str = "note",
    ) -> str:
        """Store a passage (global; marked with ``branch``); returns ``a<N>``."""
        text = self._red(text)
        if not text.strip():
            raise ValueError("archival text must be non-empty")
        tags = [self._red(t).strip() for t in tags if str(t).strip()]
        ref = self._red(source_ref) if source_ref else None
        a = self.db.write(lambda c: self._insert_archival(c, text, tags, ref, kind, branch))
        self._embed_ids([a])
        return aid(a)

    def archival_many(self, branch: str | None, texts: Sequence[str], kind: str = "note") -> list[str]:
        """Bulk write (one transaction, one embedding batch) — for imports and benchmarks."""
        clean = [self._red(t) for t in texts]
        ids = self.db.write(lambda c: [self._insert_archival(c, t, [], None, kind, branch) for t in clean])
        self._embed_ids(ids)
        return [aid(i) for i in ids]

    def archival_update(
        self, branch: str | None, ident: str | int, text: str | None = None, tags: Sequence[str] | None = None
    ) -> str:
        """Replace a passage's text and/or tags; the previous version goes to ``archival_history``."""
        a = parse_id(ident, "a")

        def w(c: sqlite3.Connection) -> None:
            row = c.execute("SELECT text, tags FROM archival WHERE id = ?", (a,)).fetchone()
            if row is None:
                raise KeyError(f"no archival passage {aid(a)}")
            c.execute(
                "INSERT INTO archival_history(archival_id, text, tags, branch, replaced) VALUES (?, ?, ?, ?, ?)",
                (a, row["text"], row["tags"], branch, self.clock()),
            )
            new_text = self._red(text) if text is not None else row["text"]
            new_tags = " ".join(self._red(t) for t in tags) if tags is not None else row["tags"]
            c.execute(
                "UPDATE archival SET text = ?, tags = ?, updated = ? WHERE id = ?",
                (new_text, new_tags, self.clock(), a),
            )

        self.db.write(w)
        self._embed_ids([a])
        return aid(a)

    def archival_get(self, ident: str | int) -> S.Hit | None:
        a = parse_id(ident, "a")
        row = self.db.read(lambda c: c.execute("SELECT * FROM archival WHERE id = ?", (a,)).fetchone())
        return _hit(row, 0.0, {}) if row else None

    def archival_count(self) -> int:
        return self.db.read(lambda c: c.execute("SELECT count(*) FROM archival").fetchone()[0])

    def archival_search(
        self,
        query: str,
        k: int = 5,
        branch: str | None = None,
        lanes: Sequence[str] = S.LANES,
        scope: str = "global",
    ) -> list[S.Hit]:
        """Hybrid search (RRF over the lanes asked for). ``scope="lineage"`` keeps only passages
        written on ``branch``'s lineage; the default searches every branch's passages."""
        if not query.strip() or k <= 0:
            return []
        query = query[:MAX_QUERY_CHARS]  # a pasted log must not make the identifier scan slow
        limit = max(4 * k, 20) if scope == "global" else max(20 * k, 100)
        ranked: dict[str, list[int]] = {}
        if "fts" in lanes:
            ranked["fts"] = self.db.read(lambda c: S.fts_lane(c, query, limit, self._dfc))
        if "exact" in lanes:
            ranked["exact"] = self.db.read(lambda c: S.exact_lane(c, query, limit))
        if "vector" in lanes and self.vectors is not None and self.embedder is not None:
            try:
                ranked["vector"] = self.vectors.search(self.embedder.embed([query])[0], limit)
            except Exception as exc:  # a broken endpoint degrades to the other lanes, loudly
                log.warning("vector lane failed for archival search: %s", exc)
        fused = S.rrf(ranked)
        ranks = {lane: {a: i for i, a in enumerate(ids, 1)} for lane, ids in ranked.items()}
        allowed = set(self.lineage(branch)) if (scope == "lineage" and branch) else None
        ids = [a for a, _ in fused]
        rows = self._archival_rows(ids)
        hits = []
        for a, score in fused:
            row = rows.get(a)
            if row is None or (allowed is not None and row["branch"] not in allowed):
                continue
            hits.append(_hit(row, score, {ln: r[a] for ln, r in ranks.items() if a in r}))
            if len(hits) >= k:
                break
        return hits

    def _archival_rows(self, ids: list[int]) -> dict[int, Any]:
        if not ids:
            return {}
        rows = self.db.read(
            lambda c: c.execute(
                "SELECT * FROM archival WHERE id IN (SELECT value FROM json_each(?))", (json.dumps(ids),)
            ).fetchall()
        )
        return {r["id"]: r for r in rows}

    # ------------------------------------------------------------------- vectors --
    def _embed_ids(self, ids: Sequence[int]) -> None:
        """Embed passages and store their vectors; a failure is logged and kept in ``vector_errors``
        (the passage stays searchable by FTS/exact; ``rebuild_vectors`` fills the gap later)."""
        if self.embedder is None or not ids:
            return
        rows = self._archival_rows(list(ids))
        todo = [(a, rows[a]["text"] + " " + rows[a]["tags"]) for a in ids if a in rows]
        try:
            vecs = self.embedder.embed([t for _, t in todo])
        except Exception as exc:
            msg = f"embedding {len(todo)} archival passage(s) failed: {exc}"
            log.warning("%s; rebuild_vectors() will retry", msg)
            self.vector_errors.append(msg)
            return
        self._store_vecs(self.embedder.name, [a for a, _ in todo], vecs)

    def _store_vecs(self, name: str, ids: Sequence[int], vecs: np.ndarray) -> None:
        dim = int(vecs.shape[1])
        self.db.write(
            lambda c: c.executemany(
                "INSERT OR REPLACE INTO archival_vec(archival_id, model, dim, vec) VALUES (?, ?, ?, ?)",
                [
                    (a, name, dim, np.asarray(v, dtype=np.float32).tobytes())
                    for a, v in zip(ids, vecs, strict=True)
                ],
            )
        )

    def missing_vectors(self) -> list[int]:
        """Archival ids without a vector from the current embedding model."""
        if self.embedder is None:
            return []
        model = self.embedder.name
        return self.db.read(
            lambda c: [
                r[0]
                for r in c.execute(
                    "SELECT a.id FROM archival a LEFT JOIN archival_vec v ON v.archival_id = a.id"
                    " AND v.model = ? WHERE v.archival_id IS NULL",
                    (model,),
                )
            ]
        )

    def rebuild_vectors(self, reembed: bool = False, batch: int = 2048) -> int:
        """Rebuild the faiss index from the database; embeds passages that lack a vector from the
        current model (all of them with ``reembed=True``). Returns the number of vectors indexed."""
        if self.embedder is None or self.vectors is None:
            return 0
        if reembed:
            missing = self.db.read(lambda c: [r[0] for r in c.execute("SELECT id FROM archival ORDER BY id")])
        else:
            missing = self.missing_vectors()
        for start in range(0, len(missing), batch):
            self._embed_ids(missing[start : start + batch])
        self.vectors.reset()
        self.vectors.sync()
        self.vectors.save()
        return self.vectors.size


def _hit(row: Any, score: float, lanes: dict[str, int]) -> S.Hit:
    return S.Hit(
        id=aid(row["id"]),
        text=row["text"],
        score=score,
        lanes=lanes,
        branch=row["branch"],
        source_ref=row["source_ref"],
        kind=row["kind"],
        tags=row["tags"].split() if row["tags"] else [],
    )
