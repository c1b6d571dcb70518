"""A prompt layer: one named section of a prompt with its own budget and truncation policy."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal


@dataclass(frozen=True)
class Layer:
    """One section of a prompt.

    ``key`` names the value (in the ``values`` passed to ``assemble``) the layer
    presents; ``None`` means the template is fixed prose that is always present.
    ``priority``: higher survives longer. ``pinned`` layers are never dropped.
    ``min_tokens``: a policy may cut the layer down to this, not below; a layer
    that cannot get it is dropped. ``max_tokens`` caps the layer on its own.
    ``policy`` names the truncation strategy (see ``policies.LAYER_POLICIES``).
    ``strip_reasoning``: thinking text is removed before the layer is shown.
    """

    name: str
    role: Literal["system", "user"]
    template: str
    key: str | None = None
    priority: int = 50
    pinned: bool = False
    required: bool = False
    min_tokens: int = 0
    max_tokens: int | None = None
    policy: str = "none"
    title: str = ""
    strip_reasoning: bool = False

    @property
    def heading(self) -> str:
        return self.title or self.name.replace("_", " ").capitalize()

    def with_overrides(self, override: Any) -> Layer:
        """Apply a ``context.layers.<name>`` config entry (priority, min/max tokens, policy)."""
        if override is None:
            return self
        changes: dict[str, Any] = {}
        for attr in ("priority", "min_tokens", "max_tokens", "policy"):
            value = getattr(override, attr, None)
            if value is None and isinstance(override, dict):
                value = override.get(attr)
            if value is not None:
                changes[attr] = value
        return replace(self, **changes) if changes else self
