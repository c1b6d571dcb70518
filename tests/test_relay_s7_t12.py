"""Issue 28, relay runs s7 mm1 (the compiled-C blocked-matmul idea) and s7 ln1 (the bundled
label-noise idea), a capable model answering each request alone:

- mm1 013, 014, 017, 018: the execution review found a node's timings disturbed by machine load
  (its ``measurement`` caveat), but the same node's plotting call and figure critique did not get
  it, so each rediscovered it. Now both carry the review's caveat, once, when it gave one.
- ln1 024: the stage summary's seed tables repeated the parent's unchanged metrics for every
  child. Now a metric a child measured exactly as its parent did, on its search run and on every
  seed re-run, is shown once; another child's table says it in one line.

Each test derives what the prompts must say from the run's files (review.json, the journal, the
prompt logs), never from constants of its own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ai_scientist_testing.scripted import ExampleResponder
from pipeline_support import prompt_records, record_text, start_run

# the caveat a load-disturbed benchmark's review gave (relay s7 mm1 012), for every other node
LOAD = (
    "The run shared the machine with other jobs (load average 3.1 on 2 cores): the timings of the "
    "larger tiles vary by up to 2x between repetitions, so the speed-up is not comparable"
)


class LoadedResponder(ExampleResponder):
    """Every other node's review gives a measurement caveat; the rest give none."""

    def _exec_review(self, text: str, ctx: Any) -> str:
        review = json.loads(super()._exec_review(text, ctx))
        review["measurement"] = LOAD if int(ctx.node_id[1:]) % 2 == 0 else ""
        return json.dumps(review)


@pytest.fixture(scope="module")
def loaded(tmp_path_factory) -> Path:
    code, run_dir, _ = start_run(tmp_path_factory.mktemp("s7_t12_load"), responder=LoadedResponder())
    assert code == 0
    return run_dir


def _calls(run: Path, kind: str) -> list[tuple[str, str]]:
    """(node id, prompt text) of every ``kind`` call ("plot" or "critique") a node made."""
    out = []
    for rec in prompt_records(run):
        phase, label = rec.get("phase") or "", rec.get("label") or ""
        if kind == "plot" and phase == "phase5_plot" and label.startswith("plot"):
            out.append((rec["node_id"], record_text(rec)))
        elif kind == "critique" and phase == "phase5_vlm":
            out.append((rec["node_id"], record_text(rec)))
    return out


def test_plotting_and_critique_carry_the_reviews_measurement_caveat_once(loaded):
    """A node's plotting call and its figure critique carry its execution review's measurement
    caveat (as review.json has it) exactly once; a node whose review gave none gets no caveat line
    (relay s7 mm1 013/014, 017/018: each call rediscovered the machine load the review had found)."""
    with_caveat = without = 0
    for kind in ("plot", "critique"):
        calls = _calls(loaded, kind)
        assert calls, kind
        for node_id, text in calls:
            review = json.loads((loaded / "nodes" / node_id / "review.json").read_text())
            said = " ".join(str(review.get("measurement") or "").split())
            line = "with this caveat on its numbers"
            if said:
                assert text.count(said) == 1, (kind, node_id)
                assert text.count(line) == 1, (kind, node_id)
                # on the caveat's own line, so that it is read as the review's, about this node
                assert any(said in ln and line in ln for ln in text.splitlines()), (kind, node_id)
                with_caveat += 1
            else:
                assert line not in text, (kind, node_id)
                without += 1
    assert with_caveat >= 2 and without >= 2, (with_caveat, without)
