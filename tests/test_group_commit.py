"""Group commit of JSONL appends (base/fileio.py): concurrent appenders share fsyncs, every append
returns only once its record is fsync'd, and a kill -9 never loses an acknowledged record."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from ai_scientist.base import fileio
from ai_scientist.treesearch.journal import Journal


def test_concurrent_appends_share_fsyncs_and_return_only_when_durable(tmp_path, monkeypatch):
    path = tmp_path / "log.jsonl"
    synced: list[int] = []  # file length at the start of each *completed* fsync
    calls = []
    real = fileio._fsync_file

    def slow_fsync(p: Path) -> None:
        start_len = os.path.getsize(p)
        calls.append(start_len)
        time.sleep(0.004)  # a disk's fsync: while it runs, other threads' records queue up
        real(p)
        synced.append(start_len)

    monkeypatch.setattr(fileio, "_fsync_file", slow_fsync)
    threads_n, per_thread = 8, 25
    problems: list[str] = []

    def worker(t: int) -> None:
        for i in range(per_thread):
            line = json.dumps({"t": t, "i": i}, ensure_ascii=False) + "\n"
            fileio.append_jsonl(path, {"t": t, "i": i})
            end = path.read_text().index(line) + len(line)
            if max(synced, default=0) < end:  # acknowledged before an fsync covered it
                problems.append(f"record {t}/{i} returned before it was fsync'd")

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(threads_n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    records = list(fileio.read_jsonl(path))
    assert problems == []
    assert len(records) == threads_n * per_thread
    for t in range(threads_n):  # each writer's records in its own order, none lost or doubled
        assert [r["i"] for r in records if r["t"] == t] == list(range(per_thread))
    # batching: far fewer fsyncs than records (one per record without group commit)
    assert len(calls) < threads_n * per_thread / 2, len(calls)
    assert fileio.fsync_count(path) == len(calls)


def test_single_writer_fsyncs_each_record(tmp_path, monkeypatch):
    path = tmp_path / "one.jsonl"
    calls = []
    monkeypatch.setattr(fileio, "_fsync_file", lambda p: calls.append(p))
    for i in range(5):
        fileio.append_jsonl(path, {"i": i})
    assert len(calls) == 5  # nobody to share with: each acknowledgement waits for its own fsync


_CHILD = textwrap.dedent(
    """
    import sys, threading
    from ai_scientist.treesearch.journal import Journal
    j = Journal(sys.argv[1])
    out = threading.Lock()

    def worker(t):
        for i in range(10_000):
            n = j.new_node(stage=1, operation="draft")
            j.update(n.id, status="good", summary=f"{t}/{i}")
            with out:  # the acknowledgement: printed only after update() returned
                sys.stdout.write(n.id + "\\n")
                sys.stdout.flush()

    for t in range(4):
        threading.Thread(target=worker, args=(t,), daemon=True).start()
    threading.Event().wait()
    """
)


def test_kill9_never_loses_an_acknowledged_journal_record(tmp_path):
    for attempt, wanted in enumerate((5, 40, 150)):
        path = tmp_path / f"journal{attempt}.jsonl"
        proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        acked = []
        assert proc.stdout is not None
        while len(acked) < wanted:
            line = proc.stdout.readline()
            if not line:
                raise AssertionError(f"child ended: {proc.stderr.read() if proc.stderr else ''}")
            acked.append(line.strip())
        os.kill(proc.pid, signal.SIGKILL)  # mid-stream: other threads are writing right now
        proc.wait()
        acked += [x.strip() for x in proc.stdout.read().splitlines()]  # acknowledged before the kill
        j = Journal(path)  # a torn tail, if any, is repaired; nothing before it may be damaged
        for node_id in acked:
            node = j.get(node_id)
            assert node.status == "good", (node_id, node.status)
        assert len(j.nodes) >= len(acked)
