"""Sentence evidence: how close each sentence of the top hits comes to the question, by the model
that embeds that sentence's language (MiniLM for English, multilingual-e5-small for Chinese).

A chunk's cosine to a question is diluted by the chunk's other sentences, and its BM25 needs the
question's own words: a paraphrase ("What can I spend on lodging per night?") shares neither with
its answer ("The hotel limit is 140 EUR per night in most cities"). The best sentence's cosine is
the evidence both miss. It is used twice (``rag_router.answer.flow``):

- **decide**: a question the floor declined is answered from a top hit whose evidence clears the
  sentence floor of its model (``SentenceFloor``): for MiniLM the chunk's cosine plus its best
  sentence's (neither alone separates paraphrases from questions near a stored topic), for e5 the
  best sentence's cosine (its unrelated pairs sit at 0.80-0.86, its answers above 0.88).
- **compose**: the extractive answer's lead sentence is chosen by its share of the question's
  terms plus its cosine (``rag_router.answer.extractive``), so a paraphrase leads with the
  sentence that answers it rather than with one that repeats a word of it.

Measured on the dev sets, not tuned per question: docs/answers.md says what was tried. Sentences
are embedded on a worker thread with the passage model (not the query lane's micro-batcher, nor
behind a bulk ingest), at most ``MAX_SENTENCES`` per answer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from indexers.embed.embedder import AsyncEmbedder
from rag_router.search.spaces import Spaces

log = logging.getLogger(__name__)

MAX_SENTENCES = 64  # per answer: the top hits' sentences, in rank order


@dataclass(frozen=True, slots=True)
class SentenceFloor:
    """When a top hit's sentence evidence makes it relevant (above 2: never)."""

    primary: float = 0.82  # the chunk's cosine + its best sentence's, the primary model (MiniLM)
    second: float = 0.89  # the best sentence's cosine, the second model (e5), in the question's space
    cross: float = 0.805  # the best sentence's cosine, the second model, the other language's space

    def clears(self, *, chunk: float | None, sentence: float | None, space: str) -> bool:
        if sentence is None:
            return False
        if space == "primary":
            return chunk is not None and chunk + sentence >= self.primary
        return sentence >= (self.second if space == "second" else self.cross)


class SentenceScorer:
    """Cosines of sentences to a question, each by the model of its language (None: no model of
    that space embedded the question, e.g. a Chinese question and English sentences)."""

    def __init__(self, embedder: AsyncEmbedder, spaces: Spaces) -> None:
        self._embedder = embedder
        self._spaces = spaces

    def second(self, question: str) -> bool:
        """Whether the second model embeds the question (its own space is e5's)."""
        return self._spaces.is_second(question)

    def space(self, question: str, sentence: str) -> str:
        """ "primary", "second" (the second model, the question's own space) or "cross"."""
        own = self._spaces.of(question)
        if self._spaces.of(sentence) == own:
            return "second" if self._spaces.is_second(question) else "primary"
        return "cross"

    async def cosines(self, question: str, sentences: Sequence[str]) -> list[float | None]:
        texts = list(sentences[:MAX_SENTENCES])
        if not texts:
            return []
        own = self._spaces.of(question)
        try:
            query = _unit(np.asarray(await self._embedder.embed_query(question), dtype=np.float32))
            cross = await self._spaces.cross(self._embedder, question)
            vectors = await asyncio.to_thread(self._embedder.sync.embed, texts)
        except Exception as exc:  # no evidence: the floor's decision stands
            log.warning("sentence evidence failed: %r", exc)
            return [None] * len(sentences)
        matrix = np.asarray(vectors, dtype=np.float32)
        matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
        other = _unit(np.asarray(cross[0], dtype=np.float32)) if cross else None
        out: list[float | None] = []
        for text, row in zip(texts, matrix, strict=True):
            space = self._spaces.of(text)
            if space == own:
                out.append(float(row @ query))
            elif cross is not None and other is not None and space == cross[1]:
                out.append(float(row @ other))
            else:
                out.append(None)
        return out + [None] * (len(sentences) - len(texts))


def _unit(vector: np.ndarray) -> np.ndarray:
    flat = vector.reshape(-1)
    return flat / max(float(np.linalg.norm(flat)), 1e-12)
