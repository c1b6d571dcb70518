"""The pieces of the isolation, each on its own: the mount plan, the refusal rule, the
non-dumpable orchestrator and the private file modes of the run directory."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from ci_paths import nonroot_dir

from ai_scientist.base.fileio import append_jsonl, atomic_write_json, create_private
from ai_scientist.execution.isolation import harden_orchestrator, plan_mounts
from ai_scientist.execution.subprocess_backend import isolation_gap

ROOT = Path(__file__).resolve().parents[1]
NONROOT_PY = nonroot_dir() / "venv/bin/python"


@pytest.fixture
def tree():
    # outside the private tmp dirs' influence: the plan is computed with private_tmp=False
    base = Path(tempfile.mkdtemp(prefix="ai-sci-plan-", dir="/tmp"))  # /tmp: enterable by all
    base.chmod(0o755)
    (base / "open" / "locked" / "run" / "ws").mkdir(parents=True)
    (base / "open" / "res").mkdir()
    (base / "open" / "locked").chmod(0o700)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def test_plan_covers_what_the_fresh_uid_cannot_enter_and_binds_the_workspace_back(tree):
    ws, res = tree / "open" / "locked" / "run" / "ws", tree / "open" / "res"
    plan = plan_mounts([(ws, "rw"), (res, "ro"), (Path("/usr"), "reach")], workdir=ws, drop_uid=True,
                       private_tmp=False)  # fmt: skip
    assert plan.covers == (str(tree / "open" / "locked"),)  # the topmost directory it cannot enter
    binds = {b.path: b.read_only for b in plan.binds}
    assert binds[str(ws)] is False
    assert binds[str(res)] is True  # resources: always read-only
    assert "/usr" not in binds  # reachable: a "reach" path is bound only when hidden
    assert plan.chdir == str(ws) and plan.tmpfs == ()


def test_plan_without_uid_drop_hides_only_private_tmp(tree):
    ws = tree / "open" / "locked" / "run" / "ws"
    plan = plan_mounts([(ws, "rw")], workdir=ws, drop_uid=False, private_tmp=True)
    assert "/tmp" in plan.tmpfs and plan.covers == ()
    under_tmp = str(ws.resolve()).startswith(tuple(t + "/" for t in plan.tmpfs))
    assert [b.path for b in plan.binds] == ([str(ws.resolve())] if under_tmp else [])


def test_refusal_rule():
    full = {"root": True, "pid_namespace": True, "mount_namespace": True, "drop_uid": True}
    assert isolation_gap(full) is None
    problem, fix = isolation_gap({**full, "mount_namespace": False})
    assert "mount_namespace" in problem and "docker" in fix
    problem, fix = isolation_gap({**full, "root": False})
    assert "not root" in problem and "bwrap" in fix


def _spawn_holder(harden: bool, as_uid: int | None) -> subprocess.Popen:
    code = (
        "import os, sys, time\n"
        "from ai_scientist.execution.isolation import harden_orchestrator\n"
        f"assert harden_orchestrator() if {harden} else True\n"
        "print('ready', flush=True); time.sleep(60)\n"
    )
    py = str(NONROOT_PY) if as_uid is not None else sys.executable
    argv = ([shutil.which("setpriv"), f"--reuid={as_uid}", f"--regid={as_uid}", "--clear-groups"]
            if as_uid is not None else []) + [py, "-c", code]  # fmt: skip
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOLDER_SECRET": "s3cr3t-" + str(time.time())}
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def _read_environ_as(pid: int, as_uid: int | None) -> str:
    argv = ["cat", f"/proc/{pid}/environ"]
    if as_uid is not None:
        argv = [shutil.which("setpriv"), f"--reuid={as_uid}", f"--regid={as_uid}", "--clear-groups", *argv]
    r = subprocess.run(argv, capture_output=True)
    return "READ" if r.returncode == 0 and b"HOLDER_SECRET" in r.stdout else "DENIED"


def test_non_dumpable_orchestrator_hides_its_environ_from_its_own_uid():
    # root bypasses dumpability (CAP_SYS_PTRACE): the holder and the reader both run as uid 65534
    as_uid = 65534 if os.geteuid() == 0 else None
    if as_uid is not None and (not NONROOT_PY.exists() or shutil.which("setpriv") is None):
        pytest.skip(f"needs setpriv and the non-root venv {NONROOT_PY} (scripts/setup.sh --with-test-tools)")
    for harden, expected in ((False, "READ"), (True, "DENIED")):  # the control first
        holder = _spawn_holder(harden, as_uid)
        try:
            assert _read_environ_as(holder.pid, as_uid) == expected, f"harden={harden}"
        finally:
            holder.kill()
            holder.wait()
    assert harden_orchestrator()  # idempotent in this process too


def test_run_files_are_private_whatever_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        append_jsonl(tmp_path / "journal.jsonl", {"seq": 1})
        atomic_write_json(tmp_path / "state.json", {"a": 1})
        create_private(tmp_path / "memory.sqlite")
    finally:
        os.umask(old)
    for name in ("journal.jsonl", "state.json", "memory.sqlite"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600, name


def test_memory_database_is_created_private(tmp_path):
    from ai_scientist.memory.db import Database

    old = os.umask(0o022)
    try:
        Database(tmp_path / "memory.sqlite")
    finally:
        os.umask(old)
    for path in tmp_path.glob("memory.sqlite*"):  # -wal / -shm take the database file's mode
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
