"""A recorded run replays to the same tree with today's code: what a refactor must keep.

``tests/fixtures/run_<commit>`` (found by :func:`ai_scientist_testing.bench_support.recorded_run`)
is a scripted run of the bundled example (2 workers, free-running scheduler, all four stages, node
plots and critiques, stage summaries) recorded by the code of the commit in its name, trimmed to what replay reads: the journal, events, idea, resolved config,
environment, stage summaries, each node's prompt logs (JSON), ``exec/`` records and workspace
files. Replaying it must send, call for call, the prompts that code sent (every one is looked up by
its request key) and rebuild the same tree and decisions; if a change alters a prompt, the replay
diverges and names the first difference.

History: the first fixture, ``run_6c8e6de``, was recorded by the code before issue 12's layout
change and replayed identically through every commit of that refactor (checked last at d0bf952).
Issues 13-15 then changed prompts and calls on purpose (stage inputs and summaries, node plots,
the stable-first layer order, merged calls), so it was replaced by a recording at 14eab8e; this
session's issues 14, 15 and 17 changed them again (drafts plan in their code answer, edits against
the seed, constrained schemas, the lineage-first layer order, compact JSON), recorded at c971a5e;
issue 28 changed them on purpose (budgets per model, reviews and plots given the output and data,
calls that state their purpose, drafts that see each other, siblings, the ablation stage's best, the
siblings layer, the seed rule), recorded at 89f97fd; issue 30 changed them (the stage's evaluation
protocol shown to later nodes, graded and self-reported metrics in the review, re-ranking over
seeds at a stage's end), recorded again; issue 28's relay follow-ups changed them (a later draft
copies the protocol node's data code, findings whole, the parent's commands and run as text, the
length limits and per-branch memory words, the ideas schema's count, a parent's seed re-run mean beside its search run, the protocol's environment values, the protocol in the review, the parent's figure problems, the best node's design), recorded at a06d13a; this session's issue-28 work changed them again (the judges' sibling and tuning tables, a child's diff in reviews and plotting, the compact environment of a pure-Python task, the short memory protocol, the headline's configuration, the seed noise in the protocol, loss lists in the review, the best sibling's code for an improve node, siblings in creation order), recorded at 23fb08f; the next session's issue-28 work changed them again (every structured call's answer limit, the best sibling's code as its own layer, the protocol keeping quantity-word constants, the stage in idea proposals, the seed sentences, the plotting script a child gets, the stage summaries' seed tables and stage goal, compile fixes without the findings, what run.expected_outputs holds, no parent metrics in a plotting call, the figure reviews' findings in the stage summaries), recorded at 028d46b; session 6's issue-28 work changed them again (findings said once, commands in a child's diff, ties within the noise, earlier stages' noise figures labelled, what the best node already measured, the tried tables in creation order, the headline's configuration and method, paired seeds, nodes without re-runs, inherited advice labelled, a tune's cut output and plot feedback, the parent's metrics one a line, the machine alone in reviews and critiques), recorded at d3c8d32; session 7's issue-28 work changed them again (a node's own plan to its reviewers, stage-3 research ideas, every ablation measured in-run, the parent's seed values beside its search run, each command's CPU time and load, the seed noise's driver and concurrency, finding re-runs, the last-level cache line, the headline condition's loss lists, findings cut at sentence ends), recorded at 3f6eeb9, and again at dfd24a9 (the first metric said to be the headline); session 8's changed them again (the lines defining a node's data in its plotting call, the protocol and machine facts in figure calls, fixed parameters listed apart, rankings that say their order, per-step series and load in reviews, no install note offline, the writer's number rule and measured word budget), recorded at 4cc48dd, and again at 5fd3302 (a judge's protocol wording, the loss lists' conditions, the data outline, the answer limit of a large-window model, a later draft's freedoms, a grid's headline, a figure critique's parent headline, edits' newline rule, the report's aggregation and figure-review inputs), and at 2537273 (a grid-only tune idea); session 9's changed them again (an ablation proposal's inventory of the best program's parts, the short memory protocol, paired differences' spread over seeds, the load under a timing ranking, rough seed bands, the headline's lists first in reviews, run names in plotting calls, the report's manifest, figure data and program differences), recorded at f0296a1, and again at 04ea1c9 (a tuning proposal's grid sentence and multi-parameter settings, objectives and cross-entropies reviewed as losses); session 10's changed them again (what one SEED draws beside the band, an extra condition's own random draws, every per-step list's condition, captions as the plotter's claims, the writer's memory notes, a dict setting whole, a tunable's other users, the load from outside the run, no config key names, rough ties said unsettled), recorded at 779d623, and again at 845e807 (a formula only where one pair fits, the headline condition's lists named as the condition it reports). A change that alters prompts on purpose records a new fixture (``record_fixture`` in docs/testing.md) and says so.
"""

from __future__ import annotations

import shutil

from ai_scientist_testing.bench_support import recorded_run
from pipeline_support import decisions, tree

from ai_scientist.cli.main import main

FIXTURE = recorded_run()  # tests/fixtures/run_<commit>, scripts/record_fixture.sh


def test_fixture_is_a_complete_recording():
    nodes = tree(FIXTURE)
    assert {n["stage"] for n in nodes.values()} == {1, 2, 3, 4}, "the recording covers all four stages"
    assert any(n["status"] == "good" for n in nodes.values())
    logs = list(FIXTURE.glob("nodes/*/prompt_logs/*.json"))
    assert len(logs) >= len(nodes)


def test_recorded_run_replays_to_the_same_tree(tmp_path, capsys):
    src = tmp_path / "recorded"
    shutil.copytree(FIXTURE, src, symlinks=True)
    code = main(["replay", str(src), "--out", str(tmp_path / "replays")])
    err = capsys.readouterr().err
    assert code == 0, err
    replayed = tmp_path / "replays" / "recorded.replay"
    assert tree(replayed) == tree(FIXTURE)
    assert decisions(replayed) == decisions(FIXTURE)
    sent = sorted(p.relative_to(replayed) for p in replayed.glob("nodes/*/prompt_logs/*.json"))
    recorded = sorted(p.relative_to(FIXTURE) for p in FIXTURE.glob("nodes/*/prompt_logs/*.json"))
    assert sent == recorded, "one replayed call per recorded call, same node, number, phase and label"
