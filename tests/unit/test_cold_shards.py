"""The cold tier's lexical index in shards (``indexers.tiers.cold_shards``): where chunks go, how
a search merges the shards, a change of shard count, and a crash between the shards' commits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from indexers.records import Chunk, EmbeddedChunk
from indexers.text.lexical import Analyzer
from indexers.tiers import cold_shards
from indexers.tiers.cold_lexical import LexicalIndex
from indexers.tiers.cold_shards import ShardedLexical, open_lexical
from indexers.tiers.local_cold import LocalCold
from indexers.tiers.query import Filters

ANALYZER = Analyzer()
TENANT = Filters(tenant="default")
WORDS = ["harbour", "tide", "ledger", "invoice", "notice", "clause", "pilot", "ferry"]


def _rows(n: int) -> list[tuple[object, ...]]:
    """Chunk rows as tantivy takes them: seq, tenant, terms, year, day, keywords."""
    return [
        (seq, "default", f"common {WORDS[seq % len(WORDS)]} w{seq}", None, None, [])
        for seq in range(1, n + 1)
    ]


def _chunks(n: int) -> list[EmbeddedChunk]:
    return [
        EmbeddedChunk(
            Chunk(f"d{i}#0", f"d{i}", 0, f"The {WORDS[i % len(WORDS)]} report number {i}.", None, {}),
            np.ones(4, np.float32) / 2,
        )
        for i in range(n)
    ]


def _docs(lexical: LexicalIndex | ShardedLexical) -> int:
    parts = lexical.parts if isinstance(lexical, ShardedLexical) else [lexical]
    return sum(int(p.index.searcher().num_docs) for p in parts)


def test_each_chunk_lives_in_one_shard_and_a_search_merges_them_by_score(tmp_path: Path) -> None:
    sharded = ShardedLexical(tmp_path / "s", 3)
    sharded.apply(_rows(60), [], version=1)
    for i, part in enumerate(sharded.parts):  # seq % 3: twenty each
        seqs = {seq for seq, _ in part.search(["common"], TENANT, 100)}
        assert seqs == {s for s in range(1, 61) if s % 3 == i}
    hits = sharded.search(["common", "tide", "w7"], TENANT, 10)
    assert len(hits) == 10
    assert hits[0][0] == 7  # the one chunk with every term, from whichever shard holds it
    assert [score for _, score in hits] == sorted((score for _, score in hits), reverse=True)
    assert {seq for seq, _ in sharded.search(["tide"], TENANT, 100)} == {
        s for s in range(1, 61) if s % 8 == 1
    }
    sharded.apply([], [7, 8], version=2)  # deletions reach the shard that holds each
    assert {seq for seq, _ in sharded.search(["w7", "w8", "w9"], TENANT, 10)} == {9}
    assert sharded.watermark() == 2
    sharded.close()


def test_a_shard_count_is_at_least_two_and_a_layout_count_at_least_one(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="2 shards"):
        ShardedLexical(tmp_path / "s", 1)
    with pytest.raises(ValueError, match="1 or more"):
        open_lexical(tmp_path, 0)


def test_another_shard_count_reindexes_the_store_from_sqlite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cold_shards, "REPLAY_PAGE", 7)  # the replay reads SQLite in pages
    cold = LocalCold(tmp_path / "cold", dim=4, analyzer=ANALYZER)
    cold.upsert(_chunks(45))
    cold.delete("default", [f"d{i}#0" for i in range(40, 45)])
    terms = ANALYZER.query_terms("tide report")
    before = cold._parts()[1].search(terms, TENANT, 100)
    assert len(before) == 40
    cold.close()
    for shards, folder in ((4, "tantivy-4"), (1, "tantivy")):
        cold = LocalCold(tmp_path / "cold", dim=4, analyzer=ANALYZER, lexical_shards=shards)
        lexical = cold._parts()[1]
        assert _docs(lexical) == 40  # every stored chunk, once; the deleted ones not
        assert {s for s, _ in lexical.search(terms, TENANT, 100)} == {s for s, _ in before}
        assert sorted(p.name for p in (tmp_path / "cold").iterdir() if p.name.startswith("tantivy")) == [
            folder
        ]
        cold.close()


def test_a_crash_between_the_shards_commits_is_replayed_without_duplicates(tmp_path: Path) -> None:
    cold = LocalCold(tmp_path / "cold", dim=4, analyzer=ANALYZER, lexical_shards=3)
    cold.upsert(_chunks(30))
    lexical = cold._parts()[1]
    assert isinstance(lexical, ShardedLexical)
    mark = lexical.watermark()
    real = LexicalIndex.commit
    calls: list[int] = []

    def dies_after_the_first_shard(self: LexicalIndex, version: int) -> None:
        calls.append(version)
        if len(calls) > 1:
            raise OSError(5, "Input/output error")
        real(self, version)

    LexicalIndex.commit = dies_after_the_first_shard  # type: ignore[method-assign]
    try:
        with pytest.raises(OSError):
            cold.upsert(_chunks(36)[30:])  # six new chunks: shard 0 commits its own, then the crash
    finally:
        LexicalIndex.commit = real  # type: ignore[method-assign]
    assert lexical.watermark() == mark  # the sharded watermark did not move
    cold.close()  # the other shards' added rows were never committed: dropped
    reopened = LocalCold(tmp_path / "cold", dim=4, analyzer=ANALYZER, lexical_shards=3)
    caught_up = reopened._parts()[1]
    assert caught_up.watermark() > mark
    assert _docs(caught_up) == 36  # the replayed chunks were not indexed twice
    found = caught_up.search(ANALYZER.query_terms("report"), TENANT, 100)
    assert len(found) == len({s for s, _ in found}) == 36
    reopened.close()


def test_a_replay_commits_page_by_page_at_the_old_mark_and_deletes_only_where_chunks_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tantivy holds pending deletes in memory until a commit: a long replay commits each page at
    the watermark it started from (moved only at the end), and into an empty index deletes nothing."""
    cold = LocalCold(tmp_path / "cold", dim=4, analyzer=ANALYZER)
    cold.upsert(_chunks(20))
    store = cold._parts()[0]
    version = store.version()
    monkeypatch.setattr(cold_shards, "REPLAY_PAGE", 7)
    commits: list[int] = []
    news: list[int | None] = []

    class Spy(LexicalIndex):
        def add(self, rows: Any, deleted: Any, new_above: int | None = None) -> None:
            if rows:
                news.append(new_above)
            super().add(rows, deleted, new_above)

        def commit(self, version: int) -> None:
            commits.append(version)
            super().commit(version)

    fresh = Spy(tmp_path / "other")
    cold_shards.catch_up_lexical(store.reader(), fresh, version)
    assert commits == [0, 0, version] and news == [0, 0, 0]  # three pages; nothing to delete
    assert _docs(fresh) == 20
    fresh.watermark_file.write_text("0")  # as if a crash had come before the last commit
    commits.clear()
    news.clear()
    cold_shards.catch_up_lexical(store.reader(), fresh, version)
    assert commits == [0, 0, version] and news == [None, None, None]  # each deleted, then added
    assert _docs(fresh) == 20  # not twice
    fresh.close()
    cold.close()
