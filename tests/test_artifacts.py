"""The typed node artifacts (``ai_scientist/base/artifacts.py``): the plan, the code answer, the
build record, phase 4's run record, the execution review, the plots record and the figure critique
each have one reader and one writer, and the files keep the format the code before them wrote
(the recorded fixture's files read back to the same values and write back to the same JSON), so
an old run resumes and a recorded run replays; the phases hand them to each other."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from ai_scientist_testing.bench_support import recorded_run

from ai_scientist.base import artifacts
from ai_scientist.base.artifacts import (
    BuildRecord,
    CodeAnswer,
    CommandOutput,
    Critique,
    Plan,
    PlotsRecord,
    Review,
    RunRecord,
    read_artifact,
    write_artifact,
)
from ai_scientist.base.nodedata import unmeasured
from ai_scientist.base.paths import (
    CODE_FILE,
    COMPILE_FILE,
    PLAN_FILE,
    PLOTS_FILE,
    REVIEW_FILE,
    RUN_FILE,
    VLM_FILE,
)

FIXTURE = recorded_run()
RUN_FILES = sorted(FIXTURE.glob(f"nodes/*/{RUN_FILE}"))
REVIEW_FILES = sorted(FIXTURE.glob(f"nodes/*/{REVIEW_FILE}"))


def test_the_fixture_has_both_artifacts():
    assert RUN_FILES and REVIEW_FILES
    # a failed run (no metrics read) and a measured one are both among them
    kinds = {"metrics_source" in json.loads(p.read_text()) for p in RUN_FILES}
    assert kinds == {True, False}


@pytest.mark.parametrize("path", RUN_FILES, ids=lambda p: p.parent.name)
def test_a_run_record_written_by_the_previous_code_reads_to_its_values(path, tmp_path):
    raw = json.loads(path.read_text(encoding="utf-8"))
    record = read_artifact(path, RunRecord)
    assert record is not None
    assert [o.to_json() for o in record.outputs] == raw["outputs"]
    assert record.duration_s == raw["duration_s"]
    assert list(record.missing_outputs) == raw["missing_outputs"]
    assert record.failure == raw["failure"]
    assert record.metrics_source == raw.get("metrics_source")
    assert [dict(m) for m in record.metrics] == raw.get("metrics", [])
    assert list(record.unmeasured_files) == raw.get("unmeasured_files", [])
    assert record.self_reported is None  # the fixture has no grader
    # written back: the same JSON, keys in the same order (what the viewer and a resume read)
    out = write_artifact(tmp_path / RUN_FILE, record)
    assert out.read_text(encoding="utf-8") == path.read_text(encoding="utf-8")
    assert read_artifact(out, RunRecord) == record
    assert unmeasured(path.parent) == frozenset(record.unmeasured_files)


@pytest.mark.parametrize("path", REVIEW_FILES, ids=lambda p: p.parent.name)
def test_a_review_written_by_the_previous_code_reads_to_its_values(path, tmp_path):
    raw = json.loads(path.read_text(encoding="utf-8"))
    review = read_artifact(path, Review)
    assert review is not None
    assert (review.is_bug, review.findings, review.remarks, review.measurement) == (
        raw["is_bug"],
        raw["findings"],
        raw["remarks"],
        raw["measurement"],
    )
    assert review.headline == raw.get("headline") and review.metrics == raw.get("metrics")
    out = write_artifact(tmp_path / REVIEW_FILE, review)
    assert out.read_text(encoding="utf-8") == path.read_text(encoding="utf-8")
    assert read_artifact(out, Review) == review


def test_a_graded_record_keeps_the_programs_own_metrics_apart(tmp_path):
    run = RunRecord(
        outputs=(CommandOutput("python3 run.py", 0, None, "", "acc=0.9\n", "", 1.25),),
        duration_s=1.25,
        unmeasured_files=("seed.npy",),
        metrics=({"name": "acc", "value": 0.8, "direction": "maximize", "dataset": "test"},),
        metrics_source="grader",
        self_reported=({"name": "acc", "value": 0.9, "direction": "maximize", "dataset": None},),
        self_reported_source="metrics.json",
        mismatches=(
            {"name": "acc", "graded": 0.8, "self_reported": 0.9, "difference": 0.1, "tolerance": 0.01},
        ),
    )
    path = write_artifact(tmp_path / RUN_FILE, run)
    raw = json.loads(path.read_text())
    assert list(raw) == [
        "outputs",
        "duration_s",
        "missing_outputs",
        "failure",
        "unmeasured_files",
        "metrics",
        "metrics_source",
        "self_reported",
        "self_reported_source",
        "mismatches",
    ]
    back = read_artifact(path, RunRecord)
    assert back == run
    assert back is not None and back.metrics[0]["value"] == 0.8 and back.self_reported[0]["value"] == 0.9


def test_a_review_with_parsed_metrics_and_a_headline_round_trips(tmp_path):
    review = Review(
        is_bug=False,
        findings="acc=0.91 at lr=0.1",
        measurement="timed once",
        headline="lr=0.1",
        metrics=({"name": "acc", "value": 0.91, "direction": "maximize"},),
    )
    path = write_artifact(tmp_path / REVIEW_FILE, review)
    assert list(json.loads(path.read_text())) == [
        "findings",
        "remarks",
        "measurement",
        "headline",
        "is_bug",
        "metrics",
    ]
    assert read_artifact(path, Review) == review
    failed = replace(Review(is_bug=False), remarks="review unavailable: timeout", error="timeout")
    assert read_artifact(write_artifact(tmp_path / "r2.json", failed), Review) == failed


def test_a_review_before_issue_28_reads_its_summary_as_findings(tmp_path):
    path = tmp_path / REVIEW_FILE
    path.write_text(json.dumps({"is_bug": False, "summary": "ran; acc=0.5"}))
    review = read_artifact(path, Review)
    assert review is not None and review.findings == "ran; acc=0.5"


@pytest.mark.parametrize(
    ("kind", "data", "named"),
    [
        (RunRecord, [1, 2], "not a JSON object"),
        (RunRecord, {"outputs": "no", "duration_s": 1}, "outputs"),
        (RunRecord, {"outputs": [], "duration_s": 1, "metrics": [{"value": 1}]}, "metrics"),
        (RunRecord, {"outputs": [{"command": "x", "exit_code": "0"}], "duration_s": 1}, "exit_code"),
        (Review, {"findings": "x"}, "is_bug"),
        (Review, {"is_bug": "false"}, "is_bug"),
    ],
)
def test_a_malformed_file_is_a_clear_error(tmp_path, kind, data, named):
    """A malformed file raises ValueError naming the field (the checkpoint then redoes the phase)."""
    path = tmp_path / "artifact.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=named):
        read_artifact(path, kind)


def test_no_file_reads_as_none(tmp_path):
    assert read_artifact(tmp_path / RUN_FILE, RunRecord) is None


@pytest.mark.parametrize("damage", ["torn", "malformed"])
def test_a_done_phase_whose_typed_artifact_does_not_read_is_redone(tmp_path, damage):
    """checkpoint_typed reuses a done phase's RunRecord as read back, and redoes the phase when
    the file is torn (a power loss) or has the wrong shape (the reader's ValueError)."""
    from pipeline_support import run_args

    from ai_scientist.cli.commands import setup_run
    from ai_scientist.phases.base import NodeContext, checkpoint_typed
    from ai_scientist.treesearch.journal import Journal

    run, _ = setup_run(run_args(tmp_path))

    def ctx_of(journal: Journal, node_id: str) -> NodeContext:
        return NodeContext(
            run=run,
            node=journal.get(node_id),
            parent=None,
            llm=None,
            executor=None,
            prompts=None,
            environment={},
            environment_text="",
            journal=journal,
        )

    journal = Journal(run.journal_path)
    ctx = ctx_of(journal, journal.new_node(stage=1, operation="draft").id)
    first = read_artifact(RUN_FILES[-1], RunRecord)
    assert first is not None
    calls = []

    def compute(value: RunRecord):
        def run_it() -> RunRecord:
            calls.append(value)
            return value

        return run_it

    assert checkpoint_typed(ctx, "phase4", RunRecord, RUN_FILE, compute(first)) == first
    resumed = ctx_of(Journal(run.journal_path), ctx.node.id)
    second = replace(first, duration_s=first.duration_s + 1)
    assert checkpoint_typed(resumed, "phase4", RunRecord, RUN_FILE, compute(second)) == first
    assert calls == [first]  # reused, read back as the same record
    path = ctx.dir / RUN_FILE
    path.write_text('{"outputs": [' if damage == "torn" else '{"outputs": 3, "duration_s": 1}')
    resumed = ctx_of(Journal(run.journal_path), ctx.node.id)
    assert checkpoint_typed(resumed, "phase4", RunRecord, RUN_FILE, compute(second)) == second
    assert calls == [first, second]
    assert read_artifact(path, RunRecord) == second


# the artifacts of the other phases, as the recorded run's code wrote them
KINDS = {
    PLAN_FILE: Plan,
    CODE_FILE: CodeAnswer,
    COMPILE_FILE: BuildRecord,
    PLOTS_FILE: PlotsRecord,
    VLM_FILE: Critique,
}
OTHER_FILES = sorted(p for name in KINDS for p in FIXTURE.glob(f"nodes/*/{name}"))


def test_the_fixture_has_every_other_artifact():
    assert {p.name for p in OTHER_FILES} == set(KINDS)


@pytest.mark.parametrize("path", OTHER_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_an_artifact_written_by_the_previous_code_reads_to_its_values_and_writes_back(path, tmp_path):
    raw = json.loads(path.read_text(encoding="utf-8"))
    kind = KINDS[path.name]
    artifact = read_artifact(path, kind)
    assert artifact is not None
    if isinstance(artifact, Plan):
        deps = raw.get("dependencies") or {}
        assert (artifact.goal_summary, artifact.source) == (raw["goal_summary"], raw["plan_source"])
        assert list(artifact.dependencies.pip) == deps.get("pip", [])
        assert artifact.guidance_for("phase2") == (raw.get("phase_guidance") or {}).get("phase2")
    elif isinstance(artifact, CodeAnswer):
        assert artifact.text_files() == {f["path"]: f["content"] for f in raw["files"]}
        assert list(artifact.run.commands) == raw["run"]["commands"]
        assert list(artifact.build.commands) == raw["build"].get("commands", [])
    elif isinstance(artifact, BuildRecord):
        assert artifact.ok == raw["ok"] and [c.command for c in artifact.commands] == [
            c["command"] for c in raw["commands"]
        ]
    elif isinstance(artifact, PlotsRecord):
        assert [(f.file, f.caption) for f in artifact.figures] == [
            (f["file"], f["caption"]) for f in raw["figures"]
        ]
        assert (artifact.attempts, artifact.error) == (raw["attempts"], raw["error"])
    else:
        assert isinstance(artifact, Critique)
        verdict = raw.get("critique")
        assert (artifact.verdict.valid if artifact.verdict else None) == (verdict or {}).get("valid")
        assert artifact.skipped == raw.get("skipped")
    out = write_artifact(tmp_path / path.name, artifact)
    assert out.read_text(encoding="utf-8") == path.read_text(encoding="utf-8")
    assert read_artifact(out, kind) == artifact


def test_a_plan_keeps_its_answer_as_given(tmp_path):
    """The plan is the model's JSON: its keys in the order answered and a field the pipeline does
    not read are kept (the file and the prompts that show a plan are those bytes)."""
    data = {
        "implementation_strategy": "s",
        "goal_summary": "g",
        "extra_note": "kept",
        "dependencies": {
            "pip": ["numpy"],
            "apt": [],
            "source": [],
            "new": [{"name": "x", "manager": "pip", "reason": "r"}],
        },
        "phase_guidance": {"phase4": "run it", "phase1": ""},
    }
    plan = Plan.from_json(data).with_source("own")
    assert list(plan.to_json()) == [*data, "plan_source"]
    assert plan.dependencies.new_names("pip") == ("x",) and plan.guidance_for("phase1") == ""
    assert plan.shown()["phase_guidance"] == {"phase4": "run it"}
    path = write_artifact(tmp_path / PLAN_FILE, plan)
    assert read_artifact(path, Plan) == plan


@pytest.mark.parametrize(
    ("kind", "data", "named"),
    [
        (Plan, {"goal_summary": "g", "dependencies": {"pip": "numpy"}}, "pip"),
        (Plan, {"goal_summary": "g", "phase_guidance": ["x"]}, "phase_guidance"),
        (CodeAnswer, {"files": [{"path": 3, "content": ""}]}, "path"),
        (CodeAnswer, {"files": [], "run": {"commands": "python3 x.py"}}, "run.commands"),
        (BuildRecord, {"commands": []}, "ok"),
        (PlotsRecord, {"figures": "a.png"}, "figures"),
        (Critique, {"model": "m", "critique": {"problems": "none"}}, "problems"),
    ],
)
def test_a_malformed_artifact_of_another_phase_is_a_clear_error(tmp_path, kind, data, named):
    path = tmp_path / "artifact.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=named):
        read_artifact(path, kind)


def test_a_node_reads_its_parents_artifacts_once_and_is_handed_its_own(tmp_path, monkeypatch):
    """Every read of a plan, code answer or build record by the node pipeline (through the one
    reader), during a scripted run: a node's own are handed from phase to phase (never read back in a run that is not
    resumed), its parent's are read once by each child (the code before read a child's parent's
    code answer up to five times: plan prompt, code prompt, edit base, review and plotting diffs)."""
    from pipeline_support import journal_nodes, start_run

    reads: list[tuple[str, str]] = []
    real = artifacts.read_json

    def counting(path, *args, **kwargs):
        # the node's phases' reads (the run loop reads plans and answers too, for the next
        # nodes' prompts: the siblings' design lines, the protocol node's code)
        reader = sys._getframe(2).f_globals.get("__name__", "")  # read_artifact's caller
        if reader.startswith("ai_scientist.phases."):
            reads.append((Path(path).parent.name, Path(path).name))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(artifacts, "read_json", counting)
    code, run_dir, _ = start_run(
        tmp_path,
        "agent.stages.stage1_max_iters=3",
        "agent.stages.stage2_max_iters=2",
        "agent.multi_seed_eval.num_seeds=1",
    )
    assert code == 0
    nodes = journal_nodes(run_dir)
    children: dict[str, int] = {}
    for n in nodes.values():
        if n.get("parent_id"):
            children[n["parent_id"]] = children.get(n["parent_id"], 0) + 1
    assert children, "the run has children"
    for name in (PLAN_FILE, CODE_FILE, COMPILE_FILE):
        counts = {nid: reads.count((nid, name)) for nid in nodes}
        for nid, n in counts.items():
            assert n <= children.get(nid, 0), (name, nid, n, children.get(nid, 0))
    # the children did read their parents' code answers (the count above is not trivially zero)
    assert sum(reads.count((nid, CODE_FILE)) for nid in children) >= 1
