"""Ingestion throughput and memory: the pipeline against the raw embedder, in one run.

    python bench/ingest.py speed --corpus ../shared/data/scifact/corpus.jsonl.gz --docs 400
    python bench/ingest.py rss --corpus ../shared/data/scifact/corpus.jsonl.gz --docs 300 --scale 10
    python bench/ingest.py all --out bench/results/bench-ingest.json     # both, with this machine's details

``speed`` writes the documents to a JSONL file, chunks them once to learn the chunk texts,
times the raw embedder on exactly those texts (``embed`` called with the pipeline's batch
size, after a warm-up), then times the pipeline from the file into fresh tiers (no embedding
cache, so every chunk is embedded). On CUDA it samples GPU utilisation with nvidia-smi.
``rss`` runs the pipeline in child processes on N and scale×N documents and compares their
peak RSS. ``--repeat K`` cycles the corpus K times with unique ids (for GPU-sized runs).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gzip
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import emit, machine
from indexers.embed.embedder import AsyncEmbedder, SentenceTransformerEmbedder
from indexers.ingest.load import load_paths
from indexers.ingest.pipeline import Pipeline
from indexers.records import Document
from indexers.text.chunk import Chunker
from indexers.text.lexical import Analyzer
from indexers.tiers.base import Tier

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact" / "corpus.jsonl.gz"


def write_corpus(source: Path, docs: int, repeat: int, dest: Path, join: int = 1) -> int:
    """The first ``docs`` records of ``source`` as JSONL: ``join`` consecutive ones per document
    (longer documents, so chunks fill up to the token limit), cycled ``repeat`` times with unique ids."""
    opener = gzip.open if source.name.endswith(".gz") else open
    with opener(source, "rt", encoding="utf-8") as f:  # type: ignore[operator]
        records = [json.loads(line) for _, line in zip(range(docs), f, strict=False)]
    if join > 1:
        records = [
            {
                "_id": "+".join(r["_id"] for r in group),
                "title": group[0].get("title"),
                "text": "\n\n".join(r["text"] for r in group),
            }
            for group in (records[i : i + join] for i in range(0, len(records), join))
        ]
    n = 0
    with dest.open("w", encoding="utf-8") as out:
        for r in range(repeat):
            for rec in records:
                text = rec["text"] if r == 0 else f"Copy {r}. {rec['text']}"
                out.write(
                    json.dumps({"id": f"{rec['_id']}-{r}", "title": rec.get("title"), "text": text}) + "\n"
                )
                n += 1
    return n


def make_tiers(kind: str, path: Path, dim: int, fresh_limit: int) -> dict[str, Tier]:
    analyzer = Analyzer()
    if kind == "cold":
        from indexers.tiers.local_cold import LocalColdTier

        return {"cold": LocalColdTier(path / "cold", dim=dim, analyzer=analyzer)}
    from indexers.tiers.qdrant_edge import QdrantEdgeTier

    return {"hot": QdrantEdgeTier(path / "hot", dim=dim, analyzer=analyzer, fresh_limit=fresh_limit)}


@contextlib.contextmanager
def gpu_sampler() -> Iterator[list[float]]:
    """GPU utilisation (%) every 200 ms while the block runs (empty without nvidia-smi)."""
    samples: list[float] = []
    if shutil.which("nvidia-smi") is None:
        yield samples
        return
    proc = subprocess.Popen(
        ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits", "-lms", "200"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        yield samples
    finally:
        proc.terminate()
        out, _ = proc.communicate()
        samples.extend(float(x) for x in out.split() if x.strip().replace(".", "").isdigit())


async def ingest(
    args: argparse.Namespace, embedder: SentenceTransformerEmbedder, corpus: Path, work: Path
) -> dict[str, Any]:
    chunker = Chunker(embedder.count_tokens, max_tokens=args.max_tokens, overlap_tokens=args.overlap)
    tiers = make_tiers(args.tier, work, embedder.dim, fresh_limit=args.fresh_limit)
    for tier in tiers.values():
        await tier.ensure()
    worker = AsyncEmbedder(embedder)
    pipeline = Pipeline(
        embedder=worker,
        chunker=chunker,
        tiers=tiers,
        batch_chunks=args.batch_chunks,
        queue_batches=args.queue_batches,
    )
    with gpu_sampler() as gpu:
        report = await pipeline.ingest(load_paths([corpus]), placement=args.tier)
    for tier in tiers.values():
        await tier.close()
    worker.close()
    return {
        "documents": report.documents,
        "chunks": report.chunks_written,
        "seconds": round(report.seconds, 2),
        "chunks_per_s": round(report.chunks_per_s, 1),
        "stage_busy_s": {k: round(v, 2) for k, v in report.stage_seconds.items()},
        "gpu_util_mean": round(sum(gpu) / len(gpu), 1) if gpu else None,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def raw_embedder(
    args: argparse.Namespace, embedder: SentenceTransformerEmbedder, corpus: Path
) -> dict[str, Any]:
    chunker = Chunker(embedder.count_tokens, max_tokens=args.max_tokens, overlap_tokens=args.overlap)
    texts = [c.embed_text for d in load_paths([corpus]) if isinstance(d, Document) for c in chunker.chunk(d)]
    embedder.embed(texts[: args.batch_chunks])  # warm-up
    with gpu_sampler() as gpu:
        started = time.perf_counter()
        for i in range(0, len(texts), args.batch_chunks):
            embedder.embed(texts[i : i + args.batch_chunks])
        seconds = time.perf_counter() - started
    tokens = embedder.count_tokens(texts)
    return {
        "chunks": len(texts),
        "mean_tokens": round(sum(tokens) / len(tokens), 1),
        "seconds": round(seconds, 2),
        "chunks_per_s": round(len(texts) / seconds, 1),
        "gpu_util_mean": round(sum(gpu) / len(gpu), 1) if gpu else None,
    }


def speed(args: argparse.Namespace) -> dict[str, Any]:
    embedder = SentenceTransformerEmbedder(
        args.model, device=args.device, max_batch=args.max_batch, max_batch_tokens=args.max_batch_tokens
    )
    raws, pipes = [], []
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        write_corpus(args.corpus, args.docs, args.repeat, corpus, args.join)
        for round_ in range(args.rounds):  # interleaved, best of each: this VM's speed drifts
            raws.append(raw_embedder(args, embedder, corpus))
            pipes.append(asyncio.run(ingest(args, embedder, corpus, Path(tmp) / f"data{round_}")))
    raw = max(raws, key=lambda r: float(r["chunks_per_s"]))
    pipe = max(pipes, key=lambda r: float(r["chunks_per_s"]))
    return {
        "rounds": [[r["chunks_per_s"], p["chunks_per_s"]] for r, p in zip(raws, pipes, strict=True)],
        "device": embedder.device,
        "tier": args.tier,
        "batch_chunks": args.batch_chunks,
        "raw_embedder": raw,
        "pipeline": pipe,
        "ratio": round(pipe["chunks_per_s"] / raw["chunks_per_s"], 3),
    }


def rss_child(args: argparse.Namespace) -> dict[str, Any]:
    embedder = SentenceTransformerEmbedder(args.model, device=args.device)
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        write_corpus(args.corpus, args.docs, args.repeat, corpus)
        return asyncio.run(ingest(args, embedder, corpus, Path(tmp) / "data"))


def rss(args: argparse.Namespace) -> dict[str, Any]:
    runs = {}
    for docs in (args.docs, args.docs * args.scale):
        cmd = [sys.executable, __file__, "rss-child", "--corpus", str(args.corpus), "--docs", str(docs)]
        cmd += ["--device", args.device, "--tier", args.tier]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        runs[str(docs)] = json.loads(out.strip().splitlines()[-1])
    small, large = runs[str(args.docs)], runs[str(args.docs * args.scale)]
    return {
        "runs": runs,
        "documents_ratio": args.scale,
        "rss_growth": round(large["peak_rss_mb"] / small["peak_rss_mb"] - 1, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("mode", choices=["speed", "rss", "rss-child", "all"])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--docs", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--join", type=int, default=1, help="corpus records joined into one document")
    parser.add_argument("--rounds", type=int, default=2, help="speed: interleaved raw/pipeline rounds")
    parser.add_argument("--scale", type=int, default=10)
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--tier", choices=["hot", "cold"], default="hot")
    parser.add_argument("--batch-chunks", type=int, default=512)
    parser.add_argument("--queue-batches", type=int, default=2)
    parser.add_argument("--max-batch", type=int, default=64)
    parser.add_argument("--max-batch-tokens", type=int, default=16_384)
    parser.add_argument("--max-tokens", type=int, default=200, help="chunk size (the title comes on top)")
    parser.add_argument("--overlap", type=int, default=32)
    parser.add_argument("--fresh-limit", type=int, default=20_000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.mode == "rss-child":
        print(json.dumps(rss_child(args)))
        return
    result: dict[str, Any] = {"machine": machine(), "command": " ".join(sys.argv)}
    if args.mode in ("speed", "all"):
        result["speed"] = speed(args)
    if args.mode in ("rss", "all"):
        result["rss"] = rss(args)
    emit(result, args.out)


if __name__ == "__main__":
    main()
