"""The walk of one node in docs/architecture.md is the one a run really takes (issue 29).

A scripted run's first code call is followed on the real stacks: the main thread's when the stage
loop hands the node to the workers, and the worker thread's when the prompt log is written. Every
module of the package on those stacks is a hop of the docs' table, or the one indirection the docs
name (the worker pool's thread); the table holds at most ten modules and says how many.
"""

from __future__ import annotations

import re
import traceback
from pathlib import Path

from pipeline_support import start_run

from ai_scientist.promptlog.record import PromptLogger
from ai_scientist.runloop.workers import Workers

DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
WORDS = {"Eight": 8, "Nine": 9, "Ten": 10}


def _modules(stack: list[traceback.FrameSummary]) -> list[str]:
    out: list[str] = []
    for frame in stack:
        if "/ai_scientist/" in frame.filename:
            mod = frame.filename.split("/ai_scientist/")[1]
            if not out or out[-1] != mod:
                out.append(mod)
    return out


def test_the_documented_walk_is_the_path_a_code_call_takes(tmp_path, monkeypatch):
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Follow one node from `ai-scientist run` to its prompt log")[1].split("\n## ")[0]
    hops = re.findall(r"^\| (\d+) \| `([a-z0-9_/]+\.py)` \|", section, flags=re.M)
    table = [m for _, m in hops]
    assert [int(n) for n, _ in hops] == list(range(1, len(table) + 1))
    said = re.search(r"^(\w+) modules, each hop a direct call", section, flags=re.M)
    assert said and WORDS[said.group(1)] == len(table) <= 10
    indirection = set(
        re.findall(
            r"the one indirection is the worker\s+thread: the `WorkerPool` \(`([a-z0-9_/]+\.py)`\)", section
        )
    )
    assert indirection == {"runloop/scheduler.py"}

    stacks: dict[str, list[traceback.FrameSummary]] = {}
    write, add = PromptLogger.write, Workers.add

    def logged(self, record, *a, **k):
        stacks.setdefault("worker", traceback.extract_stack())
        return write(self, record, *a, **k)

    def handed(self, *a, **k):
        stacks.setdefault("main", traceback.extract_stack())
        return add(self, *a, **k)

    monkeypatch.setattr(PromptLogger, "write", logged)
    monkeypatch.setattr(Workers, "add", handed)
    start_run(tmp_path, "agent.stages.stage1_max_iters=1", "report.enabled=false")
    main, worker = _modules(stacks["main"]), _modules(stacks["worker"])
    # the main thread enters at cli/commands (the tests call execute(); cli/main is hop 1 before it)
    assert main[0] == "cli/commands.py" and "cli/main.py" in table
    walked = set(main) | set(worker) | {"promptlog/record.py"}
    assert walked - indirection == set(table) - {"cli/main.py"}, (main, worker)
    # and in the table's order: every module's first appearance on the path
    path = [m for m in main + worker + ["promptlog/record.py"] if m not in indirection]
    first = list(dict.fromkeys(path))
    assert first == [m for m in table if m != "cli/main.py"], first
