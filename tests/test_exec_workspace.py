"""The workspace writer refuses hostile file lists (all or nothing) and names path and rule."""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path, PurePosixPath

import pytest

from ai_scientist.execution.workspace import FileSpec, WorkspaceError, validate_files, write_files

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


# ---- exact limits and rules, one boundary each (mutation testing found these untested) ----------


def _errors(ws: Path, files, max_files: int = 20, max_file_bytes: int = 1000):
    plan, errors = validate_files(ws, files, max_files=max_files, max_file_bytes=max_file_bytes)
    return plan, [(e.path, e.rule) for e in errors]


def test_writing_into_a_subdirectory_that_already_exists(tmp_path):
    _write(tmp_path, [{"path": "src/a.py", "content": "a"}])
    report = _write(tmp_path, [{"path": "src/b.py", "content": "b"}, {"path": "src/a.py", "content": "A"}])
    assert report.written == ["src/b.py", "src/a.py"]
    assert (tmp_path / "src/b.py").read_text() == "b" and (tmp_path / "src/a.py").read_text() == "A"
    assert sorted(p.name for p in (tmp_path / "src").iterdir()) == ["a.py", "b.py"]  # no temp file left


def test_two_hop_symlink_chain_out_of_the_workspace_is_rejected_by_validate_files(tmp_path):
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    (ws / "d").mkdir(parents=True)
    outside.mkdir()
    (ws / "d" / "l2").symlink_to(outside)  # hop 2: leaves the workspace
    (ws / "l1").symlink_to(ws / "d")  # hop 1: stays inside
    (ws / "l3").symlink_to("d/l2")  # one component, two hops
    for path in ("l1/l2/evil.py", "l3/evil.py", "l1/l2/new/evil.py"):
        plan, errors = _errors(ws, [{"path": path, "content": "x"}])
        assert plan == [] and errors == [(path, "symlink_escape")], path
    # the walk names the link that leaves; the whole-chain check stands behind it
    err = validate_files(ws, [{"path": "l1/l2/evil.py", "content": "x"}], max_files=2, max_file_bytes=9)[1][0]
    assert err.message == "'l2' is a symlink leading outside the workspace"
    assert list(outside.iterdir()) == []


def test_a_sibling_directory_sharing_the_workspace_prefix_is_outside(tmp_path):
    ws, sibling = tmp_path / "ws", tmp_path / "ws2"
    ws.mkdir()
    sibling.mkdir()
    (ws / "link").symlink_to(sibling)
    assert _errors(ws, [{"path": "link/x.py", "content": "x"}])[1] == [("link/x.py", "symlink_escape")]


def test_dangling_or_file_symlink_as_a_directory_is_rejected_before_writing(tmp_path):
    # Found while testing the symlink rules: a dangling link used as a directory passed
    # validation and write_files then crashed in mkdir with FileExistsError.
    (tmp_path / "file.txt").write_text("x")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "to_file").symlink_to(tmp_path / "file.txt")
    exc = _rejected(
        tmp_path, [{"path": "dangling/x.py", "content": "x"}, {"path": "to_file/x.py", "content": "x"}]
    )
    assert [(e.path, e.rule) for e in exc.rejections] == [
        ("dangling/x.py", "not_a_directory"),
        ("to_file/x.py", "not_a_directory"),
    ]
    assert exc.rejections[0].message == "'dangling' is a symlink to no directory"
    assert not (tmp_path / "nowhere").exists()


def test_symlink_loop_is_not_a_directory(tmp_path):
    (tmp_path / "loop").symlink_to("loop")
    plan, errors = _errors(tmp_path, [{"path": "loop/x.py", "content": "x"}])
    assert errors == [("loop/x.py", "not_a_directory")]


def test_a_component_that_cannot_be_inspected_is_rejected(tmp_path, monkeypatch):
    # As root nothing is unreadable; stand in for a directory without search permission.
    (tmp_path / "locked").mkdir()
    real_lstat = os.lstat

    def lstat(path, *a, **kw):
        if str(path).endswith("locked/x.py"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_lstat(path, *a, **kw)

    monkeypatch.setattr(os, "lstat", lstat)
    plan, errors = validate_files(
        tmp_path, [{"path": "locked/x.py", "content": "x"}], max_files=2, max_file_bytes=9
    )
    assert [(e.path, e.rule) for e in errors] == [("locked/x.py", "unreadable")]
    assert errors[0].message.startswith(f"cannot inspect {tmp_path.resolve()}/locked/x.py: [Errno 13]")


@pytest.mark.parametrize(
    "path,ok",
    [
        ("with space.py", True),
        ("tilde~and:colon.py", True),
        ("a", True),
        ("é.py", True),
        ("unit\x1fsep.py", False),
        ("del\x7f.py", False),
        ("tab\t.py", False),
    ],
)
def test_characters_in_names_on_the_boundary(tmp_path, path, ok):
    plan, errors = _errors(tmp_path, [{"path": path, "content": "x"}])
    assert (errors == []) is ok
    if not ok:
        assert errors == [(path, "control_char")]


def test_whitespace_only_and_drive_like_paths(tmp_path):
    cases = {"   ": "empty_path", "c:x.py": "absolute", "\\\\share\\x": "absolute", "/": "absolute"}
    for path, rule in cases.items():
        assert _errors(tmp_path, [{"path": path, "content": "x"}])[1] == [(path, rule)]
    plan, errors = _errors(
        tmp_path, [{"path": "ab:c.py", "content": "x"}, {"path": "x/./y.py", "content": "y"}]
    )
    assert errors == [] and [str(p[0]) for p in plan] == ["ab:c.py", "x/y.py"]


def test_path_length_limits_are_inclusive(tmp_path):
    comp = "c" * 200
    exact = "/".join([comp] * 5) + "/" + "d" * (1024 - 5 * 201)
    assert len(exact) == 1024
    plan, errors = _errors(tmp_path, [{"path": exact, "content": "x"}])
    assert errors == [] and len(plan) == 1
    over = exact + "e"
    assert _errors(tmp_path, [{"path": over, "content": "x"}])[1] == [(over[:80] + "...", "too_long")]

    name255, name256 = "n" * 255, "n" * 256
    assert _errors(tmp_path, [{"path": name255, "content": "x"}])[1] == []
    assert _errors(tmp_path, [{"path": f"d/{name256}", "content": "x"}])[1] == [(f"d/{name256}", "too_long")]
    # the limit is in bytes: 128 two-byte characters are 256 bytes
    wide = "é" * 128
    assert _errors(tmp_path, [{"path": wide, "content": "x"}])[1] == [(wide, "too_long")]
    assert _errors(tmp_path, [{"path": "é" * 127, "content": "x"}])[1] == []


def test_max_files_is_inclusive_and_refuses_before_looking_at_the_files(tmp_path):
    files = [{"path": f"f{i}.txt", "content": "x"} for i in range(3)]
    plan, errors = _errors(tmp_path, files, max_files=3)
    assert errors == [] and len(plan) == 3
    plan, errors = validate_files(
        tmp_path, [*files, {"path": "/abs", "content": "x"}], max_files=3, max_file_bytes=9
    )
    assert plan == [] and [(e.path, e.rule) for e in errors] == [("*", "too_many_files")]
    assert "4 files proposed; the limit is 3" in errors[0].message


def test_max_file_bytes_is_inclusive_and_counts_bytes(tmp_path):
    plan, errors = _errors(tmp_path, [{"path": "a.txt", "content": "x" * 10}], max_file_bytes=10)
    assert errors == [] and plan[0][1] == b"x" * 10
    plan, errors = validate_files(
        tmp_path, [{"path": "a.txt", "content": "é" * 6}], max_files=5, max_file_bytes=11
    )
    assert [(e.path, e.rule) for e in errors] == [("a.txt", "too_large")]
    assert "12 bytes exceeds the limit of 11" in errors[0].message


def test_write_files_default_limits(tmp_path):
    assert len(write_files(tmp_path / "a", [{"path": "big", "content": "x" * 5_000_000}]).written) == 1
    with pytest.raises(WorkspaceError) as exc:
        write_files(tmp_path / "b", [{"path": "big", "content": "x" * 5_000_001}])
    assert exc.value.rules == {"too_large"}
    many = [{"path": f"f{i}", "content": ""} for i in range(200)]
    assert len(write_files(tmp_path / "c", many).written) == 200
    with pytest.raises(WorkspaceError) as exc:
        write_files(tmp_path / "d", [*many, {"path": "one-more", "content": ""}])
    assert exc.value.rules == {"too_many_files"}


@pytest.mark.parametrize(
    "mode,result",
    [
        (None, 0o644),
        ("0", 0),
        (0o777, 0o777),
        ("777", 0o777),
        ("0o640", 0o640),
        ("8", "bad_mode"),
        (0o1000, "dangerous_mode"),
        (0o4000, "dangerous_mode"),
        (0o7777, "dangerous_mode"),
        (0o10000, "bad_mode"),
        (-1, "bad_mode"),
        (True, "bad_mode"),
        ([7], "bad_mode"),
        (6.9, 6),
    ],
)
def test_mode_range(tmp_path, mode, result):
    plan, errors = validate_files(
        tmp_path, [{"path": "f", "content": "x", "mode": mode}], max_files=5, max_file_bytes=9
    )
    if isinstance(result, int):
        assert errors == [] and plan[0][2] == result
    else:
        assert plan == [] and [e.rule for e in errors] == [result]
        assert repr(mode) in errors[0].message or f"{mode:o}" in errors[0].message


def test_mode_is_applied_to_the_written_file(tmp_path):
    _write(tmp_path, [{"path": "ro.txt", "content": "x", "mode": "0400"}])
    assert stat.S_IMODE((tmp_path / "ro.txt").stat().st_mode) == 0o400


def test_lone_surrogates_and_non_strict_base64_are_refused(tmp_path):
    cases = [
        ({"path": "s.txt", "content": "ok \ud800 not"}, "bad_content"),
        ({"path": "b.bin", "content": "aGk=\n", "encoding": "base64"}, "bad_base64"),
        ({"path": "c.bin", "content": "aG k=", "encoding": "base64"}, "bad_base64"),
        ({"path": "d.bin", "content": "aGk", "encoding": "base64"}, "bad_base64"),
        ({"path": "e.bin", "content": b"aGk=", "encoding": "base64"}, "bad_content"),
    ]
    plan, errors = _errors(tmp_path, [c for c, _ in cases])
    assert plan == [] and errors == [(c["path"], rule) for c, rule in cases]
    plan, errors = _errors(tmp_path, [{"path": "ok.bin", "content": "aGk=", "encoding": "base64"}])
    assert errors == [] and plan[0][1] == b"hi"


def test_every_bad_file_is_reported_and_good_ones_are_planned_in_order(tmp_path):
    files = [
        {"path": "a.py", "content": "a"},
        {"path": "../x", "content": "x"},
        FileSpec("b.py", "b", encoding="utf-8", mode="0600"),
        {"path": "a.py", "content": "again"},
        {"path": "c.py", "content": "c", "encoding": None},
        42,
    ]
    plan, errors = validate_files(tmp_path, files, max_files=10, max_file_bytes=10)
    assert [(str(r), d, m) for r, d, m in plan] == [
        ("a.py", b"a", 0o644),
        ("b.py", b"b", 0o600),
        ("c.py", b"c", 0o644),
    ]
    assert [(e.path, e.rule) for e in errors] == [
        ("../x", "parent_ref"),
        ("a.py", "duplicate"),
        ("42", "bad_entry"),
    ]
    assert "expected a mapping with path/content, got int" in errors[2].message
    exc = WorkspaceError(errors)
    assert exc.rules == {"parent_ref", "duplicate", "bad_entry"}
    assert str(exc).startswith("'../x': '..' is not allowed in workspace paths [parent_ref]; 'a.py': ")


def test_duplicates_are_found_after_normalising(tmp_path):
    errors = _errors(tmp_path, [{"path": "x//y.py", "content": "1"}, {"path": "./x/y.py", "content": "2"}])[1]
    assert errors == [("./x/y.py", "duplicate")]
    # a rejected first entry does not make the second a duplicate
    errors = _errors(tmp_path, [{"path": "z.py", "content": 1}, {"path": "z.py", "content": "2"}])[1]
    assert errors == [("z.py", "bad_content")]


def test_non_string_path_is_shown_by_repr(tmp_path):
    errors = _errors(tmp_path, [{"path": 5, "content": "x"}])[1]
    assert errors == [("5", "empty_path")]
    err = validate_files(tmp_path, [{"path": ["a"], "content": "x"}], max_files=2, max_file_bytes=2)[1][0]
    assert (err.path, err.message) == ("['a']", "path must be a non-empty string")


# ---- every rejection, exactly: path shown, rule, message ---------------------------------------

REJECTIONS = [
    ({"path": "", "content": "x"}, "", "empty_path", "path must be a non-empty string"),
    ({"path": "a\x01b", "content": "x"}, "a\x01b", "control_char", "path contains NUL or control characters"),
    ({"path": "x" * 1025, "content": "x"}, "x" * 80 + "...", "too_long", "path longer than 1024 characters"),
    ({"path": "/etc/x", "content": "x"}, "/etc/x", "absolute",
     "absolute paths are not allowed; use a path relative to the workspace"),
    ({"path": "c:", "content": "x"}, "c:", "absolute",
     "absolute paths are not allowed; use a path relative to the workspace"),
    ({"path": "./.", "content": "x"}, "./.", "empty_path", "path names no file"),
    ({"path": "a/../b", "content": "x"}, "a/../b", "parent_ref", "'..' is not allowed in workspace paths"),
    ({"path": "d/" + "n" * 256, "content": "x"}, "d/" + "n" * 256, "too_long",
     "a path component is longer than 255 bytes"),
    ({"path": "file.txt/x", "content": "x"}, "file.txt/x", "not_a_directory", "'file.txt' exists and is not a directory"),
    ({"path": "sub", "content": "x"}, "sub", "is_directory", "target exists and is a directory"),
    ({"path": "fifo", "content": "x"}, "fifo", "special_file", "target exists and is a device, FIFO or socket"),
    ({"path": "out/x", "content": "x"}, "out/x", "symlink_escape", "'out' is a symlink leading outside the workspace"),
    ({"path": "c.txt", "content": None}, "c.txt", "bad_content", "content must be a string"),
    ({"path": "s.txt", "content": "\udc00"}, "s.txt", "bad_content",
     "content is not encodable as UTF-8 (lone surrogates)"),
    ({"path": "b.bin", "content": "@@", "encoding": "base64"}, "b.bin", "bad_base64", "content is not valid base64"),
    ({"path": "e.txt", "content": "x", "encoding": "utf-16"}, "e.txt", "bad_encoding",
     "encoding must be utf-8 or base64, got 'utf-16'"),
    ({"path": "m1", "content": "x", "mode": "0x1"}, "m1", "bad_mode", "mode must be octal like '0644', got '0x1'"),
    ({"path": "m2", "content": "x", "mode": 0o20000}, "m2", "bad_mode", "mode out of range: 8192"),
    ({"path": "m3", "content": "x", "mode": "2750"}, "m3", "dangerous_mode",
     "setuid/setgid/sticky bits are not allowed (mode 2750)"),
    ({"path": "big", "content": "x" * 11}, "big", "too_large",
     "11 bytes exceeds the limit of 10 (exec.max_file_bytes)"),
    ({"path": "a.py", "content": "again"}, "a.py", "duplicate", "the same path is proposed twice"),
    (["not", "a", "mapping"] * 20, repr(["not", "a", "mapping"] * 20)[:80], "bad_entry",
     "expected a mapping with path/content, got list"),
]  # fmt: skip


def test_every_rejection_names_path_rule_and_message(tmp_path):
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    (ws / "sub").mkdir(parents=True)
    outside.mkdir()
    (ws / "file.txt").write_text("x")
    os.mkfifo(ws / "fifo")
    (ws / "out").symlink_to(outside)
    files = [{"path": "a.py", "content": "a"}] + [r[0] for r in REJECTIONS]
    plan, errors = validate_files(ws, files, max_files=50, max_file_bytes=10)
    assert [str(p[0]) for p in plan] == ["a.py"]  # every entry is checked, bad ones in between
    assert [(e.path, e.rule, e.message) for e in errors] == [r[1:] for r in REJECTIONS]
    assert str(errors[0]) == "'': path must be a non-empty string [empty_path]"


def test_write_files_refuses_a_non_list_naming_its_type(tmp_path):
    exc = _rejected(tmp_path, ({"path": "a", "content": "b"},))
    assert [(e.path, e.rule, e.message) for e in exc.rejections] == [
        ("*", "bad_entry", "files must be a list, got tuple")
    ]


def test_write_files_creates_a_nested_workspace(tmp_path):
    ws = tmp_path / "a" / "b" / "ws"
    assert write_files(ws, [{"path": "x.py", "content": "x"}]).written == ["x.py"]
    assert (ws / "x.py").read_text() == "x"


def test_files_are_written_through_a_hidden_temp_file_in_the_target_directory(tmp_path, monkeypatch):
    renames = []
    real_replace = os.replace

    def replace(src, dst):
        renames.append((Path(src), Path(dst)))
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    _write(tmp_path, [{"path": "d/e/f.txt", "content": "x"}])
    ((src, dst),) = renames
    assert dst == tmp_path.resolve() / "d/e/f.txt"
    assert src.parent == dst.parent and src.name.startswith(".write.")  # same filesystem: atomic rename
    assert sorted(p.name for p in dst.parent.iterdir()) == ["f.txt"]


def test_write_re_checks_each_parent_against_a_concurrent_swap(tmp_path, monkeypatch):
    # validate_files saw a plain directory; by write time it is a symlink leading out.
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (ws / "swapped").symlink_to(outside)
    import ai_scientist.execution.workspace as workspace

    planned = [(PurePosixPath("ok.txt"), b"1", 0o644), (PurePosixPath("swapped/x.py"), b"x", 0o644)]
    monkeypatch.setattr(workspace, "validate_files", lambda *a, **kw: (planned, []))
    with pytest.raises(WorkspaceError) as exc:
        write_files(ws, [{"path": "ignored", "content": ""}])
    assert [(e.path, e.rule, e.message) for e in exc.value.rejections] == [
        ("swapped/x.py", "symlink_escape", "parent resolves outside the workspace")
    ]
    assert list(outside.iterdir()) == []


def test_entries_after_a_malformed_one_are_still_checked(tmp_path):
    plan, errors = _errors(
        tmp_path, ["junk", {"path": "ok.py", "content": "x"}, {"path": "/abs", "content": "x"}]
    )
    assert [str(p[0]) for p in plan] == ["ok.py"]
    assert errors == [("'junk'", "bad_entry"), ("/abs", "absolute")]


def test_an_infinite_mode_is_a_rejection_not_a_crash(tmp_path):
    # json.loads turns Infinity into float("inf"); int() of it raised OverflowError out of write_files.
    files = json.loads('[{"path": "a.sh", "content": "x", "mode": Infinity}]')
    exc = _rejected(tmp_path, files)
    assert [(e.path, e.rule, e.message) for e in exc.rejections] == [
        ("a.sh", "bad_mode", "mode must be octal like '0644', got inf")
    ]
