"""The Ray engine's parts, and the engine against the in-process pipeline on the same corpus."""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import os
import sqlite3
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from indexers.embed.embedder import AsyncEmbedder, SentenceTransformerEmbedder
from indexers.embed.tokens import count_tokens
from indexers.ingest.load import LoadOptions, load_paths
from indexers.ingest.pipeline import Pipeline
from indexers.ingest.prepare import chunk_documents, with_structure
from indexers.ingest.ray import engine
from indexers.ingest.ray.engine import BACKGROUND_NICE, step_back
from indexers.ingest.ray.pipeline import RayOptions, RayPipeline
from indexers.ingest.ray.units import plan_units, read_unit, taper
from indexers.records import Chunk, Document, EmbeddedChunk, TierName
from indexers.text.chunk import Chunker
from indexers.text.lexical import Analyzer
from indexers.tiers.base import StoreTier
from indexers.tiers.cold_segment import write_segment
from indexers.tiers.local_cold import LocalCold, LocalColdTier
from indexers.tiers.query import Filters, SearchQuery

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample"
ROWS = "SELECT tenant, chunk_id, doc_id, n, text, title, metadata, content_hash, terms, vector FROM chunks"


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """One local Ray (two CPUs) for the module's tests: the engine uses a Ray it finds running
    and leaves it running. Starting and stopping Ray once per run, as the CLI does, is what a
    process does once; done many times in one process, ``ray.shutdown`` was seen to hang."""
    ray = pytest.importorskip("ray")
    from indexers.ingest.ray.pipeline import RUNTIME_ENV

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env=RUNTIME_ENV)
    try:
        yield
    finally:
        ray.shutdown()


def sample(tmp_path: Path, copies: int = 1) -> Path:
    """The sample corpus as one JSONL file, ``copies`` times with distinct ids."""
    docs = [d for d in load_paths([SAMPLE]) if isinstance(d, Document)]
    out = tmp_path / "corpus.jsonl"
    with out.open("w", encoding="utf-8") as f:
        for c in range(copies):
            for d in docs:
                record = {"id": f"{d.id}-{c}", "title": d.title, "text": d.text, "metadata": dict(d.metadata)}
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
    return out


def ray_engine(
    embedder: SentenceTransformerEmbedder,
    chunker: Chunker,
    analyzer: Analyzer,
    tiers: Mapping[TierName, StoreTier],
    servers: Mapping[TierName, Callable[[], StoreTier]] | None = None,
    **options: Any,
) -> RayPipeline:
    """The Ray engine on the module's local Ray (two CPUs), the model on the CPU in each actor."""
    return RayPipeline(
        embedder=embedder,
        make_embedder=functools.partial(SentenceTransformerEmbedder, device="cpu"),
        chunker=chunker,
        analyzer=analyzer,
        tiers=tiers,
        options=RayOptions(num_cpus=2, **options),
        servers=servers,
    )


def test_units_read_every_line_once(tmp_path: Path) -> None:
    corpus = sample(tmp_path, copies=3)
    whole = [d.id for d in load_paths([corpus]) if isinstance(d, Document)]
    units = plan_units([corpus], LoadOptions(), unit_bytes=1500)
    assert len(units) > 10  # byte ranges that start and end mid-line
    pieces = [d.id for u in units for d in read_unit(u, LoadOptions()) if isinstance(d, Document)]
    assert pieces == whole


@pytest.mark.parametrize(("tail", "parts"), [(4000, 4), (10**9, 3), (1, 2), (4000, 1)])
def test_tapered_units_read_the_same_lines_in_the_same_order(tmp_path: Path, tail: int, parts: int) -> None:
    corpus = sample(tmp_path, copies=3)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.md").write_text("# A\n\nA note.")  # a group of files: left whole
    units = plan_units([tmp_path / "notes", corpus], LoadOptions(), unit_bytes=1500)
    cut = taper(units, tail, parts)
    ranges = [u for u in units if u.path]
    cut_ranges = [u for u in cut if u.path]
    if parts > 1:  # the last range (the input's last bytes) cut; none of its pieces over 1/parts
        last = ranges[-1]
        pieces = [u for u in cut_ranges if last.start <= u.start < last.end]
        assert len(pieces) > 1
        assert max(u.end - u.start for u in pieces) <= -(-(last.end - last.start) // parts)
        assert len(cut_ranges) > len(ranges)
    else:
        assert cut == units
    assert cut[-1] == units[-1] and cut[-1].files  # the group of files stays last, whole
    assert [(u.start, u.end) for u in cut_ranges] == sorted((u.start, u.end) for u in cut_ranges)
    assert all(a.end == b.start for a, b in itertools.pairwise(cut_ranges))  # no byte lost
    ids = [
        [d.id for u in us for d in read_unit(u, LoadOptions()) if isinstance(d, Document)]
        for us in (units, cut)
    ]
    assert ids[1] == ids[0]


@pytest.mark.parametrize(("max_tokens", "overlap"), [(240, 0), (40, 8), (12, 0)])
def test_chunks_and_model_input_are_those_of_the_tokenizer_itself(
    embedder: SentenceTransformerEmbedder, max_tokens: int, overlap: int
) -> None:
    tokenizers = embedder.tokenizers()
    docs = [with_structure(d) for d in load_paths([SAMPLE]) if isinstance(d, Document)]
    docs.append(
        Document(
            "zh",
            "第一条 为了惩罚犯罪，保护人民。第二条 本法的任务是用刑罚同一切犯罪行为作斗争。",
            title="刑法",
        )
    )
    assert tokenizers.words is not None  # ids memoised by word (indexers.embed.wordpiece)
    chunker = Chunker(tokenizers.count, max_tokens=max_tokens, overlap_tokens=overlap)
    chunks = [c for cs in chunk_documents(chunker, [(d, "h") for d in docs]) for c in cs]
    plain = Chunker(
        functools.partial(count_tokens, tokenizers.counter), max_tokens=max_tokens, overlap_tokens=overlap
    )
    assert chunks == [c for cs in chunk_documents(plain, [(d, "h") for d in docs]) for c in cs]
    texts = [tokenizers.passage_prefix + c.embed_text for c in chunks]
    expected = tokenizers.tokenizer(texts, truncation=True, max_length=tokenizers.max_len)["input_ids"]
    assert tokenizers.passages([c.embed_text for c in chunks]) == expected


def test_adopting_a_segment_is_an_upsert(tmp_path: Path, embedder: SentenceTransformerEmbedder) -> None:
    analyzer = Analyzer()
    cold = LocalCold(tmp_path / "cold", dim=embedder.dim, analyzer=analyzer)
    chunker = Chunker(embedder.count_tokens, max_tokens=60, overlap_tokens=0)
    docs = [d for d in load_paths([SAMPLE]) if isinstance(d, Document)][:5]
    chunks = [c for d in docs for c in chunker.chunk(d)]
    items = [
        EmbeddedChunk(c, v)
        for c, v in zip(chunks, embedder.embed([c.embed_text for c in chunks]), strict=True)
    ]
    for round_ in range(2):  # the second adoption replaces the rows of the first, in place
        segment = tmp_path / f"s{round_}.segment"
        write_segment(segment, items, analyzer)
        assert cold.adopt([segment]) == len(items)
    assert cold.count(None) == len(items)
    query = SearchQuery(
        text="freedom",
        terms=analyzer.terms("freedom"),
        vector=embedder.embed(["freedom"])[0],
        filters=Filters(tenant="default"),
        k=3,
        legs=("lexical", "dense"),
    )
    found = cold.search(query)
    assert found["lexical"] and found["dense"]
    cold.close()


def test_segments_adopted_together_keep_their_order_and_keywords(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    """Up to ADOPT_GROUP segments in one transaction: each keeps its own rows' keywords, and a
    chunk in two of them ends as the later one has it; the derived indexes hold every row."""
    import dataclasses

    from indexers.tiers.cold_segment import ADOPT_GROUP

    analyzer = Analyzer()
    cold = LocalCold(tmp_path / "cold", dim=embedder.dim, analyzer=analyzer)
    docs = [d for d in load_paths([SAMPLE]) if isinstance(d, Document)][:6]
    chunks = [c for d in docs for c in Chunker(embedder.count_tokens, max_tokens=60).chunk(d)]
    vectors = embedder.embed([c.embed_text for c in chunks])
    items = [EmbeddedChunk(c, v) for c, v in zip(chunks, vectors, strict=True)]
    replaced = dataclasses.replace(items[0].chunk, text="Replaced in the last segment.")
    again = EmbeddedChunk(replaced, vectors[0])
    parts = [items[0::3], items[1::3], items[2::3], [again]]
    paths = []
    for i, part in enumerate(parts):
        paths.append(tmp_path / f"g{i}.segment")
        write_segment(paths[-1], part, analyzer)
    with pytest.raises(ValueError):
        cold.adopt(paths * ADOPT_GROUP)
    assert cold.adopt(paths) == len(items) + 1
    assert cold.count(None) == len(items)
    held = {c.chunk_id: c.text for c in cold.fetch("default", [d.id for d in docs])}
    assert held[items[0].chunk.chunk_id] == again.chunk.text
    assert all(held[i.chunk.chunk_id] == i.chunk.text for i in items[1:])
    db = sqlite3.connect(tmp_path / "cold" / "cold.sqlite")
    kws = db.execute("SELECT c.chunk_id, k.kw FROM chunk_kw k JOIN chunks c ON c.seq = k.seq").fetchall()
    assert sorted(kws) == sorted((i.chunk.chunk_id, kw) for i in items for kw in i.chunk.keywords())
    assert cold._lexical is not None and cold._lexical.index.searcher().num_docs == len(items)
    assert cold._vectors is not None and cold._vectors.index.ntotal == len(items)
    cold.close()


@pytest.mark.slow
async def test_ray_engine_stores_what_the_in_process_pipeline_stores(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, local_ray: None
) -> None:
    corpus = sample(tmp_path)
    analyzer = Analyzer()
    chunker = Chunker(embedder.count_tokens, max_tokens=60, overlap_tokens=8)
    here = LocalColdTier(tmp_path / "here", dim=embedder.dim, analyzer=analyzer)
    there = LocalColdTier(tmp_path / "there", dim=embedder.dim, analyzer=analyzer)
    pipeline = Pipeline(embedder=AsyncEmbedder(embedder), chunker=chunker, tiers={"cold": here})
    await pipeline.ingest(load_paths([corpus]), placement="cold", optimize=True)
    # several units, several segments
    ray_pipeline = ray_engine(embedder, chunker, analyzer, {"cold": there}, unit_mb=0.004)
    first = await ray_pipeline.ingest([corpus], placement="cold")
    assert first.count("created") == 33 and first.chunks_embedded == first.chunks_written > 33

    a = sqlite3.connect(tmp_path / "here" / "cold.sqlite").execute(ROWS + " ORDER BY chunk_id").fetchall()
    b = sqlite3.connect(tmp_path / "there" / "cold.sqlite").execute(ROWS + " ORDER BY chunk_id").fetchall()
    assert [r[:9] for r in a] == [r[:9] for r in b]  # ids, texts, metadata, hashes, terms
    va = np.stack([np.frombuffer(r[9], dtype=np.float32) for r in a])
    vb = np.stack([np.frombuffer(r[9], dtype=np.float32) for r in b])
    assert np.abs(va - vb).max() < 1e-5

    again = await ray_pipeline.ingest([corpus], placement="cold")
    assert again.count("unchanged") == 33 and again.chunks_embedded == 0 and again.chunks_written == 0

    # one document shrinks to one sentence: its other chunks go, nothing else is embedded
    lines = corpus.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[0])
    record["text"] = record["text"].split(".")[0] + "."
    corpus.write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n", encoding="utf-8")
    third = await ray_pipeline.ingest([corpus], placement="cold", collect=True)
    assert third.count("updated") == 1 and third.count("unchanged") == 32 and third.chunks_embedded == 1
    held = await there.fetch("default", [record["id"]])
    assert [c.chunk_id for c in held] == [f"{record['id']}#0"]
    stored = there.local.count(None)  # the derived indexes hold exactly the rows
    assert there.local._vectors is not None and there.local._vectors.index.ntotal == stored
    assert there.local._lexical is not None and there.local._lexical.index.searcher().num_docs == stored
    await here.close()
    await there.close()


def versions(doc_id: str, *texts: str) -> list[str]:
    return [json.dumps({"id": doc_id, "title": "Clause", "text": t}) for t in texts]


@pytest.mark.slow
async def test_an_id_repeated_in_one_run(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, local_ray: None
) -> None:
    """Copies of one id in different units: the last copy is what stays, with no stale chunk,
    also when it equals what was stored before the run (so a worker found it unchanged), and
    into an empty tier (which the workers do not read: the owner compares the later copies)."""
    analyzer = Analyzer()
    tier = LocalColdTier(tmp_path / "cold", dim=embedder.dim, analyzer=analyzer)
    short = Chunker(embedder.count_tokens, max_tokens=12, overlap_tokens=0)
    pipeline = ray_engine(embedder, short, analyzer, {"cold": tier}, unit_mb=0.0001)  # one line a unit
    one = "Goods travel at the carrier's risk. The carrier is liable for loss."
    two = "Goods travel at the shipper's risk. The shipper insures them. Claims close after a year."
    three = "Goods travel at the buyer's risk."
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("\n".join(versions("a", two, two, one)) + "\n")
    report = await pipeline.ingest([corpus], placement="cold", collect=True)
    assert sorted(r.status for r in report.results) == ["created", "unchanged", "updated"]
    assert "".join(c.text for c in await tier.fetch("default", ["a"])) == one

    corpus.write_text("\n".join(versions("a", two, three)) + "\n")
    report = await pipeline.ingest([corpus], placement="cold", collect=True)
    assert [r.status for r in report.results] == ["updated", "updated"]
    assert [c.text for c in await tier.fetch("default", ["a"])] == [three]

    # `three` is stored and comes last again. A worker may compare it before `two` is written
    # (and find it unchanged): the owner then compares it again after the run. Either way the
    # last copy is what stays, every run, with no stale chunk of `two`.
    for _ in range(2):
        report = await pipeline.ingest([corpus], placement="cold", collect=True)
        assert len(report.results) == 2 and report.count("failed") == 0
        assert [c.text for c in await tier.fetch("default", ["a"])] == [three]

    # Stored [a0, b0]; then copies [a1, b0] and [a0, b2]. The second copy's worker compared it
    # with [a0, b0] (the first copy's segment not adopted yet) and so embedded b2 alone: written
    # as it was, the tier would hold [a1, b2]. The last copy, [a0, b2], is what must stay.
    a0, b0 = "Goods travel at the carrier's risk.", "The carrier is liable for loss."
    a1, b2 = "Goods travel at the seller's risk.", "The seller insures them for a year."
    corpus.write_text("\n".join(versions("a", f"{a0} {b0}")) + "\n")
    await pipeline.ingest([corpus], placement="cold")
    corpus.write_text("\n".join(versions("a", f"{a1} {b0}", f"{a0} {b2}")) + "\n")
    for _ in range(2):
        report = await pipeline.ingest([corpus], placement="cold", collect=True)
        assert len(report.results) == 2 and report.count("failed") == 0
        assert [c.text.strip() for c in await tier.fetch("default", ["a"])] == [a0, b2]
    await tier.close()


async def test_ray_engine_reports_each_id_read_twice(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, local_ray: None
) -> None:
    """Ray cannot refuse a later copy (its worker writes before the owner sees it), so each
    repeat is a line of the report, with where the later copy was read: across units (two
    files) and within one unit (a file's own repeat). An id that is its text's hash repeats
    only with the same text: not reported, as in process."""
    analyzer = Analyzer()
    tier = LocalColdTier(tmp_path / "cold", dim=embedder.dim, analyzer=analyzer)
    chunker = Chunker(embedder.count_tokens, max_tokens=60, overlap_tokens=8)
    pipeline = ray_engine(embedder, chunker, analyzer, {"cold": tier})
    (tmp_path / "in").mkdir()
    first, second = tmp_path / "in" / "a.jsonl", tmp_path / "in" / "b.jsonl"
    first.write_text("\n".join(versions("x", "The carrier bears the risk.")) + "\n")
    same = json.dumps({"title": "Clause", "text": "Claims close after a year."})  # no id: its hash
    lines = [*versions("x", "The shipper bears the risk."), same, *versions("y", "One.", "Two."), same]
    second.write_text("\n".join(lines) + "\n")
    report = await pipeline.ingest([tmp_path / "in"], placement="cold")
    at_y = len("\n".join(lines[:3])) + 1  # the byte where y's second copy starts
    said = "read twice in this ingest: the last copy is stored (--engine ray does not refuse repeats)"
    assert report.repeated == 2 and report.count("failed") == 0
    repeats = [(f"{second}@0", f"id 'x' {said}"), (f"{second}@{at_y}", f"id 'y' {said}")]
    assert sorted(report.repeats) == repeats
    stored = [c.text for c in await tier.fetch("default", ["x", "y"])]
    assert stored == ["The shipper bears the risk.", "Two."]
    await tier.close()


@pytest.mark.slow
async def test_ray_engine_into_the_hot_tier_reruns_embed_nothing(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, local_ray: None
) -> None:
    """Qdrant Edge cannot be opened by a worker: the owner hands the workers a copy of its hashes,
    so an unchanged hot document is skipped before embedding, as the in-process engine skips it."""
    from indexers.tiers.qdrant_edge import QdrantEdgeTier

    corpus = sample(tmp_path)
    analyzer = Analyzer()
    chunker = Chunker(embedder.count_tokens, max_tokens=60, overlap_tokens=8)
    tiers = {
        "hot": QdrantEdgeTier(tmp_path / "hot", dim=embedder.dim, analyzer=analyzer),
        "cold": LocalColdTier(tmp_path / "cold", dim=embedder.dim, analyzer=analyzer),
    }
    for tier in tiers.values():
        await tier.ensure()
    ray_pipeline = ray_engine(embedder, chunker, analyzer, tiers)  # type: ignore[arg-type]
    first = await ray_pipeline.ingest([corpus], placement="hot")
    assert first.count("created") == 33 and first.chunks_embedded > 33
    again = await ray_pipeline.ingest([corpus], placement="hot")
    assert again.count("unchanged") == 33 and again.chunks_embedded == 0 and again.chunks_written == 0
    in_process = Pipeline(embedder=AsyncEmbedder(embedder), chunker=chunker, tiers=tiers)  # type: ignore[arg-type]
    same = await in_process.ingest(load_paths([corpus]), placement="hot")
    assert same.count("unchanged") == 33 and same.chunks_embedded == 0
    moved = await ray_pipeline.ingest([corpus], placement="cold")  # every document changes tier
    assert moved.count("updated") == 33 and await tiers["hot"].count() == 0
    assert await tiers["cold"].count() == first.chunks_written
    for tier in tiers.values():
        await tier.close()


class _Model:
    def embed_ids(self, ids: list[np.ndarray]) -> np.ndarray:
        return np.asarray([[float(len(i)), float(i[0])] for i in ids], dtype=np.float32)


def test_an_actor_loads_the_model_only_when_asked_or_when_there_is_something_to_embed() -> None:
    from indexers.ingest.ray.engine import EmbedActor

    loads: list[int] = []

    def make() -> _Model:
        loads.append(1)
        return _Model()

    empty = {"ids": [np.zeros(0, np.int32)], "lengths": [np.zeros(0, np.int32)], "meta": [b"m"]}
    lazy = EmbedActor(make)  # type: ignore[arg-type]
    out = lazy(empty)
    assert loads == [] and out["vectors"][0].shape[0] == 0 and out["meta"][0] == b"m"
    rows = {
        "ids": [np.asarray([7, 8, 9, 5], np.int32)],
        "lengths": [np.asarray([3, 1], np.int32)],
        "meta": [b"m"],
    }
    assert lazy(rows)["vectors"][0].tolist() == [[3.0, 7.0], [1.0, 5.0]] and loads == [1]
    eager = EmbedActor(make, preload=True)  # type: ignore[arg-type]
    assert eager(rows)["vectors"][0].tolist() == [[3.0, 7.0], [1.0, 5.0]] and loads == [1, 1]


def test_a_document_result_travels_whole() -> None:
    import pickle

    from indexers.ingest.results import DocResult

    for result in (DocResult("a", "created"), DocResult("b/c", "failed", 0, "cold", "no text", "acme")):
        assert pickle.loads(pickle.dumps(result, protocol=5)) == result


@pytest.mark.slow
async def test_workers_write_a_server_tier_themselves(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, local_ray: None
) -> None:
    """Into Elasticsearch (an HTTP fake that keeps what it is sent): the workers compare and write
    through their own clients (the owner writes nothing there), retry a 429, store what the
    in-process pipeline stores, embed nothing on a re-run, and the last copy of an id met in two
    units is what stays although the workers' writes land in any order."""
    from indexers.tiers.elastic import ElasticTier
    from rag_router.settings import Settings
    from rag_router.stores import cold_tier
    from tests.fakes.elastic import FakeElastic
    from tests.fakes.vllm import serve

    corpus = sample(tmp_path)
    analyzer = Analyzer()
    chunker = Chunker(embedder.count_tokens, max_tokens=60, overlap_tokens=8)
    fake = FakeElastic(stateful=True)
    with serve(fake.app) as url:
        settings = {
            index: Settings(data_dir=tmp_path / index, elastic={"url": url, "index": index})
            for index in ("rag-here", "rag-there")
        }
        here, there = (cold_tier(settings[i], embedder.dim, analyzer) for i in ("rag-here", "rag-there"))
        assert isinstance(here, ElasticTier) and isinstance(there, ElasticTier)
        for tier in (here, there):
            await tier.ensure()
        pipeline = Pipeline(embedder=AsyncEmbedder(embedder), chunker=chunker, tiers={"cold": here})
        await pipeline.ingest(load_paths([corpus]), placement="cold")

        owner_writes: list[int] = []
        owner_upsert = there.upsert

        async def counted(chunks: Sequence[EmbeddedChunk]) -> None:
            owner_writes.append(len(chunks))
            await owner_upsert(chunks)

        there.upsert = counted  # type: ignore[method-assign]
        servers: dict[TierName, Callable[[], StoreTier]] = {
            "cold": functools.partial(cold_tier, settings["rag-there"], embedder.dim, analyzer)
        }
        ray_pipeline = ray_engine(
            embedder, chunker, analyzer, {"cold": there}, servers, unit_mb=0.004, write_concurrency=2
        )
        fake.bulk_script = [[429] * 5]  # the first bulk request: its first five items refused
        first = await ray_pipeline.ingest([corpus], placement="cold")
        assert first.count("created") == 33 and first.chunks_embedded == first.chunks_written > 33
        assert owner_writes == [] and fake.bulk_script == []
        assert any(r.path == "/_bulk" and r.body[0]["index"]["_index"] == "rag-there" for r in fake.requests)
        a, b = fake.docs["rag-here"], fake.docs["rag-there"]
        assert sorted(a) == sorted(b) and len(b) == first.chunks_written
        for key, doc in a.items():
            assert {k: v for k, v in doc.items() if k != "vector"} == {
                k: v for k, v in b[key].items() if k != "vector"
            }
            assert np.abs(np.asarray(doc["vector"]) - np.asarray(b[key]["vector"])).max() < 1e-5

        again = await ray_pipeline.ingest([corpus], placement="cold")
        assert again.count("unchanged") == 33 and again.chunks_embedded == 0 and again.chunks_written == 0

        # one id in three units (one line a unit), its last copy shorter than the others
        one = "Goods travel at the carrier's risk. The carrier is liable for loss. Claims close after a year."
        two = "Goods travel at the shipper's risk. The shipper insures them. Claims close after a month."
        three = "Goods travel at the buyer's risk."
        lines = tmp_path / "repeated.jsonl"
        lines.write_text("\n".join(versions("a", one, two, three)) + "\n")
        short = Chunker(embedder.count_tokens, max_tokens=12, overlap_tokens=0)
        small = ray_engine(
            embedder, short, analyzer, {"cold": there}, servers, unit_mb=0.0001, write_concurrency=3
        )
        for _ in range(2):
            report = await small.ingest([lines], placement="cold", collect=True)
            assert len(report.results) == 3 and report.count("failed") == 0
            assert [c.text for c in await there.fetch("default", ["a"])] == [three]
        for tier in (here, there):
            await tier.close()


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("server", ["qdrant", "elastic"])
async def test_workers_write_a_real_server(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, local_ray: None, server: str
) -> None:
    """The same against a real server (``RAG_TEST_QDRANT_URL`` / ``RAG_TEST_ELASTIC_URL``)."""
    import os

    from rag_router.settings import Settings
    from rag_router.stores import cold_tier, hot_tier

    url = os.environ.get(f"RAG_TEST_{server.upper()}_URL")
    if not url:
        pytest.skip(f"RAG_TEST_{server.upper()}_URL is not set: no server to test against")
    name = f"rag-ray-test-{os.getpid()}"
    placement: TierName = "hot" if server == "qdrant" else "cold"
    part, key, open_ = (
        ("qdrant", "collection", hot_tier) if server == "qdrant" else ("elastic", "index", cold_tier)
    )
    api_key = os.environ.get(f"RAG_TEST_{server.upper()}_API_KEY")
    secrets = {"api_key": api_key} if api_key else {}
    settings = Settings(data_dir=tmp_path, **{part: {"url": url, key: name, **secrets}})  # type: ignore[arg-type]
    analyzer = Analyzer()
    tier = open_(settings, embedder.dim, analyzer)
    await tier.ensure()
    chunker = Chunker(embedder.count_tokens, max_tokens=60, overlap_tokens=8)
    servers: dict[TierName, Callable[[], StoreTier]] = {
        placement: functools.partial(open_, settings, embedder.dim, analyzer)
    }
    pipeline = ray_engine(embedder, chunker, analyzer, {placement: tier}, servers, unit_mb=0.004)
    try:
        first = await pipeline.ingest([sample(tmp_path)], placement=placement)
        assert first.count("created") == 33 and await tier.count() == first.chunks_written > 33
        again = await pipeline.ingest([sample(tmp_path)], placement=placement)
        assert again.count("unchanged") == 33 and again.chunks_embedded == 0
    finally:
        for doc in {d.id for d in load_paths([SAMPLE]) if isinstance(d, Document)}:
            await tier.delete("default", [c.chunk_id for c in await tier.fetch("default", [f"{doc}-0"])])
        await tier.close()


async def test_documents_whose_segment_was_not_adopted_are_never_acknowledged(tmp_path: Path) -> None:
    """The owner adopts segments in groups, after their rows' results came in. When an adoption
    fails (a full disk, say), the results of the rows in that group are dropped: what the run's
    last commit acknowledges (``RayPipeline.ingest`` commits in ``finally``) is exactly what the
    tier holds."""
    from indexers.ingest.ray.owner import Writer
    from indexers.ingest.results import IngestReport
    from indexers.tiers.cold_segment import ADOPT_GROUP

    analyzer = Analyzer()
    tier = LocalColdTier(tmp_path / "cold", dim=4, analyzer=analyzer)
    await tier.ensure()
    tier.local.bulk_begin()
    acknowledged: list[str] = []
    writer = Writer(
        {"cold": tier},
        IngestReport(),
        commit_chunks=10**9,
        on_batch=lambda results, report: acknowledged.extend(r.id for r in results),
        collect=False,
        read_by_workers=["cold"],
    )
    adopt, calls = tier.local.adopt, []

    def full_disk_on_the_second_group(segments: Sequence[Path]) -> int:
        calls.append(len(segments))
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return adopt(segments)

    tier.local.adopt = full_disk_on_the_second_group  # type: ignore[method-assign]
    rows = 2 * ADOPT_GROUP
    with pytest.raises(OSError):
        for i in range(rows):
            await writer.write(_one_chunk_row(tmp_path, i, analyzer))
    await writer.finish()  # what the pipeline's ``finally`` does
    assert calls == [ADOPT_GROUP, ADOPT_GROUP]
    first_group = [f"d{i}" for i in range(ADOPT_GROUP)]
    assert acknowledged == first_group
    assert sorted({c.doc_id for c in await tier.fetch("default", [f"d{i}" for i in range(rows)])}) == sorted(
        first_group
    )
    await tier.close()


def _one_chunk_row(folder: Path, i: int, analyzer: Analyzer) -> dict[str, list[Any]]:
    """A batch of one row as the build stage hands it to the owner: document d<i>, one chunk
    in a segment of its own."""
    import pickle

    from indexers.ingest.results import DocResult

    chunk = Chunk(f"d{i}#0", f"d{i}", 0, f"Clause {i} of the contract.", None, {})
    segment = folder / f"{i}.segment"
    write_segment(segment, [EmbeddedChunk(chunk, np.full(4, 0.5, np.float32))], analyzer)
    meta = {
        "results": [DocResult(f"d{i}", "created", 1, "cold", tenant="default")],
        "stale": [],
        "check": [("default", f"d{i}", "cold", [(chunk.chunk_id, chunk.content_hash)])],
        "sources": [f"corpus.jsonl@{i}"],
        "repeats": [],
        "unit": f"unit-{i}",
    }
    row: dict[str, Any] = {"meta": pickle.dumps(meta), "hot": pickle.dumps([]), "segment": str(segment)}
    row |= {"segment_rows": 1, "served_rows": 0, "arrived_at": 0.0, "actor_at": 0.0, "torch_at": 0.0}
    row |= {"model_at": 0.0}
    row |= {f"{stage}_{k}": 0.0 for stage in ("prepare", "embed", "build") for k in ("s", "at")}
    return {k: [v] for k, v in row.items()}


async def test_documents_of_a_failed_tantivy_commit_are_never_acknowledged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Commits run behind tantivy's feed while the owner goes on: when feeding fails, the commit
    after it fails, and neither its documents nor any later ones are acknowledged."""
    from indexers.ingest.ray.owner import Writer
    from indexers.ingest.results import IngestReport

    analyzer = Analyzer()
    tier = LocalColdTier(tmp_path / "cold", dim=4, analyzer=analyzer)
    await tier.ensure()
    tier.local.bulk_begin(threads=1)
    acknowledged: list[str] = []
    writer = Writer(
        {"cold": tier},
        IngestReport(),
        commit_chunks=1,  # a commit after every row
        on_batch=lambda results, report: acknowledged.extend(r.id for r in results),
        collect=False,
        read_by_workers=["cold"],
    )
    await writer.write(_one_chunk_row(tmp_path, 0, analyzer))
    await asyncio.to_thread(tier.local.bulk_commit)  # row 0 fed and committed before the disk fills
    lexical = tier.local._parts()[1]

    def full_disk(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(lexical, "add", full_disk)
    with pytest.raises(RuntimeError, match="not committed"):  # at the next write, or at the end
        try:
            for i in (1, 2):
                await writer.write(_one_chunk_row(tmp_path, i, analyzer))
        finally:
            await writer.finish()  # what the pipeline's ``finally`` does
    assert acknowledged == ["d0"]
    monkeypatch.undo()  # the disk has room again
    with pytest.raises(RuntimeError):
        tier.local.bulk_end()  # leaves bulk mode; tantivy catches up from SQLite
    held = tier.local.count(None)  # row 2 is written or not: the failure shows at its write or after
    assert held in (2, 3) and lexical.index.searcher().num_docs == held  # tantivy caught up with SQLite
    await tier.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice values are Linux's")
def test_cpu_tasks_step_back_once_per_thread_and_leave_other_threads_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Prepare and build tasks run below the embedding actors and the owner (who must not wait
    for them), by ``BACKGROUND_NICE`` exactly: a worker runs many tasks, and lowering again on
    each would sink it to the floor."""
    monkeypatch.setattr(engine, "_in_actor", False)  # an actor made by an earlier test set it
    seen: list[int] = []

    def task() -> None:
        tid = threading.get_native_id()
        before = os.getpriority(os.PRIO_PROCESS, tid)
        for _ in range(3):  # three tasks on one worker thread
            step_back()
        seen.extend([before, os.getpriority(os.PRIO_PROCESS, tid)])

    here = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    worker = threading.Thread(target=task)
    worker.start()
    worker.join()
    assert seen[1] == min(19, seen[0] + BACKGROUND_NICE)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == here


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice values are Linux's")
def test_an_embedding_actors_thread_never_steps_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """On CPUs Ray runs prepare inside the embedding actor: the model, not prepare, is the work."""
    monkeypatch.setattr(engine, "_in_actor", False)
    seen: list[int] = []

    def actor() -> None:
        engine.EmbedActor(lambda: None, threads=1)  # type: ignore[arg-type, return-value]
        tid = threading.get_native_id()
        before = os.getpriority(os.PRIO_PROCESS, tid)
        step_back()
        seen.extend([before, os.getpriority(os.PRIO_PROCESS, tid)])

    worker = threading.Thread(target=actor)
    worker.start()
    worker.join()
    assert seen and seen[0] == seen[1]


def _prefixed_minilm() -> SentenceTransformerEmbedder:
    """The stand-in second model of a split (MiniLM with e5's passage prefix: other vectors)."""
    model = SentenceTransformerEmbedder(device="cpu")
    model.set_prefixes(passage="passage: ")
    return model


@pytest.mark.slow
async def test_ray_engine_embeds_each_language_with_its_model_as_in_process(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, local_ray: None
) -> None:
    """A split embedder on Ray: the prepare workers tokenize the Chinese chunks for the second
    model and the actors send them to it; what is stored is what the in-process pipeline stores."""
    from indexers.embed.split import Lazy, SplitEmbedder

    name = "all-MiniLM-L6-v2 (query: '', passage: 'passage: ')"
    split = SplitEmbedder(embedder, Lazy(_prefixed_minilm, name))
    corpus = tmp_path / "mixed.jsonl"
    docs = [
        {
            "id": "en",
            "title": "Harbour",
            "text": "The tide tables for the harbour are published every spring. " * 6,
        },
        {
            "id": "zh",
            "title": "刑法 第二百六十四条",
            "text": "盗窃公私财物，数额较大的，处三年以下有期徒刑。" * 6,
        },
    ]
    corpus.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")
    analyzer = Analyzer()
    chunker = Chunker(split.count_tokens, max_tokens=40, overlap_tokens=0)
    here = LocalColdTier(tmp_path / "here", dim=split.dim, analyzer=analyzer)
    there = LocalColdTier(tmp_path / "there", dim=split.dim, analyzer=analyzer)
    pipeline = Pipeline(embedder=AsyncEmbedder(split), chunker=chunker, tiers={"cold": here})
    await pipeline.ingest(load_paths([corpus]), placement="cold", optimize=True)
    ray_pipeline = RayPipeline(
        embedder=split,
        make_embedder=lambda: split,  # not used: the split offers its own loader (passes_loader)
        chunker=chunker,
        analyzer=analyzer,
        tiers={"cold": there},
        options=RayOptions(num_cpus=2),
    )
    report = await ray_pipeline.ingest([corpus], placement="cold")
    assert report.count("created") == 2 and report.chunks_embedded > 2

    a = sqlite3.connect(tmp_path / "here" / "cold.sqlite").execute(ROWS + " ORDER BY chunk_id").fetchall()
    b = sqlite3.connect(tmp_path / "there" / "cold.sqlite").execute(ROWS + " ORDER BY chunk_id").fetchall()
    assert [r[:9] for r in a] == [r[:9] for r in b]
    va = np.stack([np.frombuffer(r[9], dtype=np.float32) for r in a])
    vb = np.stack([np.frombuffer(r[9], dtype=np.float32) for r in b])
    assert np.abs(va - vb).max() < 1e-5
    chinese = [i for i, r in enumerate(b) if r[2] == "zh"]
    second = _prefixed_minilm().embed([f"{b[i][5]}\n{b[i][4]}" for i in chinese])
    assert np.abs(vb[chinese] - second).max() < 1e-5  # the second model's vectors, not MiniLM's own
    kw = sqlite3.connect(tmp_path / "there" / "cold.sqlite").execute(
        "SELECT DISTINCT c.doc_id, k.kw FROM chunk_kw k JOIN chunks c USING (seq) "
        "WHERE k.kw LIKE 'text_lang=%'"
    )
    assert sorted(kw.fetchall()) == [("en", "text_lang=en"), ("zh", "text_lang=zh")]
    await here.close()
    await there.close()
