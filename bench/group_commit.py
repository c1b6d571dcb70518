"""Journal writes with group commit vs one fsync per record, concurrent writers.

    python bench/group_commit.py [--threads 1 4] [--records 200] [--dir DIR]

Each of ``--threads`` threads updates its own nodes through a real ``Journal`` (``records``
updates each, a node record of the bundled example's size). Group commit (the journal today:
write under the lock, the shared fsync outside it) against the old scheme, measured in the same
run: the journal's lock held across the write *and* its own fsync (``append_jsonl`` of before,
reproduced here). Prints wall time, records per second, fsyncs issued, and the ratio. ``--dir``
picks the file system (default: a temporary directory; fsync cost depends on the disk).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from ai_scientist.base import fileio
from ai_scientist.treesearch.journal import Journal


class _PerRecordJournal(Journal):
    """The journal before group commit: write and fsync inside the lock, one fsync per record."""

    fsyncs = 0

    def _append(self, rtype: str, node: Any, seq: int) -> int:
        line = json.dumps({"seq": seq, "ts": time.time(), "type": rtype, "node": node.to_dict()}) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())
            os.fsync(fd)
            _PerRecordJournal.fsyncs += 1
        finally:
            os.close(fd)
        return 0


def _run(journal: Journal, threads: int, records: int) -> float:
    nodes = [journal.new_node(stage=1, operation="draft") for _ in range(threads)]
    summary = "ran cleanly; val_accuracy=0.7925 " * 8

    def work(i: int) -> None:
        for k in range(records):
            journal.update(nodes[i].id, summary=f"{summary} {k}", phases_done=("phase0", "phase1"))

    ts = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--records", type=int, default=200)
    ap.add_argument("--dir", default=None)
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes, only to show the script runs (tests/test_bench_smoke.py)",
    )
    args = ap.parse_args(argv)
    if args.smoke:
        args.threads, args.records = [1, 2], 10
    rows = []
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="group_commit_") as tmp:
        for threads in args.threads:
            n = threads * args.records
            old_path = Path(tmp) / f"old{threads}.jsonl"
            _PerRecordJournal.fsyncs = 0
            old_s = _run(_PerRecordJournal(old_path), threads, args.records)
            old_fsyncs = _PerRecordJournal.fsyncs
            new_path = Path(tmp) / f"new{threads}.jsonl"
            before = fileio.fsync_count(new_path)
            new_s = _run(Journal(new_path), threads, args.records)
            new_fsyncs = fileio.fsync_count(new_path) - before
            rows.append(
                {
                    "threads": threads,
                    "records": n,
                    "per_record_s": round(old_s, 3),
                    "per_record_fsyncs": old_fsyncs,
                    "group_s": round(new_s, 3),
                    "group_fsyncs": new_fsyncs,
                    "ms_per_record_before": round(1000 * old_s / n, 3),
                    "ms_per_record_after": round(1000 * new_s / n, 3),
                    "speedup": round(old_s / new_s, 2),
                }
            )
    print("threads  records  fsync/record: s (fsyncs, ms/record)  group commit: s (fsyncs, ms/record)  ratio")
    for r in rows:
        print(
            f"{r['threads']:>7}  {r['records']:>7}  {r['per_record_s']:>8.3f} ({r['per_record_fsyncs']}, "
            f"{r['ms_per_record_before']:.3f})  {r['group_s']:>8.3f} ({r['group_fsyncs']}, "
            f"{r['ms_per_record_after']:.3f})  {r['speedup']:.2f}x"
        )
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
