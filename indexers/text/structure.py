"""Structure from headings: "Article 17 …", "Article IV", "Amendment XIV", "Section 3.2", "§ 4",
"第十七条", "第一百三十三条之一", "第三章",
optionally after a law or document name ("刑法 第二十条", "GDPR Article 17").

A document whose metadata lacks ``article`` / ``section`` / ``chapter`` gets them from its title
or first line, so that the router's clause filters work on corpora that were not annotated.
Inside a document, ``split_sections`` cuts the text at heading lines: the chunker packs each
section on its own, so no chunk straddles an article, and each chunk carries its section's
article / section / chapter.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from indexers.records import metadata_year

_CN_DIGITS = {
    "零": 0,
    "〇": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}
_CN_UNITS = {"十": 10, "百": 100, "千": 1000, "万": 10_000}
CN_NUMERALS = "零〇一二两三四五六七八九十百千万"


def chinese_number(text: str) -> int:
    """第一千零六十二条 → 1062; "十二" → 12; "二十" → 20; plain digits pass through."""
    if text.isdigit():
        return int(text)
    total, section, digit = 0, 0, 0
    for ch in text:
        if ch in _CN_DIGITS:
            digit = _CN_DIGITS[ch]
        elif ch in _CN_UNITS:
            unit = _CN_UNITS[ch]
            if unit == 10_000:
                total += (section + digit) * unit
                section, digit = 0, 0
            else:
                section += (digit or 1) * unit
                digit = 0
        else:
            raise ValueError(f"not a Chinese numeral: {text!r}")
    return total + section + digit


_ROMAN_VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100}
ROMAN = r"(?-i:[IVXLC]{1,7})"


def roman_number(text: str) -> int:
    """ "XIV" → 14 (subtractive notation); raises ValueError for anything else."""
    values = [_ROMAN_VALUES[ch] for ch in text]  # KeyError for non-numerals
    total = sum(-v if i + 1 < len(values) and v < values[i + 1] else v for i, v in enumerate(values))
    if total <= 0:
        raise ValueError(f"not a Roman numeral: {text!r}")
    return total


_YEAR = r"(?:1[89]\d\d|20\d\d)"
# The version a title names: a year in brackets ("公司法（2023年修订）", "(2018 revision)"), a year
# revised or issued ("2018年修正", "2018年版", "the 2016 text", "2018 edition"), an English act's year
# ("Companies Act 2006"), or a year amended ("as amended in 2018").
TITLE_VERSION = re.compile(
    rf"[（(][^（）()\n]{{0,20}}?(?<!\d)({_YEAR})(?!\d)[^（）()\n]{{0,20}}[）)]"
    rf"|(?<!\d)({_YEAR})\s*(?:年\s*)?(?:修订|修正|修改|版|文本)"
    rf"|\b({_YEAR})\s+(?i:revision|version|edition|text|consolidation|amendments?)\b"
    rf"|\bAct,?\s+({_YEAR})\b"
    rf"|\b(?i:as\s+amended|amended|revised)\s+(?:in\s+|on\s+)?(?:\d{{1,2}}\s+)?(?:[A-Z][a-z]+\s+)?({_YEAR})\b"
)


def title_version(title: str | None) -> int | None:
    """The version (a year) a document's title names: "中华人民共和国公司法（2023年修订）" → 2023."""
    m = TITLE_VERSION.search(title or "")
    return int(next(g for g in m.groups() if g)) if m else None


# A Chinese article number, with an inserted article's 之N: 第一百三十三条之一 → "133-1"; spaces
# may stand around Arabic digits ("第 1030 条"), never a line break.
_SP = r"[ \t\u00a0\u3000]*"
CN_ARTICLE = rf"第{_SP}(\d+|[{CN_NUMERALS}]+){_SP}条(?:{_SP}之{_SP}(\d+|[{CN_NUMERALS}]+))?"
CN_CHAPTER = rf"第{_SP}(\d+|[{CN_NUMERALS}]+){_SP}章"
# The United States Code after a title number: "18 U.S.C.", "18 USC", "42 U. S. C. A."
USC = r"U\.?\s?S\.?\s?C\.?(?:\s?A\.?)?"
_USC_NAME = re.compile(rf"(\d{{1,3}})\s+{USC}", re.IGNORECASE)

_HEADINGS: list[tuple[str, str, int]] = [  # key, pattern, re flags
    ("article", rf"(?:Article|Art\.)\s+(\d{{1,4}}|{ROMAN})\b()", re.IGNORECASE),
    ("amendment", rf"Amendment\s+(\d{{1,2}}|{ROMAN})\b()", 0),
    ("section", r"(?:Section|Sec\.|(?-i:Rule)|§)\s*(\d{1,4}(?:\.\d{1,3})*)\b()", re.IGNORECASE),
    ("article", CN_ARTICLE, 0),
    ("chapter", rf"{CN_CHAPTER}()", 0),
    ("chapter", r"Chapter\s+(\d{1,3}|[IVXLC]{1,6})\b()", re.IGNORECASE),
]
# What may stand before a heading: a law or document name ("刑法 第二十条", "《民法典》第一条",
# "GDPR Article 17", "U.S. Constitution Article I"). A Chinese name is one run without spaces;
# an English one is up to six capitalised words. In the text's first line the name must be
# followed by a space, so prose ("本法第二十条规定的…") is not read as a heading.
_NAME = (
    rf"《[^》\n]{{1,40}}》|\d{{1,3}}\s+{USC}|[^\s第《》:：,，.。]{{1,40}}?"
    r"|(?-i:(?:[A-Z][\w.'&-]*\s+){0,5}[A-Z][\w.'&-]*)"
)
_OPENERS = {
    source: [
        (key, re.compile(rf"^\s*(?:(?P<name>{_NAME}){sep})??{pattern}", flags))
        for key, pattern, flags in _HEADINGS
    ]
    for source, sep in (("title", r"\s*"), ("line", r"\s+"))
}
_PRC = "中华人民共和国"


def law_name(raw: str) -> str:
    """A law's short name, as the router compares it: "《中华人民共和国刑法》" → "刑法".

    Brackets, the "中华人民共和国" prefix and a trailing parenthesis ("（2023修订）") go;
    English names are kept as written.
    """
    name = raw.strip().strip("《》〈〉").strip()
    name = re.sub(r"\s*[（(][^（）()]*[）)]$", "", name)
    if usc := _USC_NAME.fullmatch(name):
        return f"{usc.group(1)} U.S.C."
    # the version a name carries: "Companies Act 2006", "公司法2018年修订版"
    name = re.sub(rf"(?<=[A-Za-z])(?:,\s*|\s+){_YEAR}$", "", name)
    name = re.sub(rf"(?<=[\u3400-\u9fff])\s*{_YEAR}\s*(?:年\s*)?(?:修订|修正)?版?本?$", "", name)
    if name.startswith(_PRC) and len(name) > len(_PRC):
        name = name[len(_PRC) :]
    return name


def heading_metadata(title: str | None, text: str, metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The structure fields found in the title (or first line) that the metadata does not have.

    A heading counts at the start or after a law/document name, whose short name becomes
    ``law`` (``law_name``) when the metadata has none.
    """
    first_line = text.lstrip().split("\n", 1)[0][:200]
    found: dict[str, Any] = {}
    for source, openers in ((title or "", _OPENERS["title"]), (first_line, _OPENERS["line"])):
        for key, pattern in openers:
            if key in metadata or key in found:
                continue
            m = pattern.match(source)
            if m is None:
                continue
            found[key] = _value(key, m.group(2), m.group(3))
            if m.group("name") and "law" not in metadata and "law" not in found:
                found["law"] = law_name(m.group("name"))
    if "version" not in metadata and (version := _version(title, metadata, found)) is not None:
        found["version"] = version
    return found


def _version(title: str | None, metadata: Mapping[str, Any], found: Mapping[str, Any]) -> int | None:
    """Which version of a law a document is, so a query may pick one ("新公司法", "the 2016
    text"): the one its title names, else the year of a law's date (a dated news item is no
    version of anything)."""
    named = title_version(title)
    if named is not None or ("law" not in metadata and "law" not in found):
        return named
    return metadata_year(metadata)


def _value(key: str, raw: str, sub: str | None = None) -> int | str:
    if sub:  # 第一百三十三条之一: its own article, "133-1"
        return f"{_value(key, raw)}-{_value(key, sub)}"
    if raw.isdigit():
        return int(raw)
    if raw[0] in CN_NUMERALS:
        return chinese_number(raw)
    if key in ("article", "amendment"):
        return roman_number(raw)
    return raw


# A heading line: the keyword and number at the start of a line (after Markdown "#"s or "**"),
# then the end of the line, punctuation, or a capitalised title ("Article 17 Right to erasure").
# "Article 5 of the treaty says" is prose, not a heading. Chinese 第N条 / 第N章 always head.
_TAIL = r"(?=\s*$|\s*[.:–—\-)]|\s+[A-Z(\"“]|\*\*)"  # "**Article 5**" too
_LINE_HEADINGS: list[tuple[str, re.Pattern[str]]] = [
    ("chapter", re.compile(rf"^[#*\s]*{CN_CHAPTER}", re.MULTILINE)),
    ("article", re.compile(rf"^[#*\s]*{CN_ARTICLE}", re.MULTILINE)),
    ("chapter", re.compile(rf"^[#*\s]*(?i:Chapter)\s+(\d{{1,3}}|{ROMAN}){_TAIL}", re.MULTILINE)),
    ("article", re.compile(rf"^[#*\s]*(?i:Article|Art\.)\s+(\d{{1,4}}|{ROMAN}){_TAIL}", re.MULTILINE)),
    ("amendment", re.compile(rf"^[#*\s]*Amendment\s+(\d{{1,2}}|{ROMAN}){_TAIL}", re.MULTILINE)),
    (
        "section",
        re.compile(
            rf"^[#*\s]*(?:(?i:Section|Sec\.)\s+|Rule\s+|§\s*)(\d{{1,4}}(?:\.\d{{1,3}})*){_TAIL}", re.MULTILINE
        ),
    ),
]
# What every pattern above starts with: one scan of a text for it finds the texts without any
# heading line (most prose) before six scans would.
_ANY_HEADING = re.compile(
    r"^[#*\s]*(?:第|(?i:Chapter|Article|Art\.|Section|Sec\.)|Amendment|Rule|§)", re.MULTILINE
)
# A heading resets the levels below it: a new chapter has no article yet, a new article no section.
_LEVEL = {"chapter": 0, "article": 1, "amendment": 1, "section": 2}


# YAML front matter: a Markdown file's first lines between "---" (or "...") lines. It is stored as
# part of the file's text (byte for byte) and read into metadata; an answer never quotes it.
FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.DOTALL)


def after_front_matter(text: str) -> str:
    """``text`` without a leading YAML front-matter block (itself when it has none)."""
    m = FRONT_MATTER.match(text)
    return text[m.end() :] if m else text


@dataclass(frozen=True, slots=True)
class Section:
    start: int  # offset of the section's text in the document
    text: str
    metadata: Mapping[str, Any]


def _headings(text: str) -> list[tuple[int, str, int | str]]:
    if _ANY_HEADING.search(text) is None:
        return []
    found: dict[int, tuple[int, str, int | str]] = {}
    for key, pattern in _LINE_HEADINGS:
        for m in pattern.finditer(text):
            # the section starts at the heading's line, Markdown "##" / "**" included: cut after
            # them, a chunk of only "##" was left behind (and a trailing " ##" on the one before)
            start = m.start() + len(m.group(0)) - len(m.group(0).lstrip())
            try:
                sub = m.group(2) if key == "article" and m.re.groups > 1 else None
                found.setdefault(start, (start, key, _value(key, m.group(1), sub)))
            except (ValueError, KeyError):
                continue
    return sorted(found.values())


def split_sections(text: str, metadata: Mapping[str, Any], title: str | None = None) -> Iterator[Section]:
    """The text cut at heading lines; each part's metadata = the document's + its headings'.

    A short part that only introduces a deeper level ("CHAPTER III / Rights of the data
    subject" right before "Article 12"), or a preamble that is only the document's Markdown
    heading ("# 员工手册" before "第一条"), is kept as the start of the next part, so no chunk is
    only a heading; parts of the same level are never joined. A text cut into articles is a
    code, and its ``title`` names it: ``law`` (``title_law``) when the metadata has none.
    """
    headings = _headings(text)
    if headings and "law" not in metadata and (law := title_law(title)):
        metadata = {**metadata, "law": law}
    state: dict[str, int | str] = {}
    current = -1  # level of the heading that opened the pending part; -1: the preamble
    pending = 0
    for offset, key, value in headings:
        level = _LEVEL[key]
        body = text[pending:offset]
        introduces = _introduction(body) if current >= 0 else _MARKDOWN_HEADING.fullmatch(body.strip())
        if body.strip() and not (level > current and introduces):
            yield Section(pending, body, {**metadata, **state})
            pending = offset
        elif not body.strip():
            pending = offset
        state = {k: v for k, v in state.items() if _LEVEL[k] < level}
        state[key] = value
        current = level
    if text[pending:].strip():
        yield Section(pending, text[pending:], {**metadata, **state})


_SENTENCE = re.compile(r"[.!?。！？]")
_MARKDOWN_HEADING = re.compile(r"#{1,6}[ \t][^\n]*")


def title_law(title: str | None) -> str | None:
    """The name a title gives the code it heads ("员工手册", "中华人民共和国劳动合同法" →
    "劳动合同法"): a title of one name, with no heading in it ("刑法 第二十条" is read by
    ``heading_metadata``) and no longer than a name (``_NAME``: 40 characters)."""
    name = law_name(title or "")
    if not name or len(name) > 40 or "\n" in name or set(heading_metadata(name, "", {})) - {"version"}:
        return None
    return name


def _introduction(body: str) -> bool:
    """A heading plus at most a title: short, and no sentence after the heading line."""
    _, _, rest = body.strip().partition("\n")
    return len(body.strip()) <= 200 and not _SENTENCE.search(rest)
