"""The stage's evaluation protocol (issue 30): fixed by its first working node, shown to the later
nodes, and a node that changes it is kept but never ranked against the others.

The scripted run's tuning node for the first proposed idea trains on clean labels (``NOISE = 0.0``
instead of the protocol's 0.2): its accuracy beats every other node of the stage, and without the
protocol it would be the stage's best. The expectations come from the run's records: the
reference node's saved code, the journal's metrics, the events and the prompt logs.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ai_scientist_testing.scripted import TUNE_IDEAS, ExampleResponder
from pipeline_support import events, journal_nodes, prompt_records, start_run

from ai_scientist.cli.main import main
from ai_scientist.reporting.facts import stage_facts
from ai_scientist.reporting.viewer import build_view_data
from ai_scientist.runloop.protocol import (
    EvalProtocol,
    is_protocol_parameter,
    protocol_change,
    protocol_parameters,
)

_IDEA = re.compile(r"This node's idea:\s*(.+)")
CHANGED_IDEA = TUNE_IDEAS[0]


class CleanLabels(ExampleResponder):
    """The example's answers; the node tuning ``CHANGED_IDEA`` also removes the label noise."""

    def __init__(self, **kw: Any):
        super().__init__(**kw)
        self.changed: list[str] = []

    def _phase2(self, text: str, ctx: Any) -> str:
        answer = json.loads(super()._phase2(text, ctx))
        idea = _IDEA.search(text)
        if idea and idea.group(1).strip() == CHANGED_IDEA:
            self.changed.append(ctx.node_id)
            for f in answer["files"]:
                f["content"] = f["content"].replace("NOISE = 0.2", "NOISE = 0.0")
        return json.dumps(answer)


def test_a_node_that_changes_the_protocol_is_kept_out_of_the_ranking(tmp_path, capsys):
    responder = CleanLabels(buggy_nodes=())
    code, run_dir, _ = start_run(tmp_path, responder=responder)
    assert code == 0
    nodes = journal_nodes(run_dir)
    evs = events(run_dir)
    assert len(set(responder.changed)) == 1, responder.changed
    changed = responder.changed[0]
    node = nodes[changed]
    stage = node["stage"]

    # the protocol: fixed by the stage's first working node, from its saved code and metric
    fixed = next(e for e in evs if e["type"] == "eval_protocol" and e["stage"] == stage)
    ref_answer = json.loads((run_dir / "nodes" / fixed["node_id"] / "code_answer.json").read_text())
    assert [tuple(p) for p in fixed["parameters"]] == list(protocol_parameters(ref_answer))
    assert ["NOISE", "0.2"] in fixed["parameters"]
    assert fixed["metric"] == [
        nodes[fixed["node_id"]]["metric"]["name"],
        nodes[fixed["node_id"]]["metric"]["direction"],
        nodes[fixed["node_id"]]["metric"]["dataset"],
    ]

    # the node worked, is kept in the tree and the journal, marked with the reason
    assert node["status"] == "good" and node["metric"] is not None
    assert "NOISE = 0.0 instead of 0.2" in node["incomparable"]
    assert f"fixed by {fixed['node_id']}" in node["incomparable"]
    mark = next(e for e in evs if e["type"] == "node_incomparable")
    assert mark["node_id"] == changed and mark["reason"] == node["incomparable"]

    # it would have won: its metric beats every comparable node of its stage and the carried one
    state = json.loads((run_dir / "state.json").read_text())
    started = next(e for e in evs if e["type"] == "stage_started" and e["stage"] == stage)
    pool = [
        n
        for n in nodes.values()
        if (n["stage"] == stage and n["operation"] != "seed_eval" or n["id"] == started["carried_id"])
        and n["status"] == "good"
        and not n.get("incomparable")
    ]
    assert pool and all(node["metric"]["value"] > n["metric"]["value"] for n in pool)

    # ... and is never ranked: not the stage's best, not in its ranking nor its seed re-ranking
    best = next(e for e in evs if e["type"] == "stage_best" and e["stage"] == stage)
    assert best["node_id"] != changed
    assert state["stages"][str(stage)]["best"]["node_id"] == best["node_id"]
    assert changed not in [r["id"] for r in best["evidence"]["ranking"]]
    rerank = best["evidence"].get("seed_rerank") or {}
    assert changed not in rerank.get("candidates", []) and changed not in json.dumps(rerank.get("noise"))
    # no search decision grows it and no seed re-run re-measures it
    assert not [e for e in evs if e["type"] == "node_selected" and e.get("parent_id") == changed]
    assert not [n for n in nodes.values() if n.get("parent_id") == changed]

    # counts: neither good nor buggy, counted apart (the stage summary file and its prompt)
    summary = json.loads((run_dir / "stage_summaries" / f"stage{stage}.json").read_text())
    in_stage = [n for n in nodes.values() if n["stage"] == stage and n["operation"] != "seed_eval"]
    assert summary["incomparable"] == 1
    assert summary["good"] == sum(n["status"] == "good" and not n.get("incomparable") for n in in_stage)
    facts = next(
        r for r in prompt_records(run_dir) if r["phase"] == "summary" and r["label"] == f"stage{stage}"
    )
    text = facts["messages"][-1]["content"]
    assert "1 not comparable: changed the evaluation protocol" in text
    assert f"| {changed} |" in text and "not comparable: changed the evaluation protocol" in text

    # the later nodes of the stage (and the next stages) are told the protocol and asked to keep it
    later = [
        r
        for r in prompt_records(run_dir)
        if r["phase"] == "phase2" and r["node_id"] in nodes and nodes[r["node_id"]]["stage"] >= stage
    ]
    assert later
    carried_checked = 0
    for rec in later:
        layer = next(e for e in rec["ledger"] if e["layer"] == "evaluation_protocol")
        assert layer["action"] != "dropped", rec["call_id"]
        content = "\n".join(m["content"] for m in rec["messages"] if isinstance(m["content"], str))
        assert "NOISE = 0.2" in content and "Keep this protocol" in content
        # a later stage's protocol is the one of the node it starts from, and says so
        rec_stage = nodes[rec["node_id"]]["stage"]
        start = next(e for e in evs if e["type"] == "stage_started" and e["stage"] == rec_stage)
        origin = next(e for e in evs if e["type"] == "eval_protocol" and e["stage"] == rec_stage)["node_id"]
        if rec_stage > 1 and origin == start["carried_id"]:
            assert (
                f"protocol of the node it starts from ({origin}, the previous stage's best):\n- metric: "
                in content
            )
            assert "first working node" not in content
            carried_checked += 1
    assert carried_checked, "no later-stage prompt under its start node's protocol"
    # the review of each such node judges comparability under the same protocol (frozen per node)
    with_protocol = {r["node_id"] for r in later}
    reviews = [r for r in prompt_records(run_dir) if r["phase"] == "review" and r["node_id"] in with_protocol]
    assert reviews
    for rec in reviews:
        content = "\n".join(m["content"] for m in rec["messages"] if isinstance(m["content"], str))
        assert "## Evaluation protocol" in content and "NOISE = 0.2" in content, rec["call_id"]

    # a later draft writes its program from nothing: it gets the reference node's code to copy the
    # data and evaluation from (its first lines at least), the others (children) have their parent's
    first = next(e for e in evs if e["type"] == "eval_protocol" and e["stage"] == 1)
    ref_files = {
        f["path"]: f["content"]
        for f in json.loads((run_dir / "nodes" / first["node_id"] / "code_answer.json").read_text())["files"]
    }
    first_path, first_text = next(iter(ref_files.items()))
    code_calls = [r for r in prompt_records(run_dir) if r["phase"] == "phase2" and r["node_id"] in nodes]
    drafts = [
        r
        for r in code_calls
        if nodes[r["node_id"]]["operation"] == "draft" and r["node_id"] != first["node_id"]
    ]
    assert drafts, "the scripted run has no draft after the protocol was fixed"
    for rec in code_calls:
        if nodes[rec["node_id"]]["operation"] == "draft" and rec not in drafts:
            continue  # the first draft: no protocol yet
        content = "\n".join(m["content"] for m in rec["messages"] if isinstance(m["content"], str))
        copied = f"{first_path}:\n```\n{first_text[:400]}" in content
        assert copied == (rec in drafts), rec["call_id"]
        assert (f"its data and evaluation must be {first['node_id']}'s" in content) == (rec in drafts)

    # `logs` shows it
    capsys.readouterr()
    assert main(["logs", str(run_dir), "stages"]) == 0
    out = capsys.readouterr().out
    assert f"not comparable: {changed}: {node['incomparable']}" in out

    # the facts paper lists it apart with why, and the viewer never shows it as good
    row = next(
        r
        for f in stage_facts(run_dir, quote_plans=False)
        if f.stage == stage
        for r in f.rows
        if r.id == changed
    )
    assert (row.status, row.reason, row.best) == ("not comparable", node["incomparable"], False)
    shown = build_view_data(run_dir)["nodes"][changed]
    assert (shown["status"], shown["incomparable"]) == ("incomparable", node["incomparable"])


def test_protocol_change_names_each_difference():
    ref = EvalProtocol(
        "n0002", ("val_accuracy", "maximize", "synthetic"), (("NOISE", "0.2"), ("N_TRAIN", "300"))
    )
    same = EvalProtocol("n0005", ("val_accuracy", "maximize", "synthetic"), (("NOISE", "0.2"), ("LR", "0.1")))
    assert protocol_change(ref, same) is None
    other = EvalProtocol("n0006", ("val_loss", "minimize", "synthetic"), (("N_TRAIN", "60"),))
    why = protocol_change(ref, other)
    assert why is not None and "N_TRAIN = 60 instead of 300" in why
    assert "reports val_loss (minimize, dataset synthetic) where the stage measures val_accuracy" in why


def test_protocol_parameters_are_the_data_split_size_noise_and_seed_knobs():
    assert all(
        is_protocol_parameter(n)
        for n in (
            "N_TRAIN",
            "NOISE",
            "testSize",
            "SEED",
            "n",
            "VAL_FRACTION",
            "SEP",
            "REPS",
            "TOL",
            "SHIFT",
            "OFFSET",
            "SCALE",  # alone, a quantity word is how the data are drawn (relay s8 ln 005)
            "STD",
            "MEAN0",  # the class means set the separation (relay s8 ln3 010)
            "CLASS_CENTERS",
        )
    )
    assert not any(
        is_protocol_parameter(n)
        for n in (
            "N_EPOCHS",
            "BATCH_SIZE",
            "LR",
            "L2",
            "TRAIN_STEPS",
            "N_RESTARTS",
            "INIT_SCALE",
            "LR_SCALE",
            "RATE",
            # the headline's configuration is what a tune changes (relay s8 ln3 010: HEADLINE =
            # dict(l2=..., lr=...) was called protocol in the stage that tunes l2 and lr)
            "HEADLINE",
            "RUNNING_MEAN_DECAY",
        )
    )
    answer = {
        "files": [
            {
                "path": "e.py",
                "content": "N_TRAIN = 300\nLR = 0.1\nimport os\nS = os.environ.get('SEED', '0')\n",
            }
        ],
        "run": {"commands": ["python3 e.py --test-size 0.25 --epochs 3"]},
    }
    assert protocol_parameters(answer) == (
        ("N_TRAIN", "300"),
        ("SEED", "(from the environment, default 0)"),  # set per run: the seed re-runs change it
        ("--test-size", "0.25"),
    )
    # C reads its seed with getenv and no default: the value comes from the environment, not ""
    c_answer = {"files": [{"path": "mm.c", "content": 'int main(void) {\n  const char *s = getenv("SEED");\n'
                           "  int sizes[] = {256, 512, 1024};\n  return 0;\n}\n"}]}  # fmt: skip
    found = dict(protocol_parameters(c_answer))
    assert found["SEED"] == "(from the environment)"
    assert found["sizes"].replace(" ", "") in ("(256,512,1024)", "{256,512,1024}", "[256,512,1024]")


def test_a_replay_fixes_the_same_protocol_and_marks_the_same_nodes(tmp_path, capsys):
    responder = CleanLabels(buggy_nodes=())
    code, src, _ = start_run(tmp_path, "agent.num_workers=2", responder=responder)
    assert code == 0 and responder.changed
    capsys.readouterr()
    assert main(["replay", str(src), "--out", str(tmp_path / "replays")]) == 0
    replayed = tmp_path / "replays" / f"{src.name}.replay"

    def marks(run_dir):
        fixed = [(e["stage"], e["node_id"]) for e in events(run_dir) if e["type"] == "eval_protocol"]
        marked = {nid: n.get("incomparable") for nid, n in journal_nodes(run_dir).items()}
        return fixed, marked

    assert marks(replayed) == marks(src)
    assert any(why for why in marks(src)[1].values())
