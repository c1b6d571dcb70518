"""Quiet output: a normal run through an OpenAI-compatible endpoint prints no INFO line of a
third-party library (httpx logs every request at INFO); those records go to RUN_DIR/run.log.
``--verbose`` brings them back to the terminal."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pipeline_support import FAST, IDEA
from test_pipeline_promptlog_exact import SECRET, FakeOpenAI

from ai_scientist.base.logsetup import RUN_LOG, RunLog, configure_terminal
from ai_scientist.base.redact import Redactor

ROOT = Path(__file__).resolve().parents[1]


def test_a_normal_run_prints_no_library_info_lines(tmp_path: Path) -> None:
    server = FakeOpenAI()
    overrides = [
        *FAST,
        "llm.backend=openai",
        f"llm.base_url={server.url}",
        "agent.stages.stage2_max_iters=1",
        "agent.stages.stage3_max_iters=1",
        "agent.stages.stage4_max_iters=1",
    ]
    env = {**os.environ, "OPENAI_API_KEY": SECRET}
    env.pop("OPENAI_BASE_URL", None)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "ai_scientist.cli", "run", "--idea", str(IDEA), "--out", str(tmp_path),
             "--name", "quiet", *[x for s in overrides for x in ("--set", s)]],
            capture_output=True, text=True, env=env, cwd=ROOT, timeout=600,
        )  # fmt: skip
    finally:
        server.close()
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(server.bodies) > 5  # the run really talked HTTP
    out = (done.stdout + done.stderr).splitlines()
    library = [line for line in out if line.startswith("INFO") or "HTTP Request:" in line]
    assert library == [], library[:5]
    run_log = (tmp_path / "quiet" / RUN_LOG).read_text()
    # every request is in run.log (httpx's INFO record), and the key is not
    assert run_log.count("HTTP Request: POST") == len(server.bodies)
    assert SECRET not in run_log


def test_verbose_shows_library_info_and_run_log_redacts(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QUIET_TEST_KEY", "sk-quiet-0123456789abcdef")
    lib = logging.getLogger("httpx")
    try:
        configure_terminal(verbose=False)
        run_log = RunLog.start(tmp_path, Redactor(["QUIET_TEST_KEY"]))
        lib.info("HTTP Request: POST quiet sk-quiet-0123456789abcdef")
        lib.warning("a library warning")
        assert "quiet" not in capsys.readouterr().err
        configure_terminal(verbose=True)
        lib.info("HTTP Request: POST loud")
        err = capsys.readouterr().err
        assert "HTTP Request: POST loud" in err
        run_log.close()
    finally:
        configure_terminal(verbose=False)
    text = (tmp_path / RUN_LOG).read_text()
    assert "HTTP Request: POST quiet [REDACTED:QUIET_TEST_KEY]" in text and "a library warning" in text
    assert "sk-quiet-0123456789abcdef" not in text
    assert run_log.handler not in logging.getLogger().handlers  # closed with the run's services
