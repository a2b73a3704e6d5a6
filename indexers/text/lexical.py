"""Text → terms for BM25 (tantivy) and BM25-style sparse vectors (Qdrant).

One analyzer for every tier, so a term means the same thing in both: Unicode word
tokens, lowercased, English stopwords removed (the ``stop-words`` list) and Snowball
stemming (PyStemmer). A run of CJK ideographs becomes its characters plus its overlapping
character bigrams ("正当防卫" → 正 当 防 卫 正当 当防 防卫), the classic dictionary-free
analysis for Chinese retrieval: on cn-criminal-law's topic queries BM25 over these terms ranks
the right article first for 0.902 of them, against 0.829 with jieba words and 0.866 with
bigrams alone, and the same on either half of the set (docs/benchmarks.md).
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import Stemmer
from stop_words import get_stop_words

# Bumped whenever the terms of the same text change; an index records it (indexers/manifest.py).
ANALYZER_VERSION = "3-cjk-apart-from-latin"
_CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
# A word never runs into ideographs: "第20条" is 第 · 20 · 条, "GDPR第17条" is gdpr · 第 · 17 · 条
# (version 2 read "20条" and "gdpr第17条" as single words, which nothing else matched).
_WORDS = re.compile(rf"[^\W_{_CJK}]+", re.UNICODE)  # what _RUNS finds in text without ideographs
_RUNS = re.compile(rf"([{_CJK}]+)|({_WORDS.pattern})", re.UNICODE)
_IDEOGRAPH = re.compile(rf"[{_CJK}]")
_MAX_TERM_LEN = 40
_ASCII_WORDS = re.compile(r"[a-z0-9]+")  # what _WORDS finds in lower-cased ASCII text
_MEMO_WORDS = 500_000


@lru_cache(maxsize=1)
def _english_stopwords() -> frozenset[str]:
    return frozenset(get_stop_words("en"))


class Analyzer:
    """Stateless apart from the stemmer's cache; safe to share between threads."""

    def __init__(self, *, stem: bool = True, stopwords: bool = True) -> None:
        self._stem = stem
        self._stopwords = _english_stopwords() if stopwords else frozenset()
        self._local = threading.local()
        self._memo: dict[str, str] = {}  # an ASCII word → its term, "" for none

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled by its settings (the Ray engine's workers analyse as the owner does)."""
        return (_analyzer, (self._stem, bool(self._stopwords)))

    def _stemmer(self) -> Stemmer.Stemmer:
        stemmer = getattr(self._local, "stemmer", None)
        if stemmer is None:
            stemmer = self._local.stemmer = Stemmer.Stemmer("english")
        return stemmer

    def terms(self, text: str) -> list[str]:
        """All terms in order, repeats kept (the document side needs term frequencies)."""
        lowered = text.lower()
        if lowered.isascii():  # the common case: no ideographs; each word's term memoised
            return self._memoised(_ASCII_WORDS.findall(lowered))
        if _IDEOGRAPH.search(lowered) is None:  # other scripts, symbols, accents: the same way
            return self._memoised(_WORDS.findall(lowered))
        stop = self._stopwords
        words: list[str] = []
        for cjk, word in _RUNS.findall(lowered):
            if cjk:
                words.extend(cjk_terms(cjk))
            elif word not in stop and len(word) <= _MAX_TERM_LEN:
                words.append(word)
        if not self._stem:
            return words
        stems: list[str] = self._stemmer().stemWords(words)
        return stems

    def _memoised(self, words: list[str]) -> list[str]:
        """Each word's term ("" for a stopword or an overlong word), from a memo by word: the
        same as the loop in ``terms``, a third of the time (a vocabulary repeats). Words of
        text without ideographs only: a word's term does not depend on its neighbours."""
        memo = self._memo
        try:
            return list(filter(None, map(memo.__getitem__, words)))
        except KeyError:
            pass
        new = list({w for w in words if w not in memo})
        kept = [w for w in new if w not in self._stopwords and len(w) <= _MAX_TERM_LEN]
        found = dict.fromkeys(new, "")
        found.update(zip(kept, self._stemmer().stemWords(kept) if self._stem else kept, strict=True))
        if len(memo) + len(found) > _MEMO_WORDS:  # a new dict: another thread may be reading this one
            memo = self._memo = {}
        memo.update(found)
        return list(filter(None, map(memo.__getitem__, words)))

    def query_terms(self, text: str) -> list[str]:
        """Unique terms in first-seen order (the query side scores each term once)."""
        return list(dict.fromkeys(self.terms(text)))


def _analyzer(stem: bool, stopwords: bool) -> Analyzer:
    return Analyzer(stem=stem, stopwords=stopwords)


def cjk_terms(run: str) -> list[str]:
    """A CJK run's characters, then its overlapping bigrams."""
    return [*run, *(run[i : i + 2] for i in range(len(run) - 1))]


@lru_cache(maxsize=1 << 18)  # a vocabulary repeats: hashing was a third of building a point
def term_id(term: str) -> int:
    """A stable 32-bit id for a term: the sparse-vector index (Qdrant indices are u32)."""
    return int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=4).digest(), "little")


def bm25_document_vector(
    terms: Sequence[str], *, k1: float = 1.2, b: float = 0.75, avg_len: float = 100.0
) -> tuple[list[int], list[float]]:
    """BM25's term-frequency part per term; the engine multiplies in IDF (Qdrant's IDF modifier)."""
    counts = Counter(terms)
    norm = k1 * (1.0 - b + b * len(terms) / avg_len)
    merged: dict[int, float] = {}
    for term, tf in counts.items():
        idx = term_id(term)
        merged[idx] = merged.get(idx, 0.0) + tf * (k1 + 1.0) / (tf + norm)
    indices = sorted(merged)
    return indices, [merged[i] for i in indices]


def bm25_query_vector(terms: Sequence[str]) -> tuple[list[int], list[float]]:
    indices = sorted({term_id(t) for t in terms})
    return indices, [1.0] * len(indices)
