"""Parallel worker processes and threads writing one memory database at once:
0 lost writes, 0 errors, and every worker reads its own writes immediately."""

from __future__ import annotations

import multiprocessing as mp
import threading
import traceback

import pytest

from ai_scientist.memory import MemoryStore

WRITES = 2500
PROCS = 4


def _work(path: str, branch: str, n: int) -> dict:
    """n writes (core / recall / archival in turn), each read back at once."""
    store = MemoryStore(path)
    errors, ryw_fail = [], 0
    for i in range(n):
        try:
            kind = i % 3
            if kind == 0:
                store.core_set(branch, f"k{i % 20}", f"{branch}:{i}")
                ok = store.core_get(branch, f"k{i % 20}").value == f"{branch}:{i}"
            elif kind == 1:
                rid = store.recall_append(branch, "note", f"{branch} event {i}")
                ok = store.expand(rid) == f"{branch} event {i}" and store.recall_events(branch)[-1].id == rid
            else:
                aid = store.archival_write(branch, f"{branch} lesson {i}")
                ok = store.expand(aid) == f"{branch} lesson {i}"
            ryw_fail += not ok
        except Exception:
            errors.append(traceback.format_exc(limit=3))
    store.db.close()
    return {"branch": branch, "errors": errors[:3], "n_errors": len(errors), "ryw_fail": ryw_fail}


def _proc(path: str, branch: str, n: int, q) -> None:
    q.put(_work(path, branch, n))


def _count(store: MemoryStore, branch: str) -> tuple[int, int, int]:
    def r(c):
        core = c.execute("SELECT count(*) FROM core WHERE branch = ? AND deleted = 0", (branch,)).fetchone()[
            0
        ]
        rec = c.execute("SELECT count(*) FROM recall WHERE branch = ?", (branch,)).fetchone()[0]
        arc = c.execute(
            "SELECT count(*) FROM archival WHERE branch = ? AND kind = 'note'", (branch,)
        ).fetchone()[0]
        return core, rec, arc

    return store.db.read(r)


def _expected(n: int) -> tuple[int, int, int]:
    return len(range(0, n, 3)), len(range(1, n, 3)), len(range(2, n, 3))


@pytest.mark.slow
def test_four_processes_2500_writes_each(tmp_path):
    path = str(tmp_path / "memory.sqlite")
    store = MemoryStore(path)
    parent = store.fork(None, "n0001")
    branches = [store.fork(parent, f"n{2 + i:04d}") for i in range(PROCS)]
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_proc, args=(path, b, WRITES, q)) for b in branches]
    for p in procs:
        p.start()
    results = [q.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert sum(r["n_errors"] for r in results) == 0, [r["errors"] for r in results]
    assert sum(r["ryw_fail"] for r in results) == 0
    for b in branches:
        assert _count(store, b) == _expected(WRITES)
        # isolation held under concurrency: each branch sees only its own core values
        assert all(e.value.startswith(b + ":") for e in store.core_entries(b))


def test_threads_share_a_store(tmp_path):
    store = MemoryStore(tmp_path / "memory.sqlite")
    branches = [store.fork(None, f"t{i}") for i in range(4)]
    results: list[dict] = []

    def run(b: str) -> None:
        results.append(_work(str(store.path), b, 150))

    def run_shared(b: str) -> None:  # the same MemoryStore object used from several threads
        errors = 0
        for i in range(100):
            try:
                store.core_set(b, "x", str(i))
                errors += store.core_get(b, "x").value != str(i)
            except Exception:
                errors += 1
        results.append({"n_errors": errors, "ryw_fail": 0})

    threads = [threading.Thread(target=run, args=(b,)) for b in branches[:2]]
    threads += [threading.Thread(target=run_shared, args=(b,)) for b in branches[2:]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4
    assert sum(r["n_errors"] for r in results) == 0 and sum(r["ryw_fail"] for r in results) == 0
    for b in branches[:2]:
        assert _count(store, b) == _expected(150)
