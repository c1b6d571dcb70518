"""Resources declared for a run are staged with digests, listed in prompts and visible to experiments."""

from __future__ import annotations

import json

from ai_scientist_testing.scripted import ExampleResponder
from pipeline_support import run_args

from ai_scientist.cli.commands import execute, setup_run
from ai_scientist.cli.main import main
from ai_scientist.llm.scripted_backend import ScriptedBackend

ONE_STAGE = (
    "agent.stages.stage2_max_iters=0",
    "agent.stages.stage3_max_iters=0",
    "agent.stages.stage4_max_iters=0",
    "agent.multi_seed_eval.num_seeds=1",
)


def test_resources_staged_indexed_and_visible(tmp_path):
    data = tmp_path / "data" / "noisy"
    data.mkdir(parents=True)
    (data / "labels.csv").write_text("x,y\n1,0\n")
    spec = tmp_path / "resources.yaml"
    spec.write_text(
        "resources:\n  - {id: noisy_labels, type: local, path: data/noisy, "
        "summary: a CSV of noisy labels, class: dataset}\n"
    )
    args = run_args(tmp_path, *ONE_STAGE)
    args.resources = str(spec)
    run, resources = setup_run(args)
    code = execute(run, resources=resources, backend=ScriptedBackend(ExampleResponder(buggy_nodes=())))
    assert code == 0
    index = json.loads((run.dir / "resources" / "index.json").read_text())
    item = next(i for i in index["items"] if i["id"] == "noisy_labels")
    assert item.get("sha256") or item.get("digest")
    # the draft's first call (its plan rides in its code answer)
    plan_log = json.loads(
        next((run.dir / "nodes" / "n0001" / "prompt_logs").glob("*_phase2_*.json")).read_text()
    )
    assert "noisy_labels" in json.dumps(plan_log["messages"])
    ws = run.dir / "nodes" / "n0001" / "workspace"
    assert (ws / "resources" / "noisy_labels" / "labels.csv").read_text().startswith("x,y")


def test_missing_resource_path_exits_2_naming_the_entry(tmp_path, capsys):
    spec = tmp_path / "resources.yaml"
    spec.write_text("resources:\n  - {id: gone, type: local, path: does/not/exist}\n")
    code = main(
        [
            "run",
            "--idea",
            str(run_args(tmp_path).idea),
            "--resources",
            str(spec),
            "--out",
            str(tmp_path / "out"),
            "--set",
            "report.enabled=false",
        ]
    )
    assert code == 2
    assert "gone" in capsys.readouterr().err
