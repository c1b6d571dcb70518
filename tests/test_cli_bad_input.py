"""Bad command-line input exits 2 with one line naming the argument or file: no traceback, in
bounded time and memory (each case runs the real CLI in a child with a memory limit)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
IDEA = ROOT / "examples" / "label_noise" / "idea.md"
MEM_LIMIT = 1 << 30  # 1 GiB of address space is plenty for a refusal


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEM_LIMIT, MEM_LIMIT))


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ai_scientist.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=_limit,
        cwd=ROOT,
    )


def assert_refused(res: subprocess.CompletedProcess, *needles: str) -> None:
    assert res.returncode == 2, (res.returncode, res.stderr[-2000:])
    assert "Traceback" not in res.stderr, res.stderr[-2000:]
    for needle in needles:
        assert needle in res.stderr, (needle, res.stderr)


@pytest.mark.parametrize("value", ["inf", "nan", "1e300", "-1", "0", "abc"])
def test_exec_timeout_out_of_range(value: str) -> None:
    res = cli("exec", "--backend", "subprocess", "--timeout", value, "--", "true")
    assert_refused(res, "--timeout", value)


def test_exec_workspace_that_is_a_file(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    assert_refused(cli("exec", "--workspace", str(f), "--", "true"), "--workspace", "not a directory")
    assert_refused(cli("exec", "--workspace", str(f / "sub"), "--", "true"), "--workspace", "is a file")


def _nested_yaml(depth: int) -> str:
    return "a: " + "[" * depth + "]" * depth + "\n"


def test_config_nested_10000_deep(tmp_path: Path) -> None:
    cfg = tmp_path / "deep.yaml"
    cfg.write_text(_nested_yaml(10_000))
    res = cli("run", str(cfg), "--idea", str(IDEA), "--out", str(tmp_path / "out"))
    assert_refused(res, str(cfg), "nested")
    assert not (tmp_path / "out").exists()


def test_idea_json_nested_10000_deep(tmp_path: Path) -> None:
    idea = tmp_path / "idea.json"
    idea.write_text(
        '{"Title": "t", "Short Hypothesis": "h", "Experiments": ' + "[" * 10_000 + "]" * 10_000 + "}"
    )
    res = cli("run", "--idea", str(idea), "--out", str(tmp_path / "out"))
    assert_refused(res, "--idea", "nested")


def test_duplicate_yaml_keys_name_both_lines(tmp_path: Path) -> None:
    cfg = tmp_path / "dup.yaml"
    cfg.write_text("agent:\n  num_workers: 2\n  seed: 1\n  num_workers: 4\n")
    res = cli("run", str(cfg), "--idea", str(IDEA), "--out", str(tmp_path / "out"))
    assert_refused(res, "duplicate key 'num_workers' at line 4 (first at line 2)")
    res = cli("run", "--idea", str(IDEA), "--out", str(tmp_path / "out"), "--resources", str(cfg))
    assert res.returncode == 2  # the same rule for the resources file


def test_yaml_anchors_still_work_but_alias_bombs_do_not(tmp_path: Path) -> None:
    from ai_scientist.base.config import ConfigError, load_config

    ok = tmp_path / "anchors.yaml"
    ok.write_text("agent:\n  code: &m {temperature: 0.3}\n  feedback: *m\n")
    assert load_config(ok).agent.feedback.temperature == 0.3
    bomb = tmp_path / "bomb.yaml"
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 40)]
    bomb.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError, match="aliases"):
        load_config(bomb)


def test_out_that_is_a_file_under_a_file_or_read_only(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    assert_refused(cli("run", "--idea", str(IDEA), "--out", str(f)), "--out", "not a directory")
    assert_refused(cli("run", "--idea", str(IDEA), "--out", str(f / "sub")), "--out", "is a file")
    ro = tmp_path / "ro"
    ro.mkdir()
    if os.geteuid() == 0:
        # root writes through mode bits: a read-only mount is what refuses it
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(ro)]).returncode != 0:
            pytest.skip("cannot mount a read-only tmpfs here")
    else:
        ro.chmod(0o555)
    try:
        assert_refused(cli("run", "--idea", str(IDEA), "--out", str(ro)), "--out", str(ro))
        assert_refused(cli("run", "--idea", str(IDEA), "--out", str(ro / "x")), "--out")
        assert_refused(
            cli("exec", "--workspace", str(ro / "ws"), "--", "true"), "--workspace", "cannot create"
        )
    finally:
        if os.geteuid() == 0:
            subprocess.run(["umount", str(ro)])


def test_idea_fifo_and_device_are_refused_without_reading(tmp_path: Path) -> None:
    fifo = tmp_path / "idea.fifo"
    os.mkfifo(fifo)
    assert_refused(
        cli("run", "--idea", str(fifo), "--out", str(tmp_path / "o"), timeout=30), "not a regular file"
    )
    assert_refused(
        cli("run", "--idea", "/dev/zero", "--out", str(tmp_path / "o"), timeout=30), "not a regular file"
    )
    assert_refused(cli("run", "/dev/zero", "--idea", str(IDEA), "--out", str(tmp_path / "o"), timeout=30))
    assert_refused(cli("run", "--idea", str(tmp_path), "--out", str(tmp_path / "o")), "directory")


def test_idea_too_large(tmp_path: Path) -> None:
    from ai_scientist.base.userfiles import MAX_INPUT_BYTES

    big = tmp_path / "big.md"
    big.write_text("# T\n## Hypothesis\nh\n## Experiments\n" + "x" * MAX_INPUT_BYTES)
    assert_refused(cli("run", "--idea", str(big), "--out", str(tmp_path / "o")), "--idea", "bytes")


@pytest.mark.parametrize("name", ["a\nb", "a/b", "..", "-x", "tab\there", "x" * 200])
def test_bad_run_names(tmp_path: Path, name: str) -> None:
    res = cli("run", "--idea", str(IDEA), "--out", str(tmp_path / "o"), "--name", name)
    assert_refused(res, "--name")
    assert not (tmp_path / "o").exists()  # refused before anything was created
