"""RetrievalMemory: exact results on Flat against brute force, IVF recall on clustered data,
removal with stable ids, save/load round trips and mismatch errors."""

from __future__ import annotations

import json

import pytest
import torch

from babelzoo.knowledge.memory import MemoryFormatError, RetrievalMemory, recall_at_k


def _clustered(n: int, dim: int, clusters: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(clusters, dim, generator=g) * 4
    return centres[torch.randint(clusters, (n,), generator=g)] + torch.randn(n, dim, generator=g)


@pytest.mark.parametrize("metric", ["cosine", "ip", "l2"])
def test_flat_is_exact(metric):
    keys, queries = torch.randn(500, 16), torch.randn(20, 16)
    memory = RetrievalMemory(16, "Flat", metric=metric)
    ids = memory.add(keys)
    assert ids.tolist() == list(range(500)) and len(memory) == 500
    scores, found = memory.search(queries, k=5)
    if metric == "cosine":
        sims = torch.nn.functional.normalize(queries, dim=1) @ torch.nn.functional.normalize(keys, dim=1).T
        expected_scores, expected = sims.topk(5)
    elif metric == "ip":
        expected_scores, expected = (queries @ keys.T).topk(5)
    else:
        neg, expected = (-torch.cdist(queries, keys).pow(2)).topk(5)
        expected_scores = -neg
    assert torch.equal(found, expected)
    assert torch.allclose(scores, expected_scores, atol=1e-3)


def test_add_remove_save_load_round_trip(tmp_path):
    keys = torch.randn(300, 8)
    memory = RetrievalMemory(8, "Flat", metric="ip")
    ids = memory.add(keys[:200], ids=torch.arange(1000, 1200), values=torch.arange(200) * 10)
    assert ids[0] == 1000 and memory.next_id == 1200
    auto = memory.add(keys[200:], values=torch.arange(200, 300) * 10)
    assert auto.tolist() == list(range(1200, 1300))
    assert memory.remove([1000, 1001, 1250]) == 3 and len(memory) == 297
    scores, found = memory.search(keys[:3], k=4)
    assert not ({1000, 1001} & set(found.flatten().tolist()))
    expected = (keys[2:] @ keys[:3].T).T  # rows 0 and 1 are gone; column j ↔ id 1000 + j + 2
    expected[:, 1250 - 1002] = float("-inf")
    assert found.tolist() == (expected.topk(4).indices + 1002).tolist()
    assert memory.values(found).tolist() == ((found - 1000) * 10).tolist()
    memory.save(tmp_path / "mem")
    meta = json.loads((tmp_path / "mem" / "memory.json").read_text())
    assert meta["dim"] == 8 and meta["metric"] == "ip" and meta["count"] == 297
    loaded = RetrievalMemory.load(tmp_path / "mem", dim=8, metric="ip")
    scores2, found2 = loaded.search(keys[:3], k=4)
    assert torch.equal(found2, found) and torch.allclose(scores2, scores)
    assert torch.equal(loaded.values(found2), memory.values(found)) and loaded.next_id == 1300
    assert loaded.add(torch.randn(1, 8), values=torch.tensor([7])).tolist() == [1300]  # ids stay stable


def test_ivf_recall_on_clustered_data():
    keys = _clustered(20000, 32, 64, seed=0)
    queries = _clustered(200, 32, 64, seed=0)[:200] + 0.1 * torch.randn(200, 32)
    exact = RetrievalMemory(32, "Flat", metric="l2")
    exact.add(keys)
    ivf = RetrievalMemory(32, "IVF64,Flat", metric="l2", nprobe=8)
    ivf.add(keys)
    _, truth = exact.search(queries, 10)
    _, found = ivf.search(queries, 10)
    assert recall_at_k(found, truth) >= 0.95
    ivf.remove(torch.arange(100))  # IVF deletes for real
    assert len(ivf) == 19900 and not ivf._hidden


def test_hnsw_hides_removed_ids_and_keeps_them_hidden_after_load(tmp_path):
    keys = torch.randn(400, 16)
    memory = RetrievalMemory(16, "HNSW16", metric="cosine", ef_search=64)
    memory.add(keys)
    _, before = memory.search(keys[:5], 1)
    assert before.flatten().tolist() == [0, 1, 2, 3, 4]
    memory.remove([0, 1])
    _, after = memory.search(keys[:5], 1)
    assert after.flatten().tolist()[2:] == [2, 3, 4] and not ({0, 1} & set(after.flatten().tolist()))
    removed = (r"ids \[1\] were removed, but index 'HNSW16' cannot delete vectors: they stay in it, hidden from "
               r"searches, so their ids cannot be reused; add without ids= \(new ids are assigned\) or rebuild the "
               r"memory from the keys you keep")
    with pytest.raises(MemoryFormatError, match=removed):
        memory.add(torch.randn(1, 16), ids=[1])
    with pytest.raises(MemoryFormatError, match=r"ids already in the memory or repeated: \[2\]"):
        memory.add(torch.randn(1, 16), ids=[2])
    memory.save(tmp_path)
    loaded = RetrievalMemory.load(tmp_path)
    _, again = loaded.search(keys[:5], 1)
    assert torch.equal(again, after) and len(loaded) == 398
    with pytest.raises(MemoryFormatError, match=removed):  # still hidden, still not reusable
        loaded.add(torch.randn(1, 16), ids=[1])
    assert loaded.add(torch.randn(1, 16)).tolist() == [400]


def test_mismatched_saved_memory_is_a_clear_error(tmp_path):
    memory = RetrievalMemory(8, "Flat", metric="cosine")
    memory.add(torch.randn(10, 8))
    memory.save(tmp_path)
    with pytest.raises(MemoryFormatError, match=r"has dimension 8, but dimension 16 was expected"):
        RetrievalMemory.load(tmp_path, dim=16)
    with pytest.raises(MemoryFormatError, match=r"uses metric 'cosine', but 'l2' was expected"):
        RetrievalMemory.load(tmp_path, metric="l2")
    meta = json.loads((tmp_path / "memory.json").read_text())
    (tmp_path / "memory.json").write_text(json.dumps({**meta, "dim": 9}))
    with pytest.raises(MemoryFormatError, match=r"index.faiss has dimension 8 but memory.json says 9"):
        RetrievalMemory.load(tmp_path)
    with pytest.raises(MemoryFormatError, match=r"not a saved memory"):
        RetrievalMemory.load(tmp_path / "nothing")


def test_bad_input():
    memory = RetrievalMemory(4, "Flat")
    with pytest.raises(MemoryFormatError, match=r"keys must be \[N, 4\], got shape \(3, 5\)"):
        memory.add(torch.randn(3, 5))
    with pytest.raises(MemoryFormatError, match="NaN"):
        memory.add(torch.tensor([[0.0, float("nan"), 1.0, 1.0]]))
    memory.add(torch.randn(3, 4))
    with pytest.raises(MemoryFormatError, match=r"ids not in the memory: \[7\]"):
        memory.remove([1, 7])
    assert len(memory) == 3  # nothing removed by the failed call
    with pytest.raises(MemoryFormatError, match="invalid FAISS factory string"):
        RetrievalMemory(4, "NoSuchIndex")
    with pytest.raises(MemoryFormatError, match="metric='dot'"):
        RetrievalMemory(4, metric="dot")
    _, found = memory.search(torch.randn(1, 4), k=5)
    assert found[0, 3:].tolist() == [-1, -1]  # fewer entries than k


def test_over_fetch_fallback_when_selectors_are_unsupported(monkeypatch):
    keys = torch.randn(300, 8)
    memory = RetrievalMemory(8, "HNSW16", metric="ip", ef_search=64)
    memory.add(keys)
    memory.remove([3, 4])
    _, expected = memory.search(keys[:6], 5)
    monkeypatch.setattr(memory, "_search_parameters", lambda selector: (_ for _ in ()).throw(RuntimeError("no")))
    _, fallback = memory.search(keys[:6], 5)
    assert torch.equal(fallback, expected) and not ({3, 4} & set(fallback.flatten().tolist()))
