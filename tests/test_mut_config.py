"""config.py in-process, rule by rule: ``--set`` overrides, error messages naming the key path
and the bound, roles, the resolved dump and the schema's leaf keys.

tests/test_config_cli.py checks the same through the CLI (exit 2, no traceback); these tests
pin the exact messages and each branch so a changed rule fails here.
"""

from __future__ import annotations

import pytest
import yaml

from ai_scientist.base.config import (
    ROLES,
    Config,
    ConfigError,
    _describe,
    apply_override,
    dump_config,
    leaf_paths,
    load_config,
    validate,
)


def error_of(data) -> str:
    with pytest.raises(ConfigError) as exc:
        validate(data)
    return str(exc.value)


# ---- --set overrides -----------------------------------------------------------------------


def test_override_creates_nested_keys_and_parses_yaml_scalars():
    data: dict = {"agent": None}
    for assignment in (
        "agent.num_workers=3",
        "agent.search.debug_prob=0.25",
        "agent.llm_tie_break=true",
        "llm.base_url=null",
        "exec.gpus=[0, 1]",
        "llm.model=gpt-4o",
        "report.citations.api_key_env=",
        " memory.retrieval_k = 7",
        "llm.api_key_env=a=b",
        "context.layers.task={priority: 5}",
        "exec.docker_image=[unclosed",
    ):
        apply_override(data, assignment)
    assert data == {
        "agent": {"num_workers": 3, "search": {"debug_prob": 0.25}, "llm_tie_break": True},
        "llm": {"base_url": None, "model": "gpt-4o", "api_key_env": "a=b"},
        "exec": {"gpus": [0, 1], "docker_image": "[unclosed"},  # not YAML: kept as text
        "report": {"citations": {"api_key_env": ""}},
        "memory": {"retrieval_k": 7},
        "context": {"layers": {"task": {"priority": 5}}},
    }


def test_override_keeps_sibling_keys():
    data = {"agent": {"num_workers": 2, "seed": 4}}
    apply_override(data, "agent.seed=5")
    assert data == {"agent": {"num_workers": 2, "seed": 5}}


@pytest.mark.parametrize(
    "assignment,message",
    [
        ("agent.num_workers", "--set 'agent.num_workers': expected KEY.PATH=VALUE"),
        ("=3", "--set '=3': empty key path"),
        ("  =3", "--set '  =3': empty key path"),
        ("agent..x=1", "--set 'agent..x=1': empty key path"),
        (".x=1", "--set '.x=1': empty key path"),
        ("agent.=1", "--set 'agent.=1': empty key path"),
        (
            "agent.num_workers.deeper=1",
            "agent.num_workers: is a value, cannot set agent.num_workers.deeper inside it",
        ),
        ("agent.stages.x.y=1", "agent.stages.x: is a value, cannot set agent.stages.x.y inside it"),
    ],
)
def test_override_errors(assignment, message):
    data = {"agent": {"num_workers": 2, "stages": {"x": [1]}}}
    with pytest.raises(ConfigError) as exc:
        apply_override(data, assignment)
    assert str(exc.value) == message


def test_load_config_applies_overrides_in_order_after_the_file(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("agent:\n  num_workers: 2\n  seed: 1\n")
    cfg = load_config(path, ["agent.num_workers=4", "agent.num_workers=5", "llm.model=m"])
    assert (cfg.agent.num_workers, cfg.agent.seed, cfg.llm.model) == (5, 1, "m")
    assert load_config(None, ["agent.seed=9"]).agent.seed == 9
    assert load_config() == Config()
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing\n")
    assert load_config(empty, ["agent.seed=2"]).agent.seed == 2


def test_load_config_errors_name_the_file_or_key(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("- a\n- b\n")
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    assert str(exc.value) == f"{path}: the top level must be a mapping of sections"
    path.write_text("agent:\n  num_workers: [\n")
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    assert str(exc.value) == (
        f"{path}: invalid YAML at line 3, column 1: expected the node content, but found '<stream end>'"
    )
    path.write_text('agent: "\x07"\n')  # a reader error has no line mark: the message is the whole error
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    assert str(exc.value).startswith(
        f"{path}: invalid YAML: unacceptable character #x0007: special characters"
    )
    with pytest.raises(ConfigError) as exc:
        load_config(tmp_path / "nope.yaml")
    assert str(exc.value) == f"{tmp_path / 'nope.yaml'}: config file not found"
    with pytest.raises(ConfigError) as exc:
        load_config(tmp_path)
    assert str(exc.value).startswith(f"{tmp_path}: ") and "directory" in str(exc.value)
    path.write_text("agent:\n  num_workers: 0\n")
    with pytest.raises(ConfigError) as exc:
        load_config(path, ["agent.seed=x"])
    assert str(exc.value) == (
        "agent.num_workers: must be >= 1, got 0\n"
        "agent.seed: Input should be a valid integer, unable to parse string as an integer, got 'x'"
    )


# ---- validation messages -----------------------------------------------------------------


def test_validate_defaults_and_top_level():
    assert validate(None) == Config() and validate({}) == Config()
    with pytest.raises(ConfigError) as exc:
        validate([1], "my.yaml")
    assert str(exc.value) == "my.yaml: the top level must be a mapping, got list"
    assert error_of("x") == "config: the top level must be a mapping, got str"


@pytest.mark.parametrize(
    "data,message",
    [
        (
            {"agent": {"bogus": 1}},
            "agent.bogus: unknown key (check spelling; see bfts_config.yaml for the keys)",
        ),
        ({"agent": {"num_workers": 0}}, "agent.num_workers: must be >= 1, got 0"),
        ({"agent": {"num_workers": 65}}, "agent.num_workers: must be <= 64, got 65"),
        ({"exec": {"timeout": 0}}, "exec.timeout: must be > 0.0, got 0"),
        ({"llm": {"max_cost_usd": -1.5}}, "llm.max_cost_usd: must be > 0.0, got -1.5"),
        ({"exec": {"backend": "k8s"}}, "exec.backend: must be one of "),
        ({"report": {"page_limit": 5}}, "report.page_limit: must be one of 4 or 8, got 5"),
        (
            {"agent": {"stages": [1]}},
            "agent.stages: Input should be a valid dictionary or instance of StagesConfig",
        ),
        ({"exec": {"gpus": "cuda0"}}, "exec.gpus: Input should be a valid list, got 'cuda0'"),
        (
            {"agent": {"seed": "x"}},
            "agent.seed: Input should be a valid integer, unable to parse string as an integer, got 'x'",
        ),
        (
            {"llm": {"api_key_env": "sk-not a name"}},
            "llm.api_key_env: Value error, must be an environment variable name, got 'sk-not a name', got 'sk-not a name'",
        ),
    ],
)
def test_validation_messages_name_the_key_and_the_rule(data, message):
    assert error_of(data).startswith(message)


def test_every_problem_is_reported_one_per_line():
    msg = error_of({"agent": {"num_workers": 0, "bogus": 1}, "memory": {"retrieval_k": 101}})
    assert msg.splitlines() == [
        "agent.num_workers: must be >= 1, got 0",
        "agent.bogus: unknown key (check spelling; see bfts_config.yaml for the keys)",
        "memory.retrieval_k: must be <= 100, got 101",
    ]


def test_api_key_env_accepts_environment_variable_names():
    assert validate({"llm": {"api_key_env": "MY_KEY_2"}}).llm.api_key_env == "MY_KEY_2"
    assert error_of({"llm": {"api_key_env": "MY-KEY"}}).startswith("llm.api_key_env: Value error")


def test_describe_branches():
    assert _describe({"loc": (), "type": "model_type", "msg": "bad"}) == "<root>: bad, got None"
    assert _describe({"loc": ("a", 0, "b"), "type": "less_than", "input": 9, "ctx": {"lt": 5}}) == (
        "a.0.b: must be < 5, got 9"
    )
    assert _describe({"loc": ("a",), "type": "greater_than", "input": 0}) == "a: must be > ?, got 0"
    assert _describe({"loc": ("a",), "type": "literal_error", "input": "z"}) == "a: must be one of ?, got 'z'"
    assert (
        _describe({"loc": ("a",), "type": "dict_type", "msg": "need a dict", "input": [1]})
        == "a: need a dict"
    )
    assert (
        _describe({"loc": ("a",), "type": "dict_type", "msg": "need a list", "input": {"k": 1}})
        == "a: need a list"
    )
    assert _describe({"loc": ("a",), "type": "odd"}) == "a: odd, got None"


# ---- roles, dump, schema -----------------------------------------------------------------


def test_roles_and_their_models():
    cfg = validate({"llm": {"model": "base"}, "agent": {"code": {"model": "coder"}}})
    assert cfg.model_for("code") == "coder"
    assert all(cfg.model_for(r) == "base" for r in ROLES if r != "code")
    assert cfg.role("feedback") is cfg.agent.feedback
    assert Config().role("code").max_tokens == 4096 and cfg.role("feedback").temperature == 0.2
    with pytest.raises(KeyError) as exc:
        cfg.role("stages")  # an agent field, but not a role
    assert exc.value.args[0] == f"unknown LLM role 'stages'; known: {', '.join(ROLES)}"


def test_dump_is_yaml_that_loads_back_to_the_same_config(tmp_path):
    cfg = validate({"agent": {"num_workers": 3}, "llm": {"prices": {"m": {"input_per_mtok": 1.5}}}})
    text = dump_config(cfg)
    assert text.startswith("agent:\n")  # declaration order, not sorted
    assert list(yaml.safe_load(text)) == list(Config.model_fields)
    path = tmp_path / "resolved.yaml"
    path.write_text(text)
    assert load_config(path) == cfg


def test_leaf_paths_are_dotted_leaves_only():
    paths = leaf_paths()
    assert len(paths) == len(set(paths))
    for leaf in ("agent.num_workers", "agent.stages.stage1_max_iters", "agent.code.model", "llm.prices",
                 "context.layers", "context.policies.tail_window_chars", "report.citations.max_results"):  # fmt: skip
        assert leaf in paths
    for section in ("agent", "agent.stages", "agent.code", "context.policies", "report.citations"):
        assert section not in paths
    assert paths[0] == "agent.num_workers"
    assert leaf_paths(Config.model_fields["memory"].annotation, "m.")[-1] == "m.embedding.model"
