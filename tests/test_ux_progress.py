"""Issue 19 items 2 (progress part) and 9: the status shows the LLM call in flight and every retry
as it happens; a resumed run shows its saved state at once, and its final line, when interrupted
before any node finished, still shows the saved progress (not ``stage - | ... tokens 0``)."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from pipeline_support import journal_nodes
from waiting import load_scaled

from ai_scientist.base.config import validate
from ai_scientist.llm.backend import BackendReply, CallTimeout, estimate_usage
from ai_scientist.llm.call import CallContext
from ai_scientist.llm.client import LLMClient
from ai_scientist.llm.cost import CostLedger
from ai_scientist.reporting.progress import Progress

DRIVER = Path(__file__).parent / "drive_run.py"


class FlakyBackend:
    """Times out twice, then answers; notes what the status line showed during each attempt."""

    name = "flaky"

    def __init__(self, progress: Progress):
        self.progress = progress
        self.seen: list[str] = []

    def structured_mode(self, model: str) -> str:
        return "native"

    def complete(self, messages, *, model, temperature, max_tokens, schema, timeout, ctx):
        self.seen.append(self.progress.extra.get("in flight"))
        if len(self.seen) < 3:
            raise CallTimeout(f"no answer within {timeout:g} s (llm.timeout_s)")
        return BackendReply("done", usage=estimate_usage(messages, "done"))


def test_status_shows_the_call_in_flight_and_each_retry():
    stream = io.StringIO()
    progress = Progress(stream=stream, live=False)
    cfg = validate({"llm": {"max_attempts": 4, "backoff_base_s": 0, "timeout_s": 7}})
    backend = FlakyBackend(progress)
    client = LLMClient(cfg, backend, cost=CostLedger(None), sleep=lambda s: None)
    client.observer = progress
    res = client.complete(
        [{"role": "user", "content": "hi"}], role="code", ctx=CallContext("n0003", "1", "phase1", "step2")
    )
    assert res.text == "done"
    assert backend.seen == [
        "n0003 phase1/step2",
        "n0003 phase1/step2 attempt 2",
        "n0003 phase1/step2 attempt 3",
    ]
    assert progress.extra["in flight"] == "-"  # nothing left in flight
    out = stream.getvalue()
    for attempt in (1, 2):
        assert f"n0003 phase1/step2: attempt {attempt} failed (CallTimeout: no answer within 7 s" in out
    assert out.count("retrying in 0 s") == 2


def test_plain_lines_show_the_running_call_not_the_gap_between_attempts():
    """Plain mode prints at most every interval: the printed line must name the attempt running
    then. (The main job printed `in flight -` every 100 s while a 120 s local call was running,
    because lines came out when an attempt ended.)"""
    stream = io.StringIO()
    progress = Progress(stream=stream, live=False, plain_interval_s=0)
    cfg = validate({"llm": {"max_attempts": 4, "backoff_base_s": 0, "timeout_s": 7}})
    client = LLMClient(cfg, FlakyBackend(progress), cost=CostLedger(None), sleep=lambda s: None)
    client.observer = progress
    client.complete(
        [{"role": "user", "content": "hi"}], role="code", ctx=CallContext("n0003", "1", "phase1", "step2")
    )
    status = [line for line in stream.getvalue().splitlines() if "| in flight " in line]
    assert [line.rsplit("| in flight ", 1)[1] for line in status] == [
        "n0003 phase1/step2",
        "n0003 phase1/step2 attempt 2",
        "n0003 phase1/step2 attempt 3",
    ]


def _drive(*argv: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(DRIVER), *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ))  # fmt: skip


def _wait(path: Path, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.time() + load_scaled(timeout)
    while not path.exists():
        assert proc.poll() is None, f"ended before {path.name}: {proc.stderr.read()[-2000:]}"
        assert time.time() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def _interrupt(proc: subprocess.Popen) -> tuple[int, str]:
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=load_scaled(60))
    return proc.returncode, err


def test_resume_shows_saved_state_at_once_and_in_its_final_line(tmp_path):
    first = tmp_path / "hang1"
    proc = _drive("run", str(tmp_path), "run", "--hang", "n0002", "phase2", str(first))
    _wait(first, proc)
    code, _ = _interrupt(proc)
    assert code == 130
    run = tmp_path / "experiments" / "run"
    nodes = journal_nodes(run)
    buggy = sum(1 for n in nodes.values() if n["status"] == "buggy")
    assert buggy >= 1 and nodes["n0002"]["status"] == "running"  # n0001 finished; n0002 interrupted
    total = json.loads((run / "cost.json").read_text())["total"]
    tokens = total["prompt_tokens"] + total["completion_tokens"]
    assert tokens > 0

    second = tmp_path / "hang2"  # the resumed n0002 hangs again: no node finishes this time
    proc = _drive("resume", str(run), "--hang", "n0002", "phase2", str(second))
    _wait(second, proc)
    code, err = _interrupt(proc)
    assert code == 130, err[-2000:]
    lines = [ln for ln in err.splitlines() if "nodes running" in ln]
    assert lines, err[-2000:]
    restored = lines[0]  # printed before any node of the resumed run finished
    assert "stage 1 |" in restored and f"buggy {buggy}" in restored and f"tokens {tokens:,}" in restored
    final = next(ln for ln in reversed(lines) if "final:" in ln)
    assert "stage 1 |" in final and f"buggy {buggy}" in final
    shown = int(re.search(r"tokens ([\d,]+)", final).group(1).replace(",", ""))
    assert shown >= tokens > 0
