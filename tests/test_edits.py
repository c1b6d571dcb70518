"""Edits instead of rewrites (issue 17): edits apply exactly, a bad anchor is refused precisely and
the refusal reaches the model's repair round."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from grammar_support import assert_llama_parses
from hypothesis import given, settings
from hypothesis import strategies as st

from ai_scientist.base.config import validate
from ai_scientist.llm.call import CallContext
from ai_scientist.llm.client import LLMClient
from ai_scientist.llm.cost import CostLedger
from ai_scientist.llm.scripted_backend import ScriptedBackend
from ai_scientist.phases.edits import (
    Edit,
    EditError,
    apply_edits,
    edits_schema,
    edits_validator,
    expand_answer,
    make_edits,
)

PARENT = {
    "main.py": "import json\n\nEPOCHS = 10\nfor epoch in range(EPOCHS):\n    step()\nprint('done')\n",
    "util.py": "def step():\n    pass\n",
}


# ----------------------------------------------------------- reference --
def _strip1(text: str) -> str:
    return text[:-1] if text.endswith("\n") else text


def reference_apply(files: dict[str, str], edits: list[Edit]) -> tuple[dict[str, str], list[int]]:
    """String offsets, not lines: every occurrence of the anchor bounded by line starts/ends."""
    out = dict(files)
    failed = []
    for k, e in enumerate(edits, 1):
        content = out.get(e.file)
        anchor, text = _strip1(e.anchor), _strip1(e.text)
        if content is None or not anchor.strip():
            failed.append(k)
            continue
        hits = [
            i
            for i in range(len(content) - len(anchor) + 1)
            if content.startswith(anchor, i)
            and (i == 0 or content[i - 1] == "\n")
            and (i + len(anchor) == len(content) or content[i + len(anchor)] == "\n")
        ]
        if len(hits) != 1:
            failed.append(k)
            continue
        i, end = hits[0], hits[0] + len(anchor)
        if e.action == "replace" and e.text:
            content = content[:i] + text + content[end:]
        elif e.action == "replace":  # delete the lines with one of their line breaks
            if end < len(content):
                content = content[:i] + content[end + 1 :]
            elif i > 0:
                content = content[: i - 1]
            else:
                content = ""
        elif e.text:  # insert_after
            content = content[:end] + "\n" + text + content[end:]
        out[e.file] = content
    return out, failed


# a small alphabet of lines: repeats (ambiguous anchors) and near misses happen often
LINE = st.sampled_from(["a = 1", "b = 2", "", "  pass", "print(a)", "x", "a = 1 ", "def f():"])
FILE = st.lists(LINE, max_size=8).map("\n".join).flatmap(lambda s: st.sampled_from([s, s + "\n"]))


@st.composite
def files_and_edits(draw):
    files = draw(st.dictionaries(st.sampled_from(["m.py", "u.py", "d/x.c"]), FILE, min_size=1, max_size=3))
    edits = []
    for _ in range(draw(st.integers(0, 5))):
        path = draw(st.sampled_from([*sorted(files), "missing.py"]))
        lines = files.get(path, "").split("\n")
        if draw(st.booleans()) and lines:  # an anchor cut from the original file: often valid
            a = draw(st.integers(0, len(lines) - 1))
            b = draw(st.integers(a + 1, min(len(lines), a + 3)))
            anchor = "\n".join(lines[a:b]) + draw(st.sampled_from(["", "\n"]))
        else:
            anchor = "\n".join(draw(st.lists(LINE, min_size=1, max_size=2)))
        text = draw(st.lists(LINE, max_size=3).map("\n".join)) + draw(st.sampled_from(["", "\n"]))
        edits.append(Edit(path, anchor, draw(st.sampled_from(["replace", "insert_after"])), text))
    return files, edits


@settings(max_examples=400, deadline=None)
@given(files_and_edits())
def test_edits_apply_exactly_as_the_reference(case):
    files, edits = case
    expected, failed = reference_apply(files, edits)
    before = dict(files)
    if failed:
        with pytest.raises(EditError) as info:
            apply_edits(files, edits)
        assert [int(p.split()[1]) for p in info.value.problems] == failed
    else:
        assert apply_edits(files, edits) == expected
    assert files == before  # the parent's files are never changed in place


@settings(max_examples=200, deadline=None)
@given(FILE, st.data())
def test_replace_then_inverse_restores_the_file(content, data):
    lines = content.split("\n")
    unique = [ln for ln in lines if ln.strip() and lines.count(ln) == 1]
    if not unique:
        return
    old = data.draw(st.sampled_from(unique))
    new = "NEW " + old
    files = {"f.py": content}
    once = apply_edits(files, [Edit("f.py", old, "replace", new)])
    assert once["f.py"].split("\n") == [new if ln == old else ln for ln in lines]
    assert apply_edits(once, [Edit("f.py", new, "replace", old)]) == files


@settings(max_examples=300, deadline=None)
@given(FILE, FILE)
def test_make_edits_turns_parent_into_child(before, after):
    try:
        edits = make_edits({"f.py": before}, {"f.py": after})
    except EditError:  # only a file of blank lines has nothing to anchor on
        assert not before.strip()
        return
    assert apply_edits({"f.py": before}, edits) == {"f.py": after}
    assert (edits == []) == (before == after)


def test_expand_answer_records_edits_and_resulting_files():
    answer = {
        "summary": "fewer epochs",
        "edits": [{"file": "main.py", "anchor": "EPOCHS = 10", "action": "replace", "text": "EPOCHS = 3"}],
        "files": [{"path": "extra.py", "content": "X = 1\n"}],
        "run": {"commands": ["python main.py"]},
    }
    full = expand_answer(PARENT, answer)
    assert full["edits"] == answer["edits"] and full["run"] == answer["run"]
    assert [f["path"] for f in full["files"]] == ["main.py", "util.py", "extra.py"]
    assert full["files"][0]["content"] == PARENT["main.py"].replace("EPOCHS = 10", "EPOCHS = 3")
    assert full["files"][1]["content"] == PARENT["util.py"]
    plain = {"files": [{"path": "main.py", "content": "print(1)\n"}]}
    assert expand_answer(PARENT, plain) is plain
    # neither edits nor files: the parent's files as they are (a draft running its seed code)
    unchanged = expand_answer(PARENT, {"run": {"commands": ["python main.py"]}})
    assert {f["path"]: f["content"] for f in unchanged["files"]} == PARENT and unchanged["edits"] == []
    with pytest.raises(EditError, match="anchor not found"):
        expand_answer(PARENT, {**answer, "edits": [{**answer["edits"][0], "anchor": "EPOCHS = 11"}]})


# ------------------------------------------------------------ messages --
def test_missing_anchor_names_file_anchor_and_nearest_line():
    with pytest.raises(EditError) as info:
        apply_edits(PARENT, [Edit("main.py", "for epoch in range(10):", "replace", "for e in range(3):")])
    (msg,) = info.value.problems
    assert msg == (
        "edit 1 (replace) in 'main.py': anchor not found: 'for epoch in range(10):'; "
        "nearest existing line 4: 'for epoch in range(EPOCHS):'"
    )


def test_ambiguous_anchor_lists_every_match_and_all_problems_come_at_once():
    files = {"a.py": "x = 1\ny = 2\nx = 1\n"}
    edits = [
        Edit("a.py", "x = 1", "replace", "x = 3"),
        Edit("b.py", "y = 2", "replace", "y = 0"),
        Edit("a.py", "x = 1\ny = 2", "insert_after", "z = 0"),  # unique as a block: applies
        Edit("a.py", "   ", "replace", "w"),
    ]
    with pytest.raises(EditError) as info:
        apply_edits(files, edits)
    assert info.value.problems == [
        "edit 1 (replace) in 'a.py': anchor 'x = 1' matches 2 times (lines 1, 3); "
        "add neighbouring lines to the anchor so it matches once",
        "edit 2 (replace) in 'b.py': no such file among the parent's files ('a.py'); "
        "give a new file whole in 'files'",
        "edit 4 (replace) in 'a.py': the anchor is empty or blank; quote an existing line of the file",
    ]


def test_later_edits_see_earlier_ones_and_blocks_delete():
    out = apply_edits(
        PARENT,
        [
            Edit("main.py", "EPOCHS = 10", "replace", "EPOCHS = 3\nLR = 0.1"),
            Edit("main.py", "LR = 0.1", "insert_after", "SEED = 0\n"),
            Edit("util.py", "def step():\n    pass\n", "replace", ""),
        ],
    )
    assert out["main.py"] == (
        "import json\n\nEPOCHS = 3\nLR = 0.1\nSEED = 0\nfor epoch in range(EPOCHS):\n    step()\nprint('done')\n"
    )
    assert out["util.py"] == ""


def test_schema_constrains_files_and_anchor_lines():
    schema = edits_schema(PARENT, anchor_lines=True)
    item = schema["items"]["properties"]
    assert item["file"]["enum"] == ["main.py", "util.py"]
    # every offered anchor is a line that occurs exactly once in its file: it always applies
    for line in item["anchor"]["enum"]:
        path = next(p for p in PARENT if line in PARENT[p].split("\n"))
        apply_edits(PARENT, [Edit(path, line, "insert_after", "# ok")])
    assert "" not in item["anchor"]["enum"]
    good = [{"file": "main.py", "anchor": "EPOCHS = 10", "action": "replace", "text": "EPOCHS = 2"}]
    jsonschema.validate(good, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate([{**good[0], "anchor": "EPOCHS = 99"}], schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate([{**good[0], "file": "invented.py"}], schema)


def test_bad_anchor_is_fed_back_and_the_retry_applies():
    """Through the real LLM client: the first answer's anchor does not exist; the repair round
    carries the precise message; the second answer applies."""
    bad = {"edits": [{"file": "main.py", "anchor": "EPOCH = 10", "action": "replace", "text": "EPOCHS = 2"}]}
    good = {"edits": [{**bad["edits"][0], "anchor": "EPOCHS = 10"}]}
    answers = iter([bad, good])
    seen: list[list[dict]] = []

    def responder(messages, schema, ctx):
        seen.append(messages)
        return json.dumps(next(answers))

    cfg = validate({})
    client = LLMClient(
        cfg, ScriptedBackend(responder), logger=None, cost=CostLedger(None), sleep=lambda s: None
    )
    check = edits_validator(PARENT)
    schema = {"type": "object", "properties": {"edits": edits_schema(PARENT)}, "required": ["edits"]}
    result = client.complete(
        [{"role": "user", "content": "improve"}],
        role="code",
        ctx=CallContext(),
        schema=schema,
        validator=check,
    )
    assert len(seen) == 2
    expected = "edit 1 (replace) in 'main.py': anchor not found: 'EPOCH = 10'; nearest existing line 3: 'EPOCHS = 10'"
    assert expected in seen[1][-1]["content"]
    assert check(result.parsed)["main.py"].split("\n")[2] == "EPOCHS = 2"


def test_local_grammar_anchors_are_existing_unique_lines():
    """With ``anchor_lines`` (phase 2 on the local backend) llama.cpp's grammar can only produce
    anchors that are lines occurring once in a parent file: a missing anchor cannot be decoded."""
    from ai_scientist.phases.edits import with_edits
    from ai_scientist.phases.schemas import CODE_SCHEMA

    schema = with_edits(CODE_SCHEMA, PARENT, anchor_lines=True)
    assert "files" not in schema["required"] and "edits" in schema["properties"]
    gbnf = assert_llama_parses(schema)
    rules = dict(line.split(" ::= ", 1) for line in gbnf.splitlines() if " ::= " in line)
    anchor_rule = next(v for k, v in rules.items() if k.endswith("anchor"))
    offered = [json.loads(json.loads(alt.strip())) for alt in anchor_rule.split(" | ")]
    lines = [ln for text in PARENT.values() for ln in text.split("\n")]
    assert offered and all(lines.count(a) == 1 for a in offered)
    assert sorted(offered) == sorted({ln for ln in lines if ln.strip() and lines.count(ln) == 1})
    assert "for epoch in range(10):" not in offered


def test_local_grammar_takes_anchor_lines_with_quotes_and_backslashes():
    """The bundled seed code's lines (a docstring, f-strings, escapes) as anchors: llama.cpp
    parses the grammar (llama-cpp-python's own converter left the backslash unescaped, the parse
    failed and the process died with SIGSEGV at the first sampled token)."""
    from ai_scientist.phases.edits import unique_lines, with_edits
    from ai_scientist.phases.schemas import CODE_SCHEMA

    seed = (Path(__file__).parents[1] / "examples" / "label_noise" / "seed_code.py").read_text()
    files = {"seed_code.py": seed, "odd.py": 'print("a\\n", \'\\\\\')\nx = "\\"q\\""\n'}
    lines = unique_lines(files)
    assert any('"' in ln for ln in lines) and any("\\" in ln for ln in lines)
    assert_llama_parses(with_edits(CODE_SCHEMA, files, anchor_lines=True))


def test_local_grammar_keeps_long_bounds_as_gbnf_repetition():
    """Every maxLength reaches the local grammar as ``char{0,N}`` (llama.cpp's own repetition),
    so a 60,000-character bound is parsed, and a string stops at its bound."""
    from ai_scientist.llm.local_grammar import schema_gbnf
    from ai_scientist.phases.schemas import CODE_SCHEMA, LONG_TEXT

    gbnf = assert_llama_parses(CODE_SCHEMA)
    assert f"char{{0,{LONG_TEXT}}}" in gbnf
    short = schema_gbnf(
        {"type": "object", "properties": {"a": {"type": "string", "minLength": 2, "maxLength": 7}}}
    )
    assert 'a ::= "\\"" char{2,7} "\\"" space' in short


def test_local_grammar_keeps_integer_ranges():
    """A review's scores (integer minimum..maximum) reach the grammar as their values: the
    converter ignores minimum/maximum, and the embedded model's meta-review answered 100 for a 1-4
    score."""
    from ai_scientist.reporting.review import REVIEW_SCHEMA, SCORES

    gbnf = assert_llama_parses(REVIEW_SCHEMA)
    rules = dict(line.split(" ::= ", 1) for line in gbnf.splitlines() if " ::= " in line)
    for name, (lo, hi) in SCORES.items():
        assert rules[name] == " | ".join(f'"{v}"' for v in range(lo, hi + 1)), name
