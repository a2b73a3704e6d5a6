"""Bulk ingestion end to end, either engine, with what kept it busy.

    python bench/bulk_ingest.py --engine ray --tier cold --docs 5183 --join 2 --repeat 60 --rerun \
        --out bench/results/bench-bulk-ingest.json

Writes the corpus (the first ``--docs`` records, ``--join`` per document, cycled ``--repeat``
times with distinct ids) to a JSONL file, then ingests it into a fresh embedded tier:

* ``first``: chunks/s end to end (from the first byte read to the last document acknowledged,
  index builds included: the cold tier's tantivy commits and FAISS build; for the hot tier the
  sealing and HNSW build run after, timed apart as ``seal``), each stage's busy seconds (summed
  over workers: CPU-seconds for prepare and build), GPU utilisation (nvidia-smi every 200 ms),
  CPU utilisation of the whole machine, and the peak RSS of this process and all its children
  (Ray's workers included);
* ``rerun`` (with ``--rerun``): the same file again, nothing changed (0 chunks embedded).

Ray's start (``ray.init``) is outside the timed part of both runs and reported as ``ray_start_s``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import emit, machine
from bench.ingest import DEFAULT_CORPUS, make_tiers, write_corpus
from indexers.embed.embedder import AsyncEmbedder, SentenceTransformerEmbedder
from indexers.ingest.load import load_paths
from indexers.ingest.pipeline import Pipeline
from indexers.ingest.ray.pipeline import RUNTIME_ENV, RayOptions, RayPipeline
from indexers.ingest.results import IngestReport
from indexers.text.chunk import Chunker
from indexers.text.lexical import Analyzer


@contextlib.contextmanager
def sampled() -> Iterator[dict[str, Any]]:
    """GPU and CPU utilisation and the process tree's peak RSS while the block runs."""
    import psutil

    out: dict[str, Any] = {}
    stop = threading.Event()
    cpu: list[float] = []
    peak = [0]
    me = psutil.Process()

    def watch() -> None:
        psutil.cpu_percent(None)
        while not stop.wait(0.25):
            cpu.append(psutil.cpu_percent(None))
            rss = 0
            for p in [me, *me.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    rss += p.memory_info().rss
            peak[0] = max(peak[0], rss)

    gpu = None
    if shutil.which("nvidia-smi"):
        gpu = subprocess.Popen(
            ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits", "-lms", "200"],
            stdout=subprocess.PIPE,
            text=True,
        )
    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield out
    finally:
        stop.set()
        thread.join()
        out["cpu_util_mean_pct"] = round(sum(cpu) / len(cpu), 1) if cpu else None
        out["cpus"] = os.cpu_count()
        out["peak_rss_tree_mb"] = round(peak[0] / 1024 / 1024, 1)
        if gpu is not None:
            gpu.terminate()
            text, _ = gpu.communicate()
            samples = [float(x) for x in text.split() if x.strip().replace(".", "").isdigit()]
            out["gpu_util_mean_pct"] = round(sum(samples) / len(samples), 1) if samples else None


def summary(report: IngestReport, stats: dict[str, Any]) -> dict[str, Any]:
    return {
        "documents": report.documents,
        "counts": dict(report.counts),
        "chunks_written": report.chunks_written,
        "chunks_embedded": report.chunks_embedded,
        "seconds": round(report.seconds, 2),
        "chunks_per_s": round(report.chunks_written / report.seconds, 1) if report.seconds else 0.0,
        "stage_busy_s": {k: round(v, 2) for k, v in sorted(report.stage_seconds.items())},
        # (first, last) piece of work each stage finished, seconds from the start: who waited for whom
        "stage_done_at_s": {
            k: [round(a, 1), round(b, 1)] for k, (a, b) in sorted(report.stage_spans.items())
        },
        **stats,
    }


def _model(
    name: str, args: argparse.Namespace, query: str = "", passage: str = ""
) -> SentenceTransformerEmbedder:
    model = SentenceTransformerEmbedder(
        name, device=args.device, max_batch=args.max_batch, max_batch_tokens=args.max_batch_tokens
    )
    model.set_prefixes(query=query, passage=passage)
    return model


def _split(args: argparse.Namespace) -> Any:
    """The default embedder's shape (indexers/embed/split.py): ``--model`` for every text but
    Chinese, multilingual-e5-small (loaded on the first Chinese chunk) for those."""
    from indexers.embed import e5
    from indexers.embed.split import Lazy, SplitEmbedder

    second = functools.partial(_model, e5.MODEL, args, e5.QUERY_PREFIX, e5.PASSAGE_PREFIX)
    name = f"{e5.MODEL} (query: {e5.QUERY_PREFIX!r}, passage: {e5.PASSAGE_PREFIX!r})"
    return SplitEmbedder(_model(args.model, args), Lazy(second, name))


async def run(args: argparse.Namespace, corpus: Path, work: Path) -> dict[str, Any]:
    make = functools.partial(_split if args.split else functools.partial(_model, args.model), args)
    embedder = make()
    analyzer = Analyzer()
    chunker = Chunker(embedder.count_tokens, max_tokens=args.max_tokens, overlap_tokens=args.overlap)
    tiers = make_tiers(args.tier, work, embedder.dim, fresh_limit=args.fresh_limit)
    for tier in tiers.values():
        await tier.ensure()
    result: dict[str, Any] = {
        "engine": args.engine,
        "tier": args.tier,
        "device": embedder.device,
        "embedder": embedder.model_name,
    }
    if args.engine == "ray":
        import ray

        began = time.perf_counter()
        ray.init(
            num_cpus=args.num_cpus, include_dashboard=False, log_to_driver=False, runtime_env=RUNTIME_ENV
        )
        result["ray_start_s"] = round(time.perf_counter() - began, 2)
        options = RayOptions(
            unit_mb=args.unit_mb,
            embed_units=args.embed_units,
            taper=args.taper,
            commit_chunks=args.commit_chunks,
            actors_per_gpu=args.actors_per_gpu,
        )
        ray_pipe = RayPipeline(
            embedder=embedder,
            make_embedder=make,
            chunker=chunker,
            analyzer=analyzer,
            tiers=tiers,
            options=options,
        )
        # what the embedding actors load, the transformer alone or sentence-transformers (checked
        # once, here: outside the timed runs, as Ray's start is)
        result["actor_model"] = "passes" if ray_pipe.actors_load_passes else "sentence-transformers"

        async def once() -> IngestReport:
            return await ray_pipe.ingest([corpus], placement=args.tier)
    else:
        pipe = Pipeline(
            embedder=AsyncEmbedder(embedder),
            chunker=chunker,
            tiers=tiers,
            batch_chunks=args.batch_chunks,
            queue_batches=2,
        )

        async def once() -> IngestReport:
            return await pipe.ingest(load_paths([corpus]), placement=args.tier, optimize=args.tier == "cold")

    rounds = ["first", "rerun"] if args.rerun else ["first"]
    for name in rounds:
        with sampled() as stats:
            report = await once()
        result[name] = summary(report, stats)
        if name == "first" and args.tier == "hot":
            began = time.perf_counter()
            await tiers["hot"].optimize()
            result["seal_and_hnsw_s"] = round(time.perf_counter() - began, 2)
        print(json.dumps({name: result[name]}), file=sys.stderr, flush=True)
    if "rerun" in result:
        result["rerun_speedup"] = round(result["first"]["seconds"] / max(result["rerun"]["seconds"], 1e-9), 1)
    for tier in tiers.values():
        await tier.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--engine", choices=["ray", "inprocess"], default="ray")
    parser.add_argument("--tier", choices=["cold", "hot"], default="cold")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--docs", type=int, default=400)
    parser.add_argument("--join", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--rerun", action="store_true")
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument(
        "--split", action="store_true", help="the default's model per language (--model + e5)"
    )
    parser.add_argument("--device", default="auto")
    parser.add_argument("--num-cpus", type=int, default=None)
    parser.add_argument("--unit-mb", type=float, default=1.0)
    parser.add_argument("--embed-units", type=int, default=4)
    parser.add_argument("--taper", type=int, default=RayOptions().taper, help="1: units not tapered")
    parser.add_argument("--actors-per-gpu", type=int, default=2)
    parser.add_argument("--commit-chunks", type=int, default=65_536)
    parser.add_argument("--batch-chunks", type=int, default=512)
    parser.add_argument("--max-batch", type=int, default=64)
    parser.add_argument("--max-batch-tokens", type=int, default=16_384)
    parser.add_argument("--max-tokens", type=int, default=200)
    parser.add_argument("--overlap", type=int, default=32)
    parser.add_argument("--fresh-limit", type=int, default=20_000)
    parser.add_argument("--work", type=Path, default=None, help="where the tiers go (default: a temp dir)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        docs = write_corpus(args.corpus, args.docs, args.repeat, corpus, args.join)
        result = asyncio.run(run(args, corpus, Path(tmp) / "data"))
    emit({"machine": machine(), "command": " ".join(sys.argv), "documents_in_file": docs, **result}, args.out)


if __name__ == "__main__":
    main()
