"""Issue 19 item 6: one definition of a call and an attempt, used everywhere.

An attempt is one request (one prompt-log file, answered or failed); a call is one logical
``LLMClient.complete`` (its retries and repair round included). A scripted run with timeouts
(retried, and one call that runs out of attempts) is then read back through ``logs inspect``,
``logs nodes``, ``logs cost``, the prompt-log files and ``cost.json``: the same numbers for
calls, attempts, failed attempts, tokens and models everywhere; the error message's attempt
count is the last attempt number in the files.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

import pytest
from ai_scientist_testing.scripted import ExampleResponder
from pipeline_support import journal_nodes, start_run

from ai_scientist.cli.main import main
from ai_scientist.llm.backend import CallTimeout

MAX_ATTEMPTS = 3


class TimeoutsResponder(ExampleResponder):
    """The call carrying a draft's plan (its code+plan call, or its plan call with merge_calls off):
    n0001's times out once (then answers); n0002's times out every time."""

    def __init__(self) -> None:
        super().__init__(buggy_nodes=())
        self.tries: dict[tuple[str, str], int] = defaultdict(int)

    def __call__(self, messages, schema, ctx):
        key = (ctx.node_id, ctx.phase)
        self.tries[key] += 1
        if ctx.label in ("plan", "code+plan") and (
            ctx.node_id == "n0002" or (ctx.node_id == "n0001" and self.tries[key] == 1)
        ):
            raise CallTimeout(f"scripted: no answer within 1 s (llm.timeout_s) for {ctx.node_id}")
        return super().__call__(messages, schema, ctx)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("counts")
    code, run, _ = start_run(
        tmp,
        "agent.stages.stage1_max_iters=2",
        "agent.search.num_drafts=2",
        f"llm.max_attempts={MAX_ATTEMPTS}",
        "llm.backoff_base_s=0",
        "llm.backoff_max_s=0",
        responder=TimeoutsResponder(),
    )
    assert code in (0, 3), code
    return run


def _logs(capsys, run: Path, *argv: str):
    assert main(["logs", str(run), *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _from_files(run: Path, node: str) -> dict:
    """The numbers, counted straight from the prompt-log files (the test's own count)."""
    recs = [json.loads(p.read_text()) for p in sorted((run / "nodes" / node / "prompt_logs").glob("*.json"))]
    return {
        "calls": len({r["call"] for r in recs}),
        "attempts": len(recs),
        "failed_attempts": sum(1 for r in recs if r["error"]),
        "prompt_tokens": sum((r["usage"] or {}).get("prompt_tokens", 0) for r in recs),
        "completion_tokens": sum((r["usage"] or {}).get("completion_tokens", 0) for r in recs),
        "models": sorted({r["model"] for r in recs}),
    }


def test_the_run_had_retries_and_an_exhausted_call(run_dir):
    n1 = _from_files(run_dir, "n0001")
    n2 = _from_files(run_dir, "n0002")
    assert n1["failed_attempts"] == 1 and n1["attempts"] > n1["calls"]
    assert n2 == {**n2, "calls": 1, "attempts": MAX_ATTEMPTS, "failed_attempts": MAX_ATTEMPTS}
    node = journal_nodes(run_dir)["n0002"]
    assert node["status"] == "buggy"
    # the error names the same number of attempts as the files, which number them 1..N
    said = int(re.search(r"failed after (\d+) attempts", node["error"]).group(1))
    numbers = [
        json.loads(p.read_text())["attempt"]
        for p in sorted((run_dir / "nodes/n0002/prompt_logs").glob("*.json"))
    ]
    assert said == max(numbers) == len(numbers) == MAX_ATTEMPTS and numbers == list(range(1, said + 1))


def test_inspect_nodes_cost_and_files_agree(run_dir, capsys):
    cost_file = json.loads((run_dir / "cost.json").read_text())
    assert _logs(capsys, run_dir, "cost") == cost_file
    nodes = {n["id"]: n for n in _logs(capsys, run_dir, "nodes")}
    folders = sorted(p.parent.name for p in (run_dir / "nodes").glob("*/prompt_logs"))
    total = defaultdict(int)
    models: set[str] = set()
    for nid in folders:
        files = _from_files(run_dir, nid)
        bucket = cost_file["by_node"][nid]
        for key in ("calls", "attempts", "failed_attempts", "prompt_tokens", "completion_tokens"):
            assert bucket[key] == files[key], (nid, key)
            total[key] += files[key]
        models |= set(files["models"])
        if nid in nodes:
            inspected = _logs(capsys, run_dir, "inspect", nid)
            assert {k: inspected[k] for k in files} == files, nid
            assert nodes[nid]["llm"] == files, nid
    for key, value in total.items():
        assert cost_file["total"][key] == value, key
    assert set(cost_file["by_model"]) == models
    # and the plain-text views print the same totals
    assert main(["logs", str(run_dir), "nodes"]) == 0
    line = capsys.readouterr().out.splitlines()[-1]
    assert f"{total['calls']} calls, {total['attempts']} attempts ({total['failed_attempts']} failed)" in line
    assert main(["logs", str(run_dir), "cost"]) == 0
    row = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("TOTAL"))
    assert row.split()[1:4] == [str(total["calls"]), str(total["attempts"]), str(total["failed_attempts"])]
