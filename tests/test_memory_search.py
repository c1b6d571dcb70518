"""Hybrid archival search: lanes, fusion, identifiers, query construction, faiss persistence."""

from __future__ import annotations

import hashlib
import uuid

import numpy as np
import pytest
from components import wordllama_or_skip

from ai_scientist.memory import MemoryStore, query_for
from ai_scientist.memory.embed import normalise
from ai_scientist.memory.search import identifiers, rrf


class HashEmbedder:
    """Deterministic bag-of-words embedder: shared words -> similar vectors (no model needed)."""

    name = "hash:64"
    dim = 64

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts):
        self.calls += 1
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split():
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1.0
        return normalise(out)


@pytest.fixture
def store(tmp_path):
    s = MemoryStore(tmp_path / "memory.sqlite", embedder=HashEmbedder())
    s.fork(None, "n1")
    yield s
    s.close()


def test_identifiers_extracted():
    u = str(uuid.uuid4())
    q = f"key {u} in /data/train/part-0.csv commit 3f9a2c1b model.layers.0 learning_rate=3e-4"
    ids = identifiers(q)
    for want in (u, "/data/train/part-0.csv", "3f9a2c1b", "model.layers.0", "learning_rate=3e-4"):
        assert want in ids, (want, ids)
    assert identifiers("plain words only here") == []


def test_rrf_fuses_and_weights_exact():
    fused = rrf({"fts": [1, 2, 3], "vector": [2, 1], "exact": [3]})
    # 3: 1/63 + 2/61 (exact counts double) beats 1 and 2: 1/61 + 1/62 each; ties: newer id first
    assert [a for a, _ in fused] == [3, 2, 1]
    assert dict(fused)[3] == pytest.approx(1 / 63 + 2 / 61)


def test_fts_ranks_by_relevance_not_recency(store):
    best = store.archival_write("n1", "CUDA out of memory: reduce batch size or use gradient checkpointing")
    for i in range(20):
        store.archival_write("n1", f"note {i}: training loss decreased steadily with memory of the run")
    hits = store.archival_search("CUDA out of memory gradient checkpointing", 3, lanes=("fts",))
    assert hits[0].id == best and hits[0].lanes == {"fts": 1}


def test_exact_lane_finds_identifiers_embeddings_miss(store):
    keys = [str(uuid.uuid4()) for _ in range(30)]
    ids = [store.archival_write("n1", f"value of {k} is stored in bucket {i}") for i, k in enumerate(keys)]
    q = f"what is the value of {keys[17]}"
    exact = store.archival_search(q, 5, lanes=("exact",))
    assert exact[0].id == ids[17] and "exact" in exact[0].lanes
    hybrid = store.archival_search(q, 5)
    assert hybrid[0].id == ids[17]
    assert store.archival_search("value of 00000000-0000-0000-0000-000000000000", 5, lanes=("exact",)) == []


def test_vector_lane_and_hybrid(store):
    a = store.archival_write("n1", "adam optimizer with warmup converges fastest")
    store.archival_write("n1", "dataset download failed because network is blocked")
    v = store.archival_search("warmup adam converges", 1, lanes=("vector",))
    assert v[0].id == a and "vector" in v[0].lanes
    h = store.archival_search("warmup adam converges", 2)
    assert h[0].id == a and set(h[0].lanes) >= {"fts", "vector"}


def test_faiss_index_persisted_and_rebuildable(tmp_path):
    path = tmp_path / "memory.sqlite"
    s = MemoryStore(path, embedder=HashEmbedder())
    s.fork(None, "n1")
    ids = s.archival_many("n1", [f"passage number {i} about topic{i % 7}" for i in range(50)])
    assert s.archival_search("topic3 passage", 1, lanes=("vector",))
    s.close()
    assert path.with_suffix(".faiss").exists()
    s2 = MemoryStore(path, embedder=HashEmbedder())
    assert s2.vectors.size == 50  # loaded from memory.faiss, not rebuilt
    path.with_suffix(".faiss").unlink()
    s3 = MemoryStore(path, embedder=HashEmbedder())
    assert s3.rebuild_vectors() == 50
    assert s3.archival_search("passage number 12 about topic5", 1, lanes=("vector",))[0].id in ids


def test_other_process_writes_are_searchable_by_vector(tmp_path):
    path = tmp_path / "memory.sqlite"
    reader = MemoryStore(path, embedder=HashEmbedder())
    reader.fork(None, "n1")
    assert reader.archival_search("zebra stripes", 1, lanes=("vector",)) == []
    writer = MemoryStore(path, embedder=HashEmbedder())  # stands in for another worker
    a = writer.archival_write("n1", "zebra stripes pattern")
    assert reader.archival_search("zebra stripes", 1, lanes=("vector",))[0].id == a


def test_ivf_index_used_for_large_archives(tmp_path):
    s = MemoryStore(tmp_path / "m.sqlite", embedder=HashEmbedder(), ivf_threshold=300)
    s.fork(None, "n1")
    ids = s.archival_many("n1", [f"item {i} word{i % 50} other{i % 13}" for i in range(400)])
    s.vectors.sync()
    assert type(s.vectors._index).__name__ == "IndexIVFFlat"
    hits = s.archival_search("item 123 word23 other6", 5)
    assert ids[123] in [h.id for h in hits]


def test_embedding_failure_degrades_to_other_lanes(tmp_path):
    class Broken(HashEmbedder):
        def embed(self, texts):
            raise RuntimeError("endpoint down")

    s = MemoryStore(tmp_path / "m.sqlite", embedder=Broken())
    s.fork(None, "n1")
    a = s.archival_write("n1", "still findable by words")
    assert s.vector_errors and "endpoint down" in s.vector_errors[0]
    assert s.archival_search("findable words", 1)[0].id == a


def test_query_for_uses_node_content_not_phase_labels():
    q = query_for(
        idea="sparse attention",
        plan="train 3 epochs",
        error="Traceback...\nValueError: shape mismatch",
        metric="val_acc=0.71",
    )
    assert q.startswith("Traceback") and "shape mismatch" in q and "sparse attention" in q and "val_acc" in q
    assert query_for() == ""
    long_err = "x" * 5000 + "KeyError: 'label'"
    assert "KeyError: 'label'" in query_for(error=long_err + "\n")  # the tail of an error is kept
    q = query_for(plan={"goal_summary": "fit a GBM"}, error={"stderr": "MemoryError"}, metric=0.5)
    assert "fit a GBM" in q and "MemoryError" in q and "0.5" in q


def test_wordllama_embedder_offline():
    from ai_scientist.memory.embed import WordLlamaEmbedder

    wordllama_or_skip()
    emb = WordLlamaEmbedder()  # the package ships its weights: any error here is a failure
    v = emb.embed(["cuda out of memory", "gpu ran out of memory", "the cat sat"])
    assert v.shape == (3, 256)
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-4)
    assert v[0] @ v[1] > v[0] @ v[2]


def test_new_embedding_model_fills_vectors_on_open(tmp_path):
    path = tmp_path / "memory.sqlite"
    s = MemoryStore(path)  # no embedder: passages get no vectors
    s.fork(None, "n1")
    a = s.archival_write("n1", "gradient clipping fixed the nan loss")
    s.close()
    s2 = MemoryStore(path, embedder=HashEmbedder())
    assert s2.missing_vectors() == []
    assert s2.archival_search("nan loss clipping", 1, lanes=("vector",))[0].id == a

    class Other(HashEmbedder):
        name = "hash:other"

    s3 = MemoryStore(path, embedder=Other())  # model changed: re-embedded under the new name
    assert s3.vectors.size == 1 and s3.missing_vectors() == []
    assert s3.rebuild_vectors(reembed=True) == 1


def test_openai_embedder_with_a_compatible_client():
    from types import SimpleNamespace

    from ai_scientist.memory.embed import OpenAIEmbedder

    class FakeEmbeddings:
        def __init__(self):
            self.inputs = []

        def create(self, model, input):
            self.inputs.append((model, list(input)))
            data = [
                SimpleNamespace(index=i, embedding=[float(len(t)), 1.0, 0.0]) for i, t in enumerate(input)
            ]
            return SimpleNamespace(data=list(reversed(data)))  # out of order on purpose

    fake = SimpleNamespace(embeddings=FakeEmbeddings())
    emb = OpenAIEmbedder("nomic-embed", None, "NO_SUCH_KEY_ENV", client=fake)
    v = emb.embed(["abc", "", "abcdef"])
    assert v.shape == (3, 3) and emb.dim == 3 and emb.name == "openai:nomic-embed"
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0)
    assert v[0][0] < v[2][0]  # rows kept in input order
    assert fake.embeddings.inputs[0][1][1] == " "  # empty input replaced: endpoints reject ""


def test_embedder_from_config():
    from ai_scientist.base.config import load_config
    from ai_scientist.memory.embed import embedder_from_config

    assert embedder_from_config(load_config(overrides=["memory.embedding.backend=none"])) is None


def test_fts_skips_common_words_when_rare_ones_exist(tmp_path):
    from ai_scientist.memory.search import COMMON_DF

    s = MemoryStore(tmp_path / "m.sqlite")
    s.fork(None, "n1")
    s.archival_many("n1", [f"training run {i} finished normally" for i in range(COMMON_DF + 50)])
    target = s.archival_write("n1", "training run exploded with nan gradients")
    assert s.archival_search("training run nan", 1, lanes=("fts",))[0].id == target
    common_only = s.archival_search("training run finished", 3, lanes=("fts",))
    assert len(common_only) == 3  # all-common query still answers (AND of its words)
    s.archival_write("n1", "second nan run")  # cache reuse must still see new passages
    assert len(s.archival_search("nan", 5, lanes=("fts",))) == 2
