"""Replay: a recorded run re-run from its prompt logs (no LLM) gives the same tree."""

from __future__ import annotations

from pipeline_support import decisions, events, start_run, tree

from ai_scientist.cli.main import main


def test_replay_gives_the_same_tree(tmp_path, capsys):
    code, src, responder = start_run(tmp_path, "agent.num_workers=2")
    assert code == 0
    n_calls = len(responder.calls)
    capsys.readouterr()
    assert main(["replay", str(src), "--out", str(tmp_path / "replays")]) == 0
    replayed = tmp_path / "replays" / f"{src.name}.replay"
    assert replayed.is_dir(), capsys.readouterr().err
    assert tree(replayed) == tree(src)
    assert decisions(replayed) == decisions(src)
    assert len(responder.calls) == n_calls, "replay made no LLM call"
    logged_src = sorted(p.relative_to(src) for p in (src / "nodes").glob("*/prompt_logs/*.json"))
    logged_rep = sorted(p.relative_to(replayed) for p in (replayed / "nodes").glob("*/prompt_logs/*.json"))
    assert logged_src == logged_rep


def test_replay_of_a_changed_run_names_the_divergence(tmp_path, capsys):
    code, src, _ = start_run(
        tmp_path,
        "agent.stages.stage2_max_iters=0",
        "agent.stages.stage3_max_iters=0",
        "agent.stages.stage4_max_iters=0",
    )
    assert code == 0
    # tamper with the recorded idea: every prompt of the replay differs from the recording
    idea = src / "idea.json"
    idea.write_text(idea.read_text().replace("label noise", "label NOISE"))
    capsys.readouterr()
    code = main(["replay", str(src), "--out", str(tmp_path / "replays")])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "replay diverged" in err and "no recorded answer for node n0001, phase phase2" in err
    assert "first difference: message 1 (user)" in err and "label NOISE" in err
    replayed = tmp_path / "replays" / f"{src.name}.replay"
    assert any(e["type"] == "replay_diverged" for e in events(replayed))
