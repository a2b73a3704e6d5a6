"""Query → QueryFeatures: what the query's own words say about where and how to search. Pure.

English and Chinese. Every feature keeps its character span in the query. Relative time
("last year", "去年", "近三年") is resolved against an injected ``today``.

    years        1900–2100: "2023", "2023年", "FY2023"; not inside identifiers ("2016/679"),
                 prices ("$2019"), page numbers ("page 2019") or longer numbers
    date_range   "between 2019 and 2021", "2019–2021", "since 2020", "before 2018",
                 "2020年以来", "2019年至2021年", "last year", "去年", "近三年", "past 3 years"
    clauses      "Article 17", "Art. 5(1)(c)", "§ 4", "§§ 1030-1031", "Section 3.2", "Rule 56",
                 "第十二条", "第12条第3款", "第 1030 条",
                 "第一百三十三条之一" (an inserted article: label "133-1"); rag_router/search/clauses.py
    laws         the law named right at a clause: "刑法第二十条", "《民法典》第一条",
                 "GDPR Art. 6", "Article 17 of the GDPR", "GDPR 第十七条", "18 U.S.C. § 1030",
                 with the names a ``law`` filter matches
    version      the version of a law asked for: "新公司法", "2018年修订", "修订前", "the 2016 text",
                 "as amended in 2018", "current"; rag_router/search/versions.py (a version's year is
                 no time filter when the query names a clause or a law)
    identifiers  "Regulation (EU) 2016/679", "Directive 95/46/EC", "C-131/12", "42 U.S.C. § 1983"
    quoted       “…”, "…", 「…」, 『…』
    recency      "latest", "recent", "最新", "近期", ...

The question's instructions ("不超过30字", "in three bullet points", "用JSON回答，字段为 answer 和
article") are cut first (rag_router/search/instructions.py): features are read from, and spans
index, ``searched_text``, which is also what is embedded and searched.
"""

from __future__ import annotations

import calendar
import datetime as dt
import functools
import re
from dataclasses import dataclass, field
from typing import Any

from indexers.language import text_language
from indexers.text.structure import chinese_number
from rag_router.search.clauses import CN_NUMBER, Clause, Law, Span, find_clauses, find_laws, overlaps
from rag_router.search.instructions import find_instructions, strip_instructions
from rag_router.search.versions import Version, find_version


@dataclass(frozen=True, slots=True)
class DateRange:
    gte: dt.date | None
    lte: dt.date | None
    span: Span


@dataclass(frozen=True, slots=True)
class QueryFeatures:
    language: str
    years: tuple[int, ...] = ()
    year_spans: tuple[Span, ...] = ()
    date_range: DateRange | None = None
    clauses: tuple[Clause, ...] = ()
    laws: tuple[Law, ...] = ()
    version: Version | None = None  # the version of a law asked for: rag_router/search/versions.py
    identifiers: tuple[tuple[str, Span], ...] = ()
    quoted: tuple[tuple[str, Span], ...] = ()
    recency: bool = False
    recency_span: Span | None = None
    domain: str | None = None
    notes: tuple[str, ...] = field(default=())
    searched_text: str = ""  # the query without its instructions: what is embedded and searched
    instructions: tuple[str, ...] = ()  # the spans cut from the query

    def to_json(self) -> dict[str, Any]:
        r = self.date_range
        return {
            "language": self.language,
            "years": list(self.years),
            "date_range": None
            if r is None
            else {"gte": r.gte.isoformat() if r.gte else None, "lte": r.lte.isoformat() if r.lte else None},
            "clauses": [
                {
                    "text": c.text,
                    "number": c.number,
                    "path": list(c.path),
                    "span": list(c.span),
                    "kind": c.kind,
                    "sub": c.sub,
                }
                for c in self.clauses
            ],
            "laws": [
                {"text": law.text, "names": list(law.names), "span": list(law.span)} for law in self.laws
            ],
            "version": self.version.to_json() if self.version else None,
            "identifiers": [text for text, _ in self.identifiers],
            "quoted": [text for text, _ in self.quoted],
            "recency": self.recency,
            "domain": self.domain,
            "searched_text": self.searched_text,
            "instructions": list(self.instructions),
        }


# --- patterns -------------------------------------------------------------------------

_YEAR = r"(?:19\d\d|20\d\d|2100)"
_IDENTIFIERS = re.compile(
    "|".join(
        [
            r"\b(?:Regulation|Directive|Decision)\s*\((?:EU|EC|EEC|Euratom)\)\s*(?:No\.?\s*)?\d{1,4}/\d{1,4}(?:/[A-Z]{2,3})?",
            r"\bDirective\s+\d{2,4}/\d{1,4}/(?:EC|EU|EEC)\b",
            r"\b\d{2,4}/\d{1,4}/(?:EC|EU|EEC)\b",
            r"\b[CT]-\d{1,4}/\d{2}\b",  # CJEU cases
            r"\b\d+\s+U\.\s?S\.\s?C\.?\s*§+\s*\d+[a-z]?",  # 42 U.S.C. § 1983
            r"\b\d+\s+U\.S\.\s+\d+\b",  # 410 U.S. 113
            r"\[\d{4}\]\s+[A-Z][A-Za-z]{1,6}\s+\d+",  # [2019] UKSC 41
            r"\bNo\.\s*\d+[-–]\d+\b",  # No. 18-1234
            r"\b\d:\d{2}-[a-z]{2}-\d{3,6}\b",  # 3:20-cv-01234
            r"[（(]\d{4}[）)][\u4e00-\u9fff\d]{1,12}号",  # (2019)最高法民终123号
            r"\b(?:ISO|IEC|RFC|CVE|NIST\s+SP)[- ]?\d[\d:.-]*\d\b",
        ]
    )
)
_USC_ID = re.compile(r"U\.\s?S\.\s?C", re.I)
_NOT_YEAR_BEFORE = re.compile(
    r"(?:[$€£¥#/A-Za-z0-9_.,-]|\b(?:page|p\.|pp\.|model|room|no\.?|number|version|id|code)\s*|第)$",
    re.IGNORECASE,
)
_NOT_YEAR_AFTER = re.compile(
    r"^(?:[A-Za-z0-9_/]|[.,]\d|\s?(?:dollars?|euros?|usd|eur|yuan|rmb|元|美元|页|pages?|km|kg|mm|cm|mg|ml|"
    r"kelvin|degrees?|°|rpm|people|persons|patients|participants|subjects|samples|cases|words|times|units)\b)",
    re.IGNORECASE,
)
_RANGE_DASH = re.compile(rf"(?<!\d){_YEAR}\s*[-–—]\s*$")
_YEAR_TOKEN = re.compile(rf"(?:FY\s?)?({_YEAR})(?=年|\b)")

_RANGES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(rf"\b(?:between|from)\s+({_YEAR})\s+(?:and|to|until|through)\s+({_YEAR})\b", re.I), "both"),
    (re.compile(rf"\b({_YEAR})\s*(?:–|—|-|to|through)\s*({_YEAR})\b", re.I), "both"),
    (re.compile(rf"({_YEAR})\s*年?\s*(?:至|到|—|–|-|~)\s*({_YEAR})\s*年"), "both"),
    (re.compile(rf"\b(?:since|after)\s+({_YEAR})\b", re.I), "gte"),
    (re.compile(rf"\b(?:before|prior\s+to|until|up\s+to|through)\s+({_YEAR})\b", re.I), "lte"),
    (re.compile(rf"({_YEAR})\s*年\s*(?:以来|之后|以后|后)"), "gte"),
    (re.compile(rf"({_YEAR})\s*年\s*(?:之前|以前|前)"), "lte"),
]
_EXCLUSIVE = re.compile(r"^(?:after|before|prior)|之后|以后|后$|之前|以前|前$", re.I)

_CN = CN_NUMBER
_RELATIVE: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\blast\s+year\b|去年", re.I), "last_year"),
    (re.compile(r"\bthis\s+year\b|今年", re.I), "this_year"),
    (re.compile(r"前年"), "year_before_last"),
    (
        re.compile(
            rf"\b(?:in\s+the\s+)?(?:past|last)\s+(\d+|two|three|four|five|ten)\s+years?\b|(?:近|最近|过去)({_CN})年",
            re.I,
        ),
        "years",
    ),
    (
        re.compile(
            rf"\b(?:in\s+the\s+)?(?:past|last)\s+(\d+|two|three|six)\s+months?\b|(?:近|最近|过去)({_CN})个月",
            re.I,
        ),
        "months",
    ),
    (re.compile(r"\blast\s+month\b|上个?月", re.I), "last_month"),
]
_WORDS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "ten": 10}

_QUOTES = re.compile(r"“([^”]{2,200})”|\"([^\"]{2,200})\"|「([^」]{1,200})」|『([^』]{1,200})』")
_RECENCY = re.compile(
    r"\b(?:latest|newest|most\s+recent|recently|recent|up-to-date|this\s+week)\b|最新|近期|最近|目前|现行",
    re.IGNORECASE,
)


# --- extraction -----------------------------------------------------------------------


def extract(query: str, *, today: dt.date, domains: dict[str, list[str]] | None = None) -> QueryFeatures:
    """All features of ``query`` less its instructions; ``today`` anchors relative time,
    ``domains`` maps a domain to keywords."""
    cut = find_instructions(query)
    original, query = query, strip_instructions(query, cut)
    notes: list[str] = []
    identifiers = [(m.group(0).strip(), m.span()) for m in _IDENTIFIERS.finditer(query)]
    taken = [span for _, span in identifiers]
    # "18 U.S.C. § 1030" is an identifier and a clause: section 1030 of the title it names
    clauses = find_clauses(query, [span for text, span in identifiers if not _USC_ID.search(text)])
    laws = find_laws(query, clauses)
    version = find_version(query, [c.span for c in clauses], [law.span for law in laws], taken)
    if version is not None:
        laws = find_laws(query, clauses, [version.span])
        if version.year is not None and (clauses or laws):  # a version's year, not a time filter
            taken.append(version.span)
    taken += [c.span for c in clauses]
    quoted = [(next(g for g in m.groups() if g), m.span()) for m in _QUOTES.finditer(query)]
    years = _years(query, taken)
    date_range = _date_range(query, years, today, notes)
    # a recency word that asks for a law's version ("现行公司法") is not about documents' dates
    versioned = [version.span] if version else []
    recency_match = next(
        (
            m
            for m in _RECENCY.finditer(query)
            if not (date_range and _inside(m.span(), [date_range.span])) and not _inside(m.span(), versioned)
        ),
        None,
    )
    return QueryFeatures(
        language=text_language(query),
        years=tuple(y for y, _ in years),
        year_spans=tuple(s for _, s in years),
        date_range=date_range,
        clauses=tuple(clauses),
        laws=tuple(laws),
        version=version,
        identifiers=tuple(identifiers),
        quoted=tuple(quoted),
        recency=recency_match is not None,
        recency_span=recency_match.span() if recency_match else None,
        domain=_domain(query, domains or {}),
        notes=tuple(notes),
        searched_text=query,
        instructions=tuple(original[a:b].strip() for a, b in cut) if query != original else (),
    )


def _inside(span: Span, spans: list[Span]) -> bool:
    return any(a <= span[0] and span[1] <= b for a, b in spans)


def _years(query: str, taken: list[Span]) -> list[tuple[int, Span]]:
    out = []
    for m in _YEAR_TOKEN.finditer(query):
        start, end = m.span()
        if _inside((start, end), taken) or overlaps((start, end), taken):
            continue
        fiscal = m.group(0).upper().startswith("FY")
        before = query[max(0, start - 10) : start]
        second_of_range = _RANGE_DASH.search(before) is not None  # "2015-2018": 2018 is a year
        if not fiscal and not second_of_range and _NOT_YEAR_BEFORE.search(before):
            continue
        if _NOT_YEAR_AFTER.match(query[end : end + 10]):
            continue
        out.append((int(m.group(1)), (start, end + (1 if query[end : end + 1] == "年" else 0))))
    return out


def _date_range(
    query: str, years: list[tuple[int, Span]], today: dt.date, notes: list[str]
) -> DateRange | None:
    year_starts = {s[0] for _, s in years}
    for pattern, kind in _RANGES:
        m = pattern.search(query)
        if m is None or not all(m.start(i) in year_starts for i in range(1, (m.lastindex or 0) + 1)):
            continue
        first = int(m.group(1))
        if kind == "both":
            lo, hi = first, int(m.group(2))
            if lo > hi:
                notes.append(f"range {lo}–{hi} runs backwards; read as {hi}–{lo}")
                lo, hi = hi, lo
            return DateRange(dt.date(lo, 1, 1), dt.date(hi, 12, 31), m.span())
        exclusive = bool(_EXCLUSIVE.search(m.group(0).strip()))
        if kind == "gte":
            return DateRange(dt.date(first + exclusive, 1, 1), None, m.span())
        return DateRange(None, dt.date(first - exclusive, 12, 31), m.span())
    return _relative(query, today, notes)


_MAX_MONTHS_BACK = 12 * 200


def _relative(query: str, today: dt.date, notes: list[str]) -> DateRange | None:
    for pattern, kind in _RELATIVE:
        m = pattern.search(query)
        if m is None:
            continue
        if kind == "last_year":
            return DateRange(dt.date(today.year - 1, 1, 1), dt.date(today.year - 1, 12, 31), m.span())
        if kind == "this_year":
            return DateRange(dt.date(today.year, 1, 1), today, m.span())
        if kind == "year_before_last":
            return DateRange(dt.date(today.year - 2, 1, 1), dt.date(today.year - 2, 12, 31), m.span())
        if kind == "last_month":
            first = today.replace(day=1)
            end = first - dt.timedelta(days=1)
            return DateRange(end.replace(day=1), end, m.span())
        raw = next(g for g in m.groups() if g)
        n = _WORDS.get(raw.lower()) or chinese_number(raw)
        months = n * 12 if kind == "years" else n
        if not 0 < months <= _MAX_MONTHS_BACK:
            notes.append(f"relative range {m.group(0)!r} is out of bounds; ignored")
            return None
        return DateRange(_months_before(today, months), today, m.span())
    return None


def _months_before(day: dt.date, months: int) -> dt.date:
    year, month = divmod(day.year * 12 + day.month - 1 - months, 12)
    return dt.date(year, month + 1, min(day.day, calendar.monthrange(year, month + 1)[1]))


@functools.lru_cache(maxsize=32)
def _keyword_patterns(keywords: tuple[str, ...]) -> tuple[tuple[str, re.Pattern[str]], ...]:
    return tuple((kw.lower(), re.compile(rf"(?<![a-z]){re.escape(kw.lower())}(?![a-z])")) for kw in keywords)


def _domain(query: str, domains: dict[str, list[str]]) -> str | None:
    """The domain with the most keywords in the query (a substring test first: it is ~50× cheaper)."""
    lowered = query.lower()
    scores = {
        name: sum(1 for kw, p in _keyword_patterns(tuple(keywords)) if kw in lowered and p.search(lowered))
        for name, keywords in domains.items()
    }
    best = max(scores.items(), key=lambda kv: kv[1], default=(None, 0))
    return best[0] if best[1] > 0 else None
