"""The rerank stage: the first ``depth`` fused hits ordered again by a closer look at each.

Fusion ranks chunks by two whole-chunk scores; the right chunk is almost always among the first
ten, not always first. A reranker scores each of those against the question and the stage
orders them by ``z(fused) + weight · z(rerank)`` (z: standardised over the reranked hits). Fusing
rather than replacing is what helps: ordered by a sentence's cosine alone qa-squad-dev's success@1
falls (0.887 → 0.81), fused with it, it rises to 0.920 (docs/benchmarks.md, "Rank one").

Three rerankers share the stage:

- ``SentenceReranker`` (the default): late interaction at sentence level with the packaged
  models. Each chunk's sentences are embedded by the model of their language (stored at ingest
  beside the chunk vectors, ``indexers.ingest.pipeline``; embedded here when missing) and a
  chunk scores its best sentence's cosine to the question.
- ``CrossEncoderReranker``: a sentence-transformers CrossEncoder a user has
  (``RAG_RERANK__MODEL``), scoring (question, chunk) pairs.
- ``rag_router.answer.llm_rerank.LLMReranker``: the configured OpenAI-compatible server.

A reranker that fails or misses the deadline leaves the fused order (and says so in the
reasons). Each reranked hit keeps its legs and gains ``legs["rerank"]`` (its rank and score
there); its ``score`` is the fused score of the place it moved to, so scores still fall down
the list. The relevance floor and the cascade read the raw legs, never this one.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np

from indexers.embed.cache import EmbeddingCache
from indexers.embed.embedder import AsyncEmbedder
from indexers.text.chunk import rerank_sentences
from rag_router.search.fuse import Hit, LegScore
from rag_router.search.route import Route
from rag_router.search.spaces import Spaces

log = logging.getLogger(__name__)

LEG = "rerank"


class Reranker(Protocol):
    """Scores hits against a question; None for a hit it cannot score (it keeps its fused place
    among the others). May raise or run past ``deadline``: the stage then keeps the fused order."""

    name: str

    async def scores(self, query: str, hits: Sequence[Hit], deadline: float) -> list[float | None]: ...


@dataclass(frozen=True, slots=True)
class Rerank:
    """The stage: ``reranker`` over the first ``depth`` hits, fused with ``weight``."""

    reranker: Reranker
    depth: int = 10
    weight: float = 1.0
    budget_s: float = 2.0  # the most of a request's time it may take

    async def apply(self, query: str, hits: list[Hit], deadline: float) -> tuple[list[Hit], str]:
        """The hits reordered, and one line for the route's reasons."""
        head, tail = hits[: self.depth], hits[self.depth :]
        if len(head) < 2:
            return hits, ""
        until = min(deadline, time.monotonic() + self.budget_s)
        try:
            async with asyncio.timeout(max(until - time.monotonic(), 0.0)):
                scores = await self.reranker.scores(query, head, until)
        except TimeoutError:
            return hits, f"rerank {self.reranker.name}: out of time, fused order kept"
        except Exception as exc:  # a reranker's failure costs the order, never the search
            log.warning("rerank %s failed: %r", self.reranker.name, exc)
            return hits, f"rerank {self.reranker.name} failed ({type(exc).__name__}): fused order kept"
        if len(scores) != len(head) or all(s is None for s in scores):
            return hits, f"rerank {self.reranker.name}: no hit scored, fused order kept"
        return reorder(head, scores, self.weight) + tail, (
            f"rerank {self.reranker.name}: first {len(head)} hits, fused score + {self.weight:g} × its score"
        )


def precise(route: Route) -> bool:
    """Whether the question names what it wants by its words (a clause, an identifier, a quoted
    phrase): the lexical leg found it, and no sentence's meaning says "Article 17" (GDPR,
    route both: clause success@1 0.82 → 0.73 when such questions were reranked)."""
    f = route.features
    return f is not None and bool(f.clauses or f.identifiers or f.quoted)


def reorder(hits: Sequence[Hit], scores: Sequence[float | None], weight: float) -> list[Hit]:
    """``hits`` by z(fused score) + weight · z(score); an unscored hit counts as the mean.

    Each hit gets ``legs["rerank"]`` and, as its ``score``, the fused score of its new place."""
    known = [s for s in scores if s is not None]
    mean = float(np.mean(known))
    rerank = np.asarray([mean if s is None else s for s in scores], dtype=np.float64)
    fused = np.asarray([h.score for h in hits], dtype=np.float64)
    combined = _z(fused) + weight * _z(rerank)
    order = sorted(range(len(hits)), key=lambda i: (-combined[i], i))
    by_rerank = {i: r for r, i in enumerate(sorted(range(len(hits)), key=lambda i: (-rerank[i], i)), 1)}
    places = sorted(fused, reverse=True)
    out = []
    for place, i in enumerate(order):
        hit = hits[i]
        legs = dict(hit.legs)
        if scores[i] is not None:
            legs[LEG] = LegScore(by_rerank[i], float(rerank[i]))
        out.append(replace(hit, score=float(places[place]), legs=legs))
    return out


def _z(values: np.ndarray) -> np.ndarray:
    spread = float(values.std())
    return (values - values.mean()) / spread if spread > 1e-12 else np.zeros_like(values)


class SentenceReranker:
    """Each hit's best sentence, by cosine to the question, among the sentences the question's own
    model embeds (a split embedder: MiniLM for English, e5 for Chinese). A hit of the other
    language is not scored (it keeps its fused place): e5's cosines run 0.3-0.4 above MiniLM's
    for the same match, and one z-score over both raised a Chinese article over GDPR Article 17
    for "can I make them delete everything they hold about me". Sentence vectors come from
    ``store`` (written at ingest); the ones missing are embedded here and kept there."""

    name = "sentences"

    def __init__(self, embedder: AsyncEmbedder, spaces: Spaces, store: EmbeddingCache | None) -> None:
        self._embedder = embedder
        self._spaces = spaces
        self._store = store
        self._keeping: set[asyncio.Task[None]] = set()

    async def scores(self, query: str, hits: Sequence[Hit], deadline: float) -> list[float | None]:
        space = self._spaces.of(query)
        per_hit = [[t for t in rerank_sentences(h.chunk.text) if self._spaces.of(t) == space] for h in hits]
        unique = list(dict.fromkeys(t for sentences in per_hit for t in sentences))
        if not unique:
            return [None] * len(hits)
        own = np.asarray(await self._embedder.embed_query(query), dtype=np.float32).reshape(-1)
        best = dict(zip(unique, _cosines(await self._vectors(unique), own).tolist(), strict=True))
        return [max(best[t] for t in sentences) if sentences else None for sentences in per_hit]

    async def _vectors(self, texts: list[str]) -> np.ndarray:
        store = self._store
        found = await asyncio.to_thread(store.get_many, texts) if store is not None else {}
        missing = [i for i in range(len(texts)) if i not in found]
        fresh = await self._embed_and_keep([texts[i] for i in missing]) if missing else None
        rows = dict(found)
        if fresh is not None:
            rows.update(zip(missing, np.asarray(fresh, dtype=np.float32), strict=True))
        return np.stack([np.asarray(rows[i], dtype=np.float32).reshape(-1) for i in range(len(texts))])

    async def settled(self) -> None:
        """Until the sentence vectors being embedded for searches that ran out of time are kept."""
        await asyncio.gather(*self._keeping, return_exceptions=True)

    async def _embed_and_keep(self, texts: list[str]) -> np.ndarray:
        """Embedded on a thread of their own (neither behind a bulk ingest nor in the queries'
        micro-batches) and kept in the store even when this search runs out of time first: the
        next search that meets these chunks finds them. The search waits for the vectors only,
        not for the store's write (a SQLite transaction, queued behind other writers)."""
        embedding = asyncio.create_task(asyncio.to_thread(self._embed, texts))
        keeping = asyncio.create_task(self._keep(texts, embedding))
        self._keeping.add(keeping)
        keeping.add_done_callback(self._keeping.discard)
        return await asyncio.shield(embedding)

    def _embed(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self._embedder.sync.embed(texts), dtype=np.float32)

    async def _keep(self, texts: list[str], embedding: asyncio.Task[np.ndarray]) -> None:
        try:
            vectors = await embedding
        except Exception:  # the search that asked sees the failure
            return
        if self._store is not None:
            try:
                await asyncio.to_thread(self._store.put_many, texts, vectors)
            except Exception as exc:  # losing them costs a later search the embedding, no more
                log.warning("rerank: sentence vectors not kept (%r)", exc)


def _cosines(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    norms = np.maximum(np.linalg.norm(matrix, axis=1), 1e-12) * max(float(np.linalg.norm(vector)), 1e-12)
    return np.asarray((matrix @ vector) / norms)
