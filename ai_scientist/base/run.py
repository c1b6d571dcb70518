"""A Run: its directory, resolved config, idea, state and run-level events.

Everything a later process (resume, replay, ``logs``, ``view``) reads is here as
JSON / JSONL / YAML, written atomically; nothing is pickled.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from .config import Config, ConfigError, apply_override, dump_config, validate
from .errors import UsageError
from .fileio import append_jsonl, atomic_write_json, atomic_write_text, read_json, read_jsonl
from .idea import Idea
from .paths import RunPaths, slug
from .redact import Redactor, redactor_for
from .runlock import RunLock

MAX_NAME_CHARS = 120


def check_run_name(name: str) -> None:
    """A ``--name`` must be one plain, printable directory name (exit 2 otherwise)."""
    bad = [c for c in name if not c.isprintable() or c in "/\\"]
    if not name.strip() or name in (".", "..") or name.startswith("-") or bad:
        shown = f" (contains {bad[0]!r})" if bad else ""
        raise UsageError(f"--name {name!r}: must be a plain, printable directory name{shown}")
    if len(name) > MAX_NAME_CHARS:
        raise UsageError(f"--name: at most {MAX_NAME_CHARS} characters, got {len(name)}")


def _new_run_dir(out_root: Path, base: str) -> Path:
    """Create ``out_root/base`` (or ``base-2``, ``-3`` ...) atomically: two runs never share one."""
    if out_root.exists() and not out_root.is_dir():
        raise UsageError(f"--out {out_root}: exists and is not a directory")
    try:
        out_root.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UsageError(f"--out {out_root}: a parent of it is a file, not a directory") from None
    except NotADirectoryError:
        raise UsageError(f"--out {out_root}: a parent of it is a file, not a directory") from None
    except OSError as exc:
        raise UsageError(f"--out {out_root}: cannot create it ({exc.strerror})") from None
    if not os.access(out_root, os.W_OK | os.X_OK):
        raise UsageError(f"--out {out_root}: not writable by this user")
    for n in range(1, 10_000):
        run_dir = out_root / (base if n == 1 else f"{base}-{n}")
        try:
            run_dir.mkdir(mode=0o700)
            return run_dir
        except FileExistsError:
            continue
        except OSError as exc:
            raise UsageError(f"--out {out_root}: cannot create the run directory ({exc.strerror})") from None
    raise UsageError(f"--out {out_root}: too many runs named {base!r}")


class Run:
    """Handle on one run directory. Thread-safe for events and state updates."""

    def __init__(self, run_dir: Path, cfg: Config, idea: Idea, state: dict[str, Any]):
        self.dir = Path(run_dir)
        self.paths = RunPaths(self.dir)
        self.cfg = cfg
        self.idea = idea
        self.state = state
        self.redactor: Redactor = redactor_for(cfg)
        self._lock = threading.Lock()
        self.lock: RunLock | None = None  # the run's process lock, when this process holds it

    # ------------------------------------------------------------ paths ----
    @property
    def journal_path(self) -> Path:
        return self.paths.journal

    @property
    def events_path(self) -> Path:
        return self.paths.events

    @property
    def memory_path(self) -> Path:
        return self.paths.memory

    @property
    def cost_path(self) -> Path:
        return self.paths.cost

    def node_dir(self, node_id: str) -> Path:
        return self.paths.node(node_id).root

    # --------------------------------------------------------- creation ----
    @classmethod
    def create(
        cls, cfg: Config, idea: Idea, out_root: str | Path = "experiments", name: str | None = None
    ) -> Run:
        """Make a fresh run directory with the resolved config, the idea and an initial state."""
        stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
        if name is not None:
            check_run_name(name)
        base = name or f"{stamp}_{idea.name}"
        run_dir = _new_run_dir(Path(out_root), base)
        lock = RunLock.acquire(run_dir, "ai-scientist run")
        paths = RunPaths(run_dir)
        for sub in paths.skeleton():
            sub.mkdir(exist_ok=True)
        atomic_write_text(paths.config, dump_config(cfg))
        atomic_write_text(paths.idea_md, idea.to_markdown())
        atomic_write_json(paths.idea_json, dataclasses.asdict(idea))
        if idea.code:  # a copy to read; resume and replay take the seed code from idea.json
            name = slug(idea.code_file)
            paths.seed_code.mkdir(exist_ok=True)
            atomic_write_text(paths.seed_code / (name if name.strip(".") else "seed_code"), idea.code)
        now = time.time()
        state = {
            "run_id": run_dir.name,
            "status": "created",
            "created_at": now,
            "updated_at": now,
            "current_stage": 1,
            "stages": {},
            "reporting": {},
            "exit_code": None,
        }
        run = cls(run_dir, cfg, idea, state)
        run.lock = lock
        run.save_state()
        seed = {"seed_code": {"file": idea.code_file, "source": idea.code_source}} if idea.code else {}
        run.event("run_created", run_dir=str(run_dir), idea=idea.title, **seed)
        return run

    @classmethod
    def open(cls, run_dir: str | Path, overrides: list[str] | None = None) -> Run:
        """Open an existing run (for resume / replay / reporting)."""
        run_dir = Path(run_dir)
        paths = RunPaths(run_dir)
        cfg_path = paths.config
        if not cfg_path.exists():
            raise ConfigError(f"{run_dir}: not a run directory (no config.resolved.yaml)")
        data = yaml.safe_load(cfg_path.read_text(encoding="utf-8")) or {}
        for assignment in overrides or []:
            apply_override(data, assignment)
        cfg = validate(data, str(cfg_path))
        idea_data = read_json(paths.idea_json)
        if not idea_data:
            raise ConfigError(f"{run_dir}: idea.json missing or empty")
        idea = Idea(**idea_data)
        state = read_json(paths.state) or {"status": "created", "stages": {}, "reporting": {}}
        return cls(run_dir, cfg, idea, state)

    # ------------------------------------------------------------ state ----
    def save_state(self, **updates: Any) -> None:
        with self._lock:
            self.state.update(updates)
            self.state["updated_at"] = time.time()
            atomic_write_json(self.paths.state, self.state)

    def event(self, type_: str, **fields: Any) -> dict[str, Any]:
        """Append one run-level event (redacted) to ``events.jsonl``."""
        rec = {"ts": time.time(), "type": type_, **fields}
        rec = self.redactor.redact_obj(json.loads(json.dumps(rec, default=str)))
        append_jsonl(self.events_path, rec)
        return rec

    def events(self) -> list[dict[str, Any]]:

        return list(read_jsonl(self.events_path))
