"""A node's memory read round through ``NodeContext.ask`` (issue 12: return values, no closure cells).

The scripted model answers the first plan whose prompt shows memory with memory operations, one
of them a read; the
follow-up call must carry the first answer and the protocol's results, keep the first call's
memory snapshot, and its answer (without the memory operations) must become the plan.
"""

from __future__ import annotations

import json

from ai_scientist_testing.scripted import ExampleResponder
from pipeline_support import start_run

OPS = [
    {"op": "core_set", "key": "target", "value": "clean validation accuracy"},
    {"op": "core_get", "key": "target"},
]


class ReadsMemoryOnce(ExampleResponder):
    node: str | None = None  # the node whose plan reads memory

    def _phase0(self, text, ctx):
        plan = json.loads(super()._phase0(text, ctx))
        # the first planning call with memory to show (a draft's is empty: nothing happened yet)
        if self.node in (None, ctx.node_id) and ctx.label == "plan" and "\n## Memory\n" in text:
            self.node = ctx.node_id
            plan["goal_summary"] = "first answer"
            plan["memory_update"] = OPS
        return json.dumps(plan)


def test_a_read_round_continues_the_conversation_and_its_answer_is_the_plan(tmp_path):
    responder = ReadsMemoryOnce(buggy_nodes=())
    code, run_dir, _ = start_run(
        tmp_path,
        "agent.stages.stage1_max_iters=1",
        "agent.search.num_drafts=1",
        "agent.stages.stage2_max_iters=1",
        "agent.stages.stage3_max_iters=1",
        "agent.stages.stage4_max_iters=1",
        "memory.enabled=true",
        "agent.merge_calls=false",  # plans are calls of their own (merged into the code answer otherwise)
        responder=responder,
    )
    assert code == 0
    nid = responder.node
    assert nid is not None, "no planning call showed memory"
    logs = [json.loads(f.read_text()) for f in sorted((run_dir / f"nodes/{nid}/prompt_logs").glob("*.json"))]
    plan_calls = [r for r in logs if r["phase"] == "phase0"]
    assert [r["label"] for r in plan_calls] == ["plan", "plan_memory"]
    assert [c for c in responder.calls if c[0] == nid and c[1] == "phase0"] == [
        (nid, "phase0", "plan"),
        (nid, "phase0", "plan_memory"),
    ]
    first, follow = plan_calls
    # the follow-up is the first prompt plus (first answer, protocol results)
    assert follow["messages"][: len(first["messages"])] == first["messages"]
    assistant, user = follow["messages"][len(first["messages"]) :]
    assert assistant["role"] == "assistant" and json.loads(assistant["content"])["memory_update"] == OPS
    assert user["role"] == "user" and "<memory_results>" in user["content"]
    assert "clean validation accuracy" in user["content"]  # the core_get read what core_set wrote
    # both calls of the exchange saw the same rendered memory
    assert first["memory_snapshot"] and follow["memory_snapshot"] == first["memory_snapshot"]
    assert any(e["layer"].startswith("memory.") for e in first["ledger"])
    plan = json.loads((run_dir / f"nodes/{nid}/plan.json").read_text())
    assert "memory_update" not in plan and plan["goal_summary"] != "first answer"
