"""Answers constrained to what exists (issue 17, item 1): with ``agent.constrain_answers`` a plan's
dependencies come from the packages and tools the sandbox probe found (new packages, each with a
reason, only when the sandbox has network), a build's language and compiler from the probed
toolchains, and run commands from the answer's files — an enum in the schema, so neither
llama.cpp's grammar nor a server-side JSON schema (nor the client's validation) lets an invented
name through."""

from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
import pytest
from ai_scientist_testing.scripted import ExampleResponder
from grammar_support import assert_llama_parses
from pipeline_support import start_run

from ai_scientist.base.artifacts import Dependencies, Plan
from ai_scientist.execution.sandbox_probe import TOOLS
from ai_scientist.llm.structured import AnswerError, validate_answer
from ai_scientist.phases.install import dependency_check_command
from ai_scientist.phases.schemas import (
    CODE_SCHEMA,
    MERGED_CODE_SCHEMA,
    PLAN_SCHEMA,
    check_run_files,
    constrain_build,
    constrain_dependencies,
    constrain_run,
    probed_packages,
    validate_code,
)

ENV = {
    "sandbox": {
        "ok": True,
        "backend": "bwrap",
        "tools": {"gcc": "12.2.0", "make": "4.3"},
        "python": {"packages": {"numpy": "1.26.4", "scipy": "1.11.4"}, "package_count": 2},
    }
}
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


def test_new_packages_only_with_network_and_unconstrained_without_a_full_probe():
    offline = constrain_dependencies(PLAN_SCHEMA, ENV, network=False)["properties"]["dependencies"]
    online = constrain_dependencies(PLAN_SCHEMA, ENV, network=True)["properties"]["dependencies"]
    assert offline["properties"]["new"]["maxItems"] == 0 and offline["properties"]["source"]["maxItems"] == 0
    assert online["properties"]["new"]["maxItems"] > 0 and "maxItems" in online["properties"]["source"]
    for deps in (offline, online):  # installed packages and tools: an enum either way
        assert deps["properties"]["pip"]["items"]["enum"] == ["numpy", "scipy"]
        assert deps["properties"]["apt"]["items"]["enum"] == ["gcc", "make"]
    plan_only = {**PLAN_SCHEMA, "properties": {**PLAN_SCHEMA["properties"], "dependencies": online}}
    new = {"name": "torch", "manager": "pip", "reason": "the model"}
    asked = {**PLAN, "dependencies": {**PLAN["dependencies"], "new": [new]}}
    jsonschema.validate(asked, plan_only)  # online: a new package with its reason
    plan_only["properties"]["dependencies"] = offline
    with pytest.raises(AnswerError) as err:  # what the repair round tells the model
        validate_answer(asked, plan_only)
    assert "at $.dependencies.new: " in str(err.value)
    assert "(must stay empty: the sandbox has no network, nothing new can be installed)" in str(err.value)
    assert constrain_dependencies(PLAN_SCHEMA, {}, network=False) is PLAN_SCHEMA
    cut = {"sandbox": {**ENV["sandbox"], "python": {"packages": {"numpy": "1"}, "package_count": 900}}}
    assert probed_packages(cut) is None and constrain_dependencies(PLAN_SCHEMA, cut, False) is PLAN_SCHEMA
    empty = {"sandbox": {**ENV["sandbox"], "python": {"packages": {}, "package_count": 0}}}
    pip = constrain_dependencies(PLAN_SCHEMA, empty, False)["properties"]["dependencies"]["properties"]["pip"]
    assert pip["maxItems"] == 0


def test_phase1_checks_and_installs_the_new_packages():
    new = [{"name": "no-such-dist-4711", "manager": "pip", "reason": "r"}]
    deps = Dependencies.from_json({"pip": ["pip"], "apt": [], "new": new})  # as plan.json holds them
    check = dependency_check_command(deps, sys.executable)
    res = subprocess.run(check, shell=True, capture_output=True, text=True)
    assert (res.returncode, res.stdout.strip()) == (1, "missing pip: no-such-dist-4711")
    check = dependency_check_command(Dependencies.from_json({"pip": ["pip"], "apt": ["sh"]}), sys.executable)
    assert subprocess.run(check, shell=True).returncode == 0


def test_local_grammar_offers_only_the_probed_names():
    gbnf = assert_llama_parses(constrain_dependencies(PLAN_SCHEMA, ENV, False))
    rules = dict(line.split(" ::= ", 1) for line in gbnf.splitlines() if " ::= " in line)
    assert rules["dependencies-pip-item"] == '"\\"numpy\\"" | "\\"scipy\\""'
    assert rules["dependencies-apt-item"] == '"\\"gcc\\"" | "\\"make\\""'
    assert "pip-1.2.0" not in gbnf


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
        tmp_path, "agent.constrain_answers=true", "agent.stages.stage1_max_iters=2", responder=responder
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


def test_build_language_and_compiler_come_from_the_probed_toolchains():
    schema = constrain_build(CODE_SCHEMA, ENV)
    answer = {
        "files": [{"path": "m.c", "content": "int main(){return 0;}"}],
        "build": {"language": "c", "compiler": "gcc", "commands": ["gcc -O2 m.c -o m"]},
        "run": {"commands": ["./m"]},
    }
    jsonschema.validate(answer, schema)
    for bad in ({"language": "fortran", "compiler": "ifx"}, {"language": "c", "compiler": "ifx"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**answer, "build": bad}, schema)
    # interpreted code has no build commands (a `pip install` there would fail offline)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(
            {**answer, "build": {"language": "python", "commands": ["pip install x"]}}, schema
        )
    jsonschema.validate({**answer, "build": {"language": "python", "commands": []}}, schema)
    gbnf = assert_llama_parses(schema)
    assert "ifx" not in gbnf and "fortran" not in gbnf and '"\\"gcc\\""' in gbnf
    no_compiler = {"sandbox": {**ENV["sandbox"], "tools": {"make": "4.3"}}}
    only = constrain_build(CODE_SCHEMA, no_compiler)["properties"]["build"]
    assert only["properties"]["language"]["enum"] == ["python", "bash", "sh"]
    assert constrain_build(CODE_SCHEMA, {}) is CODE_SCHEMA  # no probe: nothing to choose from


def test_run_commands_must_name_files_of_the_answer():
    answer = {
        "files": [{"path": "src/train.py", "content": "print(1)"}],
        "build": {"language": "python"},
        "run": {"commands": ["cd src && python3 train.py", "python3 src/train.py"]},
    }
    check_run_files(answer)
    validate_code(answer)
    answer["run"]["commands"].append("python3 experiment.py --seed 1")
    with pytest.raises(ValueError) as err:
        validate_code(answer)
    assert str(err.value) == (
        "run.commands[2]: 'experiment.py' is not a file of this answer (files: 'src/train.py'); "
        "run one of them or add the file"
    )
    check_run_files(
        {"files": [], "run": {"commands": ["python3 resources/d/prep.py", "python3 /opt/x.py", "./a.out"]}}
    )


def test_a_compiled_build_needs_a_source_file_among_the_answer():
    """The embedded model's drafts chose C++ for the Python seed with a build command naming no
    file (``c++: fatal error: no input files``): refused before anything runs, naming the files."""
    answer = {
        "files": [{"path": "seed_code.py", "content": "print(1)"}],
        "build": {"language": "c++", "compiler": "g++", "commands": ["g++ -O2 -o exp"]},
        "run": {"commands": ["python3 seed_code.py"]},
    }
    with pytest.raises(ValueError) as err:
        validate_code(answer)
    assert str(err.value) == (
        "build: language 'c++' but none of the answer's files is a source file to compile "
        "(files: 'seed_code.py'); build nothing for an interpreted language, or add the source file"
    )
    answer["files"].append({"path": "src/kernel.cpp", "content": "int main(){}"})
    validate_code(answer)
    validate_code({**answer, "files": answer["files"][:1], "build": {"language": "python"}})


def test_run_commands_of_an_edit_answer_are_chosen_from_existing_files():
    schema = constrain_run(CODE_SCHEMA, ["seed_code.py", "README.md"], "/usr/bin/python3", ["bash run.sh"])
    run = schema["properties"]["run"]["properties"]
    assert run["commands"]["items"]["enum"] == ["bash run.sh", "/usr/bin/python3 seed_code.py"]
    assert run["expected_outputs"]["items"]["enum"] == ["metrics.json"]
    assert run["commands"]["maxItems"] == 1  # as many as the parent ran: no repeated command
    seed = constrain_run(CODE_SCHEMA, ["seed_code.py"], "python3")["properties"]["run"]["properties"]
    assert seed["commands"]["items"]["enum"] == ["python3 seed_code.py"] and seed["commands"]["maxItems"] == 1


def test_an_openai_compatible_server_gets_the_enums_in_its_json_schema(tmp_path, monkeypatch):
    """The requests a fake OpenAI-compatible server on 127.0.0.1 received: every schema carrying a
    plan lists exactly the probed tools, allows no new package (the sandbox is offline) and builds
    only with what the probe found. The installed Python packages are named once, in the
    request's text (the environment layer), not again as an enum of the schema (issue 28: ~50
    names in every code request; only a local grammar needs them there) — an uninstalled name is
    refused by ``check_installed`` (tests/test_search_prompts_purpose.py shows the repair)."""
    from pipeline_support import run_args
    from test_pipeline_promptlog_exact import FakeOpenAI

    from ai_scientist.cli.commands import execute, setup_run

    server = FakeOpenAI()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-constrained")
    try:
        args = run_args(
            tmp_path, "llm.backend=openai", f"llm.base_url={server.url}", "agent.stages.stage1_max_iters=2"
        )
        run, resources = setup_run(args)
        code = execute(run, resources=resources)
    finally:
        server.close()
    assert code == 0
    env = json.loads((run.dir / "environment.json").read_text())
    packages = sorted(env["sandbox"]["python"]["packages"])
    # a CUDA toolchain is no option without a GPU where the code runs (relay s7 mm2 offered nvcc)
    from ai_scientist.execution.sandbox_probe import GPU_TOOLS, gpu_visible

    usable = set(env["sandbox"]["tools"]) - (set() if gpu_visible(env) else GPU_TOOLS)
    tools = sorted(t for t in usable if t in TOOLS)
    bodies = [
        json.loads(b)
        for b in server.bodies
        if "dependencies" in json.dumps((json.loads(b).get("response_format") or {}).get("json_schema") or {})
    ]
    schemas = [b["response_format"]["json_schema"]["schema"] for b in bodies]
    assert schemas, "no plan-carrying request reached the server"
    for body, schema in zip(bodies, schemas, strict=True):
        deps = schema["properties"]["dependencies"]["properties"]
        assert "enum" not in deps["pip"]["items"] and deps["new"]["maxItems"] == 0
        text = json.dumps(body["messages"])
        assert packages and all(p in text for p in packages)  # the list, once, in the text
        assert deps["apt"].get("items", {}).get("enum", []) == tools
        build = schema["properties"]["build"]
        options = build.get("anyOf", [build])
        assert options[0]["properties"]["language"]["enum"] == ["python", "bash", "sh"]
        compilers = {c for o in options[1:] for c in o["properties"]["compiler"]["enum"]}
        assert compilers <= set(tools)


def test_repeated_dependencies_are_kept_once_in_the_plan():
    data = {
        "goal_summary": "g",
        "dependencies": {"apt": ["make"] * 20, "pip": ["pip", "numpy", "pip"], "source": []},
    }
    plan = Plan.from_json(data)
    unique = plan.with_unique_dependencies()
    assert unique.to_json()["dependencies"] == {"apt": ["make"], "pip": ["pip", "numpy"], "source": []}
    assert (unique.dependencies.apt, unique.dependencies.pip) == (("make",), ("pip", "numpy"))
    assert plan.dependencies.apt == ("make",) * 20  # a new plan: the first one is unchanged
    assert data["dependencies"]["apt"] == ["make"] * 20


def test_a_refused_build_names_why_each_alternative_failed():
    """What the repair round tells the model about a build outside the probed toolchains: each
    alternative's own failure, not jsonschema's bare "not valid under any of the given schemas"."""
    schema = constrain_build(CODE_SCHEMA, ENV)
    answer = {
        "files": [{"path": "e.f90", "content": "end"}],
        "build": {"language": "fortran", "compiler": "ifx", "commands": ["ifx e.f90"]},
        "run": {"commands": ["./e"]},
    }
    with pytest.raises(AnswerError) as err:
        validate_answer(answer, schema)
    assert str(err.value).endswith(
        "— option 1: at $.build.language: 'fortran' is not one of ['python', 'bash', 'sh']; "
        "option 2: at $.build.language: 'fortran' is not one of ['c']"
    )


def test_a_compiled_build_needs_its_commands():
    """Only build.commands compile (phases/execution.py runs them; nothing reads a compiler alone):
    an answer naming a compiler and no commands is refused with what to write, and the constrained
    schema asks for at least one command."""
    from ai_scientist.phases.schemas import CODE_SCHEMA, constrain_build, validate_code

    answer = {
        "files": [{"path": "m.c", "content": "int main(){return 0;}"}],
        "build": {"language": "c", "compiler": "gcc"},
        "run": {"commands": ["./m"]},
    }
    with pytest.raises(ValueError, match="needs build.commands"):
        validate_code(answer, ENV)
    compiled = constrain_build(CODE_SCHEMA, ENV)["properties"]["build"]["anyOf"][1]
    assert compiled["properties"]["commands"]["minItems"] == 1 and "commands" in compiled["required"]
    assert "flags" not in compiled["properties"] and "output" not in compiled["properties"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(answer, constrain_build(CODE_SCHEMA, ENV))
