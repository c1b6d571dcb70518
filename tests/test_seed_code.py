"""Seed code (issue 13 item 6, AI-Scientist-v2's ``--load_code``): ``run --load-code FILE``, the
idea's ``## Code`` section or a JSON idea's ``Code`` key.

A scripted run of the bundled example, stopped in the middle and resumed, shows: the seed code
is in the draft nodes' plan and code prompts (ledger: kept) and in no other prompt (ledger:
dropped, no content); the draft resumed after the stop still gets it (from the run directory:
the file is deleted after ``run``); a replay of the run sends the same prompts. Bad files exit 2
naming ``--load-code``, without a traceback and before a run directory is made.
"""

from __future__ import annotations

import json
import subprocess
from argparse import Namespace
from pathlib import Path

import pytest
from ai_scientist_testing.scripted import ExampleResponder
from pipeline_support import IDEA, cli, journal_nodes, prompt_records, run_args

from ai_scientist.base.errors import RunStop, UsageError
from ai_scientist.base.idea import IdeaError, load_idea, parse_json, parse_markdown, with_seed_code
from ai_scientist.base.paths import RunPaths
from ai_scientist.cli.commands import execute, open_locked, setup_run
from ai_scientist.llm.scripted_backend import ScriptedBackend
from ai_scientist.runloop.replay import replay_run

ROOT = Path(__file__).resolve().parents[1]
SEED_CODE = '''# seed code for the label-noise study (marker SEED-7f3a)
import random


def sigmoid(z):
    """Logistic function; the drafts start from this file."""
    return 1.0 / (1.0 + 2.718281828459045 ** (-z))
'''
SETUP_ONLY = ["--set", "exec.backend=subprocess", "--set", "report.enabled=false", "--stop-after", "setup"]


class StopOnce:
    """The example responder, but the first phase-2 call of node ``node`` stops the run (as a
    cost cap would): the node is left half done for ``resume``."""

    def __init__(self, node: str):
        self.inner = ExampleResponder()
        self.node = node
        self.fired = False

    def __call__(self, messages, schema, ctx):
        if not self.fired and ctx.node_id == self.node and ctx.phase == "phase2":
            self.fired = True
            raise RunStop(f"test stop in {self.node} phase 2")
        return self.inner(messages, schema, ctx)


def _ledger(record: dict, layer: str) -> dict | None:
    return next((e for e in record.get("ledger") or [] if e.get("layer") == layer), None)


@pytest.fixture(scope="module")
def seeded_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("seeded")
    seed = tmp / "baseline.py"
    seed.write_text(SEED_CODE, encoding="utf-8")
    args = Namespace(**{**vars(run_args(tmp)), "load_code": str(seed)})
    run, resources = setup_run(args)
    seed.unlink()  # resume must take the seed code from the run directory
    stopper = StopOnce("n0002")
    first = execute(run, resources=resources, backend=ScriptedBackend(stopper))
    assert stopper.fired and first == RunStop.exit_code
    resumed = open_locked(str(run.dir), None)
    code = execute(resumed, backend=ScriptedBackend(ExampleResponder()), resumed=True)
    assert code == 0
    return {"dir": run.dir}


def _text(content) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))


def test_seed_code_reaches_the_drafts_plan_and_code_prompts_only(seeded_run: dict):
    run_dir = seeded_run["dir"]
    nodes = journal_nodes(run_dir)
    drafts = {nid for nid, n in nodes.items() if n["operation"] == "draft"}
    assert drafts == {"n0001", "n0002"}, drafts
    assert len(nodes) > len(drafts) + 2  # debug / improve / tune / ablate / seed nodes ran too
    seen: dict[str, set[str]] = {d: set() for d in drafts}
    for r in prompt_records(run_dir):
        # (a plot critique's user message is a list of parts: its text and the figures)
        user = "\n".join(_text(m["content"]) for m in r["messages"] if m["role"] == "user")
        entry = _ledger(r, "seed_code")
        if r["node_id"] in drafts and r["phase"] in ("phase0", "phase2"):
            assert SEED_CODE in user, (r["node_id"], r["phase"], r["label"])
            assert "(from --load-code baseline.py)" in user
            assert entry is not None and entry["action"] == "kept", entry
            seen[r["node_id"]].add(r["phase"])
        else:
            assert "SEED-7f3a" not in json.dumps(r["messages"]), (r["node_id"], r["phase"], r["label"])
            assert entry is None or (entry["action"] == "dropped" and entry["reason"] == "no content")

    # a draft plans inside its code answer (agent.merge_calls) or in a planning call of its own
    def asked(d: str) -> set[str]:
        plan = json.loads((run_dir / "nodes" / d / "plan.json").read_text())
        return {"phase2"} if plan["plan_source"] == "merged" else {"phase0", "phase2"}

    assert seen == {d: asked(d) for d in drafts}, seen


def test_resume_keeps_the_seed_code(seeded_run: dict):
    run_dir = seeded_run["dir"]
    types = [json.loads(line)["type"] for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert "run_stopped" in types and "run_resumed" in types
    after = types.index("run_resumed")
    # n0002's code prompt was asked only after the resume (the stop came at its first phase-2 call)
    n2 = [r for r in prompt_records(run_dir) if r["node_id"] == "n0002" and r["phase"] == "phase2"]
    # the stopped attempt's log is set aside when phase 2 is redone (kept, not replayed from)
    aside = sorted((run_dir / "nodes" / "n0002" / "prompt_logs").glob("*_phase2_*.json.superseded"))
    n2 = [json.loads(p.read_text()) for p in aside] + n2
    assert [r["error"] for r in n2] == ["RunStop: test stop in n0002 phase 2", None]
    assert all(SEED_CODE in r["messages"][1]["content"] for r in n2)  # before and after the resume
    assert after > types.index("run_stopped")
    paths = RunPaths(run_dir)
    assert (paths.seed_code / "baseline.py").read_text(encoding="utf-8") == SEED_CODE
    stored = json.loads(paths.idea_json.read_text(encoding="utf-8"))
    assert stored["code"] == SEED_CODE and stored["code_source"] == "--load-code baseline.py"
    assert "SEED-7f3a" not in paths.idea_md.read_text(encoding="utf-8")  # not in the task layer


def test_replay_sends_the_same_prompts(seeded_run: dict, tmp_path: Path):
    src = seeded_run["dir"]
    run = replay_run(src, tmp_path)
    assert execute(run, replay_from=src) == 0  # an unrecorded prompt would stop the replay
    assert json.loads(RunPaths(run.dir).idea_json.read_text())["code"] == SEED_CODE

    def answered(run_dir: Path) -> list[str]:  # the call the stop cut off has no answer to replay
        return sorted(json.dumps(r["messages"]) for r in prompt_records(run_dir) if r.get("error") is None)

    assert answered(run.dir) == answered(src)


def test_long_seed_code_is_cut_in_the_middle_with_a_ledger_entry():
    from ai_scientist.base.config import Config
    from ai_scientist.context import Budget, assemble, counter_for

    ctx = Config.model_validate({"context": {"max_prompt_tokens": 3000}}).context
    counter = counter_for("gpt-4o-mini")
    lines = [f"step_{i} = {i}  # seed line {i}" for i in range(3000)]
    values = {
        "task": "# Idea\nMeasure X on Y.",
        "instructions": "Write the code.",
        "seed_code": "\n".join(lines) + "\n",
        "seed_code_file": "big.py",
        "seed_code_source": "--load-code big.py",
    }
    p = assemble("phase234_code", values, Budget.from_config(ctx), counter, ctx)
    entry = next(e for e in p.ledger if e["layer"] == "seed_code")
    assert entry["action"] == "truncated" and entry["policy"] == "head_tail", entry
    assert entry["tokens_after"] < entry["tokens_before"]
    text = p.sections["seed_code"]
    assert "### big.py" in text and lines[0] in text and lines[-1] in text  # head and tail kept
    assert lines[1500] not in text and p.tokens <= 3000


def _refused(res: subprocess.CompletedProcess, *needles: str) -> None:
    assert res.returncode == 2, (res.returncode, res.stderr[-2000:])
    assert "Traceback" not in res.stderr, res.stderr[-2000:]
    for needle in needles:
        assert needle in res.stderr, (needle, res.stderr)


# ------------------------------------------------------------ --load-code --


def _bad_code_files(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    latin1 = tmp_path / "latin1.py"
    latin1.write_bytes("# caf\xe9\n".encode("latin-1"))
    big = tmp_path / "big.py"
    big.write_bytes(b"#" * ((1 << 20) + 1))
    empty = tmp_path / "empty.py"
    empty.write_text("  \n")
    nul = tmp_path / "nul.bin"
    nul.write_bytes(b"abc\x00def")
    folder = tmp_path / "folder"
    folder.mkdir()
    return {
        "missing": (tmp_path / "nope.py", "not found"),
        "latin1": (latin1, "not UTF-8"),
        "big": (big, "more than the 1,048,576 allowed"),
        "empty": (empty, "empty"),
        "nul": (nul, "NUL"),
        "folder": (folder, "directory"),
    }


def test_cli_bad_load_code_exits_2_naming_it(tmp_path: Path):
    out = tmp_path / "exp"
    for name, (path, needle) in _bad_code_files(tmp_path).items():
        res = cli("run", "--idea", str(IDEA), "--load-code", str(path), "--out", str(out), *SETUP_ONLY)
        _refused(res, "--load-code", needle)
        assert not out.exists() or not any(out.iterdir()), name
    # seed code given twice (the idea's section and the flag): refused, not silently overridden
    idea = tmp_path / "idea.md"
    idea.write_text(IDEA.read_text() + "\n## Code\n```python\nprint('from the idea')\n```\n")
    ok = tmp_path / "ok.py"
    ok.write_text(SEED_CODE)
    res = cli("run", "--idea", str(idea), "--load-code", str(ok), "--out", str(out), *SETUP_ONLY)
    _refused(res, "--load-code", "already has seed code", "## Code")


def test_cli_load_code_is_stored_in_the_run_directory(tmp_path: Path):
    seed = tmp_path / "train.py"
    seed.write_text(SEED_CODE)
    res = cli("run", "--idea", str(IDEA), "--load-code", str(seed), "--out", str(tmp_path / "e"), *SETUP_ONLY)
    assert res.returncode == 0, res.stderr[-2000:]
    paths = RunPaths(res.stdout.strip().splitlines()[-1])
    assert (paths.seed_code / "train.py").read_bytes() == seed.read_bytes()
    created = json.loads(paths.events.read_text().splitlines()[0])
    assert created["seed_code"] == {"file": "train.py", "source": "--load-code train.py"}


def test_with_seed_code_in_process(tmp_path: Path):
    seed = tmp_path / "s.cu"
    seed.write_text("__global__ void k() {}\n")
    idea = with_seed_code(load_idea(IDEA), seed)
    assert (idea.code, idea.code_file, idea.code_source) == (seed.read_text(), "s.cu", "--load-code s.cu")
    assert "__global__" not in idea.to_markdown()
    with pytest.raises(UsageError, match="--load-code"):
        with_seed_code(idea, seed)


# ------------------------------------------------------------ idea code section --

MD = """# T
## Hypothesis
h
## Experiments
e
```text
# a comment in a fenced block is not a heading
```
## Code
Prose around the fence is not part of the code.

```python
# header comment: not a heading either
## nor this
x = 1
```
## Risks
r
"""


def test_markdown_code_section():
    idea = parse_markdown(MD)
    assert idea.code == "# header comment: not a heading either\n## nor this\nx = 1\n"
    assert (idea.code_file, idea.code_source) == ("seed_code.py", "the idea's '## Code' section")
    assert "# a comment in a fenced block" in idea.experiments and idea.risks == "r"
    assert idea.extra == {} and "x = 1" not in idea.to_markdown()
    # without a code section nothing changes
    plain = parse_markdown(IDEA.read_text())
    assert plain.code == "" and plain.to_markdown() == load_idea(IDEA).to_markdown()


@pytest.mark.parametrize(
    ("section", "needle"),
    [
        ("## Code\nno fence here\n", "no fenced code block"),
        ("## Code\n```\na\n```\n```\nb\n```\n", "2 fenced code blocks"),
        ("## Code\n```python\n\n```\n", "empty code block"),
        ("## Code\n```python\nx = 1\n", "never closed"),
    ],
)
def test_markdown_code_section_errors(section: str, needle: str):
    with pytest.raises(IdeaError, match=needle):
        parse_markdown("# T\n## Hypothesis\nh\n## Experiments\ne\n" + section)


def test_json_code_key():
    base = {"Title": "t", "Short Hypothesis": "h", "Experiments": "e"}
    idea = parse_json({**base, "Code": "import x\nprint(1)"})
    assert (idea.code, idea.code_file, idea.code_source) == (
        "import x\nprint(1)\n",
        "seed_code",
        "the idea's 'Code' key",
    )
    assert idea.extra == {} and "import x" not in idea.to_markdown()
    fenced = parse_json({**base, "Code": "```python\nimport y\n```"})
    assert (fenced.code, fenced.code_file) == ("import y\n", "seed_code.py")
    for bad, needle in ((["a"], "must be a string"), ("  ", "is empty")):
        with pytest.raises(IdeaError, match=needle):
            parse_json({**base, "Code": bad})
