"""``MemoryStore``: MemGPT-style core / recall / archival memory with one branch per tree node.

Scoping (what a caller may rely on):

* **Branches.** ``fork(parent, node_id)`` inserts one row (O(1) in the depth). A branch reads its
  own writes plus its ancestors' writes *as they were when it was forked* (snapshot): siblings,
  cousins and later writes of an ancestor are never visible. Writes always go to the branch.
* **Core** (key -> value, importance 1-5, optional TTL): lineage-scoped; the newest visible write
  per key wins; deletes and evictions are tombstones; an expired entry is ignored on read (an
  older visible value of the key, if any, shows again).
* **Recall** (events): lineage-scoped; consolidation and eviction hide events on the acting
  branch (and its future descendants) only; the originals stay in the database.
* **Archival** (passages): global, so a lesson learnt by a failed sibling is findable by everyone;
  each passage records the branch that wrote it. Updates keep the previous text in
  ``archival_history``.
* Nothing is lost: ``expand(id)`` returns the full original text of any recall event (``r<N>``)
  or archival passage (``a<N>``), including evicted core entries and consolidated ranges.
* Every text written passes through the redactor first.
* **Outcomes.** ``mark_outcome(node_id)`` notes that a node's outcome events are recorded, so a
  run resumed after a kill -9 records exactly the missing ones (``unrecorded_outcomes``). Use
  ``transaction()`` to make several writes one (the outcome events with their mark).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.config import Config, MemoryConfig
from ..base.paths import RunPaths
from ..base.redact import Redactor, redactor_for
from . import search as S
from .archival import ArchivalMixin
from .db import Database, MemoryStoreError, inserted_id
from .embed import Embedder, embedder_from_config
from .overflow import (
    Summarizer,
    choose_evictions,
    consolidation_text,
    evicted_core_text,
    extractive_summary,
)
from .recorded_ids import RecordedIds
from .records import Consolidation, CoreEntry, CoreWrite, Evicted, RecallEvent, aid, parse_id, rid

if TYPE_CHECKING:
    import sqlite3

log = logging.getLogger(__name__)

ROOT = "root"
_INF = 1 << 62


class MemoryStore(ArchivalMixin):
    """One memory database (``<run>/memory.sqlite``) plus its faiss index (``memory.faiss``)."""

    def __init__(
        self,
        path: str | Path,
        cfg_memory: MemoryConfig | None = None,
        embedder: Embedder | None = None,
        redactor: Redactor | None = None,
        summarizer: Summarizer | None = None,
        ivf_threshold: int = 20_000,
        clock: Callable[[], float] = time.time,
        recorded_ids: RecordedIds | None = None,
    ):
        self.path = Path(path)
        self.recorded_ids = recorded_ids  # a replay: rows get the ids they had in the recording
        self.clock = clock  # injectable so TTL expiry is testable without sleeping
        self.cfg = cfg_memory or MemoryConfig()
        self.embedder = embedder
        self.redactor = redactor or Redactor()
        self.summarizer = summarizer
        self.db = Database(self.path)
        self.vector_errors: list[str] = []
        self._chains: dict[str, list[tuple[str, int, int, int]]] = {}
        self._dfc = S.DocFreqCache()
        self.vectors = (
            S.VectorIndex(self.path.with_suffix(".faiss"), self.db, embedder.name, ivf_threshold)
            if embedder is not None
            else None
        )
        self.db.write(
            lambda c: c.execute(
                "INSERT OR IGNORE INTO branches VALUES (?, NULL, NULL, 0, 0, 0, 0, ?)", (ROOT, self.clock())
            )
        )
        if self.embedder is not None and self.missing_vectors():
            # a new embedding model, or vectors an earlier failure left out: fill the gap now
            log.info("memory: embedding archival passages that lack a %s vector", self.embedder.name)
            self.rebuild_vectors()

    @classmethod
    def open_run(cls, run_dir: str | Path, cfg: Config, **kw: Any) -> MemoryStore:
        """The store of a run directory, configured from a full :class:`~ai_scientist.base.config.Config`."""

        if cfg.llm.backend == "replay" and "recorded_ids" not in kw:
            kw["recorded_ids"] = RecordedIds.of_replay(cfg.llm.replay_dir)
        return cls(RunPaths(run_dir).memory, cfg.memory, embedder_from_config(cfg), redactor_for(cfg), **kw)

    def close(self) -> None:
        """Persist the vector index and close this thread's connection."""
        if self.vectors is not None:
            self.vectors.save()
        if self.recorded_ids is not None:
            self.recorded_ids.close()
        self.db.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """The writes of this thread inside the block commit together or not at all (see
        :meth:`Database.transaction`); re-entrant."""
        try:
            with self.db.transaction():
                yield
        except BaseException:
            self._chains.clear()  # may hold a branch the rollback removed
            raise

    def mark_outcome(self, node_id: str) -> None:
        """Note that ``node_id``'s outcome events are recorded (idempotent)."""
        self.db.write(
            lambda c: c.execute("INSERT OR IGNORE INTO outcomes VALUES (?, ?)", (node_id, self.clock()))
        )

    def outcome_recorded(self, node_id: str) -> bool:
        row = self.db.read(
            lambda c: c.execute("SELECT 1 FROM outcomes WHERE node_id = ?", (node_id,)).fetchone()
        )
        return row is not None

    def unrecorded_outcomes(self, node_ids: Collection[str]) -> list[str]:
        """The ids among ``node_ids`` that have a branch but no :meth:`mark_outcome`, sorted."""

        def r(c: sqlite3.Connection) -> set[str]:
            rows = c.execute(
                "SELECT b.id FROM branches b LEFT JOIN outcomes o ON o.node_id = b.id WHERE o.node_id IS NULL"
            ).fetchall()
            return {x[0] for x in rows}

        missing = self.db.read(r)
        return sorted(i for i in node_ids if i in missing)

    def _red(self, text: str) -> str:
        return self.redactor.redact(str(text))

    # ------------------------------------------------------------------ branches --
    def fork(self, parent_branch: str | None, node_id: str | None = None) -> str:
        """Create the branch of a new node (id = ``node_id``) under ``parent_branch`` (None: root).

        Idempotent for the same (parent, node): a resumed run forks again safely.
        """
        parent = parent_branch or ROOT
        bid = node_id or f"b{uuid.uuid4().hex[:12]}"

        def w(c: sqlite3.Connection) -> str:
            row = c.execute("SELECT parent_id FROM branches WHERE id = ?", (bid,)).fetchone()
            if row is not None:
                if row[0] != parent:
                    raise ValueError(f"branch {bid!r} already exists under {row[0]!r}, not {parent!r}")
                return bid
            prow = c.execute("SELECT depth FROM branches WHERE id = ?", (parent,)).fetchone()
            if prow is None:
                raise KeyError(f"unknown parent branch {parent!r}; fork it first")
            ups = [
                c.execute(f"SELECT coalesce(max({col}), 0) FROM {tbl}").fetchone()[0]
                for tbl, col in (("core", "seq"), ("recall", "id"), ("recall_masks", "id"))
            ]
            c.execute(
                "INSERT INTO branches VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (bid, parent, node_id, prow[0] + 1, *ups, self.clock()),
            )
            return bid

        return self.db.write(w)

    def has_branch(self, branch: str) -> bool:
        row = self.db.read(lambda c: c.execute("SELECT 1 FROM branches WHERE id = ?", (branch,)).fetchone())
        return row is not None

    def _chain(self, branch: str) -> list[tuple[str, int, int, int]]:
        """[(branch, core_limit, recall_limit, mask_limit)] from ``branch`` up to the root."""
        cached = self._chains.get(branch)
        if cached is not None:
            return cached
        rows = self.db.read(
            lambda c: c.execute(
                "WITH RECURSIVE up(id, parent_id, core_upto, recall_upto, mask_upto, depth) AS ("
                " SELECT id, parent_id, core_upto, recall_upto, mask_upto, depth FROM branches WHERE id = ?"
                " UNION ALL SELECT b.id, b.parent_id, b.core_upto, b.recall_upto, b.mask_upto, b.depth"
                " FROM branches b JOIN up ON b.id = up.parent_id)"
                " SELECT * FROM up ORDER BY depth DESC",
                (branch,),
            ).fetchall()
        )
        if not rows:
            raise KeyError(f"unknown memory branch {branch!r}; call fork() for the node first")
        chain, lims = [], (_INF, _INF, _INF)
        for r in rows:
            chain.append((r["id"], *lims))
            # the parent is visible only up to the moment this branch was forked
            lims = tuple(
                min(a, b)
                for a, b in zip(lims, (r["core_upto"], r["recall_upto"], r["mask_upto"]), strict=True)
            )
        self._chains[branch] = chain  # branches never change once created
        return chain

    def lineage(self, branch: str) -> list[str]:
        """Branch ids from ``branch`` up to the root."""
        return [b for b, *_ in self._chain(branch)]

    def _chain_json(self, branch: str) -> str:
        return json.dumps(self._chain(branch))

    _CHAIN_CTE = (
        "WITH chain(b, cl, rl, ml) AS (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'),"
        " json_extract(value, '$[2]'), json_extract(value, '$[3]') FROM json_each(?)) "
    )

    # ---------------------------------------------------------------------- core --
    def _core_visible(self, c: sqlite3.Connection, branch: str, now: float) -> dict[str, CoreEntry]:
        # newest unexpired write per key (SQLite returns the row of max(seq) for bare columns);
        # an expired write is ignored as if never made, then tombstones hide their key
        rows = c.execute(
            self._CHAIN_CTE + "SELECT core.*, max(core.seq) FROM core JOIN chain ON core.branch = chain.b"
            " AND core.seq <= chain.cl WHERE core.expires_at IS NULL OR core.expires_at > ?"
            " GROUP BY core.key",
            (self._chain_json(branch), now),
        ).fetchall()
        return {
            r["key"]: CoreEntry(r["key"], r["value"], r["importance"], r["seq"], r["branch"], r["expires_at"])
            for r in rows
            if not r["deleted"]
        }

    def core_entries(self, branch: str) -> list[CoreEntry]:
        """Visible core entries of ``branch``, oldest write first."""
        now = self.clock()
        vis = self.db.read(lambda c: self._core_visible(c, branch, now))
        return sorted(vis.values(), key=lambda e: e.seq)

    def core_get(self, branch: str, key: str) -> CoreEntry | None:
        return {e.key: e for e in self.core_entries(branch)}.get(key)

    def core_set(
        self, branch: str, key: str, value: str, importance: int = 3, ttl: float | None = None
    ) -> CoreWrite:
        """Write ``key`` on ``branch``; evicts into archival if core exceeds ``core_max_chars``."""
        key, value = self._red(key).strip(), self._red(value)
        if not key:
            raise ValueError("core key must be a non-empty string")
        importance = max(1, min(5, int(importance)))
        if ttl is not None and float(ttl) <= 0:
            raise ValueError(f"ttl must be > 0 seconds, got {ttl!r}")
        expires = self.clock() + float(ttl) if ttl is not None else None

        def w(c: sqlite3.Connection) -> CoreWrite:
            now = self.clock()
            cur = c.execute(
                "INSERT INTO core(branch, key, value, importance, expires_at, deleted, created)"
                " VALUES (?, ?, ?, ?, ?, 0, ?)",
                (branch, key, value, importance, expires, now),
            )
            result = CoreWrite(key, inserted_id(cur))
            visible = list(self._core_visible(c, branch, now).values())
            for e in choose_evictions(visible, self.cfg.core_max_chars, protect=key):
                a = self._insert_archival(
                    c,
                    evicted_core_text(e),
                    ["core", "evicted", e.group],
                    f"core:{e.key}@{e.branch}",
                    "evicted_core",
                    branch,
                )
                c.execute(
                    "INSERT INTO core(branch, key, value, importance, deleted, evicted_to, created)"
                    " VALUES (?, ?, '', ?, 1, ?, ?)",
                    (branch, e.key, e.importance, a, now),
                )
                result.evicted.append(Evicted(e.key, aid(a), e.importance, e.chars))
            return result

        self._check_branch(branch)
        res = self.db.write(w)
        self._embed_ids([parse_id(e.archival_id, "a") for e in res.evicted])
        return res

    def core_delete(self, branch: str, key: str) -> bool:
        """Tombstone ``key`` on ``branch``; returns whether it was visible."""
        if self.core_get(branch, key) is None:
            return False
        self.db.write(
            lambda c: c.execute(
                "INSERT INTO core(branch, key, value, importance, deleted, created) VALUES (?, ?, '', 1, 1, ?)",
                (branch, key, self.clock()),
            )
        )
        return True

    def _check_branch(self, branch: str) -> None:
        self._chain(branch)  # raises KeyError for an unknown branch

    # -------------------------------------------------------------------- recall --
    def recall_append(self, branch: str, kind: str, text: str, node_id: str | None = None) -> str:
        """Append an event; consolidates the oldest ones when the window is far over its size."""
        self._check_branch(branch)
        kind, text = self._red(kind).strip() or "note", self._red(text)
        key = (branch, node_id, kind, text)
        eid = self.db.write(
            lambda c: inserted_id(
                c.execute(
                    "INSERT INTO recall(id, branch, kind, text, node_id, created) VALUES (?, ?, ?, ?, ?, ?)",
                    (self._recorded_id(c, "recall", key), branch, kind, text, node_id, self.clock()),
                )
            )
        )
        limit = self.cfg.recall_max_events
        if self.db.read(lambda c: self._recall_count(c, branch)) > 2 * limit:
            events = self.recall_events(branch)
            self.consolidate(branch, events[0].id, events[len(events) - limit - 1].id)
        return rid(eid)

    _UNMASKED = (
        " AND r.id NOT IN (SELECT m.event_id FROM recall_masks m"
        " JOIN chain mc ON m.branch = mc.b AND m.id <= mc.ml)"
    )

    def _recall_count(self, c: sqlite3.Connection, branch: str) -> int:
        return c.execute(
            self._CHAIN_CTE + "SELECT count(*) FROM recall r JOIN chain ON r.branch = chain.b"
            " AND r.id <= chain.rl" + self._UNMASKED,
            (self._chain_json(branch),),
        ).fetchone()[0]

    def _masked(self, c: sqlite3.Connection, branch: str) -> dict[int, tuple[int, str]]:
        # every mask row names the archival passage it was folded or evicted into
        rows = c.execute(
            self._CHAIN_CTE + "SELECT m.event_id, m.archival_id, m.reason FROM recall_masks m"
            " JOIN chain ON m.branch = chain.b AND m.id <= chain.ml",
            (self._chain_json(branch),),
        ).fetchall()
        return {r[0]: (r[1], r[2]) for r in rows}

    def _recall_rows(self, c: sqlite3.Connection, branch: str, include_hidden: bool) -> list[Any]:
        return c.execute(
            self._CHAIN_CTE
            + "SELECT r.* FROM recall r JOIN chain ON r.branch = chain.b AND r.id <= chain.rl"
            + ("" if include_hidden else self._UNMASKED)
            + " ORDER BY r.id",
            (self._chain_json(branch),),
        ).fetchall()

    def recall_events(self, branch: str, include_hidden: bool = False) -> list[RecallEvent]:
        """Visible recall events of ``branch`` in order (consolidated/evicted ones left out)."""
        rows = self.db.read(lambda c: self._recall_rows(c, branch, include_hidden))
        return [
            RecallEvent(rid(x["id"]), x["kind"], x["text"], x["node_id"], x["branch"], x["created"])
            for x in rows
        ]

    def recall_search(self, branch: str, query: str, k: int = 5) -> list[RecallEvent]:
        """Visible events sharing the most query words (ties: newest first)."""
        terms = set(S.fts_terms(query))
        scored = []
        for ev in self.recall_events(branch):
            words = set(S.fts_terms(ev.text))
            overlap = len(terms & words)
            if overlap:
                scored.append((overlap, parse_id(ev.id, "r"), ev))
        scored.sort(key=lambda t: (-t[0], -t[1]))
        return [ev for *_, ev in scored[:k]]

    def recall_evict(self, branch: str, ids: Sequence[str | int]) -> list[str]:
        """Hide events from ``branch``'s window into one archival passage; returns the ids hidden."""
        wanted = {parse_id(i, "r") for i in ids}
        events = [e for e in self.recall_events(branch) if parse_id(e.id, "r") in wanted]
        if not events:
            return []
        self._fold(branch, events, extractive_summary(events), "evicted")
        return [e.id for e in events]

    def consolidate(
        self,
        branch: str,
        from_id: str | int | None = None,
        to_id: str | int | None = None,
        summarizer: Summarizer | None = None,
    ) -> Consolidation:
        """Summarise the visible events ``from_id..to_id`` (inclusive) into one archival passage."""
        lo = parse_id(from_id, "r") if from_id is not None else 0
        hi = parse_id(to_id, "r") if to_id is not None else _INF
        events = [e for e in self.recall_events(branch) if lo <= parse_id(e.id, "r") <= hi]
        if not events:
            raise ValueError(
                f"no visible recall events in r{lo}..r{hi if hi < _INF else 'end'} on {branch!r}"
            )
        fn = summarizer or self.summarizer
        summary = ""
        if fn is not None:
            try:
                summary = str(fn(events)).strip()
            except Exception as exc:  # the summariser is optional; its failure must not lose events
                log.warning("memory summariser failed (%s); using the extractive summary", exc)
        summary = self._red(summary or extractive_summary(events))
        a = self._fold(branch, events, summary, "consolidated")
        return Consolidation(aid(a), [e.id for e in events], summary)

    def _fold(self, branch: str, events: list[RecallEvent], summary: str, reason: str) -> int:
        text = consolidation_text(events, summary)

        def w(c: sqlite3.Connection) -> int:
            a = self._insert_archival(
                c,
                text,
                ["recall", reason],
                f"recall:{events[0].id}..{events[-1].id}",
                f"recall_{reason}",
                branch,
            )
            now = self.clock()
            c.executemany(
                "INSERT INTO recall_masks(branch, event_id, archival_id, reason, created) VALUES (?, ?, ?, ?, ?)",
                [(branch, parse_id(e.id, "r"), a, reason, now) for e in events],
            )
            return a

        a = self.db.write(w)
        self._embed_ids([a])
        return a

    def consolidations(self, branch: str) -> list[Consolidation]:
        """Ranges folded away on ``branch``'s lineage, oldest first, each citing its event ids."""

        def r(c: sqlite3.Connection) -> list[Consolidation]:
            groups: dict[int, tuple[list[str], str]] = {}
            for eid, (a, reason) in sorted(self._masked(c, branch).items()):
                groups.setdefault(a, ([], reason))[0].append(rid(eid))
            out = []
            for a, (eids, reason) in sorted(groups.items()):
                row = c.execute("SELECT text FROM archival WHERE id = ?", (a,)).fetchone()
                summary = row[0].split("\n", 1)[-1] if row else ""
                out.append(Consolidation(aid(a), eids, summary, reason))
            return out

        return self.db.read(r)

    # -------------------------------------------------------------------- expand --
    def expand(self, ident: str | int) -> str:
        """The full original text of ``r<N>`` (recall event) or ``a<N>`` (archival passage)."""
        s = str(ident).strip().lstrip("#")
        if s.lower().startswith("r"):
            n = parse_id(s, "r")
            row = self.db.read(lambda c: c.execute("SELECT text FROM recall WHERE id = ?", (n,)).fetchone())
        else:
            n = parse_id(s, "a")
            row = self.db.read(lambda c: c.execute("SELECT text FROM archival WHERE id = ?", (n,)).fetchone())
        if row is None:
            raise KeyError(f"no memory item {ident!r} (ids look like r12 for recall, a7 for archival)")
        return row[0]


__all__ = ["MemoryStore", "MemoryStoreError", "ROOT"]
