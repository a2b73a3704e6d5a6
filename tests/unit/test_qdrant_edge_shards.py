"""The hot tier's fresh/sealed shards: sealing keeps every point, and writes made during a
build are not lost when the built shard is swapped in."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from indexers.records import Chunk, EmbeddedChunk
from indexers.text.lexical import Analyzer
from indexers.tiers.base import TierError
from indexers.tiers.qdrant_edge import QdrantEdgeTier
from indexers.tiers.query import Filters, SearchQuery

A = Analyzer()
DIM = 16


def items(ids: range, salt: int = 0) -> list[EmbeddedChunk]:
    rng = np.random.default_rng(salt)
    out = []
    for i in ids:
        v = rng.normal(size=DIM).astype(np.float32)
        out.append(
            EmbeddedChunk(
                Chunk(f"d{i}#0", f"d{i}", 0, f"token{i} shared", None, {"year": 2020}), v / np.linalg.norm(v)
            )
        )
    return out


def exact(vector: np.ndarray, k: int = 5) -> SearchQuery:
    return SearchQuery("", [], vector, Filters("default"), k=k, legs=("dense",), exact=True)


async def test_sealing_keeps_every_point_and_the_same_answers(tmp_path: Path) -> None:
    tier = QdrantEdgeTier(tmp_path, dim=DIM, analyzer=A, compaction="subprocess")
    data = items(range(300))
    await tier.upsert(data)
    before = [[h.chunk.chunk_id for h in (await tier.search(exact(d.vector)))["dense"]] for d in data[:10]]
    assert await tier.optimize() is True
    names = tier.shard_names()
    assert names[0].startswith("fresh-") and len(names) == 2 and names[1].startswith("sealed-")
    assert await tier.count() == 300
    after = [[h.chunk.chunk_id for h in (await tier.search(exact(d.vector)))["dense"]] for d in data[:10]]
    assert after == before
    lexical = await tier.search(SearchQuery("token7", A.query_terms("token7"), None, Filters("default"), k=3))
    assert [h.chunk.chunk_id for h in lexical["lexical"]] == ["d7#0"]
    await tier.upsert(items(range(300, 350), salt=1))
    assert await tier.optimize() is True  # merges the new fresh shard with the sealed one
    assert len(tier.shard_names()) == 2 and await tier.count() == 350
    await tier.close()
    reopened = QdrantEdgeTier(tmp_path, dim=DIM, analyzer=A)
    await reopened.ensure()
    assert await reopened.count() == 350 and len(reopened.shard_names()) == 2
    await reopened.close()


async def test_writes_during_a_build_survive_the_swap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tier = QdrantEdgeTier(tmp_path, dim=DIM, analyzer=A, compaction="inprocess")
    await tier.upsert(items(range(100)))
    original = tier._build

    async def build_while_writing(source: Path, dest: Path) -> None:
        await original(source, dest)
        await tier.delete("default", ["d1#0", "d2#0"])  # deleted from the build's inputs
        await tier.upsert(items(range(3, 4), salt=9))  # updated: new version goes to the new fresh shard
        await tier.upsert(items(range(100, 110)))  # new points

    monkeypatch.setattr(tier, "_build", build_while_writing)
    await tier.optimize()
    assert await tier.count() == 100 - 2 + 10
    stored = {c.chunk_id for c in await tier.fetch("default", [f"d{i}" for i in range(110)])}
    assert {"d1#0", "d2#0"}.isdisjoint(stored) and {"d3#0", "d105#0"} <= stored
    new_d3 = items(range(3, 4), salt=9)[0].vector
    top = (await tier.search(exact(new_d3, k=1)))["dense"][0]
    assert top.chunk.chunk_id == "d3#0" and top.score == pytest.approx(1.0, abs=1e-5)
    assert len(await tier.fetch("default", ["d3"])) == 1
    await tier.close()


async def test_a_failed_build_loses_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tier = QdrantEdgeTier(tmp_path, dim=DIM, analyzer=A)
    await tier.upsert(items(range(50)))
    monkeypatch.setattr(
        "indexers.tiers.edge_shard.build_command",
        lambda *a: ["python3", "-c", "import sys; sys.exit('boom')"],
    )
    with pytest.raises(TierError, match="boom"):
        await tier.optimize()
    assert await tier.count() == 50
    await tier.close()
    reopened = QdrantEdgeTier(tmp_path, dim=DIM, analyzer=A)
    await reopened.ensure()
    assert await reopened.count() == 50
    folders = sorted(p.name for p in tmp_path.iterdir() if p.is_dir())  # noqa: ASYNC240
    assert folders == sorted(reopened.shard_names())
    await reopened.close()


async def test_the_fresh_shard_is_sealed_when_it_outgrows_its_limit(tmp_path: Path) -> None:
    tier = QdrantEdgeTier(tmp_path, dim=DIM, analyzer=A, fresh_limit=40)
    await tier.upsert(items(range(50)))
    assert tier._background is not None
    assert await tier._background is True
    assert len(tier.shard_names()) == 2 and await tier.count() == 50
    await tier.close()
