"""Resources: schema errors name the entry, staging digests and protects items, every backend sees
them at resources/<id>, fetches are skipped without network, the index layer ranks and budgets."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from components import backend_or_skip

from ai_scientist.base.config import ConfigError
from ai_scientist.cli.main import main
from ai_scientist.execution.base import Limits
from ai_scientist.execution.resources import (
    load_index,
    load_resources,
    render_resource_index,
    stage_resources,
)


@pytest.fixture
def base():
    path = Path(tempfile.mkdtemp(prefix="ai-sci-res-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _git_repo(root: Path) -> Path:
    repo = root / "srcrepo"
    repo.mkdir()
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(root),
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@x",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@x",
    }
    for args in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-qm", "one"], ["tag", "v1"]):
        if args[0] == "add":
            (repo / "lib.py").write_text("X = 1\n")
        subprocess.run(["git", *args], cwd=repo, check=True, env=env)
    (repo / "lib.py").write_text("X = 2\n")
    subprocess.run(["git", "commit", "-qam", "two"], cwd=repo, check=True, env=env)
    return repo


def _spec(base: Path) -> Path:
    data = base / "data"
    data.mkdir()
    (data / "train.csv").write_text("x,y\n1,2\n")
    (base / "notes.txt").write_text("hello")
    repo = _git_repo(base)
    spec = {
        "resources": [
            {
                "id": "digits",
                "type": "local",
                "path": "data",
                "summary": "digits training table",
                "class": "dataset",
            },
            {"id": "notes", "type": "local", "path": "notes.txt", "mode": "bind", "summary": "notes"},
            {"id": "lib", "type": "git", "url": f"file://{repo}", "ref": "v1", "summary": "helper library"},
            {
                "id": "weights",
                "type": "model",
                "fetch": "echo weights > w.bin",
                "summary": "pretrained weights",
            },
            {"id": "cluster", "type": "described", "class": "hardware", "summary": "two A100 nodes"},
        ]
    }
    path = base / "resources.yaml"
    path.write_text(json.dumps(spec))  # JSON is valid YAML
    return path


def test_stage_digest_readonly_and_index(base):
    spec = load_resources(_spec(base))
    run = base / "run"
    index = stage_resources(spec, run)
    by = {i.id: i for i in index.items}
    assert by["digits"].status == "staged" and by["digits"].files == 1
    file_hash = hashlib.sha256(b"x,y\n1,2\n").hexdigest()
    assert by["digits"].sha256 == hashlib.sha256(f"train.csv\0{file_hash}\n".encode()).hexdigest()
    assert not (run / "resources/digits/train.csv").stat().st_mode & 0o222  # read-only
    assert (run / "resources/notes").is_symlink()  # bind: not copied
    assert by["lib"].status == "staged" and (run / "resources/lib/lib.py").read_text() == "X = 1\n"
    assert len(by["lib"].commit) == 40
    assert by["weights"].status == "skipped" and "network" in by["weights"].reason
    assert by["cluster"].status == "described"
    again = load_index(run)
    assert [i.id for i in again.items] == [i.id for i in index.items]
    assert again.binds() == [((base / "notes.txt").resolve(), "notes")]


def test_fetch_runs_in_sandbox_when_network_allowed(base):
    from ai_scientist.execution.subprocess_backend import SubprocessExecutor

    spec = load_resources(_spec(base))
    index = stage_resources(
        spec, base / "run", executor=SubprocessExecutor(), limits=Limits(timeout_s=30, network=True)
    )
    item = next(i for i in index.items if i.id == "weights")
    assert item.status == "staged", item.reason
    assert (base / "run/resources/weights/w.bin").read_text() == "weights\n"


@pytest.mark.parametrize("backend", ["subprocess", "bwrap", "docker"])
def test_every_backend_sees_resources(base, backend):
    from ai_scientist.base.config import load_config
    from ai_scientist.execution import make_executor

    run = base / "run"
    stage_resources(load_resources(_spec(base)), run)
    cfg = load_config(overrides=["exec.docker_reuse_container=false"])
    backend_or_skip(backend)
    ex = make_executor(cfg, backend, resources_dir=run / "resources")
    ws = run / "nodes/n0001/workspace"
    ws.mkdir(parents=True)
    for d in (run, run / "nodes", ws.parent):
        d.chmod(0o755)
    try:
        r = ex.run(
            [
                "sh",
                "-c",
                'cat resources/digits/train.csv "$AI_SCIENTIST_RESOURCES/notes/notes.txt" 2>&1 || cat resources/notes; '
                "echo >> resources/digits/train.csv && echo WROTE",
            ],
            workspace=ws,
            limits=Limits(timeout_s=30),
        )
    finally:
        ex.close()
    assert "x,y" in r.stdout and "hello" in r.stdout, r.stdout + r.stderr
    assert "WROTE" not in r.stdout
    assert (run / "resources/digits/train.csv").read_text() == "x,y\n1,2\n"


@pytest.mark.parametrize(
    "bad,needle",
    [
        ([{"type": "local"}], "resources[0]"),
        ([{"id": "a", "type": "local", "path": "nope"}], "resources[0] (id 'a'): path"),
        ([{"id": "a", "type": "nonsense"}], "type"),
        ([{"id": "a", "type": "git"}], "needs 'url'"),
        ([{"id": "a", "type": "model"}], "needs 'fetch'"),
        ([{"id": "a", "type": "described", "summary": "x", "color": "red"}], "color"),
        ([{"id": "bad id!", "type": "described", "summary": "x"}], "must match"),
        (
            [
                {"id": "a", "type": "described", "summary": "x"},
                {"id": "a", "type": "described", "summary": "y"},
            ],
            "duplicate id",
        ),
        ({"resources": "x"}, "expected a list"),
    ],
)
def test_bad_schema_names_the_entry(tmp_path, bad, needle):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(bad if isinstance(bad, dict) else {"resources": bad}))
    with pytest.raises(ConfigError) as info:
        load_resources(path)
    assert needle in str(info.value)


def test_missing_path_exits_2_naming_the_entry(tmp_path, capsys):
    spec = tmp_path / "r.yaml"
    spec.write_text("resources:\n  - {id: mydata, type: local, path: /definitely/missing}\n")
    idea = tmp_path / "idea.md"
    idea.write_text("# Title\n\n## Hypothesis\nh\n\n## Experiments\ne\n")
    code = main(
        [
            "run",
            "--idea",
            str(idea),
            "--resources",
            str(spec),
            "--out",
            str(tmp_path / "out"),
            "--stop-after",
            "setup",
        ]
    )
    assert code == 2
    assert "mydata" in capsys.readouterr().err


def test_index_layer_ranks_and_respects_budget(base):
    index = stage_resources(load_resources(_spec(base)), base / "run")
    text = render_resource_index(index, relevant_to="train on the digits table", budget_chars=5000)
    assert text.index("`digits`") < text.index("`cluster`")
    assert "resources/digits" in text and "NOT available (skipped" in text
    small = render_resource_index(index, relevant_to="pretrained weights", budget_chars=450)
    assert len(small) <= 450 and "`weights`" in small and "not shown for space" in small
    assert render_resource_index(None, "x", 100) == ""
