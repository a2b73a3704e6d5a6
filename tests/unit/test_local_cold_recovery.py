"""SQLite is the cold tier's truth: tantivy and FAISS catch up after a crash or a lost file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from indexers.records import Chunk, EmbeddedChunk
from indexers.text.lexical import Analyzer
from indexers.tiers import cold_lexical
from indexers.tiers.local_cold import LocalColdTier
from indexers.tiers.query import Filters, SearchQuery

A = Analyzer()


def item(i: int, text: str) -> EmbeddedChunk:
    v = np.zeros(8, dtype=np.float32)
    v[i % 8] = 1.0
    return EmbeddedChunk(Chunk(f"d{i}#0", f"d{i}", 0, text, None, {}), v)


def q(text: str, i: int) -> SearchQuery:
    v = np.zeros(8, dtype=np.float32)
    v[i % 8] = 1.0
    return SearchQuery(text, A.query_terms(text), v, Filters("default"), k=3)


async def test_indexes_replay_writes_committed_in_sqlite_before_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tier = LocalColdTier(tmp_path, dim=8, analyzer=A)
    await tier.ensure()
    await tier.upsert([item(0, "apples"), item(1, "bananas")])
    tier.flush()

    def crash(*args: object, **kwargs: object) -> None:
        raise RuntimeError("killed between the SQLite commit and the index update")

    monkeypatch.setattr(cold_lexical.LexicalIndex, "apply", crash)
    with pytest.raises(RuntimeError):
        await tier.upsert([item(2, "cherries")])
    with pytest.raises(RuntimeError):
        await tier.delete("default", ["d0#0"])
    monkeypatch.undo()
    await tier.close()

    reopened = LocalColdTier(tmp_path, dim=8, analyzer=A)
    await reopened.ensure()
    cherries = await reopened.search(q("cherries", 2))
    assert [h.chunk.chunk_id for h in cherries["lexical"]] == ["d2#0"]
    assert cherries["dense"][0].chunk.chunk_id == "d2#0"
    apples = await reopened.search(q("apples", 0))
    assert apples["lexical"] == [] and all(h.chunk.chunk_id != "d0#0" for h in apples["dense"])
    await reopened.close()


async def test_lost_index_files_are_rebuilt(tmp_path: Path) -> None:
    tier = LocalColdTier(tmp_path, dim=8, analyzer=A)
    await tier.ensure()
    await tier.upsert([item(i, f"word{i}") for i in range(5)])
    await tier.close()
    (tmp_path / "vectors.faiss").unlink()
    (tmp_path / "tantivy" / "watermark").unlink()
    reopened = LocalColdTier(tmp_path, dim=8, analyzer=A)
    await reopened.ensure()
    result = await reopened.search(q("word3", 3))
    assert result["lexical"][0].chunk.chunk_id == "d3#0" and result["dense"][0].chunk.chunk_id == "d3#0"
    assert await reopened.count() == 5
    await reopened.close()
