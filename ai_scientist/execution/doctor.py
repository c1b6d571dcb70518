"""Live check of every sandbox backend, for ``ai-scientist doctor`` and the environment probe."""

from __future__ import annotations

from typing import Any

from .base import SandboxError
from .registry import AUTO_ORDER, live_check, resolve_backend


def check_sandboxes(cfg: Any) -> list[dict[str, Any]]:
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
