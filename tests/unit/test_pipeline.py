from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path

import pytest

from indexers.embed.cache import EmbeddingCache
from indexers.embed.embedder import AsyncEmbedder
from indexers.ingest.load import LoadFailure, load_paths
from indexers.ingest.pipeline import Pipeline
from indexers.ingest.results import IngestReport, place
from indexers.records import Document
from indexers.text.chunk import Chunker
from indexers.tiers.base import Tier
from indexers.tiers.disk import DiskFull
from tests.conftest import CountingEmbedder

TODAY = dt.date(2026, 11, 30)


def pipeline(
    embedder: CountingEmbedder,
    tiers: dict[str, Tier],
    cache: EmbeddingCache | None = None,
    batch_chunks: int = 512,
) -> Pipeline:
    chunker = Chunker(embedder.count_tokens, max_tokens=40, overlap_tokens=0)
    return Pipeline(
        embedder=AsyncEmbedder(embedder),  # type: ignore[arg-type]
        chunker=chunker,
        tiers=tiers,  # type: ignore[arg-type]
        today=lambda: TODAY,
        cache=cache,
        batch_chunks=batch_chunks,
    )


def long_text(topic: str, n: int) -> str:
    return " ".join(f"This is sentence {i} about {topic} and its many consequences." for i in range(n))


def test_placement_by_hot_window() -> None:
    def doc(**meta: object) -> Document:
        return Document("d", "t", metadata=meta)

    assert place(doc(), "auto", 365, TODAY) == "hot"
    assert place(doc(date="2026-01-02"), "auto", 365, TODAY) == "hot"
    assert place(doc(date="2025-11-29"), "auto", 365, TODAY) == "cold"
    assert place(doc(year=2019), "auto", 365, TODAY) == "cold"
    assert place(doc(date="2001-01-01"), "hot", 365, TODAY) == "hot"


async def test_reingest_embeds_nothing_and_a_change_reembeds_only_that_document(
    counting_embedder: CountingEmbedder, tiers: dict[str, Tier]
) -> None:
    docs = [Document(f"d{i}", long_text(f"topic {i}", 12), metadata={"year": 2000 + i}) for i in range(4)]
    p = pipeline(counting_embedder, tiers)
    first = await p.ingest(docs)
    assert first.count("created") == 4 and first.chunks_embedded == len(counting_embedder.embedded) > 4
    counting_embedder.embedded.clear()
    second = await p.ingest(docs)
    assert second.count("unchanged") == 4 and counting_embedder.embedded == []

    changed = Document("d2", long_text("topic 2", 12) + " One more sentence.", metadata={"year": 2002})
    third = await p.ingest([*docs[:2], changed, docs[3]], collect=True)
    assert [r.status for r in third.results] == ["unchanged", "unchanged", "updated", "unchanged"]
    assert counting_embedder.embedded and all(
        "topic 2" in t or "One more" in t for t in counting_embedder.embedded
    )
    # only the last chunk changed; the unchanged chunks of d2 were not re-embedded
    assert len(counting_embedder.embedded) == 1


async def test_shrinking_or_moving_a_document_leaves_no_stale_chunk(
    counting_embedder: CountingEmbedder, tiers: dict[str, Tier]
) -> None:
    p = pipeline(counting_embedder, tiers)
    await p.ingest([Document("d", long_text("x", 30), metadata={"date": "2026-11-01"})])
    n_before = await tiers["hot"].count()
    assert n_before > 3 and await tiers["cold"].count() == 0
    await p.ingest([Document("d", long_text("x", 5), metadata={"date": "2026-11-01"})])
    stored = await tiers["hot"].fetch("default", ["d"])
    assert 0 < len(stored) < n_before and [c.chunk_id for c in stored] == [
        f"d#{i}" for i in range(len(stored))
    ]
    await p.ingest([Document("d", long_text("x", 5), metadata={"date": "2026-11-01"})], placement="cold")
    assert await tiers["hot"].count() == 0 and await tiers["cold"].count() == len(stored)


async def test_failures_pass_through_and_good_documents_land(
    counting_embedder: CountingEmbedder, tiers: dict[str, Tier]
) -> None:
    report = await pipeline(counting_embedder, tiers).ingest(
        [LoadFailure("bad.jsonl:3", "not JSON"), Document("ok", "fine text")], collect=True
    )
    assert [(r.id, r.status) for r in report.results] == [("bad.jsonl:3", "failed"), ("ok", "created")]
    assert await tiers["hot"].count() == 1


async def test_two_versions_in_one_run_leave_only_the_last(
    counting_embedder: CountingEmbedder, tiers: dict[str, Tier]
) -> None:
    """Small batches put the versions in different batches, in flight at the same time."""
    p = pipeline(counting_embedder, tiers, batch_chunks=4)
    filler = [Document(f"f{i}", long_text(f"filler {i}", 6)) for i in range(6)]
    v1 = Document("d", long_text("first version", 30))
    v2 = Document("d", long_text("second version", 6))
    report = await p.ingest([v1, *filler, v2])
    stored = await tiers["hot"].fetch("default", ["d"])
    assert stored and all("second version" in c.text for c in stored)
    assert [c.chunk_id for c in stored] == [f"d#{i}" for i in range(len(stored))]
    assert report.count("failed") == 0 and report.documents == 8


async def test_the_embedding_cache_spares_metadata_changes_and_tier_moves(
    counting_embedder: CountingEmbedder, tiers: dict[str, Tier], tmp_path: Path
) -> None:
    cache = EmbeddingCache(tmp_path / "cache.sqlite", model="m", dim=384)
    p = pipeline(counting_embedder, tiers, cache=cache)
    text = long_text("cached", 12)
    first = await p.ingest([Document("d", text, metadata={"date": "2026-11-01"})])
    embedded = len(counting_embedder.embedded)
    assert first.chunks_embedded == embedded > 1 and len(cache) == embedded
    counting_embedder.embedded.clear()
    # a metadata change rewrites every chunk (its content hash covers metadata) but embeds none
    second = await p.ingest([Document("d", text, metadata={"date": "2026-11-02", "author": "x"})])
    assert second.count("updated") == 1 and second.chunks_cached == embedded
    # moving to the cold tier likewise
    third = await p.ingest([Document("d", text, metadata={"date": "2001-01-01"})])
    assert third.chunks_cached == embedded and counting_embedder.embedded == []
    assert await tiers["hot"].count() == 0 and await tiers["cold"].count() == embedded
    cache.close()


async def test_cancel_stops_between_batches(
    counting_embedder: CountingEmbedder, tiers: dict[str, Tier]
) -> None:
    p = pipeline(counting_embedder, tiers, batch_chunks=2)
    cancel = asyncio.Event()
    docs = [Document(f"d{i}", long_text(f"doc {i}", 4)) for i in range(100)]

    def stop_after_first(results: object, report: IngestReport) -> None:
        cancel.set()

    report = await p.ingest(docs, cancel=cancel, on_batch=stop_after_first)
    assert report.cancelled and 0 < report.documents < 100
    assert await tiers["hot"].count() < 100


async def test_a_half_broken_batch_lands_every_good_document(
    counting_embedder: CountingEmbedder, tiers: dict[str, Tier], tmp_path: Path
) -> None:
    files = tmp_path / "in"
    files.mkdir()
    (files / "corrupt.pdf").write_bytes(b"%PDF-1.4\n%broken beyond repair")
    (files / "latin1.txt").write_bytes("Caf\xe9 au lait".encode("latin-1"))
    (files / "empty.md").write_bytes(b"")
    with (files / "huge.txt").open("wb") as f:
        f.truncate(50 * 1024 * 1024)  # 50 MB, sparse
    (files / "lines.jsonl").write_text(
        '{"id": "j1", "text": "First good line."}\n{oops\n{"id": "j2", "text": "Second good line."}\n',
        encoding="utf-8",
    )
    (files / "good.md").write_text("# Good\n\nA fine markdown file.", encoding="utf-8")
    (files / "good.html").write_text("<html><body><p>A fine page.</p></body></html>", encoding="utf-8")
    report = await pipeline(counting_embedder, tiers).ingest(load_paths([files]), collect=True)
    failed = {Path(r.id).name: r.error or "" for r in report.results if r.status == "failed"}
    assert set(failed) == {"corrupt.pdf", "latin1.txt", "empty.md", "huge.txt", "lines.jsonl:2"}
    assert "PDF" in failed["corrupt.pdf"] and "UTF-8" in failed["latin1.txt"]
    assert (
        "empty" in failed["empty.md"]
        and "50.0 MB" in failed["huge.txt"]
        and "JSON" in failed["lines.jsonl:2"]
    )
    landed = {"j1", "j2", "good.md", "good.html"}
    assert {r.id for r in report.results if r.status == "created"} == landed
    assert {c.doc_id for c in await tiers["hot"].fetch("default", sorted(landed))} == landed


class BreaksAfter:
    """A tier whose upserts fail after the first ``ok`` ones (an engine that went away)."""

    def __init__(self, inner: Tier, ok: int, error: Exception) -> None:
        self.inner, self.ok, self.error = inner, ok, error

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    async def upsert(self, chunks: object) -> None:
        if self.ok <= 0:
            raise self.error
        self.ok -= 1
        await self.inner.upsert(chunks)  # type: ignore[arg-type]


async def test_a_tier_that_fails_mid_run_stops_the_run_with_its_error(
    counting_embedder: CountingEmbedder, tiers: dict[str, Tier]
) -> None:
    """The failure reaches the caller as itself (not hidden in a group) and nothing waits for ever
    on a stage that stopped: every queue between the stages is full when the write fails."""
    broken = BreaksAfter(tiers["hot"], ok=1, error=DiskFull("no room"))
    p = pipeline(counting_embedder, {"hot": broken}, batch_chunks=2)  # type: ignore[dict-item]
    docs = [Document(f"d{i}", long_text(f"doc {i}", 4)) for i in range(60)]
    written: list[int] = []

    def seen(results: object, report: IngestReport) -> None:
        written.append(report.documents)

    async with asyncio.timeout(300):  # a hang is the failure this test exists for
        with pytest.raises(DiskFull, match="no room"):
            await p.ingest(docs, on_batch=seen)
    assert len(written) == 1  # the one batch written was acknowledged, nothing after it
    stored = {c.doc_id for c in await tiers["hot"].fetch("default", [d.id for d in docs])}
    assert len(stored) == written[0] > 0  # the acknowledged batch, and nothing of the refused one
