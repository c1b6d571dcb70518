"""Phase 1 installs are inherited along a lineage: the child starts from the parent's prefix."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from components import backend_or_skip

from ai_scientist.execution.base import Limits, OutputHeadTail
from ai_scientist.execution.lineage import inherit_install_state, install_env, install_environ


@pytest.fixture
def run_dir():
    path = Path(tempfile.mkdtemp(prefix="ai-sci-lineage-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("backend", ["subprocess", "bwrap", "docker"])
def test_child_sees_parent_install_and_adds_its_own(run_dir, backend):
    from ai_scientist.base.config import load_config
    from ai_scientist.execution import make_executor

    parent, child = run_dir / "nodes/n0001", run_dir / "nodes/n0002"
    for d in (parent, child):
        (d / "workspace").mkdir(parents=True)
    for d in (run_dir, run_dir / "nodes", parent, child):
        d.chmod(0o755)
    backend_or_skip(backend)
    ex = make_executor(load_config(overrides=["exec.docker_reuse_container=false"]), backend)
    lim = Limits(timeout_s=30)
    install = (
        "import os, pathlib; site = pathlib.Path(os.environ['PYTHONPATH']); site.mkdir(parents=True);"
        "(site / 'fancylib.py').write_text('VALUE = 41\\n');"
        "b = pathlib.Path(os.environ['PREFIX']) / 'bin'; b.mkdir(); (b / 'fancytool').write_text('#!/bin/sh\\necho tool\\n');"
        "(b / 'fancytool').chmod(0o755)"
    )
    try:
        # the pipeline's way: the marker from install_env() in the command's env
        r = ex.run(
            ["python3", "-c", install],
            workspace=parent / "workspace",
            limits=lim,
            env={"SEED": "1", **install_env(parent)},
        )
        assert r.ok, r.stderr
        info = inherit_install_state(parent, child)
        assert info["method"] in ("reflink", "hardlink", "copy")
        r = ex.run(
            ["sh", "-c", "python3 -c 'import fancylib; print(fancylib.VALUE + 1)' && fancytool; env"],
            workspace=child / "workspace",
            limits=lim,
            env=install_env(child),
        )
        assert r.ok, r.stderr
        assert r.stdout.split()[:2] == ["42", "tool"]
        assert "AI_SCIENTIST_INSTALL_DIR" not in r.stdout
        # what the child adds stays its own
        r = ex.run(
            ["sh", "-c", 'echo x > "$PREFIX/bin/childonly"'],
            workspace=child / "workspace",
            limits=lim,
            install_dir=child / "env",
        )
    finally:
        ex.close()
    assert r.ok and (child / "env/bin/childonly").exists()
    assert not (parent / "env/bin/childonly").exists()


def test_inherit_without_parent_prefix_and_keep_existing(tmp_path):
    info = inherit_install_state(tmp_path / "p", tmp_path / "c")
    assert info["method"] == "empty" and (tmp_path / "c/env").is_dir()
    (tmp_path / "p/env").mkdir(parents=True)
    (tmp_path / "p/env/parent").write_text("p")
    (tmp_path / "c/env/x").write_text("x")
    assert inherit_install_state(tmp_path / "p", tmp_path / "c")["method"] == "existing"
    assert not (tmp_path / "c/env/parent").exists() and (tmp_path / "c/env/x").read_text() == "x"


def test_install_environ_points_everything_at_the_prefix():
    env = install_environ("/env", "/usr/bin/python3")
    assert env["PATH"].startswith("/env/bin:")
    assert env["PYTHONUSERBASE"] == "/env" and env["PIP_USER"] == "1"
    assert env["PYTHONPATH"].startswith("/env/lib/python3.") and env["PYTHONPATH"].endswith("/site-packages")
    assert env["LD_LIBRARY_PATH"] == "/env/lib"


def test_head_tail_keeps_both_ends_and_counts_total():
    buf = OutputHeadTail(10)
    for chunk in (b"abc", b"defgh", b"ijklmnop", b"qrstuvwxyz"):
        buf.feed(chunk)
    assert buf.total == 26
    text = buf.text()
    assert text.startswith("abcde") and text.endswith("vwxyz") and "16 bytes omitted of 26" in text
    small = OutputHeadTail(100)
    small.feed(b"hello")
    assert small.text() == "hello"
