"""``ai-scientist doctor``: what this machine offers, checked live.

Sections: LLM (backend, key present — never shown —, and for an OpenAI-compatible endpoint a
live probe: models, context window, the structured-output mode a run will use, images; see
``llm/probe.py``), sandbox backends (each really run once; which one ``auto`` picks; see
``execution/doctor.py``), LaTeX tools, the literature sources (the user's library of
``report.references`` read, each service of ``report.citations.sources`` asked once with a short
timeout: ``answers``, ``offline`` or ``failing``; see ``literature/cascade.py``), GPUs (pynvml) and
free disk. Exit 0 when the default
pipeline can run here (an LLM backend and a sandbox are usable), else 1.

Every row is ``{name, ok, status, detail}``. ``status`` is the word the table prints and it
says the same as ``detail`` (``missing``, ``none``, ``not set`` ... never ``yes`` next to a
"not"); ``detail`` is one sentence; ``ok`` is False only for what keeps a run from working.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.config import Config, load_config

if TYPE_CHECKING:
    import argparse

Row = dict[str, Any]


def check_gpus() -> list[Row]:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:  # no driver / no library: a fact to report, not an error
        why = "pynvml is not installed" if isinstance(exc, ImportError) else f"NVML: {exc}"
        return [
            {
                "name": "gpu",
                "ok": True,
                "status": "none",
                "detail": f"No NVIDIA GPU is usable ({why}); runs use the CPU.",
            }
        ]
    out = []
    try:
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h).total // 2**20
            name = pynvml.nvmlDeviceGetName(h)
            out.append(
                {
                    "name": f"gpu{i}",
                    "ok": True,
                    "status": "found",
                    "detail": f"GPU {i} is {name} with {mem} MiB.",
                }
            )
    finally:
        pynvml.nvmlShutdown()
    return out or [
        {"name": "gpu", "ok": True, "status": "none", "detail": "NVML found no GPU; runs use the CPU."}
    ]


def check_disk(path: str | Path = ".") -> list[Row]:
    usage = shutil.disk_usage(path)
    free_gb = usage.free / 2**30
    ok = free_gb >= 2
    return [
        {
            "name": "disk",
            "ok": ok,
            "status": "ok" if ok else "low",
            "detail": f"{free_gb:.1f} GiB free at {Path(path).resolve()}"
            + ("." if ok else "; runs need at least 2 GiB."),
        }
    ]


def _latex_rows() -> list[Row]:
    from ..reporting.latex import check_reporting_tools

    rows = []
    for r in check_reporting_tools():
        if r["ok"]:
            rows.append({**r, "status": "found", "detail": f"Found at {r['detail']}."})
        else:
            need = "needed for the paper" if "required" in r["detail"] else "optional"
            rows.append({**r, "status": "missing", "detail": f"{r['name']} is not on PATH ({need})."})
    return rows


def _sandbox_rows(cfg: Config) -> list[Row]:
    from ..execution.doctor import check_sandboxes

    return check_sandboxes(cfg)


def _llm_rows(cfg: Config) -> list[Row]:
    from ..llm.probe import check_llm

    return check_llm(cfg)


def _literature_rows(cfg: Config) -> list[Row]:
    """The library (records read) and each service (probed; never blocking: a run skips it)."""
    from ..base.errors import ConfigError
    from ..literature.cascade import Machine, probe_all
    from ..literature.local import load_library

    rows: list[Row] = []
    if cfg.report.references:
        try:
            n = len(load_library(cfg.report.references))
            rows.append({"name": "library", "ok": True, "status": "found",
                         "detail": f"{n} papers read from report.references, searched first"})  # fmt: skip
        except ConfigError as exc:
            rows.append({"name": "library", "ok": False, "status": "unusable", "detail": str(exc)})
    rows += probe_all(cfg, Machine())
    if not any(r["status"] in ("answers", "found") for r in rows):
        rows.append({"name": "offline", "ok": True, "status": "none",
                     "detail": "No literature source answers from this machine: a run's paper gets no "
                     "references and ideate checks no novelty unless you give --references"})  # fmt: skip
    return rows


# section name -> check; a new section (e.g. a cluster scheduler) is one more line here
SECTIONS: dict[str, Callable[[Any], list[Row]]] = {
    "llm": _llm_rows,
    "sandbox": _sandbox_rows,
    "slurm": lambda cfg: __import__("ai_scientist.execution.doctor", fromlist=["x"]).check_slurm(cfg),
    "latex": lambda cfg: _latex_rows(),
    "literature": _literature_rows,
    "gpu": lambda cfg: check_gpus(),
    "disk": lambda cfg: check_disk(),
}


def gather(cfg: Config) -> dict[str, list[Row]]:
    return {section: [readable(r) for r in check(cfg)] for section, check in SECTIONS.items()}


def readable(r: Row) -> Row:
    """``r`` with a ``status`` word (``ok`` / ``unusable`` when the check gave none) and its
    detail as one sentence: capitalised, ending with a full stop."""
    detail = " ".join(str(r.get("detail", "")).split())
    first = detail.split(" ", 1)[0].rstrip(":,;.") if detail else ""
    # a plain word starts with a capital; a program, path or URL keeps its spelling
    if first.isalpha() and first.islower() and shutil.which(first) is None:
        detail = detail[0].upper() + detail[1:]
    if detail and detail[-1] not in ".!?":
        detail += "."
    return {**r, "status": r.get("status") or ("ok" if r.get("ok") else "unusable"), "detail": detail}


def is_ready(report: dict[str, list[Row]]) -> bool:
    """Every LLM row is fine (they only fail for what the chosen backend needs) and one sandbox works."""
    return all(c.get("ok") for c in report["llm"]) and any(c.get("ok") for c in report["sandbox"])


def cmd_doctor(args: argparse.Namespace) -> int:
    cfg = load_config(args.config, args.overrides)
    report = gather(cfg)
    ready = is_ready(report)
    if args.json:
        print(json.dumps({"ready": ready, **report}, indent=2))
        return 0 if ready else 1
    from rich.console import Console
    from rich.table import Table

    table = Table(title="ai-scientist doctor")
    for col in ("section", "check", "status", "detail"):
        table.add_column(col)
    for section, checks in report.items():
        for c in checks:
            status = c["status"] if c.get("ok") else f"[bold red]{c['status']}[/]"
            table.add_row(section, str(c["name"]), status, c["detail"])
    Console().print(table)
    print("ready: the pipeline can run here" if ready else "not ready: see the rows in red above")
    return 0 if ready else 1
