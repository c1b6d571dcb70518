"""The packer: decides how many tokens each layer gets under one budget.

Rules (callers and tests rely on them):

1. pinned layers are placed first and are never dropped; if they alone exceed
   the budget they are cut by their policies (lowest priority first) down to
   their floors, and if that is not enough :class:`ContextBudgetError` is raised;
2. every other layer is first promised its floor (``min_tokens``, or its whole
   size when its policy cannot cut), highest priority first — a layer whose
   floor no longer fits is dropped, but packing continues with the next one, so
   no layer starves merely because of its position (unlike first-fit);
3. the remaining tokens then grow the promised layers towards their full size,
   highest priority first: a layer is cut to its floor before any lower-priority
   layer is dropped;
4. tokens a policy leaves unused go, in priority order, to layers dropped in 2.

The packer only does arithmetic; ``shrink(name, target)`` (given by the caller)
cuts a layer to at most ``target`` tokens and returns the tokens it really
uses, or None when the layer cannot be cut that far. Same inputs, same result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .budget import ContextBudgetError

Shrink = Callable[[str, int], "int | None"]


@dataclass(frozen=True)
class PackItem:
    name: str
    tokens: int
    priority: int
    pinned: bool
    floor: int  # smallest size the layer's policy may cut it to; == tokens if it cannot be cut
    order: int = 0  # declaration order, breaks priority ties


@dataclass(frozen=True)
class Outcome:
    status: str  # "kept" | "shrunk" | "dropped"
    tokens: int
    reason: str = ""


def _rank(items: list[PackItem]) -> list[PackItem]:
    return sorted(items, key=lambda it: (-it.priority, it.order))


def _place_pinned(pinned: list[PackItem], limit: int, shrink: Shrink) -> dict[str, Outcome]:
    out = {it.name: Outcome("kept", it.tokens) for it in pinned}
    excess = sum(it.tokens for it in pinned) - limit
    for it in reversed(_rank(pinned)):  # cut the least important pinned layer first
        if excess <= 0:
            break
        target = max(it.floor, it.tokens - excess)
        if target >= it.tokens:
            continue
        got = shrink(it.name, target)
        if got is not None and got < it.tokens:
            out[it.name] = Outcome("shrunk", got, "pinned layers over budget")
            excess -= it.tokens - got
    if excess > 0:
        sizes = ", ".join(f"{name}={o.tokens}" for name, o in out.items())
        raise ContextBudgetError(
            f"pinned layers need {excess} tokens more than the budget of {limit} ({sizes}); "
            "raise context.max_prompt_tokens or lower these layers' min_tokens"
        )
    return out


def pack(items: list[PackItem], limit: int, shrink: Shrink) -> dict[str, Outcome]:
    """Allot ``limit`` tokens across ``items``; returns one :class:`Outcome` per item name."""
    out = _place_pinned([it for it in items if it.pinned], limit, shrink)
    remaining = limit - sum(o.tokens for o in out.values())
    ranked = _rank([it for it in items if not it.pinned])
    promised: dict[str, int] = {}
    for it in ranked:  # rule 2: floors, by priority, skipping (not stopping at) misfits
        if it.floor <= remaining:
            promised[it.name] = it.floor
            remaining -= it.floor
        else:
            out[it.name] = Outcome("dropped", 0, f"its minimum ({it.floor} tokens) did not fit")
    for it in ranked:  # rule 3: grow towards full size, by priority
        if it.name in promised:
            extra = min(it.tokens - promised[it.name], remaining)
            promised[it.name] += extra
            remaining -= extra
    for it in ranked:
        if it.name not in promised:
            continue
        target = promised[it.name]
        if target >= it.tokens:
            out[it.name] = Outcome("kept", it.tokens)
            continue
        got = shrink(it.name, target)
        if got is None:
            remaining += target
            out[it.name] = Outcome("dropped", 0, f"its policy could not cut it to {target} tokens")
        else:
            remaining += target - got
            out[it.name] = Outcome("shrunk", got, f"cut to fit {target} tokens")
    for it in ranked:  # rule 4: hand unused tokens to dropped layers
        if out[it.name].status == "dropped" and it.floor <= remaining:
            target = min(it.tokens, remaining)
            got = it.tokens if target >= it.tokens else shrink(it.name, target)
            if got is not None:
                remaining -= got
                out[it.name] = Outcome("kept" if got == it.tokens else "shrunk", got, "fit in unused room")
    return out
