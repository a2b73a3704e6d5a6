"""The hot tiers give back the vectors they store (``VectorSource``): a retier copies them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import cast

import numpy as np
import pytest

from indexers.records import Chunk, EmbeddedChunk
from indexers.tiers.base import Tier, VectorSource
from tests.contract.test_tiers import SERVERS, TIERS

QDRANT = ["qdrant-edge", "qdrant-local", "qdrant-server"]  # the hot tier's engines
DIM = 16


@pytest.fixture(
    params=[pytest.param(n, marks=[pytest.mark.integration] if n in SERVERS else []) for n in QDRANT]
)
async def hot(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Tier]:
    t = TIERS[request.param](tmp_path / "tier", DIM)
    await t.ensure()
    yield t
    await t.close()


def chunks(tenant: str, seed: int) -> list[EmbeddedChunk]:
    vectors = np.random.default_rng(seed).normal(size=(3, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return [
        EmbeddedChunk(Chunk(f"d#{n}", "d", n, f"part {n}", None, {}, tenant), vectors[n]) for n in range(3)
    ]


async def test_the_stored_vectors_come_back_by_chunk_id_for_the_tenant_only(hot: Tier) -> None:
    mine, theirs = chunks("default", 1), chunks("acme", 2)  # the same chunk ids in two tenants
    await hot.upsert(mine + theirs)
    await hot.optimize()  # the embedded tier: into a sealed shard; the next write goes to a fresh one
    later = EmbeddedChunk(Chunk("e#0", "e", 0, "later", None, {}, "default"), mine[1].vector)
    await hot.upsert([later])
    assert isinstance(hot, VectorSource)
    got = await cast(VectorSource, hot).vectors("default", ["d#0", "d#2", "d#9", "e#0"])
    assert sorted(got) == ["d#0", "d#2", "e#0"]  # an id not stored is left out
    for chunk in (mine[0], mine[2], later):
        np.testing.assert_allclose(got[chunk.chunk.chunk_id], chunk.vector, atol=1e-6)
    other = await cast(VectorSource, hot).vectors("acme", ["d#1"])
    np.testing.assert_allclose(other["d#1"], theirs[1].vector, atol=1e-6)
    assert await cast(VectorSource, hot).vectors("nobody", ["d#0"]) == {}
    await hot.delete("default", ["d#0"])
    assert sorted(await cast(VectorSource, hot).vectors("default", ["d#0", "d#1"])) == ["d#1"]
