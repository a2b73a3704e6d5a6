"""What models really emit → JSON objects and citations. Never raises, on any input.

JSON: extract the object (``jsontext``: code fences, prose around it, a truncated tail, mismatched
or doubled closers, key-value pairs that go on after the object closed) → ``json`` → ``json5`` →
normalise what models get wrong (Chinese quotes, thousands separators, JSON5 line continuations
and identifier keys) → ``json`` → ``json5`` → ``json_repair``. ``json5`` goes before the
repairer: it is strict, so what it accepts means what JSON5 says, while the repairer also
"succeeds" on JSON5 and gets it wrong (it keeps a line continuation's backslash and drops keys
such as ``_`` and ``$``). A JSON object that the model put inside a string value (often fenced:
``{"answer": "```json\\n{…}\\n```"}``) is taken out when it is what the caller's fields ask
for. What still fails is reported as unparseable with the reason; the answer flow may then
spend one self-repair call on it (``prompts/templates/repair.j2``).

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
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import json5
import json_repair

from rag_router.answer.jsontext import TooDeep, extract, normalise

log = logging.getLogger(__name__)

Method = Literal["json", "normalised", "json5", "repair"]


@dataclass(frozen=True, slots=True)
class Parsed:
    value: dict[str, Any] | None
    method: Method | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ParsedValue:
    """What ``parse_json_value`` recovers: an object or an array."""

    value: dict[str, Any] | list[Any] | None
    method: Method | None = None
    error: str | None = None


_WHOLE_FENCE = re.compile(r"\A\s*```(?:json|JSON|json5)?[ \t]*\r?\n(.*?)```\s*\Z", re.DOTALL)
_JSON5_MAX = 16_000  # json5 is pure Python (~40 KB/s here): past this, the repairer alone
_MAX_DEPTH = 3  # objects inside strings inside objects: enough for what models do, and bounded
_REPAIR_MAX = 200_000  # characters: json-repair reads ~0.1-1 MB/s; a longer output is no answer


def extract_object(text: str) -> str | None:
    """The first ``{…}`` in the text (inside a code fence if one opens before it); a cut-off
    tail is kept for the repairers, closers are mended (``jsontext._close``)."""
    try:
        return extract(text, "{")
    except TooDeep:
        return None


_READERS: list[tuple[Method, bool, Callable[[str], Any]]] = [
    ("json", False, json.loads),
    ("json5", False, json5.loads),  # before normalising, which may touch quotes inside strings
    ("normalised", True, lambda s: json.loads(s, strict=False)),  # raw newlines in strings
    ("json5", True, json5.loads),
    ("repair", True, lambda s: json_repair.loads(s, skip_json_loads=True)),
]


def _ladder(candidate: str, accept: Callable[[Any], bool]) -> tuple[Any, Method | None, str]:
    """The first reading of ``candidate`` that ``accept`` takes, else the last error."""
    error, fixed = "", ""
    for method, normalised, read in _READERS:
        if normalised and not fixed:
            fixed = normalise(candidate)
        text = fixed if normalised else candidate
        if len(text) > (_JSON5_MAX if method == "json5" else _REPAIR_MAX) and method != "json":
            continue
        try:
            value = read(text)
        except Exception as exc:  # every parser's every failure means: try the next one
            error = f"{type(exc).__name__}: {str(exc)[:200]}"
            continue
        if accept(value):
            return value, method, ""
        error = f"{method} gave {type(value).__name__}, not a non-empty object"
    return None, None, error or "unparseable"


def parse_json(text: str, fields: Sequence[str] = ()) -> Parsed:
    """The JSON object in a model's output. ``fields``: the keys the caller's schema asks for,
    which tell an object the model nested in a string from an answer that quotes JSON."""
    try:
        return _parse_object(text, tuple(fields), 0)
    except Exception as exc:  # the contract: model output never raises
        return Parsed(None, error=_failed(exc))


def parse_json_value(text: str) -> ParsedValue:
    """An object or an array (``["x", "y"}`` → ``["x", "y"]``); the answer flow wants objects."""
    try:
        return _parse_value(text)
    except Exception as exc:  # the contract: model output never raises
        return ParsedValue(None, error=_failed(exc))


def _failed(exc: Exception) -> str:
    """The last resort of both entry points: logged (tests watch for it), and the reason."""
    log.warning("JSON parser failed: %r", exc)
    return f"{type(exc).__name__}: {str(exc)[:200]}"


def _parse_value(text: str) -> ParsedValue:
    try:
        candidate = extract(_unstring(text), "{[")
    except TooDeep as exc:
        return ParsedValue(None, error=str(exc))
    if candidate is None:
        return ParsedValue(None, error="no JSON object or array in the output")
    value, method, error = _ladder(candidate, lambda v: isinstance(v, dict | list) and bool(v))
    return ParsedValue(value, method, error or None)


def _parse_object(text: str, fields: tuple[str, ...], depth: int) -> Parsed:
    try:
        candidate = extract(_unstring(text), "{")
    except TooDeep as exc:
        return Parsed(None, error=str(exc))
    if candidate is None:
        return Parsed(None, error="no JSON object in the output")
    value, method, error = _ladder(candidate, lambda v: isinstance(v, dict) and bool(v))
    if value is None:
        return Parsed(None, error=error)
    return Parsed(_unnest(value, fields, depth), method)


def _unstring(text: str) -> str:
    """A whole output that is one JSON string (``"```json\\n{…}\\n```"``) → its content."""
    stripped = text.strip()
    if len(stripped) > 1 and stripped[0] == stripped[-1] == '"':
        try:
            inner = json.loads(stripped)
        except ValueError:
            return text
        return inner if isinstance(inner, str) else text
    return text


def _unnest(value: dict[str, Any], fields: tuple[str, ...], depth: int) -> dict[str, Any]:
    """The object a string value holds, when it is what the caller asked for: with ``fields``,
    one holding at least as many of them as the outer object (and one at least); without, the
    object that is the whole value of a one-key object. An answer quoting JSON stays as it is."""
    if depth >= _MAX_DEPTH:
        return value
    for text in value.values():
        if not isinstance(text, str) or "{" not in text:
            continue
        inner = _inner_object(text, fields, depth)
        if inner is None:
            continue
        if fields and _covers(inner, fields) >= max(1, _covers(value, fields)):
            return inner
        if not fields and len(value) == 1:
            return inner
    return value


def _inner_object(text: str, fields: tuple[str, ...], depth: int) -> dict[str, Any] | None:
    """The object in a string value: one fenced whole, through the whole ladder; one bare
    (``"{\"a\": 1}"``), read strictly, not by the repairer (``"{citation needed}"`` is prose);
    one fenced among prose, only when ``fields`` can tell whether it is the answer."""
    whole = _WHOLE_FENCE.match(text)
    if whole:
        return _parse_object(whole.group(1), fields, depth + 1).value
    stripped = text.strip()
    if stripped.startswith("{") and stripped.endswith("}"):
        parsed = _parse_object(stripped, fields, depth + 1)
        return parsed.value if parsed.method != "repair" else None
    if fields and "```" in text:
        return _parse_object(text, fields, depth + 1).value
    return None


def _covers(value: dict[str, Any], fields: tuple[str, ...]) -> int:
    return sum(1 for f in fields if f in value)


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


JSON_PROSE_LIMIT = 300  # characters of output with no "{" yet: a JSON answer is not coming


def hopeless_json(text: str) -> bool:
    return "{" not in text and len(text.strip()) > JSON_PROSE_LIMIT


def json_text(value: dict[str, Any]) -> str:
    """The JSON answer's string values, for citations and for clients that show text."""
    parts = [v for v in value.values() if isinstance(v, str)]
    return " ".join(parts)


def extractive_json(text: str, fields: Sequence[str], metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON object asked for, without an LLM: the answer text, and the fields the top source's
    metadata has ("article", "law", "date", ...); null for the rest."""
    names = list(fields) or ["answer"]
    answer = "answer" if "answer" in names else names[0]
    return {name: text if name == answer else metadata.get(name) for name in names}
