"""Hybrid archival search: FTS5 (bm25), faiss vectors and an exact identifier lane, fused by RRF.

* ``fts``: words of the query OR-ed in an FTS5 MATCH, ranked by bm25 (never by recency).
* ``vector``: cosine similarity through faiss (flat inner product on unit vectors; an IVF index
  once the archive is large, see :class:`VectorIndex`).
* ``exact``: identifiers regex-extracted from the query (UUIDs, hex hashes, paths, dotted or
  snake_case names, ``key=value``) found verbatim: an FTS5 phrase query narrows the candidates
  and ``instr`` confirms the exact substring. Embeddings miss these; this lane does not.

Fusion is reciprocal rank fusion, ``sum(w_lane / (60 + rank))``; the exact lane weighs double
so a passage containing the identifier asked for outranks passages that only look similar.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sqlite3
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from .db import Database

log = logging.getLogger(__name__)

RRF_K = 60
LANE_WEIGHTS = {"exact": 2.0, "fts": 1.0, "vector": 1.0}
LANES = ("fts", "vector", "exact")
MAX_QUERY_TERMS = 24
MAX_MATCH_TERMS = 12
COMMON_DF = 500  # a word in this many passages is 'common' (see fts_lane)

_STOP = frozenset(
    "a an and are as at be by for from has have in is it its of on or that the this to was were "
    "will with not no but if then than into over under we you they he she our your their".split()
)
_WORD = re.compile(r"\w+", re.UNICODE)
_IDENT_PATTERNS = [
    re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"),
    re.compile(r"(?<![\w/.])(?:~|\.{1,2})?/?(?:[\w.-]+/)+[\w.-]+"),  # paths (a/b, /a/b.c, ./x/y)
    re.compile(r"\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{7,64}\b"),  # hex hashes
    re.compile(r"\b[A-Za-z_][\w-]*(?:\.[\w-]+)+\b"),  # dotted names, file names
    re.compile(r"\b[A-Za-z][A-Za-z0-9]*_[\w]+\b"),  # snake_case identifiers
    re.compile(r"\b[\w.-]+=[\w.:/-]+"),  # key=value
]


@dataclass
class Hit:
    """One archival search result. ``id`` is ``"a<N>"``; ``lanes`` maps lane -> rank (1-based)."""

    id: str
    text: str
    score: float
    lanes: dict[str, int] = field(default_factory=dict)
    branch: str | None = None
    source_ref: str | None = None
    kind: str = "note"
    tags: list[str] = field(default_factory=list)


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:  # plan snippets and execution outputs often arrive as dicts / lists
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def query_for(
    idea: Any = None,
    plan: Any = None,
    error: Any = None,
    metric: Any = None,
    extra: Any = None,
    max_chars: int = 2000,
) -> str:
    """An archival query made of a node's content (never a phase label).

    The current error comes first (it is what the node most needs help with), then the metric,
    the plan and the idea; each part is capped so one long field cannot crowd out the others.
    Non-string values (dicts, lists, numbers) are serialised as JSON.
    """
    parts = [
        (error, 700, True),
        (metric, 200, False),
        (plan, 600, False),
        (idea, 600, False),
        (extra, 400, False),
    ]
    out = []
    for value, cap, keep_tail in parts:
        text = _as_text(value).strip()
        if text:
            # the tail of an error (the exception line) and the head of a plan carry the signal
            out.append(text[-cap:] if keep_tail else text[:cap])
    return "\n".join(out)[:max_chars]


def identifiers(query: str) -> list[str]:
    """Identifier-like substrings of ``query`` (longest first, deduplicated)."""
    found: list[str] = []
    for pat in _IDENT_PATTERNS:
        for m in pat.finditer(query):
            s = m.group(0).strip(".,;:")
            if len(s) >= 4 and not any(s in f for f in found):
                found.append(s)
    return sorted(found, key=len, reverse=True)[:12]


def fts_terms(query: str) -> list[str]:
    seen: list[str] = []
    for w in _WORD.findall(query.lower()):
        if len(w) > 1 and w not in _STOP and w not in seen:
            seen.append(w)
    return seen[:MAX_QUERY_TERMS]


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _capped_df(conn: sqlite3.Connection, term: str) -> int:
    """How many passages contain ``term``, counted up to ``COMMON_DF`` (cheap even for common words)."""
    return conn.execute(
        "SELECT count(*) FROM (SELECT rowid FROM archival_fts WHERE archival_fts MATCH ? LIMIT ?)",
        (_quote(term), COMMON_DF),
    ).fetchone()[0]


class DocFreqCache:
    """Capped document frequencies, reused until the archive grows by 10 % (they change slowly)."""

    def __init__(self) -> None:
        self._dfs: dict[str, int] = {}
        self._size = 0
        self._lock = threading.Lock()

    def get(self, conn: sqlite3.Connection, terms: list[str]) -> dict[str, int]:
        size = conn.execute("SELECT coalesce(max(id), 0) FROM archival").fetchone()[0]
        with self._lock:
            if size > self._size * 1.1 or size < self._size:
                self._dfs, self._size = {}, size
            known = {t: self._dfs[t] for t in terms if t in self._dfs}
        fresh = {t: _capped_df(conn, t) for t in terms if t not in known}
        with self._lock:
            self._dfs.update(fresh)
        return {**known, **fresh}


def fts_lane(conn: sqlite3.Connection, query: str, limit: int, dfc: DocFreqCache | None = None) -> list[int]:
    """Archival ids matching the query's words, best bm25 first.

    Words found in ``COMMON_DF`` passages or more carry little bm25 weight yet make an OR query
    score a large share of the archive, so they are left out whenever rarer words exist; a
    query of common words only requires its four rarest words (AND) instead.
    """
    terms = fts_terms(query)
    dfs = dfc.get(conn, terms) if dfc is not None else {t: _capped_df(conn, t) for t in terms}
    present = sorted((t for t in dfs if dfs[t] > 0), key=lambda t: dfs[t])
    if not present:
        return []
    selective = [t for t in present if dfs[t] < COMMON_DF][:MAX_MATCH_TERMS]
    match = " OR ".join(map(_quote, selective)) if selective else " AND ".join(map(_quote, present[:4]))
    rows = conn.execute(
        "SELECT rowid FROM archival_fts WHERE archival_fts MATCH ? ORDER BY bm25(archival_fts) LIMIT ?",
        (match, limit),
    ).fetchall()
    return [r[0] for r in rows]


def exact_lane(conn: sqlite3.Connection, query: str, limit: int) -> list[int]:
    """Archival ids containing identifiers of the query verbatim; more identifiers matched first."""
    idents = identifiers(query)
    counts: dict[int, int] = {}
    order: list[int] = []
    for ident in idents:
        words = _WORD.findall(ident.lower())
        if not words:
            continue
        phrase = _quote(" ".join(words))
        rows = conn.execute(
            "SELECT a.id FROM archival_fts f JOIN archival a ON a.id = f.rowid "
            "WHERE archival_fts MATCH ? AND instr(lower(a.text || ' ' || a.tags), ?) > 0 "
            "ORDER BY bm25(archival_fts) LIMIT ?",
            (phrase, ident.lower(), limit),
        ).fetchall()
        for (aid,) in rows:
            if aid not in counts:
                order.append(aid)
            counts[aid] = counts.get(aid, 0) + 1
    order.sort(key=lambda a: -counts[a])  # stable: ties keep bm25 order of the first identifier
    return order[:limit]


def rrf(lanes: dict[str, list[int]], weights: dict[str, float] | None = None) -> list[tuple[int, float]]:
    """Reciprocal rank fusion of ranked id lists; returns (id, score) best first."""
    weights = weights or LANE_WEIGHTS
    scores: dict[int, float] = {}
    for lane, ids in lanes.items():
        w = weights.get(lane, 1.0)
        for rank, aid in enumerate(ids, start=1):
            scores[aid] = scores.get(aid, 0.0) + w / (RRF_K + rank)
    return sorted(scores.items(), key=lambda kv: (-kv[1], -kv[0]))


class VectorIndex:
    """A faiss index over archival embeddings, kept in step with the ``archival_vec`` table.

    The table is the source of truth; the index is a cache persisted at ``path`` (plus a
    ``.json`` sidecar recording the last synced ``vseq``) and rebuilt when missing or stale.
    Each process syncs incrementally before a search (rows with a higher ``vseq``), so a
    passage written by another worker is searchable without a restart. Below
    ``ivf_threshold`` vectors the index is exact (``IndexFlatIP``); above it an ``IndexIVFFlat``
    is trained so a query scans ~10 % of the archive instead of all of it.
    """

    def __init__(self, path: str | Path, db: Database, model: str, ivf_threshold: int = 20_000):
        self.path = Path(path)
        self.meta_path = self.path.with_suffix(self.path.suffix + ".json")
        self.db = db
        self.model = model
        self.ivf_threshold = ivf_threshold
        self._lock = threading.Lock()
        self._index: faiss.Index | None = None
        self._dim = 0
        self._vseq = 0
        self._trained_at = 0
        self._load()

    # -- persistence --------------------------------------------------------------------------
    def _load(self) -> None:
        try:
            meta = json.loads(self.meta_path.read_text())
            if meta.get("model") != self.model:
                return
            index = faiss.read_index(str(self.path))
            vseq = int(meta["vseq"])
            # workers save concurrently: trust the file only if it holds exactly the vectors
            # its sidecar claims (otherwise a vector could be skipped by the incremental sync)
            expected = self.db.read(
                lambda c: c.execute(
                    "SELECT count(*) FROM archival_vec WHERE vseq <= ? AND model = ?", (vseq, self.model)
                ).fetchone()[0]
            )
            if index.ntotal != expected:
                return
            self._index, self._dim, self._vseq = index, int(meta["dim"]), vseq
            self._trained_at = int(meta.get("trained_at", 0))
        except (OSError, ValueError, KeyError, RuntimeError):
            self._index, self._vseq = None, 0  # missing or stale: rebuilt from the table on sync

    def save(self) -> None:
        """Persist the index beside the database (atomic rename)."""
        from ..base.fileio import atomic_write_json

        with self._lock:
            if self._index is None:
                return
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            faiss.write_index(self._index, str(tmp))
            tmp.replace(self.path)
            atomic_write_json(
                self.meta_path,
                {"model": self.model, "dim": self._dim, "vseq": self._vseq, "trained_at": self._trained_at},
            )

    def reset(self) -> None:
        with self._lock:
            self._index, self._vseq, self._trained_at = None, 0, 0

    @property
    def size(self) -> int:
        return 0 if self._index is None else int(self._index.ntotal)

    # -- syncing ------------------------------------------------------------------------------
    def _new_index(self, dim: int, n: int, sample: np.ndarray | None) -> faiss.Index:
        if n < self.ivf_threshold or sample is None:
            return faiss.IndexIDMap2(faiss.IndexFlatIP(dim))
        nlist = max(16, int(np.sqrt(n)))
        quant = faiss.IndexFlatIP(dim)
        ivf = faiss.IndexIVFFlat(quant, dim, nlist, faiss.METRIC_INNER_PRODUCT)
        ivf.cp.max_points_per_centroid = 64  # bounded training time; quality is ample for ranking
        ivf.train(sample)
        ivf.nprobe = max(4, nlist // 10)
        self._trained_at = n
        return ivf

    def _rows(self, conn: sqlite3.Connection, after: int) -> list[sqlite3.Row]:
        return conn.execute(
            "SELECT vseq, archival_id, dim, vec FROM archival_vec WHERE vseq > ? AND model = ? ORDER BY vseq",
            (after, self.model),
        ).fetchall()

    def sync(self) -> None:
        """Bring the index up to date with the table (cheap when nothing changed)."""
        with self._lock:
            latest = self.db.read(
                lambda c: c.execute("SELECT coalesce(max(vseq), 0) FROM archival_vec").fetchone()[0]
            )
            if latest <= self._vseq and self._index is not None:
                return
            total = self.db.read(
                lambda c: c.execute(
                    "SELECT count(*) FROM archival_vec WHERE model = ?", (self.model,)
                ).fetchone()[0]
            )
            grown = self._trained_at and total > 4 * self._trained_at
            crossed = not self._trained_at and total >= self.ivf_threshold
            if self._index is None or grown or crossed:
                self._rebuild_locked(total)
                return
            rows = self.db.read(lambda c: self._rows(c, self._vseq))
            self._add_rows(self._index, rows)

    def _rebuild_locked(self, total: int) -> None:
        rows = self.db.read(lambda c: self._rows(c, 0))
        if not rows:
            self._index, self._vseq = None, 0
            return
        dim = int(rows[0]["dim"])
        vecs = np.frombuffer(b"".join(r["vec"] for r in rows), dtype=np.float32).reshape(-1, dim)
        self._dim = dim
        self._trained_at = 0
        self._index = self._new_index(dim, total, vecs if total >= self.ivf_threshold else None)
        ids = np.array([r["archival_id"] for r in rows], dtype=np.int64)
        self._index.add_with_ids(vecs, ids)
        self._vseq = int(rows[-1]["vseq"])

    def _add_rows(self, index: faiss.Index, rows: list[sqlite3.Row]) -> None:
        if not rows:
            return
        dim = int(rows[0]["dim"])
        vecs = np.frombuffer(b"".join(r["vec"] for r in rows), dtype=np.float32).reshape(-1, dim)
        ids = np.array([r["archival_id"] for r in rows], dtype=np.int64)
        # an updated passage gets a new vseq: drop its old vector before adding the new one
        # faiss's Python wrapper turns an id array into a selector; its type stub knows only the selector
        index.remove_ids(ids)  # type: ignore[arg-type]
        index.add_with_ids(vecs, ids)
        self._vseq = int(rows[-1]["vseq"])

    def search(self, qvec: np.ndarray, limit: int) -> list[int]:
        """Archival ids nearest to the (unit) query vector, best first."""
        self.sync()
        with self._lock:
            if self._index is None or self._index.ntotal == 0:
                return []
            if qvec.shape[-1] != self._dim:
                log.warning("query vector dim %s != index dim %s; vector lane skipped", qvec.shape, self._dim)
                return []
            faiss.omp_set_num_threads(1)  # one query: threads only add spin-wait on a busy machine
            _, ids = self._index.search(qvec.reshape(1, -1).astype(np.float32), limit)
        return [int(i) for i in ids[0] if i >= 0]
