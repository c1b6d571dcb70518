"""The checkpoint of a phase: a done phase is reused, an interrupted one is redone.

Every phase of the node pipeline runs through :func:`checkpoint`, the one place that decides
whether a phase has to run. A phase is *done* when the journal lists it in the node's
``phases_done`` and its artifact (one JSON file in the node directory) reads back. The effects
of a phase happen in one order:

1. ``compute()``: the phase's LLM calls, sandbox commands and workspace writes;
2. the artifact is written atomically (temp file, rename: never seen half-written);
3. the phase is added to ``phases_done`` by a journal update (an fsync'd append).

A crash (kill -9, power loss) before step 3 leaves the phase not done, so ``resume`` runs it
again from its start: an answer the LLM gave but the journal never recorded is asked again,
never half-used, and the records that attempt left are set aside first (:func:`supersede`). After step 3 the phase is reused from its artifact. The artifact is not
fsync'd (it can be recreated): when a power loss loses or truncates it, the phase is redone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from ..base import failpoints
from ..base.artifacts import A, read_artifact, write_artifact
from ..base.paths import numbered_files, slug
from .base import NodeContext

SUPERSEDED = ".superseded"

T = TypeVar("T")


def checkpoint(ctx: NodeContext, phase: str, artifact: str, compute: Callable[[], T]) -> T:
    """The result of ``phase`` for ``ctx.node``: its saved ``artifact`` when the phase is done,
    otherwise ``compute()``, saved as ``artifact`` and then marked done in the journal.

    ``compute`` may raise :class:`~.base.PhaseFailed`: nothing is saved and the phase stays not
    done (a failing phase may save a partial record of its own first, for the viewer).
    The failpoint ``phase_saved:<node>:<phase>`` sits between the save and the journal update.
    """
    return _checkpoint(
        ctx, phase, compute, lambda: saved_artifact(ctx, artifact), lambda r: ctx.save(artifact, r)
    )


def checkpoint_typed(
    ctx: NodeContext, phase: str, kind: type[A], artifact: str, compute: Callable[[], A]
) -> A:
    """:func:`checkpoint` of a phase whose artifact is typed (``base/artifacts.py``: the run
    record, the review): read back and saved through the type's one reader and writer."""
    path = ctx.paths.file(artifact)

    def saved() -> A | None:
        try:
            return read_artifact(path, kind)
        except ValueError:  # empty, torn or malformed: the phase is redone
            return None

    return _checkpoint(ctx, phase, compute, saved, lambda r: write_artifact(path, r))


def _checkpoint(
    ctx: NodeContext,
    phase: str,
    compute: Callable[[], T],
    saved: Callable[[], T | None],
    save: Callable[[T], Any],
) -> T:
    if phase in ctx.node.phases_done:
        found = saved()
        if found is not None:
            return found
    supersede(ctx, phase)
    result = compute()
    save(result)
    failpoints.hit(f"phase_saved:{ctx.node.id}:{phase}")
    ctx.mark_done(phase)
    return result


def saved_artifact(ctx: NodeContext, artifact: str) -> Any:
    """The artifact's JSON, or None when it is missing or unreadable (torn by a power loss)."""
    try:
        return ctx.load(artifact)
    except ValueError:  # JSONDecodeError, UnicodeDecodeError: an empty or torn file
        return None


def supersede(ctx: NodeContext, phase: str) -> list[str]:
    """Before ``phase`` is computed: the command records and prompt logs an earlier attempt of it
    left (a kill -9 before the phase was marked done) are renamed ``*.json.superseded``. The node
    keeps them for inspection, but its records are those of the attempt whose result was kept,
    so a replay answers the redone phase's commands and calls from that attempt, not the killed
    one (which may have run as long, or been answered differently). Returns the renamed names."""
    moved = []
    for folder in (ctx.paths.exec, ctx.paths.prompt_logs):
        for path in numbered_files(folder):
            # NNN_<phase>_<label>.json; a phase name may hold "_" itself (phase5_vlm)
            if path.name.split("_", 1)[1].startswith(slug(phase) + "_"):
                for f in (path, path.with_suffix(".md")):  # a prompt log's rendering too
                    if f.exists():
                        f.rename(f.with_name(f.name + SUPERSEDED))
                moved.append(path.name)
    return moved
