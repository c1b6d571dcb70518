"""``ai-scientist ideate``: the v2 ideation loop against a fake Semantic Scholar on 127.0.0.1.

The LLM is scripted (``IdeationResponder``); what it answers depends on what
its prompt showed, so the tests see what really reached the model. Expected
values come from the fake server's answers and the responder's requests.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ai_scientist_testing.ideation import IdeationResponder
from components import llama_or_skip
from grammar_support import assert_llama_parses
from test_report_support import FakeS2, unreachable_url

from ai_scientist.base.idea import load_idea
from ai_scientist.cli.ideate import IdeationOptions, run_ideation
from ai_scientist.cli.main import build_parser, main
from ai_scientist.ideation.schema import ACTION_SCHEMA, EVIDENCE_KEY, V2_KEYS, check_v2
from ai_scientist.llm.scripted_backend import ScriptedBackend

PAPER = "On {Warm-up} & Learning_Rates"  # the title FakeS2 answers with
TITLES = ["Warm-up free adaptive optimisers", "Label noise and early stopping in small networks"]


def _topic(tmp_path: Path) -> Path:
    topic = tmp_path / "topic.md"
    topic.write_text("# Optimisation workshop\nSimple findings about training dynamics of small networks.\n")
    return topic


def _ideate(tmp_path, url, responder, *extra, waits=None, out="ideas.json"):
    argv = ["ideate", str(_topic(tmp_path)), "--out", str(tmp_path / out), "--s2-url", url, *extra]
    args = build_parser().parse_args(argv)
    opts = IdeationOptions(environ={}, sleep=(waits.append if waits is not None else lambda s: None))
    code = run_ideation(args, backend=ScriptedBackend(responder), options=opts)
    return code, tmp_path / out


def _records(out: Path) -> list[dict]:
    return [
        json.loads(p.read_text())
        for p in sorted((out.parent / (out.name + ".d")).glob("nodes/*/prompt_logs/*.json"))
    ]


@pytest.fixture
def s2():
    server = FakeS2()
    yield server
    server.close()


def test_ideas_with_literature_results(tmp_path, s2, capsys):
    responder = IdeationResponder(TITLES, searches=1)
    code, out = _ideate(tmp_path, s2.url, responder, "--num-ideas", "2", "--reflections", "3")
    assert code == 0 and capsys.readouterr().out.strip() == str(out)
    ideas = json.loads(out.read_text())
    assert [i["Title"] for i in ideas] == TITLES
    for idea in ideas:
        assert check_v2(idea) == [] and list(idea)[: len(V2_KEYS)] == list(V2_KEYS)
        # round 2 saw the search results: the refined draft names the paper the server returned
        assert idea["Related Work"] == f"Closest work: {PAPER}."
        ev = idea[EVIDENCE_KEY]
        assert ev["novelty_checked"] and ev["finalized"] and ev["rounds_used"] == 2
        assert ev["queries"] == [{"query": f"{idea['Title']} query 1", "status": "ok", "papers": 1}]
        assert [p["paperId"] for p in ev["papers"]] == ["abc123"] and ev["notes"] == []
    assert len(s2.requests) == 2 and all("query 1" in r["path"].replace("+", " ") for r in s2.requests)
    # accepted by `run --idea FILE#N`
    idea = load_idea(f"{out}#1")
    assert idea.title == TITLES[1] and idea.name == "label_noise_and_early_stopping_in_small_networks"
    assert PAPER in idea.related_work and EVIDENCE_KEY in idea.extra
    runs = tmp_path / "experiments"
    argv = [
        "run",
        "--idea",
        f"{out}#1",
        "--out",
        str(runs),
        "--stop-after",
        "setup",
        "--set",
        "report.enabled=false",
    ]
    assert main(argv) == 0
    run_dir = Path(capsys.readouterr().out.strip())
    assert run_dir.parent == runs and f"# {TITLES[1]}" in (run_dir / "idea.md").read_text()


def test_every_call_is_prompt_logged_with_a_ledger(tmp_path, s2):
    responder = IdeationResponder(TITLES, searches=2)
    code, out = _ideate(tmp_path, s2.url, responder, "--num-ideas", "2", "--reflections", "4")
    assert code == 0
    records = _records(out)
    assert len(records) == len(responder.prompts) == 6  # 2 ideas x (2 searches + finalize)
    sent = {(nid, label): text for nid, label, text in responder.prompts}
    for rec in records:
        assert rec["role"] == "ideation" and rec["phase"] == "ideation"
        text = "\n".join(m["content"] for m in rec["messages"])
        assert text == sent[(rec["node_id"], rec["label"])]  # the log holds exactly what was sent
        layers = {e["layer"]: e["action"] for e in rec["ledger"]}
        assert layers["topic"] == "kept" and layers["instructions"] == "kept" and layers["system"] == "kept"
    first = next(r for r in records if r["node_id"] == "idea001" and r["label"] == "round1")
    assert {e["layer"]: e["action"] for e in first["ledger"]}["literature"] == "dropped"  # nothing found yet
    second_idea = next(r for r in records if r["node_id"] == "idea002" and r["label"] == "round1")
    assert TITLES[0] in second_idea["messages"][-1]["content"]  # earlier ideas are shown to avoid repeats
    cost = json.loads((out.parent / "ideas.json.d" / "cost.json").read_text())
    assert "ideation" in json.dumps(cost)


def test_429_backs_off_then_succeeds(tmp_path):
    server = FakeS2(throttle=2)
    waits: list[float] = []
    try:
        code, out = _ideate(
            tmp_path, server.url, IdeationResponder(TITLES[:1]), "--num-ideas", "1", waits=waits
        )
    finally:
        server.close()
    assert code == 0 and waits == [7.0, 7.0] and len(server.requests) == 3  # Retry-After honoured
    ev = json.loads(out.read_text())[0][EVIDENCE_KEY]
    assert ev["novelty_checked"] and ev["papers"][0]["title"] == PAPER


def test_persistent_429_degrades_with_a_note(tmp_path):
    server = FakeS2(throttle=100)
    try:
        code, out = _ideate(tmp_path, server.url, IdeationResponder(TITLES[:1]), "--num-ideas", "1")
    finally:
        server.close()
    assert code == 0
    ev = json.loads(out.read_text())[0][EVIDENCE_KEY]
    # the only source throttled: skipped for the session, so the search is offline from then on
    assert not ev["novelty_checked"] and ev["queries"][0]["status"] == "offline"
    assert any("HTTP 429" in n and "novelty NOT checked" in n for n in ev["notes"])
    events = [json.loads(x) for x in (out.parent / "ideas.json.d" / "events.jsonl").read_text().splitlines()]
    skipped = [e["note"] for e in events if e["type"] == "literature"]
    assert len(skipped) == 1 and "Semantic Scholar skipped for the rest of this run" in skipped[0]


def test_offline_gives_ideas_with_the_note_and_stops_offering_the_search(tmp_path, capsys):
    responder = IdeationResponder(TITLES, searches=2)
    code, out = _ideate(tmp_path, unreachable_url(), responder, "--num-ideas", "2")
    assert code == 0
    err = capsys.readouterr().err
    assert "novelty NOT checked" in err and "Traceback" not in err
    ideas = json.loads(out.read_text())
    assert len(ideas) == 2
    for idea in ideas:
        ev = idea[EVIDENCE_KEY]
        assert not ev["novelty_checked"] and ev["papers"] == []
        assert any("literature search offline" in n and "unreachable" in n for n in ev["notes"])
    # idea 1 searched once; the search failed, so round 2 no longer offered it (the model, told
    # so, finalised) and idea 2's first round did not offer it either: its one "search" is the
    # title check of an idea finalised without one, answered offline at once
    assert [q["status"] for q in ideas[0][EVIDENCE_KEY]["queries"]] == ["offline"]
    assert "The search could not be made: literature search offline" in ideas[0]["Related Work"]
    assert [q["query"] for q in ideas[1][EVIDENCE_KEY]["queries"]] == [TITLES[1]]
    assert ideas[1]["Related Work"].startswith("Search unavailable: literature search offline")
    first_of_second = [t for i, label, t in responder.prompts if i == "idea002" and label == "round1"][0]
    assert "look up the literature" not in first_of_second
    assert "literature search is unavailable in this session" in first_of_second
    assert [label for i, label, _ in responder.prompts if i == "idea001"] == ["round1", "round2"]
    assert load_idea(f"{out}#0").title == TITLES[0]


def test_duplicates_skipped_against_each_other_and_the_previous_file(tmp_path, s2):
    out = tmp_path / "ideas.json"
    old = {k: "x" for k in V2_KEYS} | {"Name": "warm_up_free", "Title": TITLES[0], "Experiments": ["e"]}
    out.write_text(json.dumps([old]))
    titles = ["Adaptive optimisers, warm-up free", TITLES[1], TITLES[1].upper()]
    responder = IdeationResponder(titles, searches=1)
    code, _ = _ideate(tmp_path, s2.url, responder, "--num-ideas", "3")
    assert code == 0
    ideas = json.loads(out.read_text())
    assert [i["Title"] for i in ideas] == [TITLES[0], TITLES[1]]  # the old idea kept first, then one new
    summary = json.loads((tmp_path / "ideas.json.d" / "ideation.json").read_text())
    assert [o["status"] for o in summary["outcomes"]] == ["duplicate", "added", "duplicate"]
    assert TITLES[0] in summary["outcomes"][0]["reason"]
    # a second session appends with fresh idea ids, never reusing the first session's logs
    code, _ = _ideate(
        tmp_path, s2.url, IdeationResponder(["Sparse probes of attention heads"]), "--num-ideas", "1"
    )
    assert code == 0 and len(json.loads(out.read_text())) == 3
    assert (tmp_path / "ideas.json.d" / "nodes" / "idea004" / "prompt_logs").is_dir()


def test_unfinalised_idea_keeps_last_draft_with_note(tmp_path, s2):
    code, out = _ideate(
        tmp_path,
        s2.url,
        IdeationResponder(TITLES[:1], finalize=False),
        "--num-ideas",
        "1",
        "--reflections",
        "2",
    )
    assert code == 0
    ev = json.loads(out.read_text())[0][EVIDENCE_KEY]
    assert not ev["finalized"] and ev["rounds_used"] == 2
    assert "not finalised within 2 rounds: the last draft is kept" in ev["notes"]


def test_finalize_without_search_searches_the_title(tmp_path, s2):
    code, out = _ideate(tmp_path, s2.url, IdeationResponder(TITLES[:1], searches=0), "--num-ideas", "1")
    assert code == 0
    ev = json.loads(out.read_text())[0][EVIDENCE_KEY]
    assert ev["queries"] == [{"query": TITLES[0], "status": "ok", "papers": 1}]
    assert "the model did not search; its title was searched as the novelty check" in ev["notes"]


def test_unusable_answers_fail_the_idea_not_the_command(tmp_path, s2, capsys):
    code, out = _ideate(tmp_path, s2.url, lambda m, s, c: "not json at all", "--num-ideas", "1")
    assert code == 3 and json.loads(out.read_text()) == []
    assert "failed: round 1: no usable answer" in capsys.readouterr().err
    assert len(_records(out)) == 2  # the answer and its one repair round, both logged


def test_an_empty_idea_field_goes_back_in_the_repair_round(tmp_path, s2):
    good = IdeationResponder(TITLES[:1], searches=0)
    sent: list[str] = []

    def respond(messages, schema, ctx):
        sent.append(messages[-1]["content"])
        answer = json.loads(good(messages, schema, ctx))
        if len(sent) == 1:  # what the local model really did: an empty experiment
            answer["idea"]["Experiments"] = [" "]
        return json.dumps(answer)

    code, out = _ideate(tmp_path, s2.url, respond, "--num-ideas", "1")
    assert code == 0 and len(json.loads(out.read_text())) == 1
    records = _records(out)
    assert len(records) == len(sent) == 2  # the answer and its repair, both logged
    assert "idea.Experiments: must be a non-empty list of non-empty strings" in sent[1]


def test_action_schema_compiles_to_a_local_grammar():
    llama_or_skip()
    from ai_scientist.llm.local_backend import grammar_schema

    schema = grammar_schema(ACTION_SCHEMA)
    assert schema["properties"]["action"]["enum"] == ["search", "finalize"]
    assert_llama_parses(ACTION_SCHEMA)  # llama.cpp parses the grammar the local backend sends


def test_action_schema_is_bounded():
    def walk(node, path):
        if node.get("type") == "string" and "enum" not in node:
            assert "maxLength" in node, path
        if node.get("type") == "array":
            assert "maxItems" in node, path
            walk(node["items"], path + "[]")
        for k, sub in node.get("properties", {}).items():
            walk(sub, f"{path}.{k}")

    walk(ACTION_SCHEMA, "$")
    assert ACTION_SCHEMA["properties"]["action"]["enum"] == ["search", "finalize"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["missing.md"], "TOPIC"),
        (["topic.md", "--num-ideas", "0"], "--num-ideas must be between 1 and 50, got 0"),
        (["topic.md", "--reflections", "21"], "--reflections must be between 1 and 20, got 21"),
        (["topic.md", "--out", "bad.json"], "not a JSON list of ideas"),
        (["topic.md", "--set", "agent.ideation.temperature=9"], "agent.ideation.temperature"),
    ],
)
def test_bad_input_exits_2(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    _topic(tmp_path)
    (tmp_path / "bad.json").write_text('{"Title": "one idea, not a list"}')
    assert main(["ideate", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
