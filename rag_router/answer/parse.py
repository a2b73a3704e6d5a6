"""What models really emit → JSON objects and citations. Never raises on model output.

JSON: extract the object (code fences, prose around it, a truncated tail) → normalise what
models get wrong (Chinese quotes, thousands separators in numbers) → ``json`` → ``json_repair``
→ ``json5``. What still fails is reported as unparseable with the reason; the answer flow may
then spend one self-repair call on it (``prompts/templates/repair.j2``).

Citations: ``[n]``, ``[n, m]``, ``[n-m]`` (and full-width brackets) → source numbers; numbers
outside 1..n are dropped and reported.

Grounding (``ground``): citations cannot depend on a model remembering to write them (SmolLM2-135M
wrote ``[n]`` in one answer in ten). After generation, each answer sentence without a valid
marker is attributed to the source holding most of its analysed terms, when that source holds at
least ``SUPPORT`` of them, and gets its marker; a sentence that repeats the prompt's own lines
(the rules, the delimiters, "Question: …") is removed, never shown. The caller learns how many
sentences made a claim and how many a source supports: an answer with claims and no support is
not presented as grounded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import json5
import json_repair

Method = Literal["json", "normalised", "repair", "json5"]


@dataclass(frozen=True, slots=True)
class Parsed:
    value: dict[str, Any] | None
    method: Method | None = None
    error: str | None = None


_FENCE = re.compile(r"```(?:json|JSON|json5)?\s*\n?(.*?)(?:```|\Z)", re.DOTALL)
_CN_QUOTES = str.maketrans({"“": '"', "”": '"', "„": '"', "‘": "'", "’": "'", "：": ":", "，": ","})
_THOUSANDS = re.compile(
    r"(?<=[:\[,]\s)(-?\d{1,3}(?:,\d{3})+(?:\.\d+)?)(?=\s*[,}\]])|(?<=[:\[,])(-?\d{1,3}(?:,\d{3})+(?:\.\d+)?)(?=\s*[,}\]])"
)


def extract_object(text: str) -> str | None:
    """The first ``{…}`` in the text (inside a code fence if there is one); a cut-off tail is kept."""
    fenced = _FENCE.search(text)
    if fenced and "{" in fenced.group(1):
        text = fenced.group(1)
    start = text.find("{")
    if start < 0:
        return None
    depth, in_string, escaped = 0, False, False
    for i, ch in enumerate(text[start:], start):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[start : i + 1]
    return text[start:]  # truncated: the repairers close it


def normalise(candidate: str) -> str:
    """Chinese quotes and punctuation outside the ASCII set, and 1,234-style numbers."""
    out = candidate.translate(_CN_QUOTES)
    return _THOUSANDS.sub(lambda m: (m.group(1) or m.group(2)).replace(",", ""), out)


def parse_json(text: str) -> Parsed:
    candidate = extract_object(text)
    if candidate is None:
        return Parsed(None, error="no JSON object in the output")
    attempts: list[tuple[Method, Any]] = [
        ("json", lambda: json.loads(candidate)),
        ("normalised", lambda: json.loads(normalise(candidate))),
        ("repair", lambda: json_repair.loads(normalise(candidate), skip_json_loads=True)),
        ("json5", lambda: json5.loads(normalise(candidate))),
    ]
    error = ""
    for method, attempt in attempts:
        try:
            value = attempt()
        except (ValueError, TypeError, RecursionError) as exc:
            error = f"{type(exc).__name__}: {exc}"
            continue
        if isinstance(value, dict) and value:
            return Parsed(value, method)
        error = f"{method} gave {type(value).__name__}, not an object"
    return Parsed(None, error=error or "unparseable")


_CITATION = re.compile(r"[\[［【]\s*(\d+(?:\s*(?:[,，、;]|[-–~～])\s*\d+)*)\s*[\]］】]")


@dataclass(frozen=True, slots=True)
class Citations:
    numbers: list[int] = field(default_factory=list)  # valid, in first-cited order
    dropped: list[int] = field(default_factory=list)  # cited but outside 1..n


def parse_citations(text: str, n_sources: int) -> Citations:
    seen: dict[int, None] = {}
    dropped: dict[int, None] = {}
    for m in _CITATION.finditer(text):
        for part in re.split(r"\s*[,，、;]\s*", m.group(1)):
            bounds = re.split(r"\s*[-–~～]\s*", part)
            lo, hi = int(bounds[0]), int(bounds[-1])
            numbers = range(lo, hi + 1) if lo <= hi and hi - lo < 50 else [lo, hi]
            for n in numbers:
                (seen if 1 <= n <= n_sources else dropped)[n] = None
    return Citations(list(seen), list(dropped))


# grounding -----------------------------------------------------------------------------------

SUPPORT = 0.5  # share of a sentence's analysed terms a source must hold to support it
LEAK = 0.6  # share of a prompt line's words an answer sentence repeats to count as leaked
_LEAK_MIN_WORDS = 4  # shorter prompt lines ("Rules:") leak only when repeated whole

_ANSWER_SENTENCE = re.compile(r"[^.!?。！？\n]*(?:[.!?。！？]+(?:\s*[\[［【][^\]］】]*[\]］】])*|$)")
_PROMPT_MARKUP = re.compile(
    r"<\s*/?\s*sources\b|^\s*(?:question|(?:the\s+)?rules(?:\s+are)?)\s*:", re.IGNORECASE
)
_WORD = re.compile(r"\w+")
_SPACED_CITATION = re.compile(r"\s*" + _CITATION.pattern)
_END_PUNCT = re.compile(r"([.!?。！？]+)$")
_CJK_CHAR = re.compile(r"[\u3400-\u9fff]")


class TermAnalyzer(Protocol):
    def terms(self, text: str) -> list[str]: ...


@dataclass(frozen=True, slots=True)
class Grounded:
    text: str  # the answer without leaked prompt lines, each supported sentence cited
    claims: int  # sentences with analysed terms (not "Yes.")
    supported: int  # ... of them cited: by the model with a valid number, or attributed here
    attributed: int  # markers added here
    leaked: list[str] = field(default_factory=list)  # sentences removed as prompt text

    @property
    def grounded(self) -> bool:
        return self.claims == 0 or self.supported > 0


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


def _leaks(sentence: str, prompt_lines: Sequence[set[str]]) -> bool:
    if _PROMPT_MARKUP.search(sentence):
        return True
    words = _words(sentence)
    for line in prompt_lines:
        if len(line) < _LEAK_MIN_WORDS:
            if line and line <= words and len(words) <= len(line) + 1:
                return True
        elif len(line & words) >= LEAK * len(line) and len(line & words) >= LEAK * len(words):
            return True  # mostly the prompt line, and mostly of it (a long answer is not a leak)
    return False


def _cite(sentence: str, n: int) -> str:
    """``[n]`` before the sentence's closing punctuation, with no space before it in Chinese."""
    body = sentence.rstrip()
    end = _END_PUNCT.search(body)
    stem, punct = (body[: end.start()], end.group(1)) if end else (body, "")
    space = "" if _CJK_CHAR.search(stem[-1:] or "") else " "
    return f"{stem}{space}[{n}]{punct}"


def ground(
    text: str, sources: Sequence[str], analyzer: TermAnalyzer, prompt_lines: Sequence[str] = ()
) -> Grounded:
    """Leaked prompt lines out, a marker on each sentence a source supports (``sources[i]`` is
    number i + 1)."""
    source_terms = [set(analyzer.terms(s)) for s in sources]
    prompt_words = [w for w in (_words(line) for line in prompt_lines) if w]
    lines_out: list[str] = []
    claims = supported = attributed = 0
    leaked: list[str] = []
    for line in text.splitlines():
        kept: list[str] = []
        if line.strip() and _leaks(line, prompt_words):  # whole: "e.g." would split it
            leaked.append(line.strip())
            continue
        for sentence in (m.group(0).strip() for m in _ANSWER_SENTENCE.finditer(line)):
            if not sentence:
                continue
            if _leaks(sentence, prompt_words):
                leaked.append(sentence)
                continue
            terms = set(analyzer.terms(_CITATION.sub(" ", sentence)))
            if not terms:
                kept.append(sentence)
                continue
            claims += 1
            if parse_citations(sentence, len(sources)).numbers:
                supported += 1
            else:
                best, share = _best_source(terms, source_terms)
                if share >= SUPPORT:
                    sentence = _cite(_SPACED_CITATION.sub("", sentence), best)
                    supported += 1
                    attributed += 1
            kept.append(sentence)
        if kept or not line.strip():
            joiner = "" if _CJK_CHAR.search(line) else " "
            lines_out.append(joiner.join(kept))
    out = "\n".join(lines_out).strip()
    return Grounded(out, claims, supported, attributed, leaked)


def _best_source(terms: set[str], source_terms: Sequence[set[str]]) -> tuple[int, float]:
    best, share = 0, 0.0
    for n, held in enumerate(source_terms, 1):
        found = len(terms & held) / len(terms)
        if found > share:
            best, share = n, found
    return best, share
