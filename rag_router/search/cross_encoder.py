"""A cross-encoder a user has (``RAG_RERANK__MODEL``): the quality reranker where a network
reached a model hub once. It reads (question, chunk) pairs together, which no bi-encoder can.

Loaded with sentence-transformers from a local folder or the user's model cache (offline: no
download at run time): on a GPU with torch in half precision, on a CPU with ONNX Runtime when
``optimum[onnxruntime]`` is installed and the model has an ONNX export, else with torch.
Pairs are scored in batches on a thread of their own, under the stage's deadline
(``rag_router.search.rerank.Rerank``).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from indexers.embed.base import attention_without_cudnn, resolve_device
from rag_router.search.fuse import Hit

log = logging.getLogger(__name__)

PASSAGE_CHARS = 2000  # of each chunk: a cross-encoder reads 512 tokens at most


class CrossEncoderReranker:
    def __init__(self, model: str, *, device: str = "auto", batch: int = 16) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import CrossEncoder

        self.device = resolve_device(device)
        attention_without_cudnn(self.device)
        self.name = f"cross-encoder {Path(model).name or model}"
        self._batch = batch
        self._model: Any = None
        if not self.device.startswith("cuda"):
            try:
                self._model = CrossEncoder(model, device=self.device, backend="onnx")
            except Exception as exc:  # no optimum, or no ONNX export: torch on the CPU
                log.info(
                    "cross-encoder %s: torch on %s (no ONNX: %s)", model, self.device, type(exc).__name__
                )
        if self._model is None:
            self._model = CrossEncoder(model, device=self.device)
            if self.device.startswith("cuda"):
                self._model.model.half()
        log.info("reranker %s on %s", self.name, self.device)

    async def scores(self, query: str, hits: Sequence[Hit], deadline: float) -> list[float | None]:
        pairs = [(query, h.chunk.text[:PASSAGE_CHARS]) for h in hits]
        scored = await asyncio.to_thread(
            self._model.predict, pairs, batch_size=self._batch, show_progress_bar=False
        )
        return [float(s) for s in scored]
