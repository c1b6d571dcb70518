"""The sources behind one interface: the user's library first, then the services in order.

A search asks each source still in play, in order, until ``limit`` distinct papers are found;
what several sources return is merged (:func:`records.merge_all`), so a paper found twice is
one record that lists both. A source that fails, times out or throttles is skipped for the rest
of the run: one line says so (stderr and :attr:`Cascade.notes`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .local import LocalLibrary, load_library
from .records import Record, merge_all
from .sources import MIN_INTERVAL_S, SOURCES, HttpSource, SourceError, SourceOffline

if TYPE_CHECKING:
    from ..base.config import Config


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Cascade:
    def __init__(self, sources: list[Any], on_note: Callable[[str], None] = _stderr):
        self.sources = sources
        self.on_note = on_note
        self.skipped: dict[str, str] = {}  # source name -> why
        self.notes: list[str] = []

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.sources]

    @property
    def available(self) -> bool:
        """Some source is still in play (the library always is, when it holds a record)."""
        return any(s.name not in self.skipped for s in self.sources)

    @property
    def has_library(self) -> bool:
        return any(isinstance(s, LocalLibrary) and len(s) for s in self.sources)

    def skip(self, source: Any, why: str) -> None:
        self.skipped[source.name] = why
        note = f"literature: {source.label} skipped for the rest of this run: {why}"
        self.notes.append(note)
        self.on_note(note)

    def search(self, query: str, limit: int) -> list[Record]:
        """Up to ``limit`` papers for ``query``; raises SourceOffline when no source is left."""
        found: list[Record] = []
        for src in self.sources:
            if len(found) >= limit:
                break
            if src.name in self.skipped:
                continue
            try:
                found = merge_all(found, src.search(query, limit))
            except (SourceOffline, SourceError) as exc:
                self.skip(src, str(exc))
        if not self.available:
            raise SourceOffline(self.unavailable_reason())
        return found[:limit]

    def unavailable_reason(self) -> str:
        if not self.sources:
            return "no literature source is configured and no library was given (--references)"
        return "no literature source answers: " + "; ".join(f"{n}: {w}" for n, w in self.skipped.items())


@dataclass
class Machine:
    """Machine-level knobs not in the config: service URLs (tests point them at fake servers;
    a URL given replaces the public service and, when any is given, the sources without one
    are not contacted), the environment keys are read from, and the back-off's sleep."""

    base_urls: Mapping[str, str] | None = None
    environ: Mapping[str, str] | None = None
    sleep: Callable[[float], None] = time.sleep


def build(
    cfg: Config,
    cache_root: Path,
    machine: Machine,
    *,
    sources: Sequence[str] | None = None,
    references: list[str] | None = None,
    timeout_s: float | None = None,
    on_note: Callable[[str], None] = _stderr,
) -> Cascade:
    """The cascade the config asks for: the library (``references``, else ``report.references``)
    then ``sources`` (else ``report.citations.sources``), keys from the named variables."""
    import os

    c = cfg.report.citations
    env = machine.environ if machine.environ is not None else os.environ
    refs = references if references is not None else list(cfg.report.references)
    chain: list[Any] = []
    if refs:
        chain.append(LocalLibrary(load_library(refs)))
    keys: dict[str, str] = {
        "semantic_scholar": c.api_key_env,
        "openalex": c.openalex_key_env,
        "crossref": c.crossref_key_env,
    }
    contact = env.get(c.contact_email_env) or None if c.contact_email_env else None
    urls = dict(machine.base_urls or {})
    mirrors: dict[str, str] = {str(k): v for k, v in c.base_urls.items()}
    for name in sources if sources is not None else c.sources:
        if urls and name not in urls:
            continue  # test servers stand for the services: the public ones are not asked
        key_env = keys.get(name)
        src: HttpSource = SOURCES[name](
            cache_dir=cache_root / name,
            base_url=urls.get(name) or mirrors.get(name, ""),
            api_key=(env.get(key_env) or None) if key_env else None,
            contact=contact,
            timeout_s=timeout_s or c.timeout_s,
            max_attempts=c.max_attempts,
            max_wait_s=c.max_wait_s,
            budget=c.budget,
            min_interval_s=0.0 if name in urls or name in mirrors else MIN_INTERVAL_S[name],
            sleep=machine.sleep,
        )
        chain.append(src)
    return Cascade(chain, on_note)


def probe_all(cfg: Config, machine: Machine, timeout_s: float = 4.0) -> list[dict[str, Any]]:
    """For ``doctor``: each configured service probed once (in parallel, short timeout)."""
    from concurrent.futures import ThreadPoolExecutor

    cascade = build(cfg, Path("/nonexistent-cache"), machine, references=[], timeout_s=timeout_s)

    def one(src: HttpSource) -> dict[str, Any]:
        src.max_attempts = 1
        t0 = time.monotonic()
        try:
            src.probe()
        except SourceOffline as exc:
            why = str(exc).split(": ", 1)[-1]
            return {
                "name": src.name,
                "ok": True,
                "status": "offline",
                "detail": f"The {src.label} API at {src.base_url} does not answer here ({why}); a run skips it",
            }
        except (SourceError, ValueError) as exc:
            return {
                "name": src.name,
                "ok": True,
                "status": "failing",
                "detail": f"The {src.label} API answers with an error ({exc}); a run skips it",
            }
        return {"name": src.name, "ok": True, "status": "answers",
                "detail": f"{src.label} answered at {src.base_url} in {time.monotonic() - t0:.1f} s"}  # fmt: skip

    with ThreadPoolExecutor(max_workers=max(1, len(cascade.sources))) as pool:
        return list(pool.map(one, cascade.sources))
