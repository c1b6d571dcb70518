"""History pruning for multi-turn chat loops (seed 001, made safe for tool calls).

Keeps the system prompt, the first user message and the last K *turns*. A turn
starts at an assistant message and runs until the next assistant message, so an
assistant message with ``tool_calls`` always travels with its ``tool`` results:
pruning can never orphan a tool result or leave a call unanswered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Message = dict[str, Any]


def exchange_turn(answer: str, reply: str) -> list[Message]:
    """One more round of a call's conversation: the model's ``answer`` and the pipeline's
    ``reply`` to it (a memory read's results, a repair request). The assembler places these turns
    after the prompt and prunes old ones under the budget (:func:`prune_messages`)."""
    return [{"role": "assistant", "content": answer}, {"role": "user", "content": reply}]


def split_turns(messages: list[Message]) -> tuple[list[Message], list[list[Message]]]:
    """(head, turns): head = leading system messages + the first user message (and
    anything before the first assistant message); turns = groups each starting at
    an assistant message."""
    head: list[Message] = []
    turns: list[list[Message]] = []
    for msg in messages:
        if msg.get("role") == "assistant":
            turns.append([msg])
        elif turns:
            turns[-1].append(msg)
        else:
            head.append(msg)
    return head, turns


def prune_messages(
    messages: list[Message],
    keep_turns: int,
    fits: Callable[[list[Message]], bool] | None = None,
) -> tuple[list[Message], int]:
    """Keep the head and the last ``keep_turns`` turns; with ``fits``, drop more of the
    oldest turns until ``fits(result)`` holds (the head is never dropped).

    Returns (messages, number of turns dropped). Messages are not copied or edited.
    """
    head, turns = split_turns(messages)
    keep = max(0, min(keep_turns, len(turns)))
    while True:
        kept_turns = turns[len(turns) - keep :] if keep else []
        out = head + [m for turn in kept_turns for m in turn]
        if fits is None or keep == 0 or fits(out):
            return out, len(turns) - keep
        keep -= 1


def orphaned_tool_results(messages: list[Message]) -> list[str]:
    """tool_call_ids of ``tool`` messages whose assistant call is absent (should be empty)."""
    called: set[str] = set()
    orphans: list[str] = []
    for msg in messages:
        for call in msg.get("tool_calls") or []:
            called.add(str(call.get("id")))
        if msg.get("role") == "tool" and str(msg.get("tool_call_id")) not in called:
            orphans.append(str(msg.get("tool_call_id")))
    return orphans
