"""Token ids for the embedders: the tokenizers (the model's input and the chunker's counts),
their word memo, and how passes of ids are batched and padded for the model."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from indexers.embed.rust_tokenizer import RustTokenizer
from indexers.embed.wordpiece import WordIds
from indexers.records import Chunk

# On a GPU each new input shape costs a kernel choice, and on a fresh machine loading that
# kernel from disk: the first 18,600 chunks took 4.2 s against 0.6 s once warm (bench/actor_probe.py,
# ~20 widths). Widths padded to a multiple of this keep the shapes few; the padding is masked
# out (the same vectors, tests/unit/test_passes.py). On a CPU every padded token is work: none.
GPU_WIDTH_MULTIPLE = 32


def pad(
    rows: Sequence[Sequence[int]], pad_id: int, multiple: int = 1, limit: int = 0
) -> dict[str, np.ndarray[Any, Any]]:
    """Token id rows → right-padded ``input_ids``, ``attention_mask``, ``token_type_ids`` (int64),
    as wide as the longest row, or that rounded up to ``multiple`` but not past ``limit`` (the
    model's input length)."""
    width = max(len(r) for r in rows)
    if multiple > 1:
        width = max(width, min(-(-width // multiple) * multiple, limit))
    input_ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for i, row in enumerate(rows):
        input_ids[i, : len(row)] = row
        mask[i, : len(row)] = 1
    return {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": np.zeros_like(input_ids)}


def untruncated(tokenizer: Any) -> Any:
    """A tokenizer for counting: no truncation, no padding (tokenizer.json may carry fixed padding)."""
    tokenizer.backend_tokenizer.no_truncation()
    tokenizer.backend_tokenizer.no_padding()
    return tokenizer


def encode_plain(counter: Any, texts: Sequence[str]) -> list[Any]:
    """Encodings without special tokens; without character offsets where the tokenizer can skip
    them (``encode_batch_fast``, tokenizers ≥ 0.21: the same ids, a fifth less time)."""
    backend = counter.backend_tokenizer
    encode = getattr(backend, "encode_batch_fast", backend.encode_batch)
    return list(encode(list(texts), add_special_tokens=False))


def count_tokens(counter: Any, texts: Sequence[str]) -> list[int]:
    """Tokens per text without special tokens, counted in Rust without building id lists."""
    return [len(e) for e in encode_plain(counter, texts)]


def plain_ids(counter: Any, texts: Sequence[str]) -> list[list[int]]:
    """Token ids per text without special tokens, untruncated."""
    return [e.ids for e in encode_plain(counter, texts)]


def word_ids(counter: Any) -> WordIds | None:
    """The memo by word for a BERT WordPiece counter (``indexers.embed.wordpiece``), or None.
    It asks a copy of the counter's Rust tokenizer for unseen words (it travels to Ray workers
    pickled, and unpickles without transformers)."""
    return WordIds.of(counter, functools.partial(plain_ids, RustTokenizer.of(counter)))


def token_batches(lengths: Sequence[int], *, max_batch: int, max_tokens: int) -> Iterator[list[int]]:
    """Indices grouped into length-sorted batches; each batch's padded size ≤ ``max_tokens``."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i], reverse=True)
    batch: list[int] = []
    for i in order:
        longest = lengths[batch[0]] if batch else lengths[i]
        if batch and (len(batch) >= max_batch or longest * (len(batch) + 1) > max_tokens):
            yield batch
            batch = []
        batch.append(i)
    if batch:
        yield batch


@dataclass(frozen=True, slots=True)
class Tokenizers:
    """An embedder's tokenizers: truncating (the model's input) and counting (the chunker's)."""

    tokenizer: Any
    counter: Any
    max_len: int
    passage_prefix: str = ""
    words: WordIds | None = None  # BERT WordPiece: ids memoised by word, the same ids

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled over the Rust tokenizers alone: a Ray worker unpickles it without importing
        transformers (``indexers.embed.rust_tokenizer``)."""
        light = RustTokenizer.of(self.tokenizer), RustTokenizer.of(self.counter)
        return (Tokenizers, (*light, self.max_len, self.passage_prefix, self.words))

    def passages(self, texts: Sequence[str]) -> list[list[int]]:
        """What ``embed`` feeds the model for these passages."""
        return self.ids([self._prefixed(t) for t in texts])

    def _prefixed(self, text: str) -> str:
        return self.passage_prefix + text

    def chunk_passages(
        self, chunks: Sequence[Chunk], text_ids: Sequence[list[int] | None]
    ) -> list[list[int]]:
        """``passages`` of the chunks' ``embed_text``, taking each text's ids where the chunker
        had them (``Chunker.chunk_many_ids``; None: tokenized here) instead of tokenizing it
        again (0.23 s of a 4 MB SciFact unit's 0.82 s in a Ray prepare task; ~0.1 s net, as the
        sentences' ids are now built where only counts were). Before the text come the passage prefix
        and the title, tokenized once per title; the line break after a title, or a prefix
        that ends in whitespace, is where the tokenizer splits words anyway."""
        bounds = self._bounds()
        if bounds is None or self.words is None:
            return self.passages([c.embed_text for c in chunks])
        first, last = bounds
        # a prefix that ends in whitespace BERT also splits at (not one its normaliser drops)
        joins = not self.passage_prefix or self.passage_prefix[-1] in " \t\n\r"
        titles = sorted({c.title for c in chunks if c.title})
        heads = dict(zip(titles, self.words.ids([self._prefixed(t) for t in titles]), strict=True))
        bare = self.words.ids([self.passage_prefix])[0] if self.passage_prefix else []
        out: list[list[int]] = []
        again: list[int] = []
        for i, (chunk, ids) in enumerate(zip(chunks, text_ids, strict=True)):
            if ids is None or not (chunk.title or joins):
                again.append(i)
                out.append([])
                continue
            body = (heads[chunk.title] if chunk.title else bare) + ids
            out.append([first, *body[: self.max_len - 2], last])
        for i, ids in zip(again, self.passages([chunks[i].embed_text for i in again]), strict=True):
            out[i] = ids
        return out

    def _bounds(self) -> tuple[int, int] | None:
        """[CLS] and [SEP] where the memo by word makes the model's input (a BERT WordPiece
        tokenizer that truncates on the right), else None."""
        first, last = self.tokenizer.cls_token_id, self.tokenizer.sep_token_id
        if self.words is None or None in (first, last) or self.tokenizer.truncation_side != "right":
            return None
        return int(first), int(last)

    def ids(self, texts: Sequence[str]) -> list[list[int]]:
        if not texts:
            return []
        bounds = self._bounds()
        if bounds is not None and self.words is not None:
            # a BERT WordPiece model's input: [CLS] the text's ids, cut to fit, [SEP]
            first, last = bounds
            return [[first, *ids[: self.max_len - 2], last] for ids in self.words.ids(texts)]
        out: list[list[int]] = self.tokenizer(list(texts), truncation=True, max_length=self.max_len)[
            "input_ids"
        ]
        return out

    def count(self, texts: Sequence[str]) -> list[int]:
        if self.words is not None:
            return self.words.counts(texts)
        return count_tokens(self.counter, texts) if texts else []


def tensors(rows: Sequence[Sequence[int]], pad_id: int, device: str, limit: int = 0) -> dict[str, Any]:
    """Right-padded input ids, attention mask and token types as tensors on ``device`` (on a GPU
    to a multiple of ``GPU_WIDTH_MULTIPLE``, up to ``limit``: the model's input length)."""
    import torch

    pin = device.startswith("cuda")
    padded = pad(rows, pad_id, GPU_WIDTH_MULTIPLE if pin else 1, limit)
    return {
        k: (t.pin_memory() if pin else t).to(device, non_blocking=pin)
        for k, t in ((k, torch.from_numpy(v)) for k, v in padded.items())
    }
