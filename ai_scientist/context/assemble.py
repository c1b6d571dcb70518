"""Assemble one prompt: render its layers, pack them under the budget, record a ledger.

Entry point for the pipeline::

    prompt = assemble("phase234_code", values, Budget.from_config(cfg.context), counter, cfg.context)
    llm.chat(prompt.messages, ctx=CallContext(..., ledger=prompt.ledger))

``messages`` is normally one system message (the system-role layers) and one
user message (the user-role layers), each layer under a ``## <title>`` heading,
followed by an optional multi-turn ``conversation``. ``images`` (``image_url`` content
parts) go into the last message; their tokens (``tokens.IMAGE_TOKENS`` each, the rule
``messages_tokens`` counts them by) are set aside before the text layers are packed. The whole
request, counted with ``counter`` plus chat framing and images, never exceeds
``budget.limit_for(counter)``; the ledger ends with a ``budget`` entry (limit -> tokens used,
the budget's source as its reason) and, with images, an ``images`` entry.
Identical inputs give byte-identical messages and ledger.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..base.templates import render
from .budget import Budget, ContextBudgetError
from .history import prune_messages
from .layer import Layer
from .ledger import LedgerEntry
from .packer import Outcome, PackItem, pack
from .policies import PolicyParams, StripReasoning, get_layer_policy
from .spec import layers_for, node_first
from .tokens import IMAGE_TOKENS, PER_MESSAGE_OVERHEAD, PER_REQUEST_OVERHEAD, TokenCounter, messages_tokens

if TYPE_CHECKING:
    from ..base.config import ContextConfig

SECTION_SEP = "\n\n"
_SEP_TOKENS = 2  # the blank line between sections, counted on the safe side
_MAX_REPACKS = 5


class ContextAssemblyError(ValueError):
    """A prompt cannot be assembled: a required value is missing or pinned layers overflow."""


@dataclass
class Prompt:
    """An assembled prompt: the exact ``messages`` to send and one ledger entry per layer."""

    name: str
    messages: list[dict[str, Any]]
    ledger: list[dict[str, Any]]
    tokens: int
    limit: int
    tokens_exact: bool
    counter: str
    sections: dict[str, str] = field(default_factory=dict)  # layer -> its text as sent
    budget_source: str = ""
    image_tokens: int = 0  # included in ``tokens``


@dataclass
class _State:
    layer: Layer
    base: Any  # value after reasoning stripping: what policies cut from
    value: Any  # value as currently shown
    text: str
    tokens: int
    chars_before: int
    tokens_before: int
    notes: list[str]
    stripped: bool = False
    cut: bool = False


def _is_empty(value: Any) -> bool:
    return value is None or (isinstance(value, (str, list, dict)) and not value)


class _Renderer:
    def __init__(self, values: dict[str, Any], counter: TokenCounter):
        self.values = values
        self.counter = counter

    def section(self, layer: Layer, value: Any) -> str:
        ctx = dict(self.values)
        ctx["value"] = value
        body = render(layer.template, **ctx)
        if layer.name == "system":
            return body
        return f"## {layer.heading}\n{body}"

    def tokens(self, text: str) -> int:
        return self.counter.count(text) + _SEP_TOKENS


def _prepare(layer: Layer, raw: Any, r: _Renderer, params: PolicyParams, handle: str | None) -> _State:
    """Render the layer as given, strip reasoning, apply the policy's configured caps and max_tokens."""
    before = r.section(layer, raw)
    st = _State(layer, raw, raw, before, r.tokens(before), len(before), r.tokens(before), [])
    if layer.strip_reasoning:
        res = StripReasoning().prepare(raw, params, handle)
        if res is not None:
            st.base = st.value = res[0]
            st.notes.append(res[1])
            st.stripped = True
    policy = get_layer_policy(layer.policy)
    if layer.pinned and layer.required:
        # the call's own payload (the aggregation's manifest): previewed ahead of packing only past
        # three quarters of the budget, not a quarter — packing still cuts it if it does not fit
        # (a relay run's 29 kB manifest, well within a 32k budget, was previewed and lost 3 of 6 nodes)
        params = replace(params, budget_tokens=3 * params.budget_tokens)
    res = policy.prepare(st.base, params, handle)
    if res is not None:
        st.value, st.cut = res[0], True
        st.notes.append(res[1])
    st.text = r.section(layer, st.value)
    st.tokens = r.tokens(st.text)
    if layer.max_tokens is not None and st.tokens > layer.max_tokens:
        if not _shrink(st, layer.max_tokens, r, params, handle):
            raise ContextAssemblyError(
                f"layer {layer.name!r} ({st.tokens} tokens) cannot be cut to its max_tokens "
                f"{layer.max_tokens} by policy {layer.policy!r}; raise context.layers.{layer.name}.max_tokens"
            )
        st.notes.append(f"capped at max_tokens {layer.max_tokens}")
    return st


def _shrink(st: _State, target: int, r: _Renderer, params: PolicyParams, handle: str | None) -> bool:
    layer = st.layer

    def fits(candidate: Any) -> bool:
        return r.tokens(r.section(layer, candidate)) <= target

    res = get_layer_policy(layer.policy).shrink(st.base, fits, params, handle)
    if res is None:
        return False
    st.value, st.cut = res[0], True
    st.notes.append(res[1])
    st.text = r.section(layer, st.value)
    st.tokens = r.tokens(st.text)
    return True


def _floor(st: _State) -> int:
    if st.layer.policy == "none":
        return st.tokens
    return min(st.tokens, max(st.layer.min_tokens, 1))


def _configured_layers(prompt_name: str, cfg_context: ContextConfig | None) -> list[Layer]:
    overrides = getattr(cfg_context, "layers", None) or {}
    return [layer.with_overrides(overrides.get(layer.name)) for layer in layers_for(prompt_name)]


def _strip_conversation(conversation: list[dict[str, Any]], params: PolicyParams) -> tuple[list[dict], int]:
    """Thinking never re-enters a prompt through earlier assistant turns."""
    if not params.strip_reasoning:
        return list(conversation), 0
    out, removed = [], 0
    strip = StripReasoning()
    for msg in conversation:
        if msg.get("role") != "assistant":
            out.append(msg)
            continue
        clean = {k: v for k, v in msg.items() if k != "reasoning_content"}
        removed += len(str(msg.get("reasoning_content") or ""))
        if isinstance(msg.get("content"), str):
            res = strip.prepare(msg["content"], params, None)
            if res is not None:
                clean["content"] = res[0]
                removed += len(msg["content"]) - len(res[0])
        out.append(clean)
    return out, removed


def _fit_conversation(
    conversation: list[dict[str, Any]] | None, room: int, counter: TokenCounter, params: PolicyParams
) -> tuple[list[dict[str, Any]], LedgerEntry | None]:
    if not conversation:
        return [], None
    chars_before = sum(len(str(m.get("content") or "")) for m in conversation)
    tokens_before = messages_tokens(conversation, counter) - PER_REQUEST_OVERHEAD
    msgs, removed = _strip_conversation(conversation, params)

    def fits(candidate: list[dict[str, Any]]) -> bool:
        return messages_tokens(candidate, counter) - PER_REQUEST_OVERHEAD <= room

    kept, dropped_turns = prune_messages(msgs, params.history_keep_turns, fits)
    if not fits(kept):
        raise ContextAssemblyError(
            f"the conversation's first messages alone need more than the {room} tokens left; "
            "raise context.max_prompt_tokens"
        )
    notes = [f"reasoning stripped ({removed} chars)"] if removed else []
    if dropped_turns:
        notes.append(f"dropped the {dropped_turns} oldest turns; kept the first message and the last turns")
    action = "truncated" if dropped_turns else ("stripped" if removed else "kept")
    tokens_after = messages_tokens(kept, counter) - PER_REQUEST_OVERHEAD
    entry = LedgerEntry(
        layer="conversation",
        action=action,
        policy="history_prune",
        chars_before=chars_before,
        chars_after=sum(len(str(m.get("content") or "")) for m in kept),
        tokens_before=tokens_before,
        tokens_after=tokens_after,
        tokens_exact=counter.exact,
        reason="; ".join(notes) or "fits",
    )
    return kept, entry


def _messages(
    layers: list[Layer],
    states: dict[str, _State],
    outcomes: dict[str, Outcome],
    conv: list[dict],
    images: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    sections = {
        layer.name: states[layer.name].text
        for layer in layers
        if layer.name in outcomes and outcomes[layer.name].status != "dropped"
    }
    messages = []
    for role in ("system", "user"):
        parts = [sections[layer.name] for layer in layers if layer.role == role and layer.name in sections]
        if parts:
            messages.append({"role": role, "content": SECTION_SEP.join(parts)})
    messages += list(conv)
    if images:
        # the images go before the trailing sections that differ from node to node — the call's own
        # request and the tables comparing the node with the stage's others — so a figure sent
        # again (another caption, a node whose figure and metrics repeat an earlier one's) shares
        # the prefix up to and including its image
        user = [layer.name for layer in layers if layer.role == "user" and layer.name in sections]
        k = len(user)
        while k > 0 and user[k - 1] in AFTER_IMAGES:
            k -= 1
        messages = with_images(messages, SECTION_SEP.join(sections[n] for n in user[k:]) or None, images)
    return messages, sections


# the layers that follow a call's images when they end its user message (see _messages)
AFTER_IMAGES = frozenset({"tried_hyperparams", "tried_ablations", "siblings", "node_brief"})


def with_images(
    messages: list[dict[str, Any]], brief: str | None, images: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """``messages`` with ``images`` in the last message: after everything but ``brief`` — the
    trailing sections (the ``node_brief``, and before it the tables comparing the node with the
    stage's others) — when that text ends the message (the call's own request stays last, and a
    figure asked about twice, e.g. with two captions, shares the prefix up to its image);
    otherwise after the text."""
    *head, last = messages
    content = last["content"]
    parts = content if isinstance(content, list) else [{"type": "text", "text": content}]
    text = parts[-1].get("text") if parts[-1].get("type") == "text" else None
    if brief and isinstance(text, str) and text.endswith(brief) and len(text) > len(brief):
        before = text[: -len(brief)]
        parts = [*parts[:-1], {"type": "text", "text": before}, *images, {"type": "text", "text": brief}]
    else:
        parts = [*parts, *images]
    return [*head, {**last, "content": parts}]


def _entry(st: _State, outcome: Outcome, exact: bool, handle: str | None, state_op: Any) -> LedgerEntry:
    layer = st.layer
    reason = "; ".join(n for n in [*st.notes, outcome.reason] if n) or "fits"
    if outcome.status == "dropped":
        action, chars, tokens = "dropped", 0, 0
    else:
        chars, tokens = len(st.text), st.tokens
        if st.cut:
            previewed = layer.policy == "json_preview" and '"_preview"' in st.text
            action = "previewed" if previewed else "truncated"
        elif st.stripped:
            action = "stripped"
        elif layer.name == "history" and state_op in ("append", "replace"):
            action = "appended" if state_op == "append" else "replaced"
        else:
            action = "kept"
    if layer.name == "history" and state_op in ("append", "replace"):
        reason = f"state op {state_op}; {reason}"
    return LedgerEntry(
        layer=layer.name,
        action=action,
        policy=layer.policy,
        chars_before=st.chars_before,
        chars_after=chars,
        tokens_before=st.tokens_before,
        tokens_after=tokens,
        tokens_exact=exact,
        reason=reason,
        handle=handle if action == "previewed" else None,
    )


def _pack_once(
    prepared: dict[str, _State], room: int, r: _Renderer, params: PolicyParams, handles: dict[str, str]
) -> tuple[dict[str, _State], dict[str, Outcome]]:
    states = {n: _State(**{**vars(st), "notes": list(st.notes)}) for n, st in prepared.items()}
    items = [
        PackItem(n, st.tokens, st.layer.priority, st.layer.pinned, _floor(st), i)
        for i, (n, st) in enumerate(states.items())
    ]

    def shrink(name: str, target: int) -> int | None:
        st = states[name]
        return st.tokens if _shrink(st, target, r, params, handles.get(name)) else None

    return states, pack(items, room, shrink)


def assemble(
    prompt_name: str,
    values: dict[str, Any],
    budget: Budget,
    counter: TokenCounter,
    cfg_context: ContextConfig | None = None,
    *,
    conversation: list[dict[str, Any]] | None = None,
    handles: dict[str, str] | None = None,
    images: list[dict[str, Any]] | None = None,
) -> Prompt:
    """Assemble the prompt ``prompt_name`` (see ``spec.PROMPTS``) from ``values``.

    ``values[layer.key]`` feeds each layer; a missing/empty value drops an optional
    layer (ledger: "no content") and is an error for a required one. Every other
    value is also visible to the templates (e.g. ``state_op``, ``operation``).
    ``handles[layer]`` names where the full payload of a previewed layer is kept.
    ``images`` (``image_url`` parts) are sent in the last message and counted in the budget.
    Raises :class:`ContextAssemblyError` / :class:`ContextBudgetError` with the reason.
    """
    layers = _configured_layers(prompt_name, cfg_context)
    r, handles, limit = _Renderer(values, counter), dict(handles or {}), budget.limit_for(counter)
    params = replace(PolicyParams.from_config(getattr(cfg_context, "policies", None)), budget_tokens=limit)
    empty: dict[str, LedgerEntry] = {}
    prepared: dict[str, _State] = {}
    for layer in layers:
        raw = values.get(layer.key) if layer.key else None
        if layer.key and _is_empty(raw):
            if layer.required:
                raise ContextAssemblyError(
                    f"prompt {prompt_name!r}: required layer {layer.name!r} needs values[{layer.key!r}]"
                )
            empty[layer.name] = LedgerEntry(
                layer=layer.name,
                action="dropped",
                policy=layer.policy,
                chars_before=0,
                chars_after=0,
                tokens_before=0,
                tokens_after=0,
                tokens_exact=counter.exact,
                reason="no content",
            )
            continue
        prepared[layer.name] = _prepare(layer, raw, r, params, handles.get(layer.name))
    if "prior_code" in prepared:  # a long program opens a review and its plotting call alike
        layers = node_first(prompt_name, layers, prepared["prior_code"].tokens)
        prepared = {x.name: replace(prepared[x.name], layer=x) for x in layers if x.name in prepared}
    n_msgs = len({st.layer.role for st in prepared.values()})
    images = list(images or [])
    image_tokens = IMAGE_TOKENS * sum(1 for part in images if part.get("type") == "image_url")
    # the images' fixed cost comes off the top: the text layers are packed in what is left
    room = limit - PER_REQUEST_OVERHEAD - PER_MESSAGE_OVERHEAD * n_msgs - image_tokens
    pinned = sum(_floor(st) for st in prepared.values() if st.layer.pinned)
    conv, conv_entry = _fit_conversation(conversation, room - pinned, counter, params)
    room -= messages_tokens(conv, counter) - PER_REQUEST_OVERHEAD if conv else 0
    for _ in range(_MAX_REPACKS):
        if room <= 0:
            break
        states, outcomes = _pack_once(prepared, room, r, params, handles)
        messages, sections = _messages(layers, states, outcomes, conv, images)
        total = messages_tokens(messages, counter)
        if total <= limit:
            break
        room -= total - limit  # token counts are not exactly additive across sections
    else:
        room = 0
    if room <= 0:
        with_imgs = f" with {len(images)} image(s) ({image_tokens} tokens)" if images else ""
        raise ContextBudgetError(
            f"prompt {prompt_name!r} cannot fit {limit} tokens{with_imgs} ({budget.source})"
        )
    state_op = values.get("state_op")
    ledger = [
        empty[layer.name].to_dict()
        if layer.name in empty
        else _entry(
            states[layer.name], outcomes[layer.name], counter.exact, handles.get(layer.name), state_op
        ).to_dict()
        for layer in layers
    ]
    if conv_entry is not None:
        ledger.append(conv_entry.to_dict())
    if images:
        n = len(images)
        ledger.append(
            LedgerEntry(
                layer="images",
                action="kept",
                policy="none",
                chars_before=0,
                chars_after=0,
                tokens_before=image_tokens,
                tokens_after=image_tokens,
                tokens_exact=True,
                reason=f"{n} image(s) at {IMAGE_TOKENS} tokens each, set aside before the text layers were packed",
            ).to_dict()
        )
    ledger.append(
        LedgerEntry(
            layer="budget",
            action="kept",
            policy="budget",
            chars_before=0,
            chars_after=0,
            tokens_before=limit,
            tokens_after=total,
            tokens_exact=counter.exact,
            reason=budget.source,
        ).to_dict()
    )
    return Prompt(
        prompt_name, messages, ledger, total, limit, counter.exact, counter.name, sections,
        budget.source, image_tokens,
    )  # fmt: skip
