"""Issue 19 item 5: the prompts' own examples must not look like values a model can copy, and an
empty field is left out of a prompt rather than sent as ``Operation: \\nStage: ``.

SmolLM2 copied the memory-protocol example's archival id ``a7`` and tag ``oom`` into the plan as
package names. The tests render the prompts as they are sent.
"""

from __future__ import annotations

import json
import re

from ai_scientist.base.config import Config
from ai_scientist.memory.protocol import protocol_instructions
from ai_scientist.phases.prompts import PromptAdapter
from ai_scientist.phases.schemas import INSTALL_STEP_SCHEMA

PLACEHOLDER = re.compile(r"^<[^<>]+>$")


def _example_ops(text: str) -> list[dict]:
    block = re.search(r"<memory_update>\s*(\[.*?\])\s*</memory_update>", text, re.S)
    assert block, "the protocol shows an example block"
    return json.loads(block.group(1))


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)


def test_memory_protocol_example_values_are_placeholders():
    text = protocol_instructions(Config().memory)
    ops = _example_ops(text)
    assert len(ops) >= 2
    for op in ops:
        for key, value in op.items():
            if key == "op":
                continue  # the operation names are the protocol itself
            for s in _strings(value):
                assert PLACEHOLDER.match(s), f"example value {s!r} of {op['op']}.{key} looks copyable"


def test_memory_protocol_names_no_concrete_ids_or_tags():
    text = protocol_instructions(Config().memory)
    # quoted ids like "a7" / "r12" and the old example tag are gone everywhere in the section
    assert not re.findall(r'"[ar]\d+"', text)
    assert '"oom"' not in text and "lr=0.05" not in text


def _installer_prompt(**extra) -> str:
    cfg = Config.model_validate({"memory": {"enabled": True}})
    values = {
        "task": "# Idea\nMeasure label noise.",
        "plan_snippet": json.dumps({"dependencies": {"apt": [], "pip": ["numpy"], "source": []}}),
        "install_steps": "(none yet)",
        "step_info": "step 1 of 4; network OFF; last dependency check: failed",
        "memory": "core: (empty)",
        "response_schema": INSTALL_STEP_SCHEMA,
        **extra,
    }
    messages, _ = PromptAdapter(cfg, None).build("phase1_install", values, node_id="n0001", role="code")
    return "\n".join(m["content"] for m in messages)


def test_installer_prompt_leaves_out_empty_fields():
    text = _installer_prompt()
    assert not re.search(r"^(Operation|Stage):\s*$", text, re.M), text[:2000]
    assert "Operation:" not in text and "Stage:" not in text
    assert "You are installing the plan's dependencies" in text


def test_filled_fields_are_still_rendered():
    text = _installer_prompt(operation="draft", stage_name="stage 1")
    assert "Operation: draft\nStage: stage 1\n" in text
