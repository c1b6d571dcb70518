"""The demo's command as one piece (``scripts/demo.sh``): its config file, idea and seed code, with
the scripted LLM in place of the embedded model; nothing overridden.

The paths come from ``scripts/demo.sh`` itself and every expectation from the config file it names
or from what the run wrote (resolved config, prompt logs, events, report): a change to the demo's
config is tested as the demo runs it, including the settings every other test overrides (the
default embedder, the report, the prompt budget of the embedded model).
"""

from __future__ import annotations

import json
import re
from argparse import Namespace
from pathlib import Path

import yaml
from ai_scientist_testing.scripted import ExampleResponder
from components import latex_or_skip, matplotlib_or_skip, wordllama_or_skip
from pipeline_support import events, journal_nodes, prompt_records

from ai_scientist.cli.commands import execute, setup_run
from ai_scientist.llm.scripted_backend import ScriptedBackend

ROOT = Path(__file__).resolve().parents[1]


def demo_command() -> dict[str, Path]:
    """The config, idea and seed code ``scripts/demo.sh`` passes to ``ai-scientist run``."""
    text = (ROOT / "scripts" / "demo.sh").read_text()
    m = re.search(r"ai-scientist run (\S+) --idea (\S+)\s*\\?\s*--load-code (\S+)", text)
    assert m, "scripts/demo.sh no longer runs `ai-scientist run CONFIG --idea IDEA --load-code FILE`"
    return {k: ROOT / v for k, v in zip(("config", "idea", "seed"), m.groups(), strict=True)}


def _leaves(d: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_leaves(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def test_the_demo_config_runs_as_one_piece(tmp_path):
    wordllama_or_skip()  # memory.embedding.backend is left at its default
    latex_or_skip()  # the demo's config writes the report
    matplotlib_or_skip()
    demo = demo_command()
    args = Namespace(config=str(demo["config"]), overrides=[], idea=str(demo["idea"]), load_code=str(demo["seed"]),
                     resources=None, out=str(tmp_path), name="demo", from_phase=None, run_dir=None, stop_after=None)  # fmt: skip
    run, resources = setup_run(args)
    responder = ExampleResponder()
    code = execute(run, resources=resources, backend=ScriptedBackend(responder))
    run_dir = Path(run.dir)
    assert code == 0
    state = json.loads((run_dir / "state.json").read_text())
    assert state["status"] == "completed" and state["exit_code"] == 0

    # every setting of the demo's config file is the run's
    wanted = _leaves(yaml.safe_load(demo["config"].read_text()))
    resolved = _leaves(yaml.safe_load((run_dir / "config.resolved.yaml").read_text()))
    assert {k: resolved.get(k) for k in wanted} == wanted
    assert resolved["memory.embedding.backend"] == "wordllama" and resolved["memory.enabled"] is True

    records = prompt_records(run_dir)
    limit = wanted["context.max_prompt_tokens"]
    assert records and all(r["budget"]["limit"] == limit and r["budget"]["tokens"] <= limit for r in records)
    code_calls = [r for r in records if r["phase"] == "phase2"]
    assert code_calls and all(
        (r["params"]["max_tokens"], r["params"]["temperature"])
        == (wanted["agent.code.max_tokens"], wanted["agent.code.temperature"])
        for r in code_calls
    )
    # constrain_answers: the plan may list only installed packages, and nothing new
    deps = code_calls[0]["params"]["schema"]["properties"]["dependencies"]["properties"]
    assert "enum" in deps["pip"]["items"] and deps["new"]["maxItems"] == 0
    # --load-code: the first draft starts from the seed code, as sent
    first = min((r for r in code_calls if r["node_id"] == "n0001"), key=lambda r: r["call"])
    seed = demo["seed"].read_text()
    assert any(seed.strip().splitlines()[-1] in m["content"] for m in first["messages"])

    nodes = journal_nodes(run_dir)
    for stage in (1, 2, 3, 4):
        search = [n for n in nodes.values() if n["stage"] == stage and n["operation"] != "seed_eval"]
        assert 1 <= len(search) <= wanted[f"agent.stages.stage{stage}_max_iters"], (stage, len(search))
    assert not [c for c in responder.calls if c[1] == "phase5_plot"]  # agent.plots.enabled: false

    steps = {e["step"]: e for e in events(run_dir) if e["type"] == "report_step"}
    assert steps["writeup"]["status"] == "ok" and (run_dir / steps["writeup"]["result"]["pdf"]).is_file()
    assert "citations disabled" in steps["writeup"]["result"]["citations"]
    review = json.loads((run_dir / "review.json").read_text())
    assert len(review["reviews"]) == wanted["report.num_reviews"]
