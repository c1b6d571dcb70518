"""``ai-scientist ideate TOPIC.md [--out ideas.json] [--num-ideas N] [--reflections K] [--references PATH]``.

Writes the ideas (AI-Scientist-v2 JSON list, each with its ``Novelty Evidence``)
to ``--out`` (default: TOPIC with ``.json``), appending to an existing file and
skipping duplicates of the ideas already there. The file is rewritten after
every idea, so a stop (cost cap, Ctrl-C) keeps what was finished.

The literature (:mod:`ai_scientist.literature`): the user's library (``--references`` .bib /
PDF / folder, else ``ideation.references``, else ``report.references``), searched offline and
first, then the services of ``ideation.sources`` (else ``report.citations.sources``).

Everything else goes to the ideation directory ``<out>.d/`` (``ideas.json.d/``):
``nodes/ideaNNN/prompt_logs/`` (one record per LLM call, with its ledger),
``cost.json``, ``s2_cache/<source>/`` (the literature services' answers), ``events.jsonl``
(searches and outcomes), ``topic.md``, ``config.resolved.yaml`` and
``ideation.json`` (the summary of the last session).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.config import dump_config, load_config
from ..base.errors import EXIT_NO_WORKING_EXPERIMENT, EXIT_OK, ConfigError, RunStop, UsageError
from ..base.fileio import append_jsonl, atomic_write_json, atomic_write_text
from ..base.paths import RunPaths
from ..base.redact import redactor_for
from ..base.userfiles import load_json, read_user_text
from ..context.assemble import ContextAssemblyError
from ..context.budget import ContextBudgetError
from ..ideation.literature import Literature
from ..ideation.loop import IdeaPrompts, Ideator
from ..ideation.schema import check_v2
from ..literature.cascade import Machine, build

if TYPE_CHECKING:
    import argparse

    from ..llm.backend import Backend

NUM_IDEAS = (1, 50)
ROUNDS = (1, 20)  # v2's num_reflections: rounds per idea, the first draft included


@dataclass
class IdeationOptions:
    """Machine-level knobs not in the config (tests point them at a fake server)."""

    s2_base_url: str | None = None  # None: --s2-url, else the public API
    # {source: URL}; when any URL is given (here, s2_base_url or --s2-url) only those sources are asked
    base_urls: Mapping[str, str] | None = None
    environ: Mapping[str, str] | None = None  # where the keys are read (None = os.environ)
    sleep: Callable[[float], None] = time.sleep  # the sources' back-off waits


def log_dir_for(out: Path) -> Path:
    """The ideation directory beside the ideas file: ``ideas.json`` -> ``ideas.json.d``."""
    return out.with_name(out.name + ".d")


def load_previous(out: Path) -> list[dict[str, Any]]:
    """The ideas already in ``out`` (empty when it does not exist); a bad file is a ConfigError."""
    if not out.exists():
        return []
    data = load_json(read_user_text(out, f"--out {out}"), f"--out {out}")
    if not isinstance(data, list):
        raise ConfigError(f"--out {out}: exists but is not a JSON list of ideas; choose another --out")
    for i, idea in enumerate(data):
        problems = check_v2(idea)
        if problems:
            raise ConfigError(f"--out {out}#{i}: not an AI-Scientist-v2 idea: {'; '.join(problems)}")
    return data


def cmd_ideate(args: argparse.Namespace) -> int:
    return run_ideation(args)


def run_ideation(
    args: argparse.Namespace, *, backend: Backend | None = None, options: IdeationOptions | None = None
) -> int:
    """The ``ideate`` command; ``backend`` replaces the configured LLM backend (tests)."""
    from ..llm.factory import make_client

    opts = options or IdeationOptions()
    for flag, value, (lo, hi) in (
        ("--num-ideas", args.num_ideas, NUM_IDEAS),
        ("--reflections", args.reflections, ROUNDS),
    ):
        if not lo <= value <= hi:
            raise UsageError(f"{flag} must be between {lo} and {hi}, got {value}")
    cfg = load_config(args.config, args.overrides)
    topic_path = Path(args.topic)
    topic = read_user_text(topic_path, f"TOPIC {topic_path}")
    if not topic.strip():
        raise UsageError(f"TOPIC {topic_path}: the file is empty; describe the research area in it")
    out = Path(args.out) if args.out else topic_path.with_suffix(".json")
    ideas = load_previous(out)
    log_dir = log_dir_for(out)
    urls = dict(opts.base_urls or {})
    if opts.s2_base_url or args.s2_url:
        urls["semantic_scholar"] = opts.s2_base_url or args.s2_url
    refs = [str(Path(p).expanduser().resolve()) for p in getattr(args, "references", None) or []]

    def note(line: str) -> None:  # a source skipped for the session: one line, and in events.jsonl
        print(line, file=sys.stderr, flush=True)
        append_jsonl(RunPaths(log_dir).events, {"ts": time.time(), "type": "literature", "note": line})

    env = opts.environ if opts.environ is not None else os.environ
    # the library is read here: a bad --references exits 2 before anything is written
    cascade = build(
        cfg,
        log_dir / "s2_cache",
        Machine(base_urls=urls or None, environ=env, sleep=opts.sleep),
        sources=cfg.ideation.sources,
        references=refs or cfg.ideation.references,
        on_note=note,
    )
    log_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(log_dir / "topic.md", topic)
    atomic_write_text(RunPaths(log_dir).config, dump_config(cfg))

    llm = make_client(cfg, log_dir, redactor_for(cfg), backend=backend)
    ideator = Ideator(
        llm=llm,
        prompts=IdeaPrompts(cfg, llm),
        literature=Literature(cascade, cfg.report.citations.max_results),
        topic=topic,
        rounds=args.reflections,
        on_event=lambda e: append_jsonl(RunPaths(log_dir).events, {"ts": time.time(), **e}),
    )
    if cascade.has_library:
        n = sum(len(s) for s in cascade.sources if s.name == "library")
        print(f"literature: your library ({n} papers) is searched first", file=sys.stderr, flush=True)
    first = len(list(RunPaths(log_dir).nodes.glob("idea[0-9]*"))) + 1  # idea ids stay unique across sessions
    summary: dict[str, Any] = {"out": str(out), "previous": len(ideas), "outcomes": []}
    known = list(ideas)
    try:
        for k, outcome in enumerate(ideator.run(args.num_ideas, known, first), 1):
            if outcome.status == "added":
                assert outcome.idea is not None, "an added idea's outcome carries it (ideation.loop)"
                ideas.append(outcome.idea)
                atomic_write_json(out, ideas)
            summary["outcomes"].append({"idea_id": outcome.idea_id, "status": outcome.status,
                                        "reason": outcome.reason,
                                        "title": (outcome.idea or {}).get("Title")})  # fmt: skip
            _report(k, args.num_ideas, outcome, len(ideas) - 1)
    except (ContextAssemblyError, ContextBudgetError) as exc:
        raise ConfigError(f"the ideation prompt cannot be built: {exc}") from None
    except RunStop as exc:
        summary["stopped"] = f"{type(exc).__name__}: {exc}"
        print(f"ideation stopped: {exc}; the ideas finished so far are in {out}", file=sys.stderr)
        return exc.exit_code
    finally:
        llm.cost.flush()
        atomic_write_json(log_dir / "ideation.json", summary)
    if not out.exists():
        atomic_write_json(out, ideas)  # every idea a duplicate of none, or none finished: still a file
    print(out, flush=True)
    added = sum(o["status"] == "added" for o in summary["outcomes"])
    failed = sum(o["status"] == "failed" for o in summary["outcomes"])
    return EXIT_NO_WORKING_EXPERIMENT if added == 0 and failed else EXIT_OK


def _report(k: int, total: int, outcome: Any, index: int) -> None:
    if outcome.status == "added":
        ev = outcome.idea["Novelty Evidence"]
        line = f"added as #{index}: {outcome.idea['Name']} ({len(ev['queries'])} searches, {len(ev['papers'])} papers"
        line += f" from {', '.join(ev['sources'])})" if ev.get("sources") else ")"
        if not ev["novelty_checked"]:
            line += f"; {'; '.join(ev['notes'])}"
    else:
        line = f"{outcome.status}: {outcome.reason}"
    print(f"idea {k}/{total} [{outcome.idea_id}] {line}", file=sys.stderr, flush=True)
