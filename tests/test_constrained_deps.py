"""Answers constrained to what exists (issue 17, item 1, dependencies): with the sandbox's network
off and ``agent.constrain_dependencies``, a plan's pip dependencies come from the packages the
sandbox probe found — an enum in the schema, so neither llama.cpp's grammar nor a server-side JSON
schema (nor the client's validation) lets an invented package through."""

from __future__ import annotations

import json

import jsonschema
import pytest
from pipeline_support import start_run

from ai_scientist.llm.local_backend import grammar_schema
from ai_scientist.phases.schemas import (
    MERGED_CODE_SCHEMA,
    PLAN_SCHEMA,
    constrain_dependencies,
    probed_packages,
)
from ai_scientist.testing.scripted import ExampleResponder

ENV = {"sandbox": {"python": {"packages": {"numpy": "1.26.4", "scipy": "1.11.4"}, "package_count": 2}}}
PLAN = {
    "goal_summary": "g",
    "implementation_strategy": "s",
    "dependencies": {"apt": [], "pip": ["numpy"], "source": []},
}


@pytest.mark.parametrize("base", [PLAN_SCHEMA, MERGED_CODE_SCHEMA], ids=["plan", "merged"])
def test_schema_allows_only_probed_packages(base):
    schema = constrain_dependencies(base, ENV, network=False)
    pip = schema["properties"]["dependencies"]["properties"]["pip"]
    assert pip["items"]["enum"] == ["numpy", "scipy"]
    plan_only = {**schema, "required": [r for r in schema["required"] if r in PLAN]}
    jsonschema.validate(PLAN, plan_only)
    invented = {**PLAN, "dependencies": {**PLAN["dependencies"], "pip": ["pip-1.2.0"]}}
    with pytest.raises(jsonschema.ValidationError, match="'pip-1.2.0' is not one of"):
        jsonschema.validate(invented, plan_only)
    assert base["properties"]["dependencies"]["properties"]["pip"]["items"].get("enum") is None  # not mutated


def test_unconstrained_with_network_or_without_a_full_probe():
    assert constrain_dependencies(PLAN_SCHEMA, ENV, network=True) is PLAN_SCHEMA
    assert constrain_dependencies(PLAN_SCHEMA, {}, network=False) is PLAN_SCHEMA
    cut = {"sandbox": {"python": {"packages": {"numpy": "1"}, "package_count": 900}}}
    assert probed_packages(cut) is None and constrain_dependencies(PLAN_SCHEMA, cut, False) is PLAN_SCHEMA
    empty = {"sandbox": {"python": {"packages": {}, "package_count": 0}}}
    pip = constrain_dependencies(PLAN_SCHEMA, empty, False)["properties"]["dependencies"]["properties"]["pip"]
    assert pip["maxItems"] == 0


def test_local_grammar_offers_only_the_probed_names():
    from llama_cpp.llama_grammar import LlamaGrammar, json_schema_to_gbnf

    gbnf = json_schema_to_gbnf(json.dumps(grammar_schema(constrain_dependencies(PLAN_SCHEMA, ENV, False))))
    rules = dict(line.split(" ::= ", 1) for line in gbnf.splitlines() if " ::= " in line)
    assert rules["dependencies-pip-item"] == '"\\"numpy\\"" | "\\"scipy\\""'
    assert "pip-1.2.0" not in gbnf
    LlamaGrammar.from_string(gbnf, verbose=False)  # a grammar llama.cpp accepts


class InventingResponder(ExampleResponder):
    """The example's answers, but the first plan-carrying answer lists an invented pip package."""

    def __init__(self):
        super().__init__()
        self.schemas: list[dict] = []
        self.invented = False

    def __call__(self, messages, schema, ctx):
        text = super().__call__(messages, schema, ctx)
        props = (schema or {}).get("properties") or {}
        if "dependencies" not in props:
            return text
        self.schemas.append(schema)
        if self.invented:
            return text
        self.invented = True
        answer = json.loads(text)
        answer["dependencies"]["pip"] = ["pip-1.2.0"]
        return json.dumps(answer)


def test_scripted_run_plan_schema_comes_from_the_probe_and_refuses_invented(tmp_path):
    responder = InventingResponder()
    code, run_dir, _ = start_run(
        tmp_path, "agent.constrain_dependencies=true", "agent.stages.stage1_max_iters=2", responder=responder
    )
    env = json.loads((run_dir / "environment.json").read_text())
    probed = sorted(env["sandbox"]["python"]["packages"])
    assert probed and env["sandbox"]["python"]["package_count"] == len(probed)
    assert responder.schemas
    for schema in responder.schemas:
        assert schema["properties"]["dependencies"]["properties"]["pip"]["items"]["enum"] == probed
    # the invented package was refused by the client's schema check and the repair round fixed it
    first = sorted((run_dir / "nodes" / "n0001" / "prompt_logs").glob("*.json"))
    records = [json.loads(p.read_text()) for p in first]
    planned = [r for r in records if r["phase"] in ("phase0", "phase2")]
    assert "'pip-1.2.0' is not one of" in planned[1]["messages"][-1]["content"]
    plan = json.loads((run_dir / "nodes" / "n0001" / "plan.json").read_text())
    assert plan["dependencies"]["pip"] == []
