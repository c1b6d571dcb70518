"""The persona, ``agent.role_description`` (issue 13 item 6, seed 004's persona layer).

A scripted run of the bundled example with a persona set shows it opening the system message
of every prompt the run sent, byte for byte (the built-in opening is replaced, not added to);
unset, the built-in text stays (the recorded-run replay of tests/test_replay_fixture.py checks
those prompts are unchanged). Bad values exit 2 naming ``agent.role_description``.
"""

from __future__ import annotations

from argparse import Namespace
from pathlib import Path

import pytest
import yaml
from ai_scientist_testing.scripted import ExampleResponder
from pipeline_support import IDEA, cli, prompt_records, run_args

from ai_scientist.base.config import ROLE_DESCRIPTION_MAX_CHARS, ConfigError, validate
from ai_scientist.base.templates import render
from ai_scientist.cli.commands import execute, setup_run
from ai_scientist.llm.scripted_backend import ScriptedBackend

ROOT = Path(__file__).resolve().parents[1]
PERSONA = (
    "You are a careful numerical analyst (persona test 41c9): you distrust single runs,\n"
    "report every number with its seed, and prefer the standard library."
)
SETUP_ONLY = ["--set", "exec.backend=subprocess", "--set", "report.enabled=false", "--stop-after", "setup"]


def test_persona_opens_every_system_message_byte_for_byte(tmp_path: Path):
    cfg = tmp_path / "persona.yaml"  # a YAML block scalar: the value ends in a newline
    cfg.write_text(yaml.safe_dump({"agent": {"role_description": PERSONA + "\n"}}), encoding="utf-8")
    run, resources = setup_run(Namespace(**{**vars(run_args(tmp_path)), "config": str(cfg)}))
    assert execute(run, resources=resources, backend=ScriptedBackend(ExampleResponder())) == 0
    resolved = yaml.safe_load((run.dir / "config.resolved.yaml").read_text(encoding="utf-8"))
    assert resolved["agent"]["role_description"] == PERSONA  # outer whitespace dropped, once
    records = prompt_records(run.dir)
    nodes = {r["node_id"] for r in records}
    phases = {r["phase"] for r in records}
    assert len(records) >= 20 and {"n0001", "n0002", "run"} <= nodes, (len(records), nodes)
    assert {"phase2", "review"} <= phases, phases  # (plans ride in the code answers: agent.merge_calls)
    for r in records:
        system = r["messages"][0]
        where = (r["node_id"], r["phase"], r["label"])
        assert system["role"] == "system", where
        text = system["content"]  # the persona, then the other system layers after a blank line
        assert text == PERSONA or text.startswith(PERSONA + "\n\n"), where
        assert "You are an AI research scientist" not in text, where  # replaced, not added to


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        (5, "valid string"),
        ("", "non-empty"),
        ("  \n ", "non-empty"),
        (["a"], "valid string"),
        ("x" * (ROLE_DESCRIPTION_MAX_CHARS + 1), f"at most {ROLE_DESCRIPTION_MAX_CHARS:,}"),
    ],
)
def test_bad_role_description_names_the_key(value, needle):
    with pytest.raises(ConfigError) as err:
        validate({"agent": {"role_description": value}})
    msg = str(err.value)
    assert msg.startswith("agent.role_description: ") and needle in msg, msg
    assert len(msg) < 400  # a long value is shown by its start, not in full


def test_default_persona_is_the_built_in_one():
    assert validate({}).agent.role_description is None
    assert render("core/system.j2").startswith("You are an AI research scientist: ")
    assert render("core/system.j2", role_description=PERSONA) == PERSONA
    assert render("core/system.j2", role_description=None) == render("core/system.j2")
    # a persona is text, never a template
    assert render("core/system.j2", role_description="{{ agent_role }}") == "{{ agent_role }}"


def test_cli_bad_role_description_exits_2(tmp_path: Path):
    out = tmp_path / "exp"
    cfg = tmp_path / "c.yaml"
    cfg.write_text("agent:\n  role_description: 12\n")
    for res in (
        cli("run", "--idea", str(IDEA), "--out", str(out), "--set", "agent.role_description=", *SETUP_ONLY),
        cli("run", str(cfg), "--idea", str(IDEA), "--out", str(out), *SETUP_ONLY),
    ):
        assert res.returncode == 2, (res.returncode, res.stderr[-2000:])
        assert "Traceback" not in res.stderr and "agent.role_description: " in res.stderr, res.stderr
    assert not out.exists() or not any(out.iterdir())  # refused before a run directory is made


def test_cli_persona_with_a_colon_needs_quotes(tmp_path: Path):
    # unquoted, "X: Y" is a YAML mapping: the message says to quote it; quoted, it is the persona
    text = "You are an HPC engineer: you measure first."
    out = tmp_path / "exp"
    res = cli(
        "run", "--idea", str(IDEA), "--out", str(out), "--set", f"agent.role_description={text}", *SETUP_ONLY
    )
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert "agent.role_description: " in res.stderr and "quote it" in res.stderr, res.stderr
    res = cli(
        "run",
        "--idea",
        str(IDEA),
        "--out",
        str(out),
        "--set",
        f'agent.role_description="{text}"',
        *SETUP_ONLY,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    resolved = Path(res.stdout.strip().splitlines()[-1]) / "config.resolved.yaml"
    assert yaml.safe_load(resolved.read_text(encoding="utf-8"))["agent"]["role_description"] == text
