"""``ai-scientist doctor``: what this machine offers, checked live.

Sections: LLM backends (key present — never shown —, endpoint reachable, local
model found), sandbox backends (each really run once; which one ``auto``
picks), LaTeX tools, GPUs (pynvml) and free disk. Exit 0 when the default
pipeline can run here (an LLM backend and a sandbox are usable), else 1.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from .config import load_config


def check_gpus() -> list[dict[str, Any]]:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:  # no driver / no library: a fact to report, not an error
        return [
            {"name": "gpu", "ok": True, "detail": f"no NVIDIA GPU usable ({type(exc).__name__}); CPU only"}
        ]
    out = []
    try:
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h).total // 2**20
            out.append({"name": f"gpu{i}", "ok": True, "detail": f"{pynvml.nvmlDeviceGetName(h)}, {mem} MiB"})
    finally:
        pynvml.nvmlShutdown()
    return out or [{"name": "gpu", "ok": True, "detail": "no GPU found; CPU only"}]


def check_disk(path: str | Path = ".") -> list[dict[str, Any]]:
    usage = shutil.disk_usage(path)
    free_gb = usage.free / 2**30
    return [
        {"name": "disk", "ok": free_gb >= 2, "detail": f"{free_gb:.1f} GiB free at {Path(path).resolve()}"}
    ]


def gather(cfg: Any) -> dict[str, list[dict[str, Any]]]:
    from .execution.doctor import check_sandboxes
    from .llm.factory import check_llm
    from .reporting.latex import check_reporting_tools

    return {
        "llm": check_llm(cfg),
        "sandbox": check_sandboxes(cfg),
        "slurm": __import__("ai_scientist.execution.doctor", fromlist=["x"]).check_slurm(cfg),
        "latex": check_reporting_tools(),
        "gpu": check_gpus(),
        "disk": check_disk(),
    }


def _usable(section: list[dict[str, Any]]) -> bool:
    return any(c.get("ok") for c in section)


def cmd_doctor(args: Any) -> int:
    cfg = load_config(args.config, args.overrides)
    report = gather(cfg)
    ready = _usable(report["llm"]) and _usable(report["sandbox"])
    if args.json:
        print(json.dumps({"ready": ready, **report}, indent=2))
        return 0 if ready else 1
    from rich.console import Console
    from rich.table import Table

    table = Table(title="ai-scientist doctor")
    for col in ("section", "check", "ok", "detail"):
        table.add_column(col)
    for section, checks in report.items():
        for c in checks:
            table.add_row(section, str(c["name"]), "yes" if c.get("ok") else "NO", str(c.get("detail", "")))
    Console().print(table)
    print("ready: the pipeline can run here" if ready else "not ready: see the NO rows above")
    return 0 if ready else 1
