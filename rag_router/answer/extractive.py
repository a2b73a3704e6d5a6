"""Extractive answers: the sentences of the top passages that answer the question, cited.

Used when no LLM is configured (``mode: "extractive"``) and whenever the LLM fails (then also
``degraded: true``). Pure. Each sentence of the sources is scored by how much of the question it
covers: the IDF-weighted share of the question's analysed terms it holds (IDF over the sources'
sentences, so the topic word every sentence repeats counts little), plus a small prior for the
higher-ranked passage. The answer leads with the best sentence; further sentences come from its
own document when they add question terms it lacks, from another document only when they add
many (``_MORE_SAME`` / ``_MORE_OTHER``), within the default length or the asked-for limits.
Bullet and sentence counts are honoured when the sources have that many sentences.

Never quoted: a heading line (Markdown ``#``, or a short line without sentence punctuation: a
title), a list marker the splitter left on its own ("1.", "(a)", "（二）"). Chinese sentences end at
。！？ (not at "；", which separates clauses of one sentence) and their citation follows with no
space ("…不负刑事责任。[1]"). When no whole sentence fits the limit, the best one is narrowed to
the run of its clauses (cut at ，；：,;:) that holds most of the question's terms and fits, marked
"…" where it was cut; a single clause still too long is cut at a word (or, in Chinese, a
character). Text is quoted as stored: the caller passes the chunks' own text, not the prompt's
cleaned copy.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

import yaml

from indexers.text.lexical import Analyzer
from indexers.text.structure import after_front_matter
from rag_router.answer.prompting import Constraints, Source, count_words
from rag_router.search.instructions import strip_instructions
from rag_router.settings import PROMPTS

DEFAULT_WORDS = 60  # an answer with no stated limit: the lead sentence and what completes it
_MORE_SAME = 0.25  # share of the question's term weight a further sentence of the lead's document adds
_MORE_OTHER = 0.4  # ... and one of another document
# score bonus of the top passage's sentences (halved for the second, …); 0.1 before the rerank
# stage made the first hit likelier the answer's. 0.2 read better on the dev sets (qa-squad-dev
# gold first 0.833 against 0.827) but let a rare question word pick another article's sentence
# ("the declaration … right to education" led with Article 2's "rights … in this Declaration")
_RANK_PRIOR = 0.4
_CLOSE = 0.75  # under a limit the best sentence misses, a fitting one this close to it leads
SEMANTIC_WEIGHT = 0.2  # the sentence evidence beside the term share (each in [0, 1]; docs/answers.md)


@lru_cache(maxsize=1)
def _canned() -> dict[str, dict[str, str]]:
    data: dict[str, dict[str, str]] = yaml.safe_load((PROMPTS / "answers.yaml").read_text(encoding="utf-8"))
    return data


def canned(key: str, language: str | None) -> str:
    """A fixed sentence from ``prompts/answers.yaml`` in ``language`` (English when not listed)."""
    texts = _canned()[key]
    return texts.get(language or "en", texts["en"])


@dataclass(frozen=True, slots=True)
class _Sentence:
    text: str
    rank: int  # the source's rank
    position: int
    n: int  # the source's citation number
    found: frozenset[str]  # the question's terms it holds
    score: float = 0.0


def extractive_answer(
    question: str,
    sources: Sequence[Source],
    c: Constraints,
    analyzer: Analyzer,
    semantic: Mapping[str, float] | None = None,
    named: Sequence[str] = (),
    lead: str | None = None,
) -> str:
    """``semantic``: a quotable sentence (``quotable``) → its evidence in [0, 1], the sentence's
    cosine to the question scaled within the sources (``rag_router.answer.evidence``).
    ``named``: the clause and document the question named, whose words choose no sentence: "What
    does Section 3 of the travel policy say?" is answered with the section's first body
    sentences, "Does Section 3 allow business class?" with the one about business class.
    ``lead``: the sentence whose evidence answered a question the floor declined leads."""
    language = "zh" if c.language == "zh" else c.language
    wanted = set(analyzer.query_terms(strip_instructions(question))) or set(analyzer.query_terms(question))
    wanted -= set(analyzer.terms(" ".join(named)))
    wanted = (wanted - _shared_title_terms(sources, analyzer)) or wanted
    pool = _candidates(sources, wanted, analyzer, semantic or {})
    pool.sort(key=lambda s: s.text != lead)  # stable: the rest stay best first
    if not pool:
        return canned("no_sources", language)
    limit_words = c.max_words or (None if c.max_chars or c.max_sentences else DEFAULT_WORDS)
    chosen = _choose(pool, c, limit_words, _weights(pool, wanted))
    if not chosen:  # no whole sentence fits: the best part of the best one, without its label
        best = replace(pool[0], text=_CLAUSE_LABEL.sub("", pool[0].text, count=1) or pool[0].text)
        fits = _fits(limit_words, c.max_chars, best.n)
        part = _best_clauses(best.text, wanted, analyzer, fits)
        if part is None:  # not even one clause fits: the cut clause that shows most terms
            cuts = [
                _cut(("…" if i else "") + clause.strip(), limit_words, c.max_chars, best.n)
                for i, clause in enumerate(_CLAUSE.findall(best.text))
            ]
            part = max(cuts, key=lambda cut: len(set(analyzer.terms(cut)) & wanted))
        return cite(part, best.n)
    cited = [cite(s.text, s.n) for s in chosen]
    if c.format == "bullets":
        return "\n".join(f"- {t}" for t in cited)
    return _join(cited)


def _shared_title_terms(sources: Sequence[Source], analyzer: Analyzer) -> set[str]:
    """Terms in every source's title: they name the document ("What does the declaration say
    about the right to education?" — the UDHR), so they choose no sentence; a sentence that
    repeats one ("…set forth in this Declaration") is not the answer for it."""
    if len(sources) < 2:
        return set()
    return set.intersection(*(set(analyzer.terms(s.title or "")) for s in sources))


def quotable(text: str, title: str | None) -> list[str]:
    """The sentences of a source an answer may quote, as it quotes them: no heading, no title
    line of its own, no bare list marker."""
    folded = _folded(title or "")
    head, newline, rest = text.lstrip().partition("\n")
    if title and newline and _folded(head) == folded:  # a plain-text file's title line, whatever
        text = rest  # its case: not glued to the first sentence, which has no stop between them
    return [
        _quotable(sentence)
        for sentence in sentences(text)
        if _says_something(sentence) and not heading(sentence) and _folded(sentence) != folded
    ]


def _candidates(
    sources: Sequence[Source], wanted: set[str], analyzer: Analyzer, semantic: Mapping[str, float]
) -> list[_Sentence]:
    """Every quotable sentence, scored, best first (ties: higher-ranked source, earlier)."""
    raw: list[_Sentence] = []
    for rank, source in enumerate(sources):
        for position, text in enumerate(quotable(source.text, source.title)):
            found = frozenset(set(analyzer.terms(text)) & wanted)
            raw.append(_Sentence(text, rank, position, source.n, found))
    weights = _weights(raw, wanted)
    total = sum(weights.values()) or 1.0
    scored = [
        _Sentence(
            s.text,
            s.rank,
            s.position,
            s.n,
            s.found,
            sum(weights[t] for t in s.found) / total
            + _RANK_PRIOR / (1 + s.rank)
            + SEMANTIC_WEIGHT * semantic.get(s.text, 0.0),
        )
        for s in raw
    ]
    return sorted(scored, key=lambda s: (-s.score, s.rank, s.position))


def _weights(pool: Sequence[_Sentence], wanted: set[str]) -> dict[str, float]:
    """IDF of each question term over the candidate sentences (a term none holds weighs 0)."""
    df: dict[str, int] = {}
    for s in pool:
        for t in s.found:
            df[t] = df.get(t, 0) + 1
    return {t: math.log(1 + len(pool) / df[t]) if t in df else 0.0 for t in wanted}


def _choose(
    pool: list[_Sentence], c: Constraints, limit_words: int | None, weights: dict[str, float]
) -> list[_Sentence]:
    """The lead sentence, then those that add to it, within the limits (module docstring)."""
    count = c.bullets or c.max_sentences
    room = _Room(limit_words, c.max_chars)
    best = pool[0].score
    lead = next((s for s in pool if s.score >= _CLOSE * best and room.takes(s)), None)
    if lead is None:
        return []
    chosen = [lead]
    room.add(lead)
    covered = set(lead.found)
    total = sum(weights.values()) or 1.0
    while not count or len(chosen) < count:
        rest = [s for s in pool if s not in chosen and room.takes(s)]
        if not rest:
            break
        gain = _gainer(weights, covered, total)
        if count:  # N points or sentences asked for: the next best, the lead's document first
            pick = max(rest, key=lambda s: (s.score + (0.2 if s.n == lead.n else 0.0), -s.rank))
        else:
            useful = [s for s in rest if gain(s) >= (_MORE_SAME if s.n == lead.n else _MORE_OTHER)]
            if not useful:
                break
            pick = max(useful, key=lambda s: (gain(s), s.score))
        chosen.append(pick)
        room.add(pick)
        covered |= pick.found
    # the lead first, the rest in reading order (its document first)
    return [lead, *sorted(chosen[1:], key=lambda s: (s.n != lead.n, s.rank, s.position))]


def _gainer(weights: dict[str, float], covered: set[str], total: float) -> Callable[[_Sentence], float]:
    """The share of the question's term weight a sentence adds to what is ``covered``."""
    frozen = frozenset(covered)
    return lambda s: sum(weights[t] for t in s.found - frozen) / total


class _Room:
    """What is left of the word and character limits (a sentence's citation counts)."""

    def __init__(self, words: int | None, chars: int | None) -> None:
        self.words, self.chars = words, chars
        self.used_words = self.used_chars = 0

    def takes(self, s: _Sentence) -> bool:
        words, chars = count_words(s.text), len(cite(s.text, s.n)) + 1
        if self.words and self.used_words + words > self.words:
            return False
        return not (self.chars and self.used_chars + chars > self.chars)

    def add(self, s: _Sentence) -> None:
        self.used_words += count_words(s.text)
        self.used_chars += len(cite(s.text, s.n)) + 1


def cite(text: str, n: int) -> str:
    """``text [n]``; after Chinese text no space ("…责任。[1]")."""
    return f"{text}[{n}]" if _CJK_END.search(text) else f"{text} [{n}]"


def _join(cited: list[str]) -> str:
    out = ""
    for piece in cited:
        if out and not (_CJK.match(piece) and out.endswith("]") and _CJK_CITED.search(out)):
            out += " "
        out += piece
    return re.sub(r"[ \t]+", " ", out).strip()


# A sentence ends at . ! ? (with closing quotes/brackets) before whitespace, at CJK 。！？ (with
# closing quotes), or at a blank line; "；" joins the clauses of one sentence. A line break starts
# a new sentence only before a list item or a heading, or after a heading line.
_END = re.compile(r"(?<=[.!?])([\"'”’)\]]*)\s+|(?<=[。！？])([”’」』）)]*)")
_ITEM = re.compile(
    r"^\s*(?:#{1,6}\s|[-*•+]\s|\d{1,3}[.)、]|[（(](?:\d{1,3}|[a-zA-Z]|[一二三四五六七八九十]+)[)）]"
    r"|[一二三四五六七八九十]+、|第[一二三四五六七八九十百零〇\d]+[条章节])"
)


def sentences(text: str) -> list[str]:
    """The sentences of ``text`` as an answer quotes them (the module docstring says where one ends)."""
    out: list[str] = []
    for block in re.split(r"\n\s*\n", after_front_matter(text)):
        units: list[list[str]] = []
        for line in block.split("\n"):
            if not units or _ITEM.match(line) or heading(units[-1][-1]):
                units.append([line])
            else:
                units[-1].append(line)
        for unit in units:
            if len(unit) == 1 and heading(unit[0]):  # "## Section 3. Air travel" is one line
                out.append(unit[0])
                continue
            joined, start = "\n".join(unit), 0
            for m in _END.finditer(joined):
                end = m.end(1) if m.group(1) else (m.end(2) if m.group(2) else m.start())
                out.append(joined[start:end])
                start = m.end()
            out.append(joined[start:])
    return [s.strip() for s in out if s.strip()]


_PUNCTUATED = re.compile(r"[.!?。！？;；:：,，、…\"'”’]\s*$|[,，;；。、：]")
_CLAUSE_TITLE = re.compile(r"\s*第[一二三四五六七八九十百零〇\d]+[条章节]")  # "第三条 考勤": a title
# "第八条 " before an article's text: under a limit the words go before the label
_CLAUSE_LABEL = re.compile(r"^\s*第[一二三四五六七八九十百零〇\d]+条[ \t\u3000]*(?=\S)")


def _folded(text: str) -> str:
    return re.sub(r"[\W_]+", "", text.lower())


def heading(line: str) -> bool:
    """A heading, never quoted: a Markdown "#" line, or a title — a short single line with no
    punctuation inside or at its end, not a list item, its words capitalised ("Section 3
    Security", "第三条 考勤"). A hard-wrapped line of running text ("The company lends a monitor
    and") is none of these."""
    line = line.strip()
    if line.startswith("#"):
        return True
    if (
        not line
        or "\n" in line
        or _PUNCTUATED.search(line)
        or (_ITEM.match(line) and not _CLAUSE_TITLE.match(line))
    ):
        return False
    if _CJK.search(line):
        return len(line) <= 15
    words = line.split()
    capitalised = sum(1 for w in words if w[:1].isupper() or w[:1].isdigit())
    return len(words) <= 8 and capitalised * 2 > len(words)


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
        return words_ok and (not max_chars or len(cite(text, n)) + 1 <= max_chars)

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
    room = max_chars - len(cite(sentence, n)) + len(sentence) - 1 if max_chars else None
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
_CJK_END = re.compile(r"[\u3400-\u9fff\u3000-\u303f\uff00-\uffef][“”‘’…]*\s*$")
_CJK_CITED = re.compile(r"[\u3400-\u9fff\u3000-\u303f\uff00-\uffef]\[\d+\]$")
