"""Extractive answers: the sentences of the top passages that best match the question, cited.

Used when no LLM is configured (``mode: "extractive"``) and whenever the LLM fails (then also
``degraded: true``). Pure: sentences are scored by the question's analysed terms they contain
(weighted by how rare the term is among the passages) plus a bonus for higher-ranked passages,
then kept in reading order within the word / character / sentence limits.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from indexers.chunk import split_sentences
from indexers.lexical import Analyzer
from rag_router.prompting import Constraints, Source, count_words

DEFAULT_WORDS = 80
_NO_SOURCES = {"en": "No sources matched the question.", "zh": "没有找到与问题相关的资料。"}


def extractive_answer(question: str, sources: Sequence[Source], c: Constraints, analyzer: Analyzer) -> str:
    if not sources:
        return _NO_SOURCES["zh" if c.language == "zh" else "en"]
    wanted = set(analyzer.query_terms(question))
    candidates: list[tuple[float, int, int, str, int]] = []  # score, source rank, position, text, n
    doc_freq: dict[str, int] = {}
    per_source = []
    for source in sources:
        sentences = split_sentences(source.text)
        terms = [set(analyzer.terms(s)) for s in sentences]
        for t in set().union(*terms) if terms else set():
            doc_freq[t] = doc_freq.get(t, 0) + 1
        per_source.append((source, sentences, terms))
    for rank, (source, sentences, terms) in enumerate(per_source):
        for position, (sentence, found) in enumerate(zip(sentences, terms, strict=True)):
            overlap = sum(math.log(1 + len(sources) / doc_freq[t]) for t in found & wanted)
            score = overlap + 0.5 / (1 + rank) + (0.1 if position == 0 else 0.0)
            candidates.append((score, rank, position, sentence, source.n))
    limit_words = c.max_words or (None if c.max_chars or c.max_sentences else DEFAULT_WORDS)
    chosen: list[tuple[int, int, str, int]] = []
    used_words = used_chars = 0
    for _, rank, position, sentence, n in sorted(candidates, key=lambda x: (-x[0], x[1], x[2])):
        cited = f"{sentence} [{n}]"
        words, chars = count_words(sentence), len(cited) + 1
        if limit_words and used_words + words > limit_words:
            continue
        if c.max_chars and used_chars + chars > c.max_chars:
            continue
        if c.max_sentences and len(chosen) >= c.max_sentences:
            break
        chosen.append((rank, position, cited, n))
        used_words += words
        used_chars += chars
        if c.bullets and len(chosen) >= c.bullets:
            break
    if not chosen:
        return _NO_SOURCES["zh" if c.language == "zh" else "en"]
    ordered = [text for _, _, text, _ in sorted(chosen)]
    if c.format == "bullets":
        return "\n".join(f"- {t}" for t in ordered)
    return re.sub(r"\s+", " ", " ".join(ordered)).strip()
