"""A scripted run with the default embedder (``memory.embedding.backend: wordllama``, real weights).

Every other pipeline test turns embeddings off. Here the first node's plan writes an archival
passage, a later node's plan searches for it with words the passage does not contain (so only the
vector lane can find it), and the test reads back, from the run's files, that the passage got a
wordllama vector and that the search answered through the vector lane.
"""

from __future__ import annotations

import json
import sqlite3

from ai_scientist_testing.scripted import ExampleResponder
from components import wordllama_or_skip
from pipeline_support import start_run

PASSAGE = "Label smoothing at 0.1 kept validation accuracy stable under flipped labels."
QUERY = "robustness trick for noisy targets"  # no word in common with the passage


class WritesThenSearches(ExampleResponder):
    writer: str | None = None
    reader: str | None = None

    def _phase0(self, text, ctx):
        plan = json.loads(super()._phase0(text, ctx))
        if ctx.label != "plan":
            return json.dumps(plan)
        if self.writer is None:
            self.writer = ctx.node_id
            plan["memory_update"] = [{"op": "archival_write", "text": PASSAGE, "tags": ["finding"]}]
        elif self.reader is None and ctx.node_id != self.writer:
            self.reader = ctx.node_id
            plan["memory_update"] = [{"op": "archival_search", "query": QUERY, "k": 3}]
        return json.dumps(plan)


def test_the_default_embedder_stores_vectors_and_answers_a_search(tmp_path):
    wordllama_or_skip()
    from ai_scientist.memory.embed import WordLlamaEmbedder

    responder = WritesThenSearches(buggy_nodes=())
    code, run_dir, _ = start_run(
        tmp_path,
        "agent.stages.stage1_max_iters=1",
        "agent.search.num_drafts=1",
        "agent.stages.stage2_max_iters=1",  # a child of the draft: it reads what the draft wrote
        "agent.stages.stage3_max_iters=0",
        "agent.stages.stage4_max_iters=0",
        "agent.multi_seed_eval.num_seeds=1",
        "memory.enabled=true",
        "memory.embedding.backend=wordllama",  # the default (FAST turns it off)
        "agent.merge_calls=false",  # plans are calls of their own
        responder=responder,
    )
    assert code == 0
    assert responder.writer and responder.reader, (responder.writer, responder.reader)
    with sqlite3.connect(run_dir / "memory.sqlite") as db:
        texts = [t for (t,) in db.execute("SELECT text FROM archival")]
        vecs = db.execute("SELECT model, dim, COUNT(*) FROM archival_vec GROUP BY model, dim").fetchall()
    assert any(PASSAGE in t for t in texts), texts
    # every passage has a vector from the wordllama model the config names
    assert vecs == [(WordLlamaEmbedder().name, 256, len(texts))], vecs
    logs = sorted((run_dir / f"nodes/{responder.reader}/prompt_logs").glob("*.json"))
    follow = next(json.loads(p.read_text()) for p in logs if "_phase0_plan_memory" in p.name)
    results = follow["messages"][-1]["content"]
    assert "<memory_results>" in results
    hits = _search_hits(results)
    hit = next((h for h in hits if PASSAGE in h["text"]), None)
    assert hit is not None, results
    # lane -> rank: no shared word, so full-text search cannot have found it; the vector lane did
    assert set(hit["lanes"]) == {"vector"}, hit


def _search_hits(block: str) -> list[dict]:
    """The hits of the ``archival_search`` read in a ``<memory_results>`` block
    (``prompt/memory/results.j2``: the op and its arguments, then its result as JSON)."""
    head = f"archival_search {json.dumps({'query': QUERY, 'k': 3}, sort_keys=True)}:"
    assert head in block, block
    body = block.split(head, 1)[1]
    hits, _ = json.JSONDecoder().raw_decode(body.lstrip())
    return hits
