"""Document → Chunks: token-bounded, sentence-aware (English and CJK), with overlap.

Token counts come from the embedder's own tokenizer, so a chunk never exceeds what the
model reads. Ids are deterministic, ``{doc_id}#{n}``: re-chunking the same text gives the
same ids, so a re-ingest overwrites instead of duplicating.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from indexers.documents import Chunk, Document

TokenCounter = Callable[[Sequence[str]], list[int]]

# A sentence ends at . ! ? (plus closing quotes/brackets) before whitespace, at CJK 。！？,
# or at a line break. Abbreviations like "e.g. the" may split early; that only costs a
# slightly shorter chunk, never lost text.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+|(?<=[。！？；])|\n+")


def split_sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


@dataclass(frozen=True, slots=True)
class Chunker:
    """Packs whole sentences into chunks of at most ``max_tokens`` tokens.

    ``overlap_tokens`` of trailing sentences are repeated at the start of the next chunk so
    that a fact spanning a boundary is retrievable from either side.
    """

    count_tokens: TokenCounter
    max_tokens: int = 240
    overlap_tokens: int = 32

    def chunk(self, doc: Document) -> list[Chunk]:
        pieces = list(self._pieces(doc.text))
        return [
            Chunk(
                chunk_id=f"{doc.id}#{n}",
                doc_id=doc.id,
                n=n,
                text=text,
                title=doc.title,
                metadata=dict(doc.metadata),
                tenant=doc.tenant,
            )
            for n, text in enumerate(self._pack(pieces))
        ]

    def _pieces(self, text: str) -> Iterator[tuple[str, int]]:
        sentences = split_sentences(text)
        if not sentences:
            return
        for sentence, tokens in zip(sentences, self.count_tokens(sentences), strict=True):
            if tokens <= self.max_tokens:
                yield sentence, tokens
            else:
                yield from self._split_long(sentence)

    def _split_long(self, sentence: str) -> Iterator[tuple[str, int]]:
        """A sentence longer than a chunk is cut at word (or, for CJK, character) boundaries."""
        words = sentence.split()
        units = words if len(words) > 1 else list(sentence)
        joiner = " " if len(words) > 1 else ""
        counts = self.count_tokens(units)
        start, used = 0, 0
        for i, count in enumerate(counts):
            if used + count > self.max_tokens and i > start:
                piece = joiner.join(units[start:i])
                yield piece, used
                start, used = i, 0
            used += count
        if start < len(units):
            yield joiner.join(units[start:]), used

    def _pack(self, pieces: list[tuple[str, int]]) -> Iterator[str]:
        current: list[tuple[str, int]] = []
        used = 0
        for piece in pieces:
            if current and used + piece[1] > self.max_tokens:
                yield " ".join(p for p, _ in current)
                current, used = self._overlap(current)
                if used + piece[1] > self.max_tokens:
                    current, used = [], 0
            current.append(piece)
            used += piece[1]
        if current:
            yield " ".join(p for p, _ in current)

    def _overlap(self, chunk: list[tuple[str, int]]) -> tuple[list[tuple[str, int]], int]:
        kept: list[tuple[str, int]] = []
        used = 0
        for piece in reversed(chunk[1:]):  # never repeat a whole chunk
            if used + piece[1] > self.overlap_tokens:
                break
            kept.insert(0, piece)
            used += piece[1]
        return kept, used
