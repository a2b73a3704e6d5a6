"""Extractive answers: the sentences of the top passages that best match the question, cited.

Used when no LLM is configured (``mode: "extractive"``) and whenever the LLM fails (then also
``degraded: true``). Pure: sentences are scored by the question's analysed terms they contain
(weighted by how rare the term is among the passages) plus a bonus for higher-ranked passages,
then kept in reading order within the word / character / sentence limits.

A list marker that the sentence splitter leaves on its own ("1.", "(a)", "（二）") is not a
sentence and is never quoted. When no whole sentence fits the limit, the best one is narrowed to
the run of its clauses (cut at ，；：,;:) that holds most of the question's terms and fits, marked
"…" where it was cut ("…对不法侵害人造成损害的，属于正当防卫，不负刑事责任。"); a single clause
still too long is cut at a word (or, in Chinese, a character). Text is quoted as stored: the
caller passes the chunks' own text, not the prompt's cleaned copy.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence

from indexers.text.chunk import split_sentences
from indexers.text.lexical import Analyzer
from rag_router.answer.prompting import Constraints, Source, count_words

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
            if not _says_something(sentence):
                continue
            sentence = _quotable(sentence)
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
    if not chosen and candidates:  # no whole sentence fits: the best part of the best one
        _, rank, position, sentence, n = min(candidates, key=lambda x: (-x[0], x[1], x[2]))
        fits = _fits(limit_words, c.max_chars, n)
        part = _best_clauses(sentence, wanted, analyzer, fits)
        if part is None:  # not even one clause fits: the cut clause that shows most terms
            cuts = [
                _cut(("…" if i else "") + clause.strip(), limit_words, c.max_chars, n)
                for i, clause in enumerate(_CLAUSE.findall(sentence))
            ]
            part = max(cuts, key=lambda cut: len(set(analyzer.terms(cut)) & wanted))
        chosen.append((rank, position, f"{part} [{n}]", n))
    if not chosen:
        return _NO_SOURCES["zh" if c.language == "zh" else "en"]
    ordered = [text for _, _, text, _ in sorted(chosen)]
    if c.format == "bullets":
        return "\n".join(f"- {t}" for t in ordered)
    return re.sub(r"\s+", " ", " ".join(ordered)).strip()


# "1.", "12)", "(a)", "iv.", "（二）", "一、": a list marker the splitter left as a sentence.
_MARKER = re.compile(
    r"^[\s(（\[]*(?:\d{1,3}|[A-Za-z]|[ivxlcIVXLC]{1,6}|[一二三四五六七八九十百]+)[.)）\]、．:：\s]*$"
)
_LETTER = re.compile(r"[^\W\d_]")


# "（二）", "(b)", "3.", "一、" before a clause's text: the list it came from is not quoted
_ENUMERATOR = re.compile(
    r"^\s*(?:[（(](?:\d{1,3}|[a-zA-Z]|[一二三四五六七八九十]+)[)）]|\d{1,3}[.)、]|[一二三四五六七八九十]+、)\s*"
)


def _quotable(sentence: str) -> str:
    """The sentence as an answer quotes it: no leading enumerator, no line break inside (a
    break between two ideographs is dropped, elsewhere it becomes a space)."""
    sentence = _ENUMERATOR.sub("", sentence)
    sentence = re.sub(r"(?<=[\u3400-\u9fff，、；：])\s*\n\s*(?=[\u3400-\u9fff])", "", sentence)
    return re.sub(r"\s*\n\s*", " ", sentence)


def _says_something(sentence: str) -> bool:
    return bool(_LETTER.search(sentence)) and not _MARKER.match(sentence)


_CLAUSE = re.compile(r"[^，,；;：:]+[，,；;：:]?\s*")


def _fits(max_words: int | None, max_chars: int | None, n: int) -> Callable[[str], bool]:
    def fits(text: str) -> bool:
        words_ok = not max_words or count_words(text) <= max_words
        return words_ok and (not max_chars or len(f"{text} [{n}]") + 1 <= max_chars)

    return fits


def _best_clauses(
    sentence: str, wanted: set[str], analyzer: Analyzer, fits: Callable[[str], bool]
) -> str | None:
    """The contiguous clauses of ``sentence`` that hold most question terms and fit (with "…"
    where cut): most terms, then most text, then the earliest. None when no clause fits alone."""
    clauses = _CLAUSE.findall(sentence)
    found = [set(analyzer.terms(c)) & wanted for c in clauses]
    best: tuple[int, int, int] | None = None
    best_text = None
    for i in range(len(clauses)):
        for j in range(i, len(clauses)):
            text = ("…" if i > 0 else "") + "".join(clauses[i : j + 1]).strip()
            if j + 1 < len(clauses):
                text = text.rstrip(" ,;:，；：、") + "…"
            if not fits(text):
                break
            key = (len(set().union(*found[i : j + 1])), len(text), -i)
            if best is None or key > best:
                best, best_text = key, text
    return best_text


def _cut(sentence: str, max_words: int | None, max_chars: int | None, n: int) -> str:
    """The start of ``sentence`` within the limits (its citation included), ending in "…"."""
    room = max_chars - len(f" [{n}]") - 1 if max_chars else None
    if max_words and count_words(sentence) > max_words:
        if _CJK.search(sentence):  # Chinese counts characters as words
            sentence = sentence[: max(max_words - 1, 1)]
        else:
            sentence = " ".join(sentence.split()[: max(max_words, 1)])
        sentence = sentence.rstrip(" ,;:，；：、") + "…"
    if room is not None and len(sentence) > room:
        sentence = sentence[: max(room - 1, 1)].rstrip(" ,;:，；：、") + "…"
    return sentence


_CJK = re.compile(r"[\u3400-\u9fff]")
