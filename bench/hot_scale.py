"""The hot tier (embedded Qdrant Edge) at 1M chunks: issue 43's figures for it, on the machine at hand.

    python bench/hot_scale.py --pool POOL.json.gz --scifact ../shared/data/scifact \
        --chunks 1000000 --work /tmp/hot-scale --out bench/results/hot-scale-2core-1m.json

The steps, each one's figures saved as they come (a run cut short keeps them):

1. SciFact's corpus posted to the hot tier of an empty store through ``rag-router serve``; its
   test queries one at a time (nDCG@10 alone, the figure the big store is held to).
2. With the server stopped, ``--chunks`` documents written into that hot tier through its own
   class, in batches as a bulk load's owner writes them (the background sealing and merging of
   shards as the service does them; the rate and the time until they settle are measured).
   The texts are the pool's sentences recombined as ``bench/scale_corpus.py`` does. The vectors
   are *composed*: each sentence of the pool is embedded once by the service's embedder, and a
   document's vector is the normalised sum of its sentences' vectors. Embedding 1M chunks on a
   2-core machine takes hours; the composition keeps the texts' topics and their clustering. How
   close it is to the model's vector of the whole text is measured on a sample and reported
   (``composed_vs_embedded``).
3. The hot tier's HNSW against exact search over the same points (SciFact's queries, the dense
   leg alone, recall@10), in-process.
4. ``serve`` on the store: ready time, RSS, SciFact one client (nDCG@10 inside the store) and
   ``--clients`` clients, pages of ``GET /v1/documents``, freshness during a bulk load, then a
   delete by filter of 1 % of the documents (all hot), then ``POST /v1/retier`` of everything
   hot → cold (every generated document is dated 1990-2019, past any hot window), stop time,
   disk.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import machine, percentiles
from bench.scale_measure import (
    _disk,
    _many_clients,
    _ndcg,
    _one_client,
    _queries,
    _rss_mb,
    _serve,
    stop_serve,
)
from bench.scale_measure import _through_server as through_server
from indexers.embed.embedder import query_function
from indexers.records import Chunk, EmbeddedChunk
from indexers.text.lexical import Analyzer
from indexers.tiers.query import Filters, SearchQuery
from rag_router.embedders import build_embedder
from rag_router.settings import get_settings
from rag_router.stores import hot_tier

BATCH = 5_000  # documents a write: a bulk load's owner writes pages of this order
SAMPLE = 2_000  # composed vectors checked against the model's vector of the whole text
EF_CURVE = (64, 128, 256, 512, 1024)  # HNSW search breadths measured against exact search


def _save(result: dict[str, Any], out: Path) -> None:
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    tmp.replace(out)


async def _post_scifact(url: str, scifact: Path) -> dict[str, Any]:
    opener = gzip.open if (scifact / "corpus.jsonl.gz").exists() else open
    path = scifact / ("corpus.jsonl.gz" if (scifact / "corpus.jsonl.gz").exists() else "corpus.jsonl")
    with opener(path, "rt", encoding="utf-8") as f:
        docs = [json.loads(line) for line in f if line.strip()]
    began = time.perf_counter()
    async with httpx.AsyncClient(base_url=url, timeout=3600) as client:
        for at in range(0, len(docs), 256):
            batch = [
                {"id": str(d["_id"]), "title": d.get("title") or None, "text": d["text"]}
                for d in docs[at : at + 256]
            ]
            r = await client.post("/v1/documents", json={"documents": batch, "tier": "hot"})
            r.raise_for_status()
    return {"documents": len(docs), "seconds": round(time.perf_counter() - began, 1)}


def _alone(data: Path, args: argparse.Namespace, log: Path) -> dict[str, Any]:
    proc, url, ready = _serve(data, log)
    try:
        out: dict[str, Any] = {"serve_ready_s": round(ready, 2)}
        out["ingest"] = asyncio.run(_post_scifact(url, args.scifact))
        queries, qrels = _queries(args.scifact)

        async def one() -> dict[str, Any]:
            async with httpx.AsyncClient(base_url=url, timeout=600) as client:
                return await _one_client(client, queries)

        result = asyncio.run(one())
        out["ndcg@10_scifact"] = _ndcg(result.pop("run"), qrels)
        out["one_client"] = result
        return out
    finally:
        proc.terminate()
        proc.wait(600)


def _sentence_vectors(sentences: list[str], work: Path, embed: Any) -> np.ndarray[Any, Any]:
    cache = work / "sentences.npy"
    if cache.exists():
        loaded: np.ndarray[Any, Any] = np.load(cache)
        return loaded
    vectors = np.concatenate(
        [
            np.asarray(embed(sentences[at : at + 512]), dtype=np.float32)
            for at in range(0, len(sentences), 512)
        ]
    )
    np.save(cache, vectors)
    return vectors


def _documents(
    rng: np.random.Generator, start: int, n: int, sentences: list[str], vectors: np.ndarray[Any, Any]
) -> tuple[list[Chunk], np.ndarray[Any, Any]]:
    picks, sizes = rng.integers(0, len(sentences), size=(n, 6)), rng.integers(2, 7, size=n)
    years, days = rng.integers(1990, 2020, size=n), rng.integers(1, 29, size=n)
    chunks, composed = [], np.zeros((n, vectors.shape[1]), dtype=np.float32)
    for i in range(n):
        chosen = picks[i, : sizes[i]]
        composed[i] = vectors[chosen].sum(axis=0)
        doc = f"x{start + i:09d}"
        metadata = {
            "date": f"{years[i]}-{1 + i % 12:02d}-{days[i]:02d}",
            "batch": f"b{(start + i) % 100:02d}",
        }
        chunks.append(Chunk(f"{doc}#0", doc, 0, " ".join(sentences[j] for j in chosen), None, metadata))
    composed /= np.maximum(np.linalg.norm(composed, axis=1, keepdims=True), 1e-12)
    return chunks, composed


async def _fill(data: Path, args: argparse.Namespace, out: dict[str, Any], saved: Any) -> None:
    settings = get_settings(data_dir=data)
    embedder = build_embedder(settings)
    with gzip.open(args.pool, "rt", encoding="utf-8") as f:
        sentences = json.load(f)["sentences"]
    began = time.perf_counter()
    vectors = _sentence_vectors(sentences, args.work, embedder.embed)
    out["sentence_vectors"] = {"sentences": len(sentences), "seconds": round(time.perf_counter() - began, 1)}
    rng = np.random.default_rng(1)
    sample, composed = _documents(np.random.default_rng(2), 0, SAMPLE, sentences, vectors)
    model = np.asarray(embedder.embed([c.embed_text for c in sample]), dtype=np.float32)
    cosines = (model * composed).sum(axis=1)
    out["composed_vs_embedded"] = {
        "documents": SAMPLE,
        "cosine": {
            q: round(float(np.quantile(cosines, p)), 4) for q, p in (("p10", 0.1), ("p50", 0.5), ("p90", 0.9))
        },
    }
    saved()
    tier = hot_tier(settings, embedder.dim, Analyzer())
    await tier.ensure()
    writes: list[float] = []
    began = time.perf_counter()
    for start in range(0, args.chunks, BATCH):
        chunks, composed = _documents(rng, start, min(BATCH, args.chunks - start), sentences, vectors)
        items = [EmbeddedChunk(c, v) for c, v in zip(chunks, composed, strict=True)]
        written = time.perf_counter()
        await tier.upsert(items)
        writes.append((time.perf_counter() - written) * 1000)
        if start % 100_000 == 0:
            print(
                f"hot fill: {start + len(items):,} chunks in {time.perf_counter() - began:.0f} s", flush=True
            )
    upserted = time.perf_counter() - began
    await tier.optimize()  # as a bulk load ends (rag-router ingest): every shard merged into one
    optimized = time.perf_counter() - began
    await tier.close()
    out["fill"] = {
        "chunks": args.chunks,
        "upserts_s": round(upserted, 1),
        "chunks_per_s": round(args.chunks / upserted, 1),
        "optimized_s": round(optimized, 1),
        "write_ms": percentiles(writes),
        "shards": sorted(p.name for p in (data / "hot").iterdir() if p.is_dir()),
    }
    saved()


async def _recall(data: Path, scifact: Path, efs: tuple[int, ...] = EF_CURVE) -> dict[str, Any]:
    """The dense leg of the hot tier at each HNSW search breadth against its exact search."""
    settings = get_settings(data_dir=data)
    embedder = build_embedder(settings)
    queries, _ = _queries(scifact)
    texts = list(queries.values())
    vectors = np.asarray(query_function(embedder)(texts), dtype=np.float32)
    asked = [
        SearchQuery(text, [], vector, Filters(tenant="default"), k=10, legs=("dense",), payload=False)
        for text, vector in zip(texts, vectors, strict=True)
    ]

    async def keys(ef: int, exact: bool) -> tuple[list[set[int]], list[float]]:
        qdrant = settings.qdrant.model_copy(update={"hnsw_ef": ef})
        tier = hot_tier(settings.model_copy(update={"qdrant": qdrant}), embedder.dim, Analyzer())
        await tier.ensure()
        found, ms = [], []
        try:
            for query in asked:
                began = time.perf_counter()
                legs = await tier.search(replace(query, exact=exact))
                ms.append((time.perf_counter() - began) * 1000)
                found.append({h.key for h in legs["dense"]})
        finally:
            await tier.close()
        return found, ms

    truth, exact_ms = await keys(settings.qdrant.hnsw_ef, True)
    out: dict[str, Any] = {"queries": len(texts), "exact_ms": percentiles(exact_ms), "curve": []}
    for ef in efs:
        found, ms = await keys(ef, False)
        recall = sum(len(f & t) for f, t in zip(found, truth, strict=True)) / (10 * len(texts))
        out["curve"].append({"hnsw_ef": ef, "recall@10": round(recall, 4), "dense_leg_ms": percentiles(ms)})
    return out


async def _searches(url: str, args: argparse.Namespace, pid: int, out: dict[str, Any]) -> None:
    """One client (nDCG too), then ``--clients`` clients: reads only."""
    await through_server(url, args, True, args.chunks, None, pid, out, lambda: None)
    async with httpx.AsyncClient(
        base_url=url, timeout=600, limits=httpx.Limits(max_connections=args.clients + 8)
    ) as client:
        texts = list(_queries(args.scifact)[0].values())
        out["many_clients"] = await _many_clients(client, texts, args.clients, 8)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pool", type=Path, required=True, help="bench/scale_corpus.py pool's output")
    parser.add_argument("--scifact", type=Path, required=True, help="SciFact in BEIR layout")
    parser.add_argument("--chunks", type=int, default=1_000_000)
    parser.add_argument("--work", type=Path, required=True, help="an empty folder (the store goes in data/)")
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument(
        "--fresh-s", type=float, default=60.0, help="seconds of bulk load while probing freshness"
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--measure-only",
        action="store_true",
        help="steps 3 and 4 on the store already in --work/data (a copy of one filled before, say)",
    )
    parser.add_argument(
        "--search-only",
        action="store_true",
        help="only one client and --clients clients on the store in --work/data (the settings' "
        "RAG_QDRANT__HNSW_EF, say): no writes, no HNSW curve",
    )
    args = parser.parse_args()
    result: dict[str, Any] = {"machine": machine(), "command": " ".join(sys.argv), "chunks": args.chunks}
    result["hnsw_ef"] = get_settings().qdrant.hnsw_ef
    data, log = args.work / "data", args.work / "hot-scale.log"

    def saved() -> None:
        _save(result, args.out)

    if not (args.measure_only or args.search_only):
        shutil.rmtree(data, ignore_errors=True)
        args.work.mkdir(parents=True, exist_ok=True)
        result["scifact_alone"] = _alone(data, args, log)
        saved()
        asyncio.run(_fill(data, args, result, saved))
    if not args.search_only:
        result["hnsw_vs_exact"] = asyncio.run(_recall(data, args.scifact))
    result["disk_mb"] = _disk(data)
    saved()
    proc, url, ready = _serve(data, log)
    result["serve_ready_s"], result["rss_ready_mb"] = round(ready, 2), _rss_mb(proc.pid)
    saved()
    try:
        if args.search_only:
            asyncio.run(_searches(url, args, proc.pid, result))
        else:
            asyncio.run(
                through_server(
                    url, args, False, args.chunks, "b00", proc.pid, result, saved, delete_first=True
                )
            )
    finally:
        stop_serve(proc, data, result, wait_s=1800)
        saved()


if __name__ == "__main__":
    main()
