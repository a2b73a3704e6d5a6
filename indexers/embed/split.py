"""Two dense models, one per language: each text is embedded by the model that reads it.

The default embedder (``RAG_EMBEDDING__MODEL=auto``). all-MiniLM-L6-v2 is the better English
model here (SciFact hybrid 0.74 against multilingual-e5-small's 0.72) and twice as fast, but it
reads no Chinese; multilingual-e5-small reads Chinese (cn-criminal-law topic success@1 0.89 with
the dense leg off → 0.96). So a chunk whose text is Chinese (``indexers.language``) is embedded by
the secondary model and every other chunk by the primary, and a query is embedded by the model
of its own language. The two models' vectors share a dimension but not a space, so each chunk
carries its language as a keyword term (``records.SPACE_KEY``) and a query's dense leg searches
only the chunks of its own model (``SearchQuery.space``); the lexical leg searches them all.

The secondary model is loaded on the first text that needs it (a service that never sees
Chinese never loads it; the first time on a machine it is also converted and exported, about a
minute on two cores). Token counts for the chunker are the primary's: for Chinese its WordPiece
counts one token per ideograph, never fewer than e5's SentencePiece does, so no chunk outgrows
either model's input.

On the Ray engine the prepare workers tokenize each chunk for its model; a row for the secondary
starts with ``SECONDARY`` (a token id no vocabulary has), which the embedding actor's
``embed_ids`` strips to send the row to that model.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from indexers.embed.base import PassEmbedder
from indexers.embed.embedder import query_function
from indexers.embed.tokens import Tokenizers
from indexers.language import text_language
from indexers.records import Chunk, Vector

log = logging.getLogger(__name__)

SECONDARY = -1  # first id of a token row for the secondary model (Ray's prepare → actor)
LANGUAGES = frozenset({"zh"})  # the secondary model's: the packaged pair's split


class Lazy:
    """A model loaded on first use, once, by whichever thread asks first (the others wait).

    A load that fails (no disk for the conversion, a missing package) is not tried again for
    ``retry_s``: meanwhile every ``get`` raises at once with the first error, so a search
    degrades to its lexical leg instead of waiting for another conversion attempt each time."""

    def __init__(self, load: Callable[[], PassEmbedder], name: str, retry_s: float = 60.0) -> None:
        self._load = load
        self.name = name
        self._retry_s = retry_s
        self._model: PassEmbedder | None = None
        self._failed: tuple[float, Exception] | None = None
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple[Any, ...]:
        """Another process gets the recipe, and loads the model there on its own first use."""
        return (Lazy, (self._load, self.name, self._retry_s))

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def get(self) -> PassEmbedder:
        if self._model is None:
            with self._lock:
                if self._model is None:
                    self._model = self._first()
        return self._model

    def _first(self) -> PassEmbedder:
        if self._failed is not None and time.monotonic() - self._failed[0] < self._retry_s:
            raise RuntimeError(f"{self.name} could not be loaded: {self._failed[1]}") from self._failed[1]
        log.info("loading %s for the first text in its language (once)", self.name)
        try:
            model = self._load()
            if model.model_name != self.name:  # the manifest recorded ``name``
                raise RuntimeError(f"secondary model loaded as {model.model_name!r}, not {self.name!r}")
            # ONNX Runtime's first run sets up its buffers (~1 s here against 20 ms after): done
            # now, with the load, not inside the first query's time budget
            model.embed_queries(["预热"])
        except Exception as exc:
            log.error("loading %s failed (retried in %.0f s): %s", self.name, self._retry_s, exc)
            self._failed = (time.monotonic(), exc)
            raise
        self._failed = None
        return model


class SplitEmbedder(PassEmbedder):
    """``primary`` for every text but those in ``languages``, which ``secondary`` embeds."""

    def __init__(self, primary: PassEmbedder, secondary: Lazy, languages: frozenset[str] = LANGUAGES) -> None:
        self.primary = primary
        self.secondary = secondary
        self.languages = languages
        self._dim = primary.dim
        self.device = getattr(primary, "device", "cpu")

    @property
    def model_name(self) -> str:
        langs = ",".join(sorted(self.languages))
        return f"{self.primary.model_name} | {langs}: {self.secondary.name}"

    def space(self, text: str) -> str:
        """The vector space ``text`` is embedded in: its language (the keyword term's value)."""
        return text_language(text)

    @property
    def loaded(self) -> bool:
        """Whether every model is loaded (no text will wait for one)."""
        return self.secondary.loaded

    def pending(self, text: str) -> Callable[[], object] | None:
        """What loads the model that embeds ``text``, when that model is not loaded yet."""
        if self.secondary.loaded or self.space(text) not in self.languages:
            return None
        return self.secondary.get

    def _secondary(self) -> PassEmbedder:
        model = self.secondary.get()
        if model.dim != self._dim:
            raise ValueError(f"{self.secondary.name} has dimension {model.dim}, the primary {self._dim}")
        return model

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self.primary.count_tokens(texts)

    def embed(self, texts: Sequence[str]) -> Vector:
        return self._route(texts, self.primary.embed, lambda m: m.embed)

    def embed_queries(self, texts: Sequence[str]) -> Vector:
        return self._route(texts, query_function(self.primary), query_function)

    def _route(
        self,
        texts: Sequence[str],
        primary: Callable[[Sequence[str]], Vector],
        secondary: Callable[[PassEmbedder], Callable[[Sequence[str]], Vector]],
    ) -> Vector:
        first, second = _sides([self.space(t) in self.languages for t in texts])
        if not second:
            return primary(texts)
        return self._vectors(
            len(texts),
            (first, lambda: primary([texts[i] for i in first])),
            (second, lambda: secondary(self._secondary())([texts[i] for i in second])),
        )

    def _vectors(self, n: int, *parts: tuple[list[int], Callable[[], Vector]]) -> Vector:
        """Each part's vectors in its rows (a part with no rows is not run)."""
        out = np.zeros((n, self._dim), dtype=np.float32)
        for rows, run in parts:
            if rows:
                out[rows] = run()
        return out

    def with_threads(self, threads: int, *, max_batch: int | None = None) -> SplitEmbedder:
        """The query lane's copy: the primary in a session of its own (``OnnxEmbedder``); the
        secondary shared (one ONNX session serves every thread; it is loaded once)."""
        primary: Any = self.primary
        return SplitEmbedder(
            primary.with_threads(threads, max_batch=max_batch), self.secondary, self.languages
        )

    # the Ray engine: token ids made by its prepare workers, vectors by its actors ---------------

    def tokenizers(self) -> Tokenizers:
        return SplitTokenizers.of(self)

    def embed_ids(self, ids: Sequence[Sequence[int]]) -> Vector:
        first, second = _sides([len(row) > 0 and row[0] == SECONDARY for row in ids])
        if not second:
            return self.primary.embed_ids(ids)
        return self._vectors(
            len(ids),
            (first, lambda: self.primary.embed_ids([ids[i] for i in first])),
            (second, lambda: self._secondary().embed_ids([list(ids[i])[1:] for i in second])),
        )

    def passes_loader(self) -> Callable[[], PassEmbedder] | None:
        primary = self.primary.passes_loader()
        if primary is None:
            return None
        return functools.partial(_load_split, primary, self.secondary, self.languages)


def _load_split(
    primary: Callable[[], PassEmbedder], secondary: Lazy, languages: frozenset[str]
) -> SplitEmbedder:
    return SplitEmbedder(primary(), secondary, languages)


@dataclasses.dataclass(frozen=True)
class SplitTokenizers(Tokenizers):
    """The primary's tokenizers (the chunker counts with them), and the secondary's for the
    chunks in its languages, built on the first such chunk (a Ray worker that only sees English
    never loads them)."""

    secondary: Lazy | None = None
    languages: frozenset[str] = LANGUAGES

    @classmethod
    def of(cls, split: SplitEmbedder) -> SplitTokenizers:
        p = split.primary.tokenizers()
        return cls(
            p.tokenizer, p.counter, p.max_len, p.passage_prefix, p.words, split.secondary, split.languages
        )

    def __reduce__(self) -> tuple[Any, ...]:
        base = Tokenizers.__reduce__(self)[1]
        return (_split_tokenizers, (base, self.secondary, self.languages))

    def _secondary(self) -> Tokenizers:
        second: Tokenizers | None = self.__dict__.get("_second")
        if second is None:
            if self.secondary is None:
                raise RuntimeError("split tokenizers without a secondary model")
            second = self.secondary.get().tokenizers()
            self.__dict__["_second"] = second  # a cache, not a field: frozen like its base
        return second

    def passages(self, texts: Sequence[str]) -> list[list[int]]:
        first, second = _sides([text_language(t) in self.languages for t in texts])
        if not second:
            return Tokenizers.passages(self, texts)
        own = Tokenizers.passages(self, [texts[i] for i in first])
        return self._marked(len(texts), first, own, second, [texts[i] for i in second])

    def chunk_passages(
        self, chunks: Sequence[Chunk], text_ids: Sequence[list[int] | None]
    ) -> list[list[int]]:
        first, second = _sides([text_language(c.embed_text) in self.languages for c in chunks])
        if not second:
            return Tokenizers.chunk_passages(self, chunks, text_ids)
        own = Tokenizers.chunk_passages(self, [chunks[i] for i in first], [text_ids[i] for i in first])
        return self._marked(len(chunks), first, own, second, [chunks[i].embed_text for i in second])

    def _marked(
        self, n: int, first: list[int], own: list[list[int]], second: list[int], texts: list[str]
    ) -> list[list[int]]:
        """The primary's rows as they are, the secondary's (of ``texts``) after ``SECONDARY``."""
        out: list[list[int]] = [[] for _ in range(n)]
        for i, ids in zip(first, own, strict=True):
            out[i] = ids
        for i, ids in zip(second, self._secondary().passages(texts), strict=True):
            out[i] = [SECONDARY, *ids]
        return out


def _sides(second: Sequence[bool]) -> tuple[list[int], list[int]]:
    """The positions that go to the primary model, and those that go to the secondary."""
    return [i for i, s in enumerate(second) if not s], [i for i, s in enumerate(second) if s]


def _split_tokenizers(
    base: tuple[Any, ...], secondary: Lazy | None, languages: frozenset[str]
) -> SplitTokenizers:
    tokenizer, counter, max_len, prefix, words = base
    return SplitTokenizers(tokenizer, counter, max_len, prefix, words, secondary, languages)
