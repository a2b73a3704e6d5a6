"""Which version of a law a query asks for, and that version's hits first. Pure.

    a year          "2018年版", "2018年修订", "（2018年修正）", "the 2016 text", "as amended in 2018",
                    "Companies Act 2006" → that version, else the one in force in that year
    before a year   "2018年修订前", "before the 2018 amendment" → the last one before it
    latest          "新公司法", "现行", "修订后", "current", "in force", "new", "as amended"
    earlier         "旧…", "修订前", "old", "former", "previous", "repealed" → the one before the latest
    original        "最初", "原始", "original", "as enacted" → the first

A year is read wherever its words stand (they say "version"); other words only next to a clause
or a law the query names, and a bare adjective ("new", "old") only right before one, so "current
density", "the old house" or "Article 36 prior consultation" say nothing.
"latest" and "最新" stay words about documents (recency: the hot tier), "现行" next to a law is
about its version: the query then searches both tiers, where the law's versions may lie.
Stored chunks carry ``version`` (the year their title names, or a law's date: indexers/text/
structure.py), else their year. The choice is a preference, never a filter: among the hits of
one clause of one law (``_group``), the wanted version takes the best place the group had; a
law stored in one version only, or hits without versions, stay as they are.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from indexers.records import metadata_year
from indexers.text.structure import TITLE_VERSION, law_name
from rag_router.search.clauses import NOT_A_VERSION, Span
from rag_router.search.fuse import Hit

Want = Literal["year", "before", "latest", "earlier", "original"]

# Hits fused beyond top_k when a version is asked for: the wanted one may rank just below
# (both versions of an article match the clause filter equally well).
EXTRA_CANDIDATES = 10

_Y = r"(?:1[89]\d\d|20\d\d)"
_BEFORE = r"(?:before|prior\s+to|until)\s+(?:the\s+)?"
_YEARS: list[tuple[re.Pattern[str], Want]] = [
    (re.compile(rf"(?<!\d)({_Y})\s*(?:年\s*)?(?:修订|修正|修改)\s*(?:之|以)?前的?"), "before"),
    (re.compile(rf"\b{_BEFORE}({_Y})\s+(?:amendments?|revision|reform|version|text)\b", re.I), "before"),
    (
        re.compile(
            rf"[（(]\s*(?:as\s+)?({_Y})\s*年?[^（）()\n]{{0,10}}?(?:修订|修正|修改|版|文本|revision|revised|version"
            rf"|edition|text|amendments?|amended)[^（）()\n]{{0,6}}[）)]的?",
            re.I,
        ),
        "year",
    ),
    (
        re.compile(
            rf"(?<!\d)({_Y})\s*(?:年\s*)?(?:(?:修订|修正|修改)(?:(?:之|以)?后)?(?:版本?)?|版本?|文本)的?"
        ),
        "year",
    ),
    (
        re.compile(
            rf"\b(?:(?:the|its)\s+)?({_Y})\s+(?:text|version|edition|revision|consolidation|wording"
            rf"|amendments?|reform)\b",
            re.I,
        ),
        "year",
    ),
    (
        re.compile(
            rf"\b(?:as\s+(?:amended|revised|in\s+force|it\s+stood|applicable)|amended|revised|in\s+force)"
            rf"\s+(?:in|on|from|since|at|as\s+of)\s+(?:\d{{1,2}}\s+)?(?:[A-Z][a-z]+\s+)?({_Y})\b",
            re.I,
        ),
        "year",
    ),
    (
        re.compile(
            rf"\b(?:version|text|edition|wording)\s+of\s+(?:\d{{1,2}}\s+)?(?:[A-Z][a-z]+\s+)?({_Y})\b", re.I
        ),
        "year",
    ),
]
# A Chinese law's name right after a one-character word ("新公司法", "旧《合同法》"), where 新/旧
# does not begin a word of its own (NOT_A_VERSION: 新闻法, 新加坡…, 旧金山… are names).
_LAW_NEXT = (
    rf"{NOT_A_VERSION}(?=《|[\u3400-\u9fff]{{1,20}}?(?:法|法典|条例|规定|办法|章程)(?:第|的|[\s《》（(]|$))"
)
# Phrases that name a version, next to a clause or a law (either side).
_PHRASES: list[tuple[re.Pattern[str], Want]] = [
    (
        re.compile(
            rf"现行(?:有效)?的?|新修[订正]的?|修[订正改]后的?|新版的?|新{_LAW_NEXT}"
            r"|\b(?:(?:as\s+)?currently\s+in\s+force|as\s+amended|in\s+its\s+(?:current|amended|present)"
            r"\s+(?:form|version|wording)|(?:current|new|amended|consolidated)\s+(?:version|text|wording))\b",
            re.I,
        ),
        "latest",
    ),
    (
        re.compile(
            rf"修[订正改]前的?|[旧老原]版本?的?|旧{_LAW_NEXT}|原(?=《)"
            r"|\b(?:in\s+its\s+(?:old|former|previous|earlier|prior)\s+(?:form|version|wording)"
            r"|(?:old|former|previous|earlier|prior|repealed|superseded)\s+(?:version|text|wording)"
            r"|before\s+(?:the|its)\s+(?:amendments?|revision|reform))\b",
            re.I,
        ),
        "earlier",
    ),
    (
        re.compile(
            r"最初(?:版本)?的?|原始(?:版本|文本)?的?|首版的?"
            r"|\b(?:as\s+(?:originally\s+)?(?:enacted|adopted|passed)|in\s+its\s+original\s+(?:form|version"
            r"|wording)|original\s+(?:version|text|wording))\b",
            re.I,
        ),
        "original",
    ),
]
# A bare adjective only right before the clause or law it qualifies ("the old Article 5", "the
# current GDPR"): after one it is the clause's own topic ("Article 36 prior consultation").
_ADJECTIVES: list[tuple[re.Pattern[str], Want]] = [
    # lower case only: "New York Penal Law", "Old Age Security Act" are names, not versions
    (re.compile(r"\b(?:current|new|amended|revised|consolidated)\b"), "latest"),
    (
        re.compile(r"\b(?:old|older|former|previous|prior|earlier|repealed|superseded|outdated|unamended)\b"),
        "earlier",
    ),
    (re.compile(r"\boriginal\b"), "original"),
]
_FILLER = r"(?:\s|\b(?:(?i:the|of|version|text|wording|form|edition))\b)*"
_JUST_FILLER = re.compile(_FILLER)
# ... or right before a law's name: "the current Data Protection Code", "the old GDPR"
# (an acronym counts as a law's name only before a clause or at the end of a sentence: "the old
# GDPR", "the current GDPR Article 5", never "previous CEO of IBM")
_LAW_TITLE = re.compile(
    rf"{_FILLER}(?:(?:[A-Z][\w.'&-]*\s+){{0,5}}(?:Act|Code|Law|Regulation|Directive|Constitution|Treaty"
    r"|Convention|Charter|Statute|Ordinance|Rules)\b"
    r"|[A-Z]{3,8}\b(?=\s*(?:Art(?:icle)?s?\.?|§|Sections?|Sec\.)\s*\d|\s*[,.;:?!)]|\s*$))"
)
_NEAR = 30  # characters between a version word and the clause or law it qualifies
_STOP = re.compile(r"[.?!;。？！；\n]")


@dataclass(frozen=True, slots=True)
class Version:
    text: str
    want: Want
    span: Span
    year: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "want": self.want, "year": self.year}


def find_version(
    query: str, clauses: Sequence[Span], laws: Sequence[Span] = (), taken: Sequence[Span] = ()
) -> Version | None:
    """The version the query asks for: a year read anywhere, else a word next to one of its
    ``clauses`` or ``laws`` (or inside a law's name: "新公司法"). Nothing inside ``taken``
    (identifiers) or a clause is read."""
    taken = [*taken, *clauses]
    for pattern, want in _YEARS:
        for m in pattern.finditer(query):
            if not _overlaps(m.span(), taken):
                return Version(m.group(0).strip(), want, m.span(), int(m.group(1)))
    named = [*clauses, *laws]
    for pattern, want in _PHRASES:
        for m in pattern.finditer(query):
            if not _overlaps(m.span(), taken) and _near(query, m.span(), named):
                return Version(m.group(0).strip(), want, m.span())
    for pattern, want in _ADJECTIVES:
        for m in pattern.finditer(query):
            if not _overlaps(m.span(), taken) and _right_before(query, m.end(), named):
                return Version(m.group(0).strip(), want, m.span())
    return None


def _right_before(query: str, end: int, named: Sequence[Span]) -> bool:
    if _LAW_TITLE.match(query, end):
        return True
    return any(a >= end and _JUST_FILLER.fullmatch(query[end:a]) for a, _ in named)


def _near(query: str, span: Span, named: Sequence[Span]) -> bool:
    for a, b in named:
        if _overlaps(span, [(a, b)]):
            return True
        gap = query[span[1] : a] if span[1] <= a else query[b : span[0]]
        if len(gap) <= _NEAR and not _STOP.search(re.sub(r"\b(?:Art|Sec|Sect|No)\.", "", gap, flags=re.I)):
            return True
    return False


def _overlaps(span: Span, spans: Sequence[Span]) -> bool:
    return any(span[0] < b and a < span[1] for a, b in spans)


def prefer_version(hits: Sequence[Hit], version: Version | None, reasons: list[str]) -> list[Hit]:
    """``hits`` with the wanted version of each clause first: within a group of hits of one
    clause of one law in two versions or more, the wanted version's hits take the group's best
    places (and their scores); every other hit keeps its place."""
    if version is None:
        return list(hits)
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, hit in enumerate(hits):
        groups.setdefault(_group(hit), []).append(i)
    out = list(hits)
    moved: set[int] = set()
    for places in groups.values():
        versions = [_version(hits[i].chunk.metadata) for i in places]
        target = _target(version, sorted({v for v in versions if v is not None}))
        if target is None:
            continue
        order = [i for i, v in zip(places, versions, strict=True) if v == target]
        order += [i for i in places if i not in order]
        for place, i in zip(places, order, strict=True):
            out[place] = dataclasses.replace(hits[i], score=hits[place].score)
            if place != i:
                moved.add(place)
    if moved:
        reasons.append(f"version {version.text!r} → {_shown(version)} ranked first")
    return out


def _target(version: Version, known: list[int]) -> int | None:
    """The wanted one of a clause's stored versions (years, ascending); None: no choice to make."""
    if len(known) < 2:
        return None
    year = version.year
    if version.want == "latest":
        return known[-1]
    if version.want == "earlier":
        return known[-2]
    if version.want == "original":
        return known[0]
    assert year is not None
    if version.want == "before":
        return max((v for v in known if v < year), default=None)
    return max((v for v in known if v <= year), default=known[0])  # the one in force that year


def _shown(version: Version) -> str:
    if version.want == "year":
        return f"the version of {version.year}"
    if version.want == "before":
        return f"the last version before {version.year}"
    return {"latest": "the latest version", "earlier": "the version before the latest"}.get(
        version.want, "the first version"
    )


def _version(metadata: Mapping[str, Any]) -> int | None:
    raw = metadata.get("version")
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.isdigit():
        return int(raw)
    return metadata_year(metadata)


def _group(hit: Hit) -> tuple[str, ...]:
    """One clause of one law, whatever its version: its law (else its title without the version
    it names) and its article / section / amendment."""
    metadata = hit.chunk.metadata
    title = law_name(TITLE_VERSION.sub(" ", hit.chunk.title or "")).lower()
    law = metadata.get("law") or title or f"doc:{hit.doc_id}"
    return (str(law), *(str(metadata.get(k, "")) for k in ("article", "section", "amendment")))
