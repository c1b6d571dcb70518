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
never half-used. After step 3 the phase is reused from its artifact. The artifact is not
fsync'd (it can be recreated): when a power loss loses or truncates it, the phase is redone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from ..base import failpoints
from .base import NodeContext

T = TypeVar("T")


def checkpoint(ctx: NodeContext, phase: str, artifact: str, compute: Callable[[], T]) -> T:
    """The result of ``phase`` for ``ctx.node``: its saved ``artifact`` when the phase is done,
    otherwise ``compute()``, saved as ``artifact`` and then marked done in the journal.

    ``compute`` may raise :class:`~.base.PhaseFailed`: nothing is saved and the phase stays not
    done (a failing phase may save a partial record of its own first, for the viewer).
    The failpoint ``phase_saved:<node>:<phase>`` sits between the save and the journal update.
    """
    if phase in ctx.node.phases_done:
        saved = saved_artifact(ctx, artifact)
        if saved is not None:
            return saved
    result = compute()
    ctx.save(artifact, result)
    failpoints.hit(f"phase_saved:{ctx.node.id}:{phase}")
    ctx.mark_done(phase)
    return result


def saved_artifact(ctx: NodeContext, artifact: str) -> Any:
    """The artifact's JSON, or None when it is missing or unreadable (torn by a power loss)."""
    try:
        return ctx.load(artifact)
    except ValueError:  # JSONDecodeError, UnicodeDecodeError: an empty or torn file
        return None
