"""Where a search's time and ``serve``'s start go on one store, part by part, without the server.

bench/scale.py runs it on each store before the server starts (the store as built). The server
times its stages (embed, cold, rerank, ...); this splits the two that grew with the store:

- the embedded cold tier's search, one leg at a time: tantivy's BM25 (with its chunk-id lookup;
  also at depths 50 and 20 instead of the fusion's 100: what a shallower leg would save), FAISS
  (the server's threads and nprobe), both legs in one call, and the hydration of ten hits;
- the rerank stage's sentence vectors: the sentences of each query's first ten hits, tokenized
  alone and embedded (tokenizing included), as the stage embeds them when the store has none;
- ``serve``'s start: the cold tier's SQLite, tantivy and FAISS opened one by one, the row count
  the opening reads, and the model's load in a process of its own (its imports included).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from bench._common import percentiles

LOAD_MODEL = (
    "import time; t = time.perf_counter(); "
    "from rag_router.embedders import build_embedder; from rag_router.settings import get_settings; "
    "e = build_embedder(get_settings()); e.embed(['warm']); print(time.perf_counter() - t)"
)


def _seconds(fn: Callable[[], Any]) -> tuple[Any, float]:
    began = time.perf_counter()
    value = fn()
    return value, round(time.perf_counter() - began, 3)


def _ms(fn: Callable[[], Any], into: list[float]) -> Any:
    began = time.perf_counter()
    value = fn()
    into.append((time.perf_counter() - began) * 1000)
    return value


def opening(data_dir: Path, dim: int, ivf_threshold: int, shards: int) -> dict[str, float | int]:
    """Seconds each part of the cold tier takes to open (what ``LocalCold._parts`` does)."""
    from indexers.tiers.cold_shards import open_lexical
    from indexers.tiers.cold_store import Store
    from indexers.tiers.cold_vectors import VectorIndex

    cold = data_dir / "cold"
    store, out_store = _seconds(lambda: Store(cold / "cold.sqlite"))
    lexical, out_lexical = _seconds(lambda: open_lexical(cold, shards))
    segments = lexical.segments  # each is searched on its own
    vectors = VectorIndex(cold / "vectors.faiss", dim, ivf_threshold)
    _, out_faiss = _seconds(vectors.load)
    _, out_count = _seconds(lambda: store.reader().execute("SELECT COUNT(*) FROM chunks").fetchone())
    lexical.close()
    store.close()
    loaded = subprocess.run([sys.executable, "-c", LOAD_MODEL], capture_output=True, text=True, check=False)
    model = round(float(loaded.stdout.split()[-1]), 2) if loaded.returncode == 0 else None
    return {
        "sqlite_s": out_store,
        "tantivy_s": out_lexical,
        "tantivy_segments": segments,
        "faiss_read_s": out_faiss,
        "count_s": out_count,
        "model_load_process_s": model or -1.0,
    }


def anatomy(data_dir: Path, texts: list[str]) -> dict[str, Any]:
    """The parts, each as percentiles of milliseconds over ``texts`` (SciFact's test queries)."""
    from indexers.text.chunk import rerank_sentences
    from indexers.text.lexical import Analyzer
    from indexers.tiers.local_cold import LocalCold
    from indexers.tiers.query import Filters, SearchQuery
    from rag_router.embedders import build_embedder
    from rag_router.settings import get_settings

    settings = get_settings(data_dir=data_dir)
    embedder = build_embedder(settings)
    threshold = settings.elastic.ivf_threshold
    shards = settings.elastic.lexical_shards
    out: dict[str, Any] = {"opening": opening(data_dir, embedder.dim, threshold, shards)}
    analyzer = Analyzer()
    tokenizers = getattr(embedder, "tokenizers", None)  # what ``embed`` tokenizes with
    ids = tokenizers().ids if tokenizers is not None else embedder.count_tokens
    vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
    cold = LocalCold(
        data_dir / "cold", dim=embedder.dim, analyzer=analyzer, ivf_threshold=threshold, lexical_shards=shards
    )
    cold.ensure()
    lexical: list[float] = []
    shallower: dict[int, list[float]] = {50: [], 20: []}
    dense: list[float] = []
    both: list[float] = []
    hydrate: list[float] = []
    tokenize: list[float] = []
    embed: list[float] = []
    sentences: list[float] = []
    try:
        for text, vector in zip(texts, vectors, strict=True):
            query = SearchQuery(
                text, analyzer.query_terms(text), vector, Filters(tenant="default"), k=100, payload=False
            )
            _ms(lambda q=query: cold.search(replace(q, legs=("lexical",))), lexical)
            for k, into in shallower.items():  # what a smaller lexical depth would save
                _ms(lambda q=query, k=k: cold.search(replace(q, legs=("lexical",), k=k)), into)
            _ms(lambda q=query: cold.search(replace(q, legs=("dense",))), dense)
            found = _ms(lambda q=query: cold.search(q), both)
            refs = [h.ref for h in found.get("dense", [])[:10]]
            chunks = _ms(lambda r=refs: cold.hydrate(r), hydrate)
            said = list(dict.fromkeys(s for c in chunks.values() for s in rerank_sentences(c.text)))
            if said:
                sentences.append(len(said))
                _ms(lambda s=said: ids(s), tokenize)
                _ms(lambda s=said: embedder.embed(s), embed)
    finally:
        cold.close()
    out["cold_ms"] = {
        "lexical": percentiles(lexical),
        **{f"lexical_k{k}": percentiles(v) for k, v in shallower.items()},
        "dense": percentiles(dense),
        "both_in_one_call": percentiles(both),
        "hydrate_10": percentiles(hydrate),
    }
    out["rerank_sentences"] = {
        "per_query": percentiles(sentences),
        "tokenize_ms": percentiles(tokenize),
        "embed_ms": percentiles(embed),
    }
    return out
