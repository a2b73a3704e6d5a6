"""The question's instructions, cut from the text that is searched. Pure.

"员工生病请假需要什么证明？不超过30字" asks about sick-leave proof; "不超过30字" says how to answer.
Searched, "超过" matches a late-arrival rule and "30" reads as UDHR Article 30. The phrasings
are data: the output constraints of prompts/constraints.yaml (also what the answer flow parses)
and prompts/instructions.yaml (what that table lacks, the filler words, where a span may stand).

A span is cut only where it stands as a clause of its own (between clause boundaries), or at
the very start or end of the question for the phrasings that never read as content there; see
prompts/instructions.yaml. A question that is nothing but instructions is searched as it is.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

import yaml

from indexers.text.structure import CN_NUMERALS
from rag_router.search.clauses import Span
from rag_router.settings import PROMPTS

_NUMBER_WORDS = (
    "a single|single|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|"
    "thirty|forty|fifty|a hundred|hundred"
)
_N = rf"(?:\d+|{_NUMBER_WORDS}|[{CN_NUMERALS}]+)"
_FIELDS = r"(?:[A-Za-z_]\w*(?:\s*(?:,|、|，|\band\b|和|及|与)\s*[A-Za-z_]\w*)*)"
_BOUNDARY = "?？.。!！;；,，:：\n…"
_TRIM = " \t,，;；:：、"


@dataclass(frozen=True, slots=True)
class _Rules:
    groups: tuple[tuple[str, re.Pattern[str]], ...]  # (group name, pattern)
    edge: frozenset[str]
    filler: re.Pattern[str]  # one filler word, with the whitespace around it


@dataclass(frozen=True, slots=True)
class _Run:
    start: int
    end: int
    groups: frozenset[str]


@functools.lru_cache(maxsize=1)
def _rules() -> _Rules:
    constraints: dict[str, Any] = yaml.safe_load((PROMPTS / "constraints.yaml").read_text(encoding="utf-8"))
    own: dict[str, Any] = yaml.safe_load((PROMPTS / "instructions.yaml").read_text(encoding="utf-8"))
    raw: list[tuple[str, str]] = []
    for name, value in constraints.items():
        patterns = [p for group in value.values() for p in group] if isinstance(value, dict) else value
        raw += [(name, p) for p in patterns]
    raw += [(name, p) for name, patterns in own["patterns"].items() for p in patterns]
    groups = tuple((name, _compile(p)) for name, p in raw)
    filler = re.compile(r"\s*(?:" + "|".join(own["filler"]) + r")(?![A-Za-z])\s*", re.IGNORECASE)
    return _Rules(groups, frozenset(own["edge"]), filler)


def _compile(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern.replace("{n}", _N).replace("{fields}", _FIELDS), re.IGNORECASE)


def find_instructions(text: str) -> list[Span]:
    """The spans of ``text`` (its own offsets) that are instructions on how to answer."""
    folded, origin = _fold(text)
    rules = _rules()
    runs = _runs(folded, rules)
    out: list[Span] = []
    for run in runs:
        start, end = _widen(folded, run, rules.filler)
        before, after = folded[:start].rstrip(), folded[end:].lstrip()
        head, tail = not before, not after.strip(_BOUNDARY + " ")
        clause = (head or before[-1] in _BOUNDARY) and (tail or after[0] in _BOUNDARY)
        # at the start only after a filler word ("用不超过200字概括…"): "不超过三十个字的标题"
        # is a question about titles
        edge = (tail or (head and start < run.start)) and bool(run.groups & rules.edge)
        if clause or edge:
            out.append((origin[start], origin[end]))
    return out


def strip_instructions(text: str, spans: list[Span] | None = None) -> str:
    """``text`` without its instruction spans (``find_instructions``' unless given): what is
    embedded and searched. ``text`` itself when it has none, or when nothing else is left."""
    spans = find_instructions(text) if spans is None else spans
    if not spans:
        return text
    parts, last = [], 0
    for start, end in spans:
        parts.append(text[last:start])
        last = end
    parts.append(text[last:])
    kept = parts[0]
    for part in parts[1:]:
        left, right = kept.rstrip(), part.lstrip()
        # "…security? ." → "…security?": the cut leaves one clause boundary, not two
        if left and right and left[-1] in _BOUNDARY and right[0] in _BOUNDARY:
            right = right[1:]
        kept = f"{left} {right}" if left and right and _needs_space(left[-1], right[0]) else left + right
    kept = kept.strip(_TRIM)
    kept = kept.lstrip(_BOUNDARY + _TRIM)
    return kept if any(ch.isalnum() for ch in kept) else text


def _needs_space(a: str, b: str) -> bool:
    return a.isascii() and b.isascii() and (a.isalnum() or a in _BOUNDARY) and b.isalnum()


def _fold(text: str) -> tuple[str, list[int]]:
    """NFKC per character (full-width "ＪＳＯＮ", "３０" fold), and where each folded character
    came from, so spans found in the folded text cut the original."""
    out: list[str] = []
    origin: list[int] = []
    for i, ch in enumerate(text):
        folded = unicodedata.normalize("NFKC", ch)
        out.append(folded)
        origin.extend([i] * len(folded))
    origin.append(len(text))
    return "".join(out), origin


def _runs(folded: str, rules: _Rules) -> list[_Run]:
    """Every instruction match, neighbours joined when only filler or a comma lies between."""
    matches = sorted(
        (m.start(), m.end(), name)
        for name, pattern in rules.groups
        for m in pattern.finditer(folded)
        if m.end() > m.start()
    )
    runs: list[_Run] = []
    for start, end, name in matches:
        if runs and _joinable(folded[runs[-1].end : start], rules.filler):
            last = runs[-1]
            runs[-1] = _Run(last.start, max(last.end, end), last.groups | {name})
        else:
            runs.append(_Run(start, end, frozenset({name})))
    return runs


def _joinable(gap: str, filler: re.Pattern[str]) -> bool:
    """Whether ``gap`` between two matches holds only filler words, spaces and one comma."""
    if not gap:
        return True
    if gap.count(",") + gap.count("，") + gap.count("、") > 1:
        return False
    rest = re.sub(r"[,，、]", " ", gap)
    return re.fullmatch(rf"(?:{filler.pattern})*\s*", rest, re.IGNORECASE) is not None


def _widen(folded: str, run: _Run, filler: re.Pattern[str]) -> Span:
    """The run with the filler words on either side ("please answer …", "…回答")."""
    start, end = run.start, run.end
    while (m := filler.match(folded, end)) and m.end() > end:
        end = m.end()
    while (begin := _filler_before(folded, start, filler)) is not None:
        start = begin
    return start, end


def _filler_before(folded: str, start: int, filler: re.Pattern[str]) -> int | None:
    """Where a filler word that ends at ``start`` begins (the longest), or None."""
    for begin in range(max(0, start - 24), start):
        if filler.fullmatch(folded, begin, start) and _word_edge(folded, begin):
            return begin
    return None


def _word_edge(folded: str, i: int) -> bool:
    """A filler word must not start inside a Latin word ("it" in "limit")."""
    return i == 0 or not (folded[i - 1].isascii() and folded[i - 1].isalnum() and folded[i].isascii())
