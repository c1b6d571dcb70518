"""Live check of every sandbox backend, for ``ai-scientist doctor`` and the environment probe."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import SandboxError
from .registry import AUTO_ORDER, live_check, resolve_backend

if TYPE_CHECKING:
    from ..base.config import Config


def check_sandboxes(cfg: Config) -> list[dict[str, Any]]:
    """One ``{name, ok, detail}`` per backend (each ran ``true`` or says why not), then ``auto``."""
    rows = []
    for name in AUTO_ORDER:
        ok, detail = live_check(cfg, name)
        rows.append({"name": name, "ok": ok, "detail": detail})
    picked = next((r["name"] for r in rows if r["ok"]), None)
    if cfg.exec.backend == "auto":
        detail = f"auto picks {picked}" if picked else "no backend works here"
    else:
        try:
            name, why = resolve_backend(cfg)
            detail = f"{why} (auto would pick {picked})"
        except SandboxError as exc:
            detail = str(exc)
    rows.append({"name": "auto", "ok": picked is not None, "detail": detail})
    return rows


def check_slurm(cfg: Config) -> list[dict[str, Any]]:
    """Slurm rows for ``doctor``: client, controller, partitions with their limits.

    ``ok`` is False only when ``exec.backend`` is ``slurm`` and something it needs is missing.
    """
    import shutil
    import subprocess

    from .slurm_cli import SlurmCLI

    needed = cfg.exec.backend == "slurm"
    found, detail = SlurmCLI.available()
    if not found:
        return [{"name": "slurm client", "ok": not needed, "status": "missing", "detail": detail}]

    def ask(*argv: str) -> subprocess.CompletedProcess[str] | None:
        try:
            return subprocess.run(list(argv), capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            return None

    version = ask("sbatch", "--version")
    rows = [
        {
            "name": "slurm client",
            "ok": True,
            "status": "found",
            "detail": f"Slurm client {(version.stdout.strip() if version else '') or 'sbatch'} at {detail}",
        }
    ]
    ping = ask("scontrol", "ping") if shutil.which("scontrol") else None
    up = bool(ping and ping.returncode == 0 and "UP" in ping.stdout)
    ping_text = (
        (ping.stdout.strip() or ping.stderr.strip())
        if ping
        else "The controller did not answer scontrol ping"
    )
    rows.append(
        {
            "name": "slurm controller",
            "ok": up or not needed,
            "status": "reachable" if up else "unreachable",
            "detail": ping_text.replace("\n", "; ")[:300],
        }
    )
    if not up:
        return rows
    info = ask("sinfo", "--noheader", "-o", "%P|%a|%l|%D|%c|%m|%G")
    wanted = cfg.exec.slurm.partition
    seen = []
    for line in info.stdout.splitlines() if info and info.returncode == 0 else []:
        part, avail, limit, nodes, cpus, mem, gres = (line.split("|") + [""] * 7)[:7]
        name = part.rstrip("*")
        seen.append(name)
        rows.append(
            {
                "name": f"partition {part}",
                "ok": avail == "up" or not needed or (wanted is not None and name != wanted),
                "status": avail,
                "detail": f"{nodes} node(s), {cpus} CPUs and {mem} MB per node, time limit {limit}"
                + (f", gres {gres}" if gres and gres != "(null)" else "")
                + ("; the default partition" if part.endswith("*") else ""),
            }
        )
    if wanted and wanted not in seen:
        rows.append(
            {
                "name": f"partition {wanted}",
                "ok": not needed,
                "status": "missing",
                "detail": f"Partition {wanted} (exec.slurm.partition) is not one of this cluster's: "
                + (", ".join(seen) or "none"),
            }
        )
    return rows
