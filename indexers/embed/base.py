"""What every embedder that runs passes shares: ``PassEmbedder`` (token counting, and ``embed``
as length-sorted passes of token ids), ``resolve_device`` and ``attention_without_cudnn``.

A room of its own below ``embedder.py`` (sentence-transformers), ``passes.py`` (the transformer
alone, for Ray's actors) and ``onnx.py``: each subclasses ``PassEmbedder``, and ``embedder.py``
reaches ``passes.py`` to offer its faster loader, so neither may import the other for the base
(an import-linter contract in pyproject.toml keeps the layers).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from indexers.embed.tokens import Tokenizers, token_batches, word_ids
from indexers.embed.wordpiece import WordIds
from indexers.records import Vector

# What a Linux host with a GPU torch could use shows: NVIDIA's driver, WSL2's GPU, ROCm's device.
GPU_DEVICE_FILES = ("/proc/driver/nvidia", "/dev/dxg", "/dev/kfd")


def resolve_device(device: str) -> str:
    if device != "auto":
        return device
    if sys.platform == "linux" and not any(Path(f).exists() for f in GPU_DEVICE_FILES):
        return "cpu"  # no GPU driver: no torch import (~2 s of a CLI query) to find that out
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def attention_without_cudnn(device: str) -> None:
    """On a GPU, attention by the flash and memory-efficient kernels, not cuDNN's: torch builds
    a cuDNN graph for every new (rows, length) shape it meets, and an embedder's batches are
    ever new shapes (the rerank stage's sentences, queries of new lengths, ingest's passes). On
    an H200 (torch 2.11) 40 batches of 5-44 sentences took p50 59.5 ms, max 578 ms, with cuDNN's
    kernel; 5.8 ms, max 11.2 ms, without (docs/benchmarks.md, "10M chunks"). A process-wide
    switch of torch's; nothing here uses cuDNN's attention."""
    if device.startswith("cuda"):
        import torch

        torch.backends.cuda.enable_cudnn_sdp(False)


class PassEmbedder:
    """What both embedders share: token counting, and ``embed`` as length-sorted passes.

    A call tokenizes its texts once, sorts them by length and runs passes bounded by count
    and tokens (padding waste is what makes unsorted batches slow); a subclass only turns one
    pass of token ids into L2-normalised float32 vectors (``_forward``).
    """

    _dim: int
    _query_prefix: str = ""  # e5-style models: "query: " / "passage: " (set_prefixes)
    _passage_prefix: str = ""
    _counter: Any  # a tokenizer for counting: no truncation (see ``untruncated``)
    _words: tuple[Any, WordIds | None] | None = None  # (the counter it was made for, its memo)
    _tokenizer: Any
    _max_len: int
    _max_batch: int
    _max_batch_tokens: int

    @property
    def model_name(self) -> str:
        """What wrote the vectors (the index manifest records it): each backend names itself."""
        raise NotImplementedError

    @property
    def dim(self) -> int:
        return self._dim

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens per text without special tokens (what a chunk's text costs)."""
        return self.tokenizers().count(texts) if texts else []

    def set_prefixes(self, *, query: str = "", passage: str = "") -> None:
        """Text put before every query / passage, for models trained with them (e5: "query: ",
        "passage: "). They change the vectors, so they are part of ``prefixes``."""
        self._query_prefix, self._passage_prefix = query, passage

    @property
    def prefixes(self) -> str:
        """ "" or " (query: …, passage: …)": what ``model_name`` adds when prefixes are set."""
        if not (self._query_prefix or self._passage_prefix):
            return ""
        return f" (query: {self._query_prefix!r}, passage: {self._passage_prefix!r})"

    def embed(self, texts: Sequence[str]) -> Vector:
        """Passages."""
        return self._embed([self._passage_prefix + t for t in texts] if self._passage_prefix else texts)

    def embed_queries(self, texts: Sequence[str]) -> Vector:
        return self._embed([self._query_prefix + t for t in texts] if self._query_prefix else texts)

    def _embed(self, texts: Sequence[str]) -> Vector:
        return self.embed_ids(self.tokenizers().ids(texts))

    def tokenizers(self) -> Tokenizers:
        """This embedder's tokenization, picklable: other processes count and tokenize exactly
        as it does (the Ray engine's CPU workers), and hand the ids to ``embed_ids``."""
        if self._words is None or self._words[0] is not self._counter:  # built on first use
            self._words = (self._counter, word_ids(self._counter))
        return Tokenizers(self._tokenizer, self._counter, self._max_len, self._passage_prefix, self._words[1])

    def passes_loader(self) -> Callable[[], PassEmbedder] | None:
        """A picklable function that loads, in another process, an embedder for ``embed_ids``
        alone that starts faster than this one does; None where there is none."""
        return None

    def embed_ids(self, ids: Sequence[Sequence[int]]) -> Vector:
        """Vectors of tokenized passages, in length-sorted passes bounded by count and tokens."""
        out = np.zeros((len(ids), self._dim), dtype=np.float32)
        lengths = [len(i) for i in ids]
        for batch in token_batches(lengths, max_batch=self._max_batch, max_tokens=self._max_batch_tokens):
            out[batch] = self._forward([ids[i] for i in batch])
        return out

    def _forward(self, rows: Sequence[Sequence[int]]) -> Vector:
        raise NotImplementedError
