"""The workspace writer refuses hostile file lists (all or nothing) and names path and rule."""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path

import pytest

from ai_scientist.execution.workspace import WorkspaceError, write_files

OK = {"path": "main.py", "content": "print('hi')\n"}


def _write(ws: Path, files, **kw):
    return write_files(
        ws, files, max_files=kw.get("max_files", 20), max_file_bytes=kw.get("max_file_bytes", 1000)
    )


def _rejected(ws: Path, files) -> WorkspaceError:
    with pytest.raises(WorkspaceError) as info:
        _write(ws, files)
    return info.value


HOSTILE = [
    ("absolute", [{"path": "/etc/passwd", "content": "x"}]),
    ("absolute", [{"path": "/tmp/evil.py", "content": "x"}]),
    ("parent_ref", [{"path": "../evil.py", "content": "x"}]),
    ("parent_ref", [{"path": "src/../../evil.py", "content": "x"}]),
    ("parent_ref", [{"path": "src\\..\\..\\evil.py", "content": "x"}]),
    ("control_char", [{"path": "evil\x00.py", "content": "x"}]),
    ("control_char", [{"path": "evil\n.py", "content": "x"}]),
    ("empty_path", [{"path": "", "content": "x"}]),
    ("empty_path", [{"path": "./", "content": "x"}]),
    ("empty_path", [{"path": None, "content": "x"}]),
    ("too_long", [{"path": "a" * 300 + ".py", "content": "x"}]),
    ("too_large", [{"path": "big.bin", "content": "x" * 1001}]),
    (
        "too_large",
        [{"path": "big.bin", "content": base64.b64encode(b"\0" * 1001).decode(), "encoding": "base64"}],
    ),
    ("bad_base64", [{"path": "blob.bin", "content": "!!!not base64!!!", "encoding": "base64"}]),
    ("bad_encoding", [{"path": "a.py", "content": "x", "encoding": "latin-1"}]),
    ("bad_content", [{"path": "a.py", "content": 42}]),
    ("dangerous_mode", [{"path": "run.sh", "content": "x", "mode": "4755"}]),
    ("dangerous_mode", [{"path": "run.sh", "content": "x", "mode": 0o2755}]),
    ("bad_mode", [{"path": "run.sh", "content": "x", "mode": "rwx"}]),
    ("duplicate", [OK, dict(OK)]),
    ("bad_entry", ["just a string"]),
]


@pytest.mark.parametrize("rule,files", HOSTILE, ids=[f"{r}-{i}" for i, (r, _) in enumerate(HOSTILE)])
def test_hostile_file_lists_are_rejected_and_nothing_written(tmp_path, rule, files):
    ws = tmp_path / "ws"
    exc = _rejected(ws, [*files, {"path": "innocent.py", "content": "ok"}])
    assert rule in exc.rules, str(exc)
    assert not (ws / "innocent.py").exists()  # all or nothing
    assert not (tmp_path / "evil.py").exists()
    err = next(e for e in exc.rejections if e.rule == rule)
    assert err.message and f"[{rule}]" in str(exc)


def test_too_many_files(tmp_path):
    files = [{"path": f"f{i}.txt", "content": "x"} for i in range(21)]
    exc = _rejected(tmp_path, files)
    assert [e.rule for e in exc.rejections] == ["too_many_files"]
    assert "exec.max_files" in str(exc)
    assert list(tmp_path.iterdir()) == []


def test_symlink_escape_is_rejected(tmp_path):
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (ws / "data").symlink_to(outside)
    exc = _rejected(ws, [{"path": "data/evil.py", "content": "x"}])
    assert [e.rule for e in exc.rejections] == ["symlink_escape"]
    assert "'data/evil.py'" in str(exc) and "'data' is a symlink" in str(exc)
    assert list(outside.iterdir()) == []


def test_existing_symlink_at_target_is_replaced_not_followed(tmp_path):
    ws, secret = tmp_path / "ws", tmp_path / "secret.txt"
    ws.mkdir()
    secret.write_text("keep")
    (ws / "out.txt").symlink_to(secret)
    report = _write(ws, [{"path": "out.txt", "content": "new"}])
    assert report.written == ["out.txt"]
    assert secret.read_text() == "keep"
    assert not (ws / "out.txt").is_symlink() and (ws / "out.txt").read_text() == "new"


def test_special_file_and_directory_targets_are_rejected(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("x")
    exc = _rejected(
        tmp_path,
        [
            {"path": "pipe", "content": "x"},
            {"path": "adir", "content": "x"},
            {"path": "afile/sub.py", "content": "x"},
        ],
    )
    assert sorted(exc.rules) == ["is_directory", "not_a_directory", "special_file"]


def test_internal_symlink_is_followed_when_it_stays_inside(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    report = _write(tmp_path, [{"path": "alias/x.py", "content": "x"}])
    assert report.written == ["alias/x.py"] and (tmp_path / "real" / "x.py").read_text() == "x"


def test_good_files_are_written_with_mode_and_encoding(tmp_path):
    blob = bytes(range(256))
    files = [
        {"path": "src/pkg/main.py", "content": "print(1)\n"},
        {"path": "run.sh", "content": "#!/bin/sh\necho hi\n", "mode": "0755"},
        {"path": "data/blob.bin", "content": base64.b64encode(blob).decode(), "encoding": "base64"},
        {"path": "./notes//a.md", "content": "é ü"},
    ]
    report = _write(tmp_path, files)
    assert report.written == ["src/pkg/main.py", "run.sh", "data/blob.bin", "notes/a.md"]
    assert (tmp_path / "data/blob.bin").read_bytes() == blob
    assert stat.S_IMODE((tmp_path / "run.sh").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "src/pkg/main.py").stat().st_mode) == 0o644
    assert (tmp_path / "notes/a.md").read_text(encoding="utf-8") == "é ü"
    assert report.to_dict()["written"][0] == "src/pkg/main.py"


def test_not_a_list_is_rejected(tmp_path):
    assert _rejected(tmp_path, {"path": "a", "content": "b"}).rules == {"bad_entry"}
