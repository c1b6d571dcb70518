"""Foundation: strict config (exit 2 with the key path, no traceback), idea files, CLI surface."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ai_scientist.base.config import ConfigError, leaf_paths, load_config
from ai_scientist.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
IDEA = ROOT / "examples" / "label_noise" / "idea.md"


def _cli(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ai_scientist.cli", *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


def test_help_lists_all_seven_subcommands():
    out = _cli("--help").stdout
    for cmd in ("run", "resume", "replay", "logs", "view", "doctor", "exec"):
        assert re.search(rf"^\s+{cmd}\s", out, re.M), f"{cmd} missing from --help:\n{out}"


def test_console_script_installed():
    exe = Path(sys.executable).parent / "ai-scientist"
    assert exe.exists(), "pip install -e . should install the ai-scientist console script"
    res = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "doctor" in res.stdout


def test_default_config_file_is_valid_and_documents_every_key():
    cfg = load_config(ROOT / "bfts_config.yaml")
    assert cfg.agent.num_workers >= 1
    text = (ROOT / "bfts_config.yaml").read_text()
    data = yaml.safe_load(text)
    for path in leaf_paths():
        node = data
        for part in path.split("."):
            assert isinstance(node, dict) and part in node, f"bfts_config.yaml does not document {path}"
            node = node[part]
    # every key line carries a comment (the file is the documentation)
    for line in text.splitlines():
        s = line.strip()
        if s and not s.startswith("#") and s.endswith(":") is False and ":" in s:
            assert "#" in s, f"uncommented key line: {line!r}"


def _source_text() -> str:
    parts = []
    for p in (ROOT / "ai_scientist").rglob("*.py"):
        if p.name != "config.py":
            parts.append(p.read_text(encoding="utf-8"))
    return "\n".join(parts)


def test_no_config_key_that_nothing_reads():
    src = _source_text()
    unread = []
    for path in leaf_paths():
        leaf = path.split(".")[-1]
        parent = path.split(".")[-2] if "." in path else ""
        # a key counts as read when its attribute name is accessed somewhere outside config.py
        dynamic = re.match(r"stage\d_max_iters$", leaf) and '_max_iters"' in src  # getattr(f"stage{n}_...")
        if not dynamic and not re.search(rf"\.{leaf}\b", src) and not re.search(rf"[\"']{leaf}[\"']", src):
            unread.append(path)
        elif parent in (
            "code",
            "feedback",
            "vlm_feedback",
            "summary",
            "select_node",
            "plotting",
            "writeup",
            "citation",
            "review",
        ):
            assert re.search(r"cfg\.role\(|\.role\(|model_for\(", src)
    assert not unread, f"config keys nothing reads: {unread}"


MALFORMED = [
    # (yaml text or None, --set overrides, expected fragment naming the key path)
    ("agent:\n  num_workers: -3\n", [], "agent.num_workers: must be >= 1, got -3"),
    ("agent:\n  bogus: 1\n", [], "agent.bogus: unknown key"),
    ("nonsense_section: {}\n", [], "nonsense_section: unknown key"),
    ("exec:\n  timeout: soon\n", [], "exec.timeout"),
    ("exec:\n  backend: kubernetes\n", [], "exec.backend: must be one of"),
    ("agent:\n  search:\n    debug_prob: 1.5\n", [], "agent.search.debug_prob: must be <= 1"),
    ("search:\n  policy: random_walk\n", [], "search.policy: must be one of"),
    ("memory:\n  retrieval_k: 0\n", [], "memory.retrieval_k: must be >= 1"),
    ("llm:\n  api_key_env: 'sk-not a name'\n", [], "llm.api_key_env"),
    ("report:\n  page_limit: 5\n", [], "report.page_limit"),
    ("agent: [1, 2]\n", [], "agent"),
    ("agent:\n  stages:\n    stage1_max_iters: 0\n", [], "agent.stages.stage1_max_iters: must be >= 1"),
    ("exec:\n  gpus: cuda0\n", [], "exec.gpus"),
    ("agent:\n  num_workers: 2\n  num_workers: [\n", [], "invalid YAML"),
    (None, ["agent.num_workers=abc"], "agent.num_workers"),
    (None, ["agent.num_workers"], "expected KEY.PATH=VALUE"),
    (None, ["agent..x=1"], "empty key path"),
    ("agent:\n  num_workers: 2\n", ["agent.num_workers.deeper=1"], "agent.num_workers: is a value"),
    (None, ["llm.max_cost_usd=-1"], "llm.max_cost_usd: must be > 0"),
]


@pytest.mark.parametrize("text,overrides,expected", MALFORMED)
def test_malformed_config_exits_2_naming_key(tmp_path, text, overrides, expected):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(text if text is not None else "{}\n")
    args = ["run", str(cfg), "--idea", str(IDEA), "--out", str(tmp_path / "out")]
    for o in overrides:
        args += ["--set", o]
    res = _cli(*args)
    assert res.returncode == 2, res.stderr
    assert expected in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir()), (
        "no run dir on bad config"
    )


@pytest.mark.parametrize(
    "setup,expected",
    [
        ("missing_config", "config file not found"),
        ("unreadable_config", "cannot read config file"),
        ("missing_idea", "--idea"),
        ("empty_idea", "file is empty"),
        ("incomplete_idea", "missing or empty: hypothesis"),
        ("bad_json_idea", "invalid JSON"),
        ("idea_index_out_of_range", "holds 1 ideas"),
    ],
)
def test_bad_inputs_exit_2(tmp_path, setup, expected):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("{}\n")
    idea = tmp_path / "idea.md"
    idea.write_text(IDEA.read_text())
    if setup == "missing_config":
        cfg = tmp_path / "nope.yaml"
    elif setup == "unreadable_config":
        cfg.write_bytes(b"\xff\xfe\x00bad")
    elif setup == "missing_idea":
        idea = tmp_path / "none.md"
    elif setup == "empty_idea":
        idea.write_text("   \n")
    elif setup == "incomplete_idea":
        idea.write_text("# A title\n\n## Experiments\nsomething\n")
    elif setup == "bad_json_idea":
        idea = tmp_path / "idea.json"
        idea.write_text('{"Title": "x",')
    elif setup == "idea_index_out_of_range":
        idea = tmp_path / "ideas.json"
        idea.write_text(json.dumps([{"Title": "t", "Short Hypothesis": "h", "Experiments": "e"}]))
        idea = Path(f"{idea}#3")
    res = _cli("run", str(cfg), "--idea", str(idea), "--out", str(tmp_path / "out"))
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert expected in res.stderr, res.stderr
    assert "Traceback" not in res.stderr


def test_set_override_coerces_types():
    cfg = load_config(
        None,
        [
            "agent.num_workers=3",
            "exec.network=true",
            "exec.gpus=[0, 1]",
            "llm.base_url=http://127.0.0.1:9/v1",
            "llm.max_cost_usd=2.5",
        ],
    )
    assert cfg.agent.num_workers == 3 and cfg.exec.network is True and cfg.exec.gpus == [0, 1]
    assert cfg.llm.base_url == "http://127.0.0.1:9/v1" and cfg.llm.max_cost_usd == 2.5
    with pytest.raises(ConfigError):
        load_config(None, ["exec.network=maybe"])


def test_ai_scientist_v2_json_idea_and_resolved_config_saved(tmp_path):
    idea = tmp_path / "ideas.json"
    idea.write_text(
        json.dumps(
            [
                {
                    "Name": "first",
                    "Title": "First",
                    "Short Hypothesis": "h1",
                    "Experiments": ["a", "b"],
                    "Related Work": "rw",
                    "Abstract": "abs",
                    "Risk Factors and Limitations": ["r"],
                },
                {"Name": "second", "Title": "Second idea", "Short Hypothesis": "h2", "Experiments": "e2"},
            ]
        )
    )
    code = main(
        [
            "run",
            "--idea",
            f"{idea}#1",
            "--out",
            str(tmp_path / "out"),
            "--name",
            "r1",
            "--set",
            "report.enabled=false",
            "--stop-after",
            "setup",
        ]
    )
    assert code == 0
    run_dir = tmp_path / "out" / "r1"
    assert (run_dir / "idea.md").read_text().startswith("# Second idea")
    resolved = yaml.safe_load((run_dir / "config.resolved.yaml").read_text())
    assert resolved["report"]["enabled"] is False
    state = json.loads((run_dir / "state.json").read_text())
    assert state["status"] == "created"
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert events[0]["type"] == "run_created"


def test_no_prompt_prose_in_python():
    """Prompt text lives in prompt/ templates: no long natural-language string constants in code."""
    offenders = []
    for p in (ROOT / "ai_scientist").rglob("*.py"):
        if "testing" in p.parts:
            continue
        tree = ast.parse(p.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                s = node.value
                code_like = any(
                    k in s
                    for k in (
                        "def ",
                        "CREATE ",
                        "SELECT ",
                        "import ",
                        "<html",
                        "\\begin",
                        "; do\n",
                        "printf ",
                    )
                )
                if len(s) > 400 and s.count(" ") > 60 and "\n" in s and not code_like:
                    offenders.append(f"{p.relative_to(ROOT)}:{node.lineno}")
    # docstrings are fine; this only catches big prose constants
    docstrings = set()
    for p in (ROOT / "ai_scientist").rglob("*.py"):
        tree = ast.parse(p.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=False)
                if doc and node.body and isinstance(node.body[0], ast.Expr):
                    docstrings.add(f"{p.relative_to(ROOT)}:{node.body[0].lineno}")
    assert not [o for o in offenders if o not in docstrings], offenders


def test_doctor_json_reports_every_section(capsys):
    code = main(["doctor", "--json", "--set", "exec.backend=subprocess"])
    data = json.loads(capsys.readouterr().out)
    assert set(data) >= {"ready", "llm", "sandbox", "latex", "gpu", "disk"}
    assert code == (0 if data["ready"] else 1)
    assert any(c["name"] == "subprocess" and c["ok"] for c in data["sandbox"]), data["sandbox"]
    assert (
        data["disk"][0]["detail"].endswith(str(Path(".").resolve()))
        or "GiB free" in data["disk"][0]["detail"]
    )
    text = json.dumps(data)
    assert "OPENAI_API_KEY=" not in text
