"""What runs inside a Slurm job: ``python -m ai_scientist.execution.slurm_job JOB_DIR``.

It reads ``JOB_DIR/spec.json`` (command, workspace, limits, environment,
inner sandbox), runs the command in that sandbox with the usual limits — so the
timeout is exact (Slurm's own limit is whole minutes, checked every ~30 s) and
output is capped — prints the command's capped stdout / stderr (Slurm writes
them to ``JOB_DIR/stdout`` / ``JOB_DIR/stderr``) and writes ``JOB_DIR/exit.json``
atomically: the full :class:`~.base.ExecResult`, or ``{"sandbox_error": ...}``
when the inner sandbox cannot run here. The orchestrator reads only that file
for the outcome; the job's own exit code mirrors the command's for humans
looking at ``squeue``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .run_setup import SandboxBackend

EXIT_FILE = "exit.json"
SPEC_FILE = "spec.json"
# the GPU binding Slurm sets for a job with --gres (NVIDIA, AMD, Intel); with the job's SLURM_*
# variables it reaches the command, which the inner sandbox's allow-listed environment would drop
GPU_BINDING = ("CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK")


def allocation_environ(environ: dict[str, str]) -> dict[str, str]:
    """The allocation as the job sees it: every ``SLURM_*`` variable (job id, CPUs, tasks, nodes,
    GPUs) and the GPU binding; nothing else of the job's environment, no secret-looking name."""
    from .sandbox_env import is_secret_name

    return {
        k: v
        for k, v in environ.items()
        if (k.startswith("SLURM_") or k in GPU_BINDING) and not is_secret_name(k)
    }


def allocation_gpus(environ: dict[str, str], sandbox: str) -> tuple[int, ...]:
    """The job's GPUs as the inner sandbox's ``Limits.gpus``: apptainer's ``--nv`` gets the
    indices the job sees (``CUDA_VISIBLE_DEVICES``, as by hand in the job); bwrap binds the device
    files, numbered as Slurm allocated them (``SLURM_JOB_GPUS``). Empty without a GPU allocation."""
    order = ("CUDA_VISIBLE_DEVICES", "SLURM_JOB_GPUS") if sandbox == "apptainer" else ("SLURM_JOB_GPUS",)
    for key in (*order, "CUDA_VISIBLE_DEVICES"):
        ids = [int(x) for x in environ.get(key, "").split(",") if x.strip().isdigit()]
        if ids:
            return tuple(ids)
    return ()


def write_exit(job_dir: Path, record: dict[str, Any]) -> None:
    """Atomic: the orchestrator sees no exit file or a complete one, never a torn one."""
    tmp = job_dir / f".{EXIT_FILE}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(record, fh)
        fh.flush()
        os.fsync(fh.fileno())  # shared file systems: the data is on the server before the rename
    os.replace(tmp, job_dir / EXIT_FILE)


def _host_checks_file(job_dir: Path) -> Path:
    # beside the run's job directories (<root>/<node>/<key>-<k>), one file per compute node
    return job_dir.parent.parent / ".host-checks" / f"{os.uname().nodename}.json"


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def reuse_host_checks(job_dir: Path, sandbox: str) -> bool:
    """Take the inner sandbox's isolation checks (five small programs, 50-100 ms of every job) from
    an earlier job of this run on this node, when that job ran them since the node's last boot as
    the same user; True when they were taken."""
    if sandbox not in ("subprocess", "bwrap"):
        return False
    try:
        saved = json.loads(_host_checks_file(job_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    boot = _boot_id()
    if not boot or saved.get("boot_id") != boot or saved.get("euid") != os.geteuid():
        return False
    from .subprocess_backend import assume_host_checks

    assume_host_checks({k: bool(v) for k, v in saved["checks"].items()})
    return True


def save_host_checks(job_dir: Path) -> None:
    """Record this job's checks for the next job of the run on this node (best effort)."""
    from .subprocess_backend import host_checks

    boot = _boot_id()
    if not boot:
        return
    path = _host_checks_file(job_dir)
    try:
        path.parent.mkdir(exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"boot_id": boot, "euid": os.geteuid(), "checks": host_checks()}))
        os.replace(tmp, path)
    except OSError:
        pass


def inner_executor(spec: dict[str, Any]) -> SandboxBackend:
    """The sandbox named by ``spec["sandbox"]`` (subprocess | bwrap | apptainer)."""
    name = spec["sandbox"]
    res = spec.get("resources_dir")
    if name == "subprocess":
        from .subprocess_backend import SubprocessExecutor

        return SubprocessExecutor(
            python=spec["python"], resources_dir=res, **_unsafe(SubprocessExecutor, spec)
        )
    if name == "bwrap":
        from .bwrap_backend import BwrapExecutor

        return BwrapExecutor(python=spec["python"], resources_dir=res, **_unsafe(BwrapExecutor, spec))
    if name == "apptainer":
        from .apptainer_backend import ApptainerExecutor

        return ApptainerExecutor(
            spec.get("apptainer_image"),
            binary=spec.get("apptainer_binary") or "apptainer",
            python=spec["python"],
            resources_dir=res,
            **_unsafe(ApptainerExecutor, spec),
        )
    from .base import SandboxError

    raise SandboxError(f"exec.slurm.sandbox: unknown inner sandbox {name!r}")


def _unsafe(cls: type, spec: dict[str, Any]) -> dict[str, Any]:
    # exec.allow_unsafe_sandbox reaches the inner backend when that backend has the switch
    import inspect

    if "allow_unsafe" in inspect.signature(cls).parameters:
        return {"allow_unsafe": bool(spec.get("allow_unsafe"))}
    return {}


def run_job(job_dir: Path) -> int:
    """Run the spec of ``job_dir``; returns the job's exit code (the command's shell exit code)."""
    from .base import Limits, SandboxError
    from .hpc_facts import job_module_environ
    from .usage import tracked

    spec = json.loads((job_dir / SPEC_FILE).read_text(encoding="utf-8"))
    started = time.time()
    workspace = Path(spec["workspace"])
    if not workspace.is_dir():
        # Slurm would silently fall back to /tmp for a missing --chdir; say so instead.
        msg = f"workspace {workspace} does not exist on compute node {os.uname().nodename} (not on shared storage?)"
        write_exit(job_dir, {"launch_error": msg, "host": os.uname().nodename, "started": started})
        print(msg, file=sys.stderr)
        return 2
    limits = spec["limits"]
    # the allocation decides the GPUs (exec.gpus is refused under Slurm), not the orchestrator
    limits["gpus"] = allocation_gpus(dict(os.environ), spec["sandbox"])
    reused = reuse_host_checks(job_dir, spec["sandbox"])
    try:
        executor = inner_executor(spec)
        executor.hidden = tuple(spec.get("hidden") or ())  # a grader's directory (grader.dir)
        if hasattr(executor, "fork_server"):
            # one command per job from a small fresh process: a fork server would only add its start
            executor.fork_server = False
        try:
            # the load on the compute node (the orchestrator's own count of other commands replaces
            # this job's, which sees none)
            result = tracked(executor.run)(
                spec["command"],
                workspace=workspace,
                limits=Limits(**limits),
                # the site's module system reaches the command (hpc_facts.job_module_environ), and
                # the allocation, over what the orchestrator set (its CUDA_VISIBLE_DEVICES="")
                env={
                    **job_module_environ(dict(os.environ)),
                    **(spec.get("env") or {}),
                    **allocation_environ(dict(os.environ)),
                },
                install_dir=Path(spec["install_dir"]) if spec.get("install_dir") else None,
            )
        finally:
            executor.close()
    except SandboxError as exc:
        write_exit(job_dir, {"sandbox_error": str(exc), "host": os.uname().nodename, "started": started})
        print(f"inner sandbox {spec['sandbox']}: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    record = result.to_dict()
    record["extra"] = {
        **record.get("extra", {}),
        "host": os.uname().nodename,
        "inner_backend": result.backend,
        "host_checks_reused": reused,
    }
    record["started"] = started
    write_exit(job_dir, record)
    if not reused and spec["sandbox"] in ("subprocess", "bwrap"):
        save_host_checks(job_dir)  # after exit.json: off the command's path
    return min(result.shell_exit_code, 255)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m ai_scientist.execution.slurm_job JOB_DIR", file=sys.stderr)
        return 2
    return run_job(Path(args[0]))


if __name__ == "__main__":
    sys.exit(main())
