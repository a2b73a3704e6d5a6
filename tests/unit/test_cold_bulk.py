"""The embedded cold tier's bulk loads: commits queued behind tantivy's feed; each test with one
lexical index and with three shards (``indexers.tiers.cold_shards``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from indexers.records import Chunk, EmbeddedChunk, chunk_key
from indexers.text.lexical import Analyzer
from indexers.tiers.cold_segment import write_segment
from indexers.tiers.local_cold import LocalCold
from indexers.tiers.query import Filters, SearchQuery

SHARDS = [1]  # the lexical shards of the tiers the running test opens


@pytest.fixture(autouse=True, params=[1, 3], ids=["one-index", "three-shards"])
def _lexical_shards(request: pytest.FixtureRequest) -> None:
    SHARDS[0] = request.param


def _cold(path: Path, analyzer: Analyzer) -> LocalCold:
    return LocalCold(path, dim=4, analyzer=analyzer, lexical_shards=SHARDS[0])


def _segment(path: Path, names: list[str], analyzer: Analyzer) -> Path:
    items = [
        EmbeddedChunk(
            Chunk(f"{n}#0", n, 0, f"Clause about {n} in the contract.", None, {}), np.ones(4, np.float32) / 2
        )
        for n in names
    ]
    write_segment(path, items, analyzer)
    return path


def _tier(tmp_path: Path) -> tuple[LocalCold, Analyzer]:
    """An empty cold tier (4-dimensional vectors) and its analyzer."""
    analyzer = Analyzer()
    cold = _cold(tmp_path / "cold", analyzer)
    cold.ensure()
    return cold, analyzer


def _searchable(cold: LocalCold, word: str) -> int:
    """Hits for ``word`` in tantivy (what it has committed)."""
    return len(cold._parts()[1].search([word], Filters(tenant="default"), 10))


def test_a_queued_commit_makes_what_was_adopted_before_it_searchable(tmp_path: Path) -> None:
    cold, analyzer = _tier(tmp_path)
    cold.bulk_begin(threads=1)
    cold.adopt([_segment(tmp_path / "a.segment", ["alpha"], analyzer)])
    committed = cold.bulk_commit_later()
    cold.adopt([_segment(tmp_path / "b.segment", ["beta"], analyzer)])  # adopting goes on meanwhile
    committed.result()
    lexical = cold._parts()[1]
    assert lexical.watermark() >= 1
    assert _searchable(cold, analyzer.terms("alpha")[0]) == 1
    cold.bulk_end()
    assert _searchable(cold, analyzer.terms("beta")[0]) == 1
    cold.close()


def test_a_commit_queued_after_a_failed_feed_commits_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tantivy failed to take some adopted rows: a commit queued after them fails and leaves the
    watermark where it was; the load's end rolls tantivy back and feeds it again from SQLite."""
    cold, analyzer = _tier(tmp_path)
    cold.bulk_begin(threads=1)
    cold.adopt([_segment(tmp_path / "a.segment", ["alpha"], analyzer)])
    cold.bulk_commit_later().result()
    lexical = cold._parts()[1]
    mark = lexical.watermark()

    def full_disk(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(lexical, "add", full_disk)
    cold.adopt([_segment(tmp_path / "b.segment", ["beta"], analyzer)])
    with pytest.raises(RuntimeError, match="not committed"):
        cold.bulk_commit_later().result()
    assert lexical.watermark() == mark
    monkeypatch.undo()
    with pytest.raises(RuntimeError, match="not committed"):  # the end reports it too...
        cold.bulk_end()
    assert lexical.watermark() > mark  # ...after tantivy caught up from SQLite
    assert _searchable(cold, analyzer.terms("beta")[0]) == 1
    assert _searchable(cold, analyzer.terms("alpha")[0]) == 1
    chunk = Chunk("gamma#0", "gamma", 0, "Clause about gamma in the contract.", None, {})
    cold.upsert([EmbeddedChunk(chunk, np.ones(4, np.float32) / 2)])  # the failure was reported once
    assert _searchable(cold, analyzer.terms("gamma")[0]) == 1
    cold.close()


def test_a_bulk_load_that_wrote_nothing_leaves_faiss_as_it_was(tmp_path: Path) -> None:
    """A re-run finds every document unchanged: the end neither reloads nor rebuilds FAISS."""
    cold, analyzer = _tier(tmp_path)
    cold.bulk_begin(threads=1)
    cold.adopt([_segment(tmp_path / "a.segment", ["alpha", "beta"], analyzer)])
    cold.bulk_end()
    index = cold._parts()[2].index
    assert index.ntotal == 2
    cold.bulk_begin(threads=1)
    cold.bulk_end()
    assert cold._parts()[2].index is index
    cold.close()


def test_after_a_failed_feed_other_writes_wait_for_the_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An upsert committing tantivy after a failed feed would move its watermark past the rows
    it never took (lost from search for good): writes are refused, before anything is written,
    until ``bulk_end`` repaired it."""
    cold, analyzer = _tier(tmp_path)
    cold.bulk_begin(threads=1)
    lexical = cold._parts()[1]

    def full_disk(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(lexical, "add", full_disk)
    cold.adopt([_segment(tmp_path / "b.segment", ["beta"], analyzer)])
    cold.bulk_commit_later().exception()  # the feed has run (and failed)
    monkeypatch.undo()
    chunk = Chunk("gamma#0", "gamma", 0, "Clause about gamma in the contract.", None, {})
    item = EmbeddedChunk(chunk, np.ones(4, np.float32) / 2)
    for _ in range(2):  # the failure first, then the refusal
        with pytest.raises((OSError, RuntimeError)):
            cold.upsert([item])
    with pytest.raises(RuntimeError):
        cold.delete("default", ["beta#0"])
    with pytest.raises(RuntimeError, match="not committed"):
        cold.bulk_end()
    assert _searchable(cold, analyzer.terms("beta")[0]) == 1  # the refused delete wrote nothing
    assert _searchable(cold, analyzer.terms("gamma")[0]) == 0  # nor the refused upserts
    cold.upsert([item])
    assert _searchable(cold, analyzer.terms("gamma")[0]) == 1
    cold.close()


def _feed_failed_reading_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LocalCold:
    """A bulk load where alpha was adopted and fed, then beta and delta adopted and their feed
    failed before it read their rows back (so the vectors kept for FAISS lack theirs)."""
    from indexers.tiers import cold_bulk

    cold, analyzer = _tier(tmp_path)
    cold.bulk_begin(threads=1)
    cold.adopt([_segment(tmp_path / "a.segment", ["alpha"], analyzer)])
    cold.bulk_commit_later().result()  # alpha's feed has read its vector back

    def unreadable(*args: object, **kwargs: object) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(cold_bulk, "lexical_rows", unreadable)
    cold.adopt([_segment(tmp_path / "b.segment", ["beta", "delta"], analyzer)])
    return cold


def test_after_a_feed_failed_reading_back_faiss_still_gets_every_adopted_vector(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The end builds FAISS from the vectors the feeds read back, beside tantivy's last commit;
    after a failed feed that set is short, so FAISS is brought up to date from SQLite instead."""
    cold = _feed_failed_reading_back(tmp_path, monkeypatch)
    cold.bulk_commit_later().exception()
    monkeypatch.undo()
    with pytest.raises(RuntimeError, match="not committed"):
        cold.bulk_end()
    assert cold._parts()[2].index.ntotal == 3
    assert _searchable(cold, Analyzer().terms("delta")[0]) == 1
    cold.close()


def test_a_feed_failure_a_delete_reported_first_still_leaves_faiss_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A delete (the owner removing stale chunks) reports a failed feed before the end does, and
    clears what was queued; the end still knows the adopted vectors are short."""
    cold = _feed_failed_reading_back(tmp_path, monkeypatch)
    with pytest.raises(OSError):
        cold.delete("default", ["alpha#0"])
    monkeypatch.undo()
    with pytest.raises(RuntimeError, match="not committed"):
        cold.bulk_end()
    assert cold._parts()[2].index.ntotal == 3
    cold.close()
    reopened = _cold(tmp_path / "cold", Analyzer())
    assert reopened._parts()[2].index.ntotal == 3  # what was saved holds them too
    reopened.close()


@pytest.mark.parametrize("failing", ["commit", "build"])
def test_a_last_commit_or_faiss_build_that_fails_once_leaves_both_indexes_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    """tantivy's last commit fails (a full disk: raised, tantivy catches up from SQLite), or
    FAISS's build from the adopted vectors does (a GPU out of memory: FAISS catches up from
    SQLite, nothing raised); either way both indexes end holding every adopted row."""
    cold, analyzer = _tier(tmp_path)
    cold.bulk_begin(threads=1)
    cold.adopt([_segment(tmp_path / "a.segment", ["alpha", "beta"], analyzer)])
    _, lexical, vectors = cold._parts()
    part: Any = lexical if failing == "commit" else vectors
    real = getattr(part, failing)

    def fails_once(*args: object, **kwargs: object) -> None:
        monkeypatch.setattr(part, failing, real)
        raise OSError(28, "No space left on device") if failing == "commit" else RuntimeError("CUDA OOM")

    monkeypatch.setattr(part, failing, fails_once)
    if failing == "commit":
        with pytest.raises(OSError):
            cold.bulk_end()
    else:
        cold.bulk_end()
    version = cold._parts()[0].version()
    assert vectors.index.ntotal == 2
    assert int(vectors.watermark_file.read_text()) == version
    assert lexical.watermark() == version
    assert _searchable(cold, analyzer.terms("beta")[0]) == 1
    cold.close()


def test_a_bulk_load_checkpoints_beside_the_writer_and_hands_it_back_at_the_end(tmp_path: Path) -> None:
    cold, analyzer = _tier(tmp_path)
    writer = cold._parts()[0].writer
    cold.bulk_begin(threads=1)
    assert writer.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0  # the thread does it
    cold.adopt([_segment(tmp_path / "a.segment", ["alpha", "beta"], analyzer)])
    cold.bulk_end()
    assert writer.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000
    assert "checkpoint" in cold.bulk_seconds
    cold.bulk_begin(threads=1)  # a load left unended: closing the tier stops its thread
    thread = cold._checkpointer._thread if cold._checkpointer is not None else None
    assert thread is not None and thread.is_alive()
    cold.close()
    assert not thread.is_alive()
    cold = _cold(tmp_path / "cold", analyzer)
    assert sorted(c.doc_id for c in cold.fetch("default", ["alpha", "beta"])) == ["alpha", "beta"]
    cold.close()


def _upserted_mid_load(tmp_path: Path) -> LocalCold:
    """A bulk load into an empty tier: alpha and beta adopted, then gamma upserted by another
    writer (its vector [1, 0, 0, 0])."""
    cold, analyzer = _tier(tmp_path)
    cold.bulk_begin(threads=1)
    cold.adopt([_segment(tmp_path / "a.segment", ["alpha", "beta"], analyzer)])
    chunk = Chunk("gamma#0", "gamma", 0, "Clause about gamma in the contract.", None, {})
    cold.upsert([EmbeddedChunk(chunk, np.asarray([1, 0, 0, 0], np.float32))])
    return cold


def test_a_chunk_upserted_during_a_bulk_load_stays_in_faiss(tmp_path: Path) -> None:
    """FAISS is built at the end from the vectors adopted into an empty tier; a chunk written
    meanwhile by another writer (not adopted) is in it too."""
    cold = _upserted_mid_load(tmp_path)
    cold.bulk_end()
    vectors = cold._parts()[2]
    assert vectors.index.ntotal == 3
    seq = cold._parts()[0].reader().execute("SELECT seq FROM chunks WHERE chunk_id = 'gamma#0'").fetchone()[0]
    assert vectors.search(np.asarray([1, 0, 0, 0], np.float32), 1, None, exact=True)[0][0] == seq
    cold.close()


def test_a_bulk_load_that_fails_to_begin_leaves_the_writer_checkpointing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cold, _ = _tier(tmp_path)
    store, lexical, _ = cold._parts()

    def no_writer(*args: object, **kwargs: object) -> None:
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(lexical, "reopen_writer", no_writer)
    with pytest.raises(OSError):
        cold.bulk_begin(threads=1)
    assert cold._checkpointer is None
    assert store.writer.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000
    cold.close()


def test_a_tier_closed_mid_load_reopens_with_every_vector(tmp_path: Path) -> None:
    """Closed before ``bulk_end`` (the adopted rows not yet in FAISS) after an upsert made FAISS
    worth saving: what it saved is marked as of the load's start, so the reopened tier's FAISS
    catches up with every row."""
    cold = _upserted_mid_load(tmp_path)
    cold.close()
    reopened = _cold(tmp_path / "cold", Analyzer())
    assert reopened._parts()[2].index.ntotal == 3
    reopened.close()


def test_a_tenant_that_arrives_by_bulk_load_is_kept_apart_from_the_others(tmp_path: Path) -> None:
    """Searches skip the tenant filter while the store holds one tenant; a second one that came
    by an adopted segment (not by upsert) must end that, on both legs."""
    cold, analyzer = _tier(tmp_path)
    vector = np.ones(4, np.float32) / 2
    cold.upsert([EmbeddedChunk(Chunk("own#0", "own", 0, "Clause about alpha.", None, {}), vector)])
    other = [EmbeddedChunk(Chunk("b#0", "b", 0, "Clause about alpha too.", None, {}, tenant="acme"), vector)]
    write_segment(tmp_path / "acme.segment", other, analyzer)
    cold.bulk_begin(threads=1)
    cold.adopt([tmp_path / "acme.segment"])
    cold.bulk_end()
    query = SearchQuery("alpha", analyzer.terms("alpha"), vector, Filters(tenant="default"), k=10)
    found = cold.search(query)
    assert {leg: [h.key for h in hits] for leg, hits in found.items()} == {
        "lexical": [chunk_key("default", "own#0")],
        "dense": [chunk_key("default", "own#0")],
    }
    cold.close()
