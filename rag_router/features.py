"""Query → QueryFeatures: what the query's own words say about where and how to search. Pure.

English and Chinese. Every feature keeps its character span in the query. Relative time
("last year", "去年", "近三年") is resolved against an injected ``today``.

    years        1900–2100: "2023", "2023年", "FY2023"; not inside identifiers ("2016/679"),
                 prices ("$2019"), page numbers ("page 2019") or longer numbers
    date_range   "between 2019 and 2021", "2019–2021", "since 2020", "before 2018",
                 "2020年以来", "2019年至2021年", "last year", "去年", "近三年", "past 3 years"
    clauses      "Article 17", "Art. 5(1)(c)", "§ 4", "Section 3.2", "第十二条", "第12条第3款",
                 "第一百三十三条之一" (an inserted article: label "133-1")
    laws         the law named right at a clause: "刑法第二十条", "《民法典》第一条",
                 "GDPR Art. 6", "Article 17 of the GDPR"; with the short names it may be stored as
    identifiers  "Regulation (EU) 2016/679", "Directive 95/46/EC", "C-131/12", "42 U.S.C. § 1983"
    quoted       “…”, "…", 「…」, 『…』
    recency      "latest", "recent", "最新", "近期", ...
"""

from __future__ import annotations

import calendar
import datetime as dt
import functools
import re
from dataclasses import dataclass, field
from typing import Any

from indexers.structure import CN_NUMERALS, ROMAN, chinese_number, law_name, roman_number

Span = tuple[int, int]

_CN_NUM = CN_NUMERALS


@dataclass(frozen=True, slots=True)
class Clause:
    text: str
    number: int
    path: tuple[int, ...]
    span: Span
    # "article" (Article, Art., 第N条), "section" (Section, Sec., §, Clause) or "amendment"
    kind: str = "article"
    sub: int | None = None  # 第N条之M: the inserted article M after article N

    @property
    def label(self) -> str:
        """The value a clause filter matches: "17" for Article 17, "3.2" for Section 3.2, "133-1"
        for 第一百三十三条之一 (as ``indexers.structure`` stores it)."""
        if self.kind == "section":
            return ".".join(map(str, self.path[: self.depth]))
        return f"{self.number}-{self.sub}" if self.sub else str(self.number)

    @property
    def depth(self) -> int:
        return len(re.findall(r"\d+", self.text.split("(")[0])) or 1


@dataclass(frozen=True, slots=True)
class Law:
    """A law named at a clause reference; ``names`` are the values a ``law`` filter may match."""

    text: str
    names: tuple[str, ...]
    span: Span


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
    identifiers: tuple[tuple[str, Span], ...] = ()
    quoted: tuple[tuple[str, Span], ...] = ()
    recency: bool = False
    recency_span: Span | None = None
    domain: str | None = None
    notes: tuple[str, ...] = field(default=())

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
            "identifiers": [text for text, _ in self.identifiers],
            "quoted": [text for text, _ in self.quoted],
            "recency": self.recency,
            "domain": self.domain,
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

_CN = rf"(?:\d+|[{_CN_NUM}]+)"
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

_SUB = r"\((?:\d{1,3}|[a-z]{1,4})\)"
_ORDINAL_WORDS = (
    "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth thirteenth "
    "fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth twentieth"
)
_ORDINALS = {w: i for i, w in enumerate(_ORDINAL_WORDS.split(" "), 1)}
_ORDINALS |= {f"twenty{sep}{w}": 20 + i for sep in ("-", " ") for w, i in list(_ORDINALS.items())[:7]}
_ORDINAL = "|".join(sorted((re.escape(w) for w in _ORDINALS), key=len, reverse=True))
_CLAUSES = re.compile(
    rf"\b(?P<en>Articles?|Arts?\.?)\s*(?P<en_n>\d{{1,4}}|{ROMAN}\b)(?P<en_sub>(?:{_SUB})*)"
    rf"|\b(?-i:Amendment)\s+(?P<am_n>\d{{1,2}}|{ROMAN})\b"
    rf"|\b(?P<am_ord>\d{{1,2}}(?:st|nd|rd|th)|{_ORDINAL})\s+(?-i:Amendment)\b"
    rf"|(?P<sec>§§?|\bSections?\b|\bSec\.|\bClauses?\b)\s*(?P<sec_n>\d{{1,4}}(?:\.\d{{1,3}})*)(?P<sec_sub>(?:{_SUB})*)"
    rf"|第(?P<zh_n>{_CN})条(?:之(?P<zh_sub>{_CN}))?(?:第(?P<zh_k>{_CN})款)?(?:第(?P<zh_x>{_CN})项)?",
    re.IGNORECASE,
)

_QUOTES = re.compile(r"“([^”]{2,200})”|\"([^\"]{2,200})\"|「([^」]{1,200})」|『([^』]{1,200})』")
_RECENCY = re.compile(
    r"\b(?:latest|newest|most\s+recent|recently|recent|up-to-date|this\s+week)\b|最新|近期|最近|目前|现行",
    re.IGNORECASE,
)
_CJK_CHAR = re.compile(r"[\u3400-\u9fff]")
_LATIN_WORD = re.compile(r"[A-Za-z]+")


# --- extraction -----------------------------------------------------------------------


def extract(query: str, *, today: dt.date, domains: dict[str, list[str]] | None = None) -> QueryFeatures:
    """All features of ``query``; ``today`` anchors relative time, ``domains`` maps a domain to keywords."""
    notes: list[str] = []
    identifiers = [(m.group(0).strip(), m.span()) for m in _IDENTIFIERS.finditer(query)]
    taken = [span for _, span in identifiers]
    clauses = _clauses(query, taken)
    taken += [c.span for c in clauses]
    quoted = [(next(g for g in m.groups() if g), m.span()) for m in _QUOTES.finditer(query)]
    years = _years(query, taken)
    date_range = _date_range(query, years, today, notes)
    recency_match = next(
        (m for m in _RECENCY.finditer(query) if not (date_range and _inside(m.span(), [date_range.span]))),
        None,
    )
    return QueryFeatures(
        language=_language(query),
        years=tuple(y for y, _ in years),
        year_spans=tuple(s for _, s in years),
        date_range=date_range,
        clauses=tuple(clauses),
        laws=tuple(_laws(query, clauses)),
        identifiers=tuple(identifiers),
        quoted=tuple(quoted),
        recency=recency_match is not None,
        recency_span=recency_match.span() if recency_match else None,
        domain=_domain(query, domains or {}),
        notes=tuple(notes),
    )


def _inside(span: Span, spans: list[Span]) -> bool:
    return any(a <= span[0] and span[1] <= b for a, b in spans)


def _language(query: str) -> str:
    cjk = len(_CJK_CHAR.findall(query))
    latin = sum(len(w) for w in _LATIN_WORD.findall(query))
    return "zh" if cjk and cjk * 2 >= latin else "en"


def _years(query: str, taken: list[Span]) -> list[tuple[int, Span]]:
    out = []
    for m in _YEAR_TOKEN.finditer(query):
        start, end = m.span()
        if _inside((start, end), taken) or _overlaps((start, end), taken):
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


def _overlaps(span: Span, spans: list[Span]) -> bool:
    return any(span[0] < b and a < span[1] for a, b in spans)


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


def _clauses(query: str, taken: list[Span]) -> list[Clause]:
    out = []
    for m in _CLAUSES.finditer(query):
        if _overlaps(m.span(), taken):
            continue
        kind = "article"
        if m.group("en_n"):
            raw = m.group("en_n")
            if not raw.isdigit() and not _roman_article(m.group("en"), raw):
                continue
            number = int(raw) if raw.isdigit() else roman_number(raw)
            path = [number, *_subdivisions(m.group("en_sub"))]
        elif m.group("am_n") or m.group("am_ord"):
            kind = "amendment"
            path = [_amendment_number(m.group("am_n") or m.group("am_ord"))]
        elif m.group("sec_n"):
            kind = "section"
            path = [int(p) for p in m.group("sec_n").split(".")] + _subdivisions(m.group("sec_sub"))
        else:
            path = [chinese_number(g) for g in (m.group("zh_n"), m.group("zh_k"), m.group("zh_x")) if g]
        sub = chinese_number(m.group("zh_sub")) if m.group("zh_sub") else None
        out.append(Clause(m.group(0).strip(), path[0], tuple(path), m.span(), kind, sub))
    return out


# A law named right before a Chinese clause (a bracketed title or the run of ideographs), or an
# acronym of three or more capitals before or after an English one ("GDPR Art. 6", "Article 17
# of the GDPR"). The unbracketed Chinese run may carry words before the name ("请问刑法"), so
# every ending of it is a candidate; a law filter that matches nothing is relaxed like any other.
_CN_LAW_BEFORE = re.compile(r"(?:《([^》]{1,40})》|((?:(?![第条款项章节])[\u3400-\u9fff]){2,40}))\s*$")
_EN_LAW_BEFORE = re.compile(r"\b([A-Z]{3,8})\s*$")
_EN_LAW_AFTER = re.compile(r"^\s*(?:,\s*)?(?:of\s+(?:the\s+)?)?([A-Z]{3,8})\b")
_MAX_LAW_SUFFIX = 12


def _laws(query: str, clauses: list[Clause]) -> list[Law]:
    out: dict[str, Law] = {}
    previous_end = 0
    for clause in clauses:
        start, end = clause.span
        base = max(previous_end, start - 45)  # never a piece of the clause before
        before = query[base:start]
        previous_end = end
        if clause.text.startswith("第"):
            m = _CN_LAW_BEFORE.search(before)
            if m is None:
                continue
            text = m.group(0).rstrip()
            span = (base + m.start(), base + m.start() + len(text))
            name = law_name(m.group(1) or m.group(2))
            names = (
                [name]
                if m.group(1)
                else [name[i:] for i in range(max(0, len(name) - _MAX_LAW_SUFFIX), len(name) - 1)]
            )
            values = tuple(dict.fromkeys(v for n in names for v in (n, f"中华人民共和国{n}")))
        else:
            after = _EN_LAW_AFTER.match(query[end : end + 20])
            m = _EN_LAW_BEFORE.search(before) or after
            if m is None or _roman_like(m.group(1)):
                continue
            offset = base if m is not after else end
            span = (offset + m.start(1), offset + m.end(1))
            text = m.group(1)
            values = (text,)
        out.setdefault(text, Law(text, values, span))
    return list(out.values())


def _roman_like(word: str) -> bool:
    return set(word) <= set("IVXLC")


def _amendment_number(raw: str) -> int:
    """ "XIV", "14", "14th", "Fourteenth", "Twenty-fifth" → the amendment's number."""
    if raw[0].isdigit():
        return int(re.match(r"\d+", raw).group(0))  # type: ignore[union-attr]
    return _ORDINALS.get(raw.lower()) or roman_number(raw)


def _roman_article(keyword: str, numeral: str) -> bool:
    """ "Article IV", "art. II": yes; "the article I wrote": no (a lone I after a lowercase keyword)."""
    try:
        roman_number(numeral)
    except (KeyError, ValueError):
        return False
    return keyword[0].isupper() or len(numeral) > 1


def _subdivisions(raw: str | None) -> list[int]:
    """ "(1)(c)(iv)" → [1, 3, 4]: numbers as they are, letters by position, roman after a letter."""
    out: list[int] = []
    after_letter = False
    for part in re.findall(r"\(([^)]+)\)", raw or ""):
        if part.isdigit():
            out.append(int(part))
            after_letter = False
        elif set(part.lower()) <= set("ivx") and (after_letter or len(part) > 1):
            out.append(roman_number(part.upper()))
        else:
            out.append(ord(part.lower()[0]) - ord("a") + 1)
            after_letter = True
    return out


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
