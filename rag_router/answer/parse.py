"""What models really emit → JSON objects and citations. Never raises on model output.

JSON: extract the object (code fences, prose around it, a truncated tail) → normalise what
models get wrong (Chinese quotes, thousands separators in numbers) → ``json`` → ``json_repair``
→ ``json5``. What still fails is reported as unparseable with the reason; the answer flow may
then spend one self-repair call on it (``prompts/templates/repair.j2``).

Citations: ``[n]``, ``[n, m]``, ``[n-m]`` (and full-width brackets) → source numbers; numbers
outside 1..n are dropped and reported.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

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
