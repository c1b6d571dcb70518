"""``ai-scientist doctor``: each row's status word agrees with its detail, and each detail is one
readable sentence (issue 19 item 8: ``api key | yes | OPENAI_API_KEY is not set``, ``gpu | yes |
no NVIDIA GPU usable`` and a raw exception tuple in the Docker row)."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from ai_scientist.base.config import validate
from ai_scientist.cli.doctor import check_gpus, gather, readable
from ai_scientist.cli.main import main

# words that say "this is here and works"; a detail next to one of them must not say the opposite
POSITIVE = {"ok", "yes", "set", "found", "reachable", "accepted"}
NEGATIVE_DETAIL = re.compile(r"\bnot (set|found|usable|reachable|installed)\b|\bno \w+ (is )?usable", re.I)


@pytest.fixture
def no_key_no_docker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/ai-scientist-test/docker.sock")


def test_status_words_match_the_details(no_key_no_docker: None) -> None:
    report = gather(validate({}))
    rows = {(section, r["name"]): r for section, checks in report.items() for r in checks}
    key = rows[("llm", "api key")]
    assert key["status"] == "not set" and "OPENAI_API_KEY is not set" in key["detail"]
    for (section, name), r in rows.items():
        where = f"{section}/{name}: {r['status']} | {r['detail']}"
        if r["status"] in POSITIVE:
            assert not NEGATIVE_DETAIL.search(r["detail"]), where
        # one readable sentence: capitalised (or a path / URL), a full stop, no raw exception repr
        assert r["detail"].endswith(".") and "\n" not in r["detail"], where
        first = r["detail"].split(" ", 1)[0].rstrip(":,;.")
        assert not r["detail"][0].islower() or r["detail"].startswith("http") or shutil.which(first), where
        assert not re.search(r"\('|\w+Error\(|Errno", r["detail"]), where
    docker = rows[("sandbox", "docker")]
    assert not docker["ok"] and docker["status"] == "unusable"
    assert "the socket does not exist" in docker["detail"], docker


def test_no_gpu_is_reported_as_none() -> None:
    rows = check_gpus()
    if any(r["name"].startswith("gpu") and r["status"] == "found" for r in rows):
        pytest.skip("this machine has an NVIDIA GPU")
    (row,) = rows
    assert row["status"] == "none" and row["detail"].startswith("No NVIDIA GPU is usable")
    assert row["detail"].endswith("runs use the CPU.")


def test_readable_turns_a_fragment_into_a_sentence() -> None:
    r = readable({"name": "bwrap", "ok": False, "detail": "cannot create a user namespace:\n  denied"})
    assert r["status"] == "unusable" and r["detail"] == "Cannot create a user namespace: denied."
    r = readable({"name": "subprocess", "ok": True, "detail": "ran `true` in 0.02s"})
    assert r["status"] == "ok" and r["detail"] == "Ran `true` in 0.02s."
    # a program name or a path keeps its spelling
    assert readable({"name": "x", "ok": True, "detail": "/usr/bin/latexmk"})["detail"] == "/usr/bin/latexmk."
    assert readable({"name": "x", "ok": True, "detail": "sh: not found"})["detail"] == "sh: not found."


def test_doctor_table_shows_the_status_words(no_key_no_docker: None, capsys: pytest.CaptureFixture) -> None:
    code = main(["doctor"])
    out = capsys.readouterr().out
    api_line = next(line for line in out.splitlines() if "api key" in line)
    assert "not set" in api_line and "yes" not in api_line.split("api key")[1].split("OPENAI")[0]
    assert code in (0, 1)
    capsys.readouterr()
    main(["doctor", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert all("status" in r for checks in report.values() if isinstance(checks, list) for r in checks)
