"""`ai-scientist exec` through the real CLI entry point; `doctor` rows; auto resolution."""

from __future__ import annotations

import threading
import uuid

import psutil
from waiting import load_scaled, wait_until

from ai_scientist.base.config import load_config
from ai_scientist.cli.main import main
from ai_scientist.execution.doctor import check_sandboxes
from ai_scientist.execution.registry import make_executor, resolve_backend


def _marked(marker: str) -> list[int]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if marker in " ".join(p.info["cmdline"] or []) and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p.pid)
        except psutil.NoSuchProcess:
            continue
    return found


def test_exec_timeout_leaves_no_process_behind(capsys):
    marker = f"aisci_cli_{uuid.uuid4().hex}"
    sleeper = f'python3 -c "import time; time.sleep(300)" {marker}'
    # the timeout must not come before the three processes are seen: longer on a busy machine
    argv = ["exec", "--backend", "subprocess", "--timeout", f"{load_scaled(5):.0f}", "--",
            "bash", "-c", f"({sleeper}) & {sleeper} & wait", marker]  # fmt: skip
    box: dict[str, int] = {}
    runner = threading.Thread(target=lambda: box.update(code=main(argv)))
    runner.start()
    try:
        # both sleepers (and the shell) run before the timeout: their absence later is the kill's
        wait_until(lambda: len(_marked(marker)) >= 3, "the shell and both sleepers are running", 30)
    finally:
        runner.join(120)
    assert box.get("code") == 124
    err = capsys.readouterr().err
    assert "killed_by=timeout" in err and "backend=subprocess" in err
    wait_until(lambda: not _marked(marker), "no process of the command is left", 30)


def test_exec_prints_output_and_returns_exit_code(capsys, tmp_path):
    code = main(
        [
            "exec",
            "--backend",
            "subprocess",
            "--workspace",
            str(tmp_path),
            "--",
            "sh",
            "-c",
            "echo out; echo err >&2; echo f > made; exit 7",
        ]
    )
    cap = capsys.readouterr()
    assert code == 7
    assert cap.out == "out\n" and cap.err.startswith("err\n") and "exit=7" in cap.err
    assert (tmp_path / "made").read_text() == "f\n"


def test_exec_usage_errors_exit_2(capsys):
    assert main(["exec", "--backend", "subprocess", "--"]) == 2
    assert main(["exec", "--backend", "nope", "--", "true"]) == 2
    assert "unknown backend" in capsys.readouterr().err
    assert main(["exec", "--set", "exec.timeout=-1", "--", "true"]) == 2


def test_doctor_rows_name_auto_choice():
    rows = check_sandboxes(load_config())
    names = [r["name"] for r in rows]
    assert names == ["docker", "apptainer", "bwrap", "subprocess", "auto"]
    sub = rows[3]
    assert sub["ok"] and "ran `true`" in sub["detail"]
    auto = rows[-1]
    first_ok = next(r["name"] for r in rows[:-1] if r["ok"])
    assert auto["detail"] == f"auto picks {first_ok}"
    app = rows[1]
    assert not app["ok"] and "not found" in app["detail"]


def test_resolve_backend_auto_and_explicit():
    cfg = load_config(overrides=["exec.backend=subprocess"])
    assert resolve_backend(cfg) == ("subprocess", "configured exec.backend=subprocess")
    cfg = load_config(overrides=["exec.apptainer_binary=definitely-missing"])
    name, why = resolve_backend(cfg)
    assert name in ("docker", "bwrap", "subprocess") and f"auto picked {name}" in why
    ex = make_executor(cfg)
    try:
        assert ex.name == name
    finally:
        ex.close()


def test_limits_from_config_uses_exec_keys():
    from ai_scientist.execution.base import Limits

    cfg = load_config(
        overrides=[
            "exec.timeout=5",
            "exec.memory_mb=700",
            "exec.pids_limit=40",
            "exec.max_output_bytes=4096",
            "exec.network=true",
            "exec.gpus=[0,2]",
            "exec.cpus=2",
        ]
    )
    lim = Limits.from_config(cfg.exec)
    assert (lim.timeout_s, lim.memory_mb, lim.pids, lim.output_bytes, lim.network, lim.gpus, lim.cpus) == (
        5.0,
        700,
        40,
        4096,
        True,
        (0, 2),
        2.0,
    )
    assert lim.output_hard_cap == 16 * 4096 and lim.cpu_seconds == 12
