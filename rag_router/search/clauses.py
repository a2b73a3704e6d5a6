"""Clause references and the laws named at them, in English and Chinese. Pure.

"Article 17", "Art. 5(1)(c)" → article 17, path [5, 1, 3]; "Article IV" → 4
"§ 4", "Section 3.2", "Clause 7" → section; "Fourteenth Amendment", "Amendment XIV" → 14
"第十二条", "第12条第3款" → article 12, path [12, 3]; "第一百三十三条之一" → label "133-1"
"刑法第二十条", "《民法典》第一条", "GDPR Art. 6", "Article 17 of the GDPR" → the law named
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from indexers.text.structure import CN_NUMERALS, ROMAN, USC, chinese_number, law_name, roman_number

Span = tuple[int, int]
CN_NUMBER = rf"(?:\d+|[{CN_NUMERALS}]+)"
_CN = CN_NUMBER


@dataclass(frozen=True, slots=True)
class Clause:
    text: str
    number: int
    path: tuple[int, ...]
    span: Span
    # "article" (Article, Art., 第N条), "section" (Section, Sec., §, Clause) or "amendment"
    kind: str = "article"
    sub: int | None = None  # 第N条之M: the inserted article M after article N
    levels: int | None = None  # how many numbers of ``path`` name the section (None: as written)

    @property
    def label(self) -> str:
        """The value a clause filter matches: "17" for Article 17, "3.2" for Section 3.2, "133-1"
        for 第一百三十三条之一 (as ``indexers.text.structure`` stores it)."""
        if self.kind == "section":
            return ".".join(map(str, self.path[: self.depth]))
        return f"{self.number}-{self.sub}" if self.sub else str(self.number)

    @property
    def depth(self) -> int:
        if self.levels is not None:
            return self.levels
        return len(re.findall(r"\d+", self.text.split("(")[0])) or 1


@dataclass(frozen=True, slots=True)
class Law:
    """A law named at a clause reference; ``names`` are the values a ``law`` filter may match."""

    text: str
    names: tuple[str, ...]
    span: Span


_SUB = r"\((?:\d{1,3}|[a-z]{1,4})\)"
# after 新/旧, what makes a word of its own rather than a version of a law ("新闻法", "新加坡公司法",
# "旧金山市条例"): such a name is read whole, with no version
NOT_A_VERSION = r"(?!闻|加坡|西兰|疆|冠|华|型|兴|区|能源|金山|约)"
_S = r"[ \t\u00a0\u3000]*"  # "第 1030 条": spaces around Arabic digits, never a line break
# A range of sections after a plural keyword ("§§ 1030-1031", "Sections 3 to 5"): every number in it
_RANGE = r"\s*(?:[-–—]|\s(?:to|through)\s)\s*"
_MAX_RANGE = 20
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
    rf"|\b(?P<usc>\d{{1,3}}\s+(?-i:{USC}))\s*(?:§§?\s*)?(?P<usc_n>\d{{1,5}})(?P<usc_sub>(?:{_SUB})*)"
    rf"|(?P<sec>§§?|\bSections?\b|\bSec(?:t|s)?\.|\bClauses?\b|\b(?-i:Rule)\b)\s*"
    rf"(?P<sec_n>\d{{1,4}}(?:\.\d{{1,3}})*)(?!\d)(?P<sec_sub>(?:{_SUB})*)(?:{_RANGE}(?P<sec_to>\d{{1,4}})\b)?"
    rf"|第{_S}(?P<zh_n>{_CN}){_S}条(?:{_S}之{_S}(?P<zh_sub>{_CN}))?(?:{_S}第{_S}(?P<zh_k>{_CN}){_S}款)?"
    rf"(?:{_S}第{_S}(?P<zh_x>{_CN}){_S}项)?",
    re.IGNORECASE,
)


def find_clauses(query: str, taken: list[Span]) -> list[Clause]:
    """Every clause reference that does not overlap a span already ``taken`` (an identifier)."""
    out = []
    for m in _CLAUSES.finditer(query):
        if overlaps(m.span(), taken):
            continue
        kind = "article"
        rest: list[Clause] = []
        if m.group("en_n"):
            raw = m.group("en_n")
            if not raw.isdigit() and not _roman_article(m.group("en"), raw):
                continue
            number = int(raw) if raw.isdigit() else roman_number(raw)
            path = [number, *_subdivisions(m.group("en_sub"))]
        elif m.group("am_n") or m.group("am_ord"):
            kind = "amendment"
            path = [_amendment_number(m.group("am_n") or m.group("am_ord"))]
        elif m.group("usc_n"):  # "18 U.S.C. § 1030": a section of a title of the US Code
            kind = "section"
            path = [int(m.group("usc_n")), *_subdivisions(m.group("usc_sub"))]
        elif m.group("sec_n"):
            kind = "section"
            path = [int(p) for p in m.group("sec_n").split(".")] + _subdivisions(m.group("sec_sub"))
            rest = _range_rest(m, path[0])
        else:
            path = [chinese_number(g) for g in (m.group("zh_n"), m.group("zh_k"), m.group("zh_x")) if g]
        sub = chinese_number(m.group("zh_sub")) if m.group("zh_sub") else None
        levels = 1 if m.group("usc_n") else None
        out.append(Clause(m.group(0).strip(), path[0], tuple(path), m.span(), kind, sub, levels))
        out.extend(rest)
    return out


def _range_rest(m: re.Match[str], first: int) -> list[Clause]:
    """The sections after the first of a range written after a plural keyword ("§§ 1030-1031",
    "Sections 3 to 5"); none for a singular one ("§ 2-207" is one section of the UCC)."""
    keyword, last = m.group("sec"), m.group("sec_to")
    plural = keyword == "§§" or keyword.lower().endswith("s") or keyword.lower() == "secs."
    if not last or not plural or "." in m.group("sec_n") or not first < int(last) <= first + _MAX_RANGE:
        return []
    return [Clause(m.group(0).strip(), n, (n,), m.span(), "section") for n in range(first + 1, int(last) + 1)]


# A law named right before a Chinese clause: a bracketed title, or the run of ideographs there
# ("刑法第二十条", "员工手册第三条", "公司章程第五条"). An unbracketed run is one name, never cut
# inside ("劳动合同法" is not also 合同法, a law of its own): what may stand around a name are
# function words, taken off by grammar, not by a list of names: an opener before it ("请问",
# "根据"), a conjunction after an earlier clause ("…第二十条与宪法第五条"), a possessive or
# locative after it ("员工手册的", "刑法中"). Words that follow an earlier clause without a
# conjunction are its predicate ("第三条规定第五条"), and a run right after 第 is a numbered
# reference ("第三章"), not names. A law filter that matches nothing is relaxed like any other.
_CN_LAW_BEFORE = re.compile(r"(?:《([^》]{1,40})》|((?:(?!第)[\u3400-\u9fff]){2,40}))\s*$")
_OPENER = re.compile(
    r"(?:请问|什么是|什么叫|何为|根据|依据|依照|按照|参照|对照|查询|查看|看看|了解|我想知道|想知道|告诉我|以及|还有)+"
)
_JOINER = re.compile(r"(?:和|与|及|或|跟|同|并|以及|还有)")
_AFTER_NAME = re.compile(r"(?:的|之|中|里|内)+$")
# A PRC statute or regulation may be written with the state's name ("中华人民共和国刑法"): that
# variant of a name is a filter value only for a name of that kind, not for "员工手册".
_STATE_LAW = re.compile(r"(?:法|法典|条例|修正案)$")
_USC_TITLE = re.compile(rf"\d{{1,3}}\s+{USC}", re.IGNORECASE)
_EN_LAW_BEFORE = re.compile(r"\b([A-Z]{3,8})\s*$")
_EN_LAW_AFTER = re.compile(r"^\s*(?:,\s*)?(?:of\s+(?:the\s+)?)?([A-Z]{3,8})\b")


def find_laws(query: str, clauses: list[Clause], cuts: list[Span] | None = None) -> list[Law]:
    """The laws named right at ``clauses``; words in ``cuts`` (a version: "修订前的", "current")
    are no part of a name. One character cut is no word to take out ("新公司法": 新闻法 too):
    such a name is read both with and without it (``_names``)."""
    for a, b in cuts or ():
        if b - a > 1:
            query = query[:a] + " " * (b - a) + query[b:]
    out: dict[str, Law] = {}
    previous_end: int | None = None
    for clause in clauses:
        start, end = clause.span
        base = max(previous_end or 0, start - 45)  # never a piece of the clause before
        before = query[base:start]
        after_clause = previous_end is not None and base == previous_end
        previous_end = end
        if usc := _USC_TITLE.match(clause.text):  # "18 U.S.C. § 1030" names its title
            text = usc.group(0)
            out.setdefault(text, Law(text, (law_name(text),), (start, start + len(text))))
            continue
        if clause.text.startswith("第"):
            m = _CN_LAW_BEFORE.search(before)
            if m is None and (en := _EN_LAW_BEFORE.search(before)) and not _roman_like(en.group(1)):
                at = base + en.start(1)  # "GDPR 第十七条"
                out.setdefault(en.group(1), Law(en.group(1), (en.group(1),), (at, at + len(en.group(1)))))
                continue
            if m is None or (m.group(2) and base + m.start() > 0 and query[base + m.start() - 1] == "第"):
                continue
            if m.group(1):
                name, text, at = law_name(m.group(1)), m.group(0).rstrip(), base + m.start()
            else:
                cut = _cn_name(m.group(2), after_clause and m.start() == 0)
                if cut is None:
                    continue
                text, at = m.group(2)[cut[0] : cut[1]], base + m.start(2) + cut[0]
                name = law_name(text)
            span = (at, at + len(text))
            values = _names(name)
        else:
            after = _EN_LAW_AFTER.match(query[end : end + 40])
            m = _EN_LAW_BEFORE.search(before) or after
            if m is None or _roman_like(m.group(1)):
                continue
            offset = base if m is not after else end
            span = (offset + m.start(1), offset + m.end(1))
            text = m.group(1)
            values = (text,)
        if values:  # 《 》, 《（修订）》: brackets with no name in them filter nothing
            out.setdefault(text, Law(text, values, span))
    return list(out.values())


def _names(name: str) -> tuple[str, ...]:
    """The values a Chinese name matches: with the state's name for a statute, and without a
    leading 新/旧 ("新公司法": 公司法, and 新闻法 stays itself)."""
    if not name:  # 《 》, 《（修订）》: nothing but brackets and a version
        return ()
    names = [name]
    rest = name[1:]
    if len(name) >= 3 and name[0] in "新旧" and re.match(NOT_A_VERSION, rest) and _STATE_LAW.search(rest):
        names.append(rest)
    return tuple(v for n in names for v in ((n, f"中华人民共和国{n}") if _STATE_LAW.search(n) else (n,)))


def _cn_name(run: str, after_clause: bool) -> tuple[int, int] | None:
    """Where the name is in a run of ideographs before a clause; None where the run is no name."""
    start = 0
    if after_clause:  # right after an earlier clause: a name only after a conjunction
        joined = _JOINER.match(run)
        if joined is None:
            return None
        start = joined.end()
    opener = _OPENER.match(run, start)
    start = opener.end() if opener else start
    end = _AFTER_NAME.search(run, start)
    stop = end.start() if end else len(run)
    return (start, stop) if stop - start >= 2 else None


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


def overlaps(span: Span, spans: list[Span]) -> bool:
    """Whether ``span`` shares a character with any of ``spans``."""
    return any(span[0] < b and a < span[1] for a, b in spans)
