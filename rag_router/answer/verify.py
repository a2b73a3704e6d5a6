"""An answer's cited claims checked against the sources it cites. Pure; never raises, on any input.

A model that writes ``[1]`` can still write what [1] does not say ("gifts above 80 EUR [1]" from
"more than 50 EUR must be declined"). In the cited sources this checks what a string match checks
reliably: numbers (however written: "1,000", "nine", "五天", "百分之十二"; units and % are not
compared), negation (a sentence that negates, citing sources that negate nothing), e-mail
addresses, URLs, phone numbers and, in English, capitalised words past a sentence's first. Claims
are read narrowly from the answer ("no one", "一般" claim no number) and broadly from the sources,
so that a miss means the claim is absent. A sentence missing one is dropped, the first named; one
without a valid ``[n]`` is left as it is (``ground``'s business).
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, NamedTuple

from rag_router.answer.parse import parse_citations

log = logging.getLogger(__name__)
_Keep = Callable[[re.Match[str]], bool]


@dataclass(frozen=True, slots=True)
class Unsupported:
    sentence: str  # as written
    cited: tuple[int, ...]  # its valid source numbers: what it was checked against
    reason: str  # the first missing claim: "80 EUR is not in source [1]"


@dataclass(frozen=True, slots=True)
class Verified:
    text: str  # the answer without the dropped sentences
    dropped: list[Unsupported]
    checked: int  # sentences that cited a valid source number


class _Claim(NamedTuple):
    at: int  # position in the sentence: the first missing claim is the one named
    label: str
    kind: Literal["held", "name"]  # "held": one of ``values`` in ``_Facts.held``; "name": in its text
    values: frozenset[str]  # alternatives: any one found supports it


class _Facts(NamedTuple):
    held: frozenset[str]  # numbers ("1000", "18:15"), phone numbers ("tel:…"), "¬" when it negates
    text: str  # NFKC, lower-cased


_MARK_RE = r"[\[［【]\s*\d{1,6}(?:\s*[,，、;\-–~～]\s*\d{1,6})*\s*[\]］】]"
_MARK = re.compile(_MARK_RE)
# a sentence ends at . ! ? ; before a space, a quote or a mark, or at 。！？; its marks follow it
_END = re.compile(
    r"(?:(?<![.!?;])[.!?;]++(?=[\s\[［【\"'”’)]|$)|[。！？]++)[\"'”’」』)）]*+(?:\s*" + _MARK_RE + ")*"
)
_ABBREV = re.compile(r"(?<![^\s(])(?:(?i:e\.g|i\.e|vs|mrs?|ms|dr|approx|ca)|[A-Z]|(?:[A-Za-z]\.)+[A-Za-z])$")
# a list item's, a heading's or a quote's marker: the line keeps it, no sentence starts with it
_LEAD = re.compile(
    r"\s*(?:(?:[-*•+>]|#{1,6}|\d{1,3}[.)])\s+|(?:\d{1,3}|[一二三四五六七八九十]{1,3})、\s*"
    r"|[（(][0-9A-Za-z一二三四五六七八九十]{1,3}[)）]\s*)?"
)
_CJK = re.compile(r"[\u3400-\u9fff]")
# the space the join put between two Chinese sentences, taken out again
_CJK_GAP = re.compile(r"(?<=[。！？」』）”’\]】])\s+(?=[\u3400-\u9fff“‘「（])")

_SOURCE_REF = re.compile(r"\b(?i:sources?|documents?|passages?)\s*#?\d{1,6}\b|(?:来源|资料|文档)\s*\d{1,6}")
_ADDRESS = re.compile(
    r"(?<![\w.,+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+|\b(?i:https?://|www\.)[^\s<>\"'\[\]()（），。]+"
)
# "+49 30 1234567", "(0)30 …", "030-1234567" (``_phone`` says which runs of digits are phone numbers)
_PHONE = re.compile(r"(?<![\w+.,])(?:\+|\(\+?)?\d[\d()]*+(?:[ ./-]\(?\d[\d()]*+){0,6}")
_DATE = re.compile(r"\s*\d{1,4}[./-]\d{1,2}[./-]\d{1,4}\s*")
_TIME = re.compile(r"(?<![\d:.])(\d{1,2}):(\d{2})(?![\d:])")
_NUMBER = re.compile(
    r"(?<![\d.])(?P<n>(?:\d{1,3}(?:,\d{3})++(?!\d)|\d++)(?:\.\d+)?+)"
    r"(?:\s?(?P<en>(?i:thousand|million|billion))\b|(?P<zh>万|亿))?"
)
_POWER = {"thousand": 3, "million": 6, "billion": 9, "万": 4, "亿": 8}
_UNIT = re.compile(r"\s?(?:%|[A-Z]{3}\b|[€$£¥元天])")

_ONES = """zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen
    sixteen seventeen eighteen nineteen"""
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety"
_SMALL = {w: i for i, w in enumerate(_ONES.split())} | {w: 20 + 10 * i for i, w in enumerate(_TENS.split())}
_SCALE = {"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9}
_NUMWORD = "(?:" + "|".join(sorted([*_SMALL, *_SCALE], key=len, reverse=True)) + r")\b"
_SPELLED = re.compile(rf"(?i:\b{_NUMWORD}(?:[\s-]{_NUMWORD}){{0,8}})")

_ZH_NUM = re.compile(r"(百分之|第)?([零〇一二两三四五六七八九十百千万亿]{1,24})")
_ZH_DIGIT = {c: i for i, c in enumerate("零一二三四五六七八九")} | {"〇": 0, "两": 2}
_ZH_TENS = {"十": 10, "百": 100, "千": 1000}
_ZH_UNITS = frozenset("天日年月周个元块岁次小时钟秒人名位项条款章节倍号家份张本件公里米克斤层楼间台辆期页")
_ZH_WORDS = frozenset({"千万", "万一", "一一", "万万"})  # "must", "in case", "one by one"

_NEGATION = re.compile(  # not 非常 "very", 无论 "whatever", 不同 "different", 未来 "future", …
    r"\b(?i:not|no|never|cannot|none|nor|neither|nobody|nothing|without|\w+n['’]t)\b"
    r"|(?!非常|无论|不同|不断|不仅|不过|不但|不少|不久|未来|无数)(?<!除)(?:不得|禁止|没有|不|没|无|非|未|勿)"
)
_PARTICLE = re.compile(r"\W*(?:(?i:no|yes)\b|不是|不|是的|是|对)(?=\s*[,，。.!！:：;；]|\s*$)")  # "No, …"

_WORD = re.compile(r"(?<![\w'’-])[^\W\d_](?:[\w'’-]*\w)?")
_CONTRACTION = re.compile(r"['’](?:s|m|ll|re|ve|d)?$", re.IGNORECASE)
_FUNCTION_WORDS = """a an the and or but if then as at by for from in into of on to with without per is are
    be do does has have will would shall should can could may might must we you he she it they this
    that these those there here who which what when where why how all any each no not yes also however
    note please see according source sources answer question mr ms dr st ok pm eur usd gbp cny rmb"""
_FUNCTION = frozenset(_FUNCTION_WORDS.split())


def supported(text: str, sources: Sequence[str]) -> tuple[str, str | None]:
    """The answer less the sentences its sources do not support, and a note saying what was
    removed and why (None: nothing was). An empty text: no sentence was supported."""
    checked = verify(text, sources)
    if not checked.dropped:
        return text, None
    why = "; ".join(d.reason for d in checked.dropped[:3])
    if not checked.text.strip():
        return "", f"its sources do not support the model's claims ({why})"
    return (
        checked.text,
        f"{len(checked.dropped)} sentence(s) removed, their sources do not support them: {why}",
    )


def verify(text: str, sources: Sequence[str]) -> Verified:
    """The answer without the cited sentences their sources do not bear out (``sources[i]``: [i + 1])."""
    try:
        return _verify(text, sources)
    except Exception as exc:  # the contract: model output never raises
        log.warning("answer verification failed: %r", exc)
        return Verified(text.strip() if isinstance(text, str) else "", [], 0)


def _verify(text: str, sources: Sequence[str]) -> Verified:
    dropped: list[Unsupported] = []
    checked, lines = 0, list[str]()
    for line in text.splitlines():
        lead = _LEAD.match(line)
        cut, kept, lost = lead.end() if lead else 0, list[str](), False
        for sentence in _sentences(line[cut:]):
            cited = tuple(parse_citations(" ".join(_MARK.findall(sentence)), len(sources)).numbers)
            if cited:
                checked += 1
                held = [_facts(sources[n - 1]) for n in cited]
                claims = sorted(_claims(sentence), key=lambda c: c.at)
                missing = next((c for c in claims if not any(_holds(f, c) for f in held)), None)
                if missing is not None:
                    where = f"source [{cited[0]}]" if len(cited) == 1 else f"sources {list(cited)}"
                    dropped.append(Unsupported(sentence, cited, f"{missing.label} is not in {where}"))
                    lost = True
                    continue
            kept.append(sentence)
        if not lost:
            lines.append(line.rstrip())
        elif kept:  # a list item or a line whose every sentence went goes whole
            lines.append(line[:cut] + _CJK_GAP.sub("", " ".join(kept)))
    out = re.sub(r"\n[ \t]*\n(?:[ \t]*\n)+", "\n\n", "\n".join(lines)) if dropped else "\n".join(lines)
    return Verified(out.strip(), dropped, checked)


def _sentences(body: str) -> list[str]:
    """The sentences of one line, each with the marks that follow its end ("…五天。[1]")."""
    out, start = [], 0
    for m in _END.finditer(body):
        if body[m.start()] == "." and _ABBREV.search(body, max(start, m.start() - 12), m.start()):
            continue  # "e.g.", "U.S.", "J."
        out.append(body[start : m.end()].strip())
        start = m.end()
    return [s for s in [*out, body[start:].strip()] if s]


def _take(rx: re.Pattern[str], t: str, keep: _Keep = lambda m: True) -> tuple[list[re.Match[str]], str]:
    """The matches ``keep`` takes, and ``t`` with them blanked (positions stay)."""
    found = [m for m in rx.finditer(t) if keep(m)]
    starts = {m.start() for m in found}
    return found, rx.sub(lambda m: " " * len(m.group()) if m.start() in starts else m.group(), t)


def _claims(sentence: str) -> list[_Claim]:
    """What a sentence asserts that its sources must hold, read narrowly (module docstring)."""
    t = _take(_SOURCE_REF, _take(_MARK, unicodedata.normalize("NFKC", sentence))[1])[1]
    found, t = _take(_ADDRESS, t)
    out = []
    for m in found:  # e-mail addresses, URLs as a source may write them ("https://www.x.org/a/." → "x.org/a")
        bare = re.sub(r"^(?i:https?://)?(?i:www\.)?", "", m.group().rstrip(".,;:!?/")).lower()
        out.append(_Claim(m.start(), m.group().rstrip(".,;:!?"), "name", frozenset({bare})))
    raw = t  # words are read before numbers are blanked: "Gifts50" is one word, "50nine" no number
    found, t = _take(_PHONE, t, lambda m: bool(_phone(m.group())))
    out += [_Claim(m.start(), m.group().strip(), "held", _phone(m.group())) for m in found]
    found, t = _take(_TIME, t)
    for m in found:  # "9:00" is also "9" ("9 a.m."); "18:15" only itself
        hour = str(int(m[1]))
        values = {f"{hour}:{m[2]}"} | ({hour} if m[2] == "00" else set())
        out.append(_Claim(m.start(), m.group(), "held", frozenset(values)))
    found, t = _take(_NUMBER, t)
    for m in found:
        prefix = t[m.start() - 1] if m.start() and t[m.start() - 1] in "€$£¥" else ""
        unit = _UNIT.match(t, m.end())
        label = prefix + m.group().strip() + (unit.group() if unit else "")
        out.append(_Claim(m.start(), label, "held", frozenset(_numbers(m)[-1:])))
    for m in _SPELLED.finditer(raw):
        words = re.split(r"[\s-]+", m.group().lower())
        if words != ["one"] and set(words) & _SMALL.keys():  # "no one", "a million thanks": no number
            out.append(_Claim(m.start(), m.group(), "held", frozenset({str(_spelled(words))})))
    for m in _ZH_NUM.finditer(t):
        run, after = m.group(2), t[m.end() : m.end() + 2]
        zh_unit = after[:1] if after[:1] in _ZH_UNITS or after == "分钟" else ""
        if m.group(1) or zh_unit or (len(run) > 1 and run not in _ZH_WORDS):
            out.append(_Claim(m.start(), m.group() + zh_unit, "held", _zh_values(run)))
    particle = _PARTICLE.match(raw)  # "No, …" answers the question; it negates nothing
    negation = _NEGATION.search(" " * particle.end() + raw[particle.end() :] if particle else raw)
    if negation:
        out.append(_Claim(negation.start(), f"'{negation.group()}'", "held", frozenset("¬")))
    return out if _CJK.search(t) else out + _names(raw)


def _names(t: str) -> list[_Claim]:
    """Capitalised words and acronyms, not a sentence's (or a colon's) first, nor function words."""
    first, out = re.search(r"\w", t), list[_Claim]()
    for m in _WORD.finditer(t):
        word = _CONTRACTION.sub("", m.group())
        low = word.lower()
        if not word[:1].isupper() or sum(c.isalpha() for c in word) < 2 or low in _FUNCTION:
            continue
        before = t[max(0, m.start() - 4) : m.start()].strip(" \"'“‘(*")
        if (first and m.start() == first.start()) or before.endswith((":", "：")):
            continue
        out.append(_Claim(m.start(), word, "name", frozenset({low, low[:-1] if low[-1] == "s" else low})))
    return out


@lru_cache(maxsize=256)
def _facts(source: str) -> _Facts:
    """What a source holds, read broadly: every number however written, its text, its negation."""
    t = unicodedata.normalize("NFKC", source)
    numbers = {f"{int(m[1])}:{m[2]}" for m in _TIME.finditer(t)}
    phones, cut = _take(_PHONE, _take(_ADDRESS, t)[1], lambda m: bool(_phone(m.group())))
    cut = _take(_TIME, cut)[1]
    for u in (t, cut):  # as written, and as an answer's numbers are read (addresses, phones, times out)
        numbers.update(*map(_numbers, _NUMBER.finditer(u)), *(_zh_values(m[2]) for m in _ZH_NUM.finditer(u)))
    for m in _SPELLED.finditer(t):
        words = re.split(r"[\s-]+", m.group().lower())
        numbers.update(str(_spelled(w)) for w in [words, *([w] for w in words)])
    numbers.update(*(_phone(m.group()) for m in [*_PHONE.finditer(t), *phones]))
    numbers.update(["¬"] if _NEGATION.search(t) else [])
    return _Facts(frozenset(numbers), t.lower())


def _holds(facts: _Facts, claim: _Claim) -> bool:
    if claim.kind == "held":
        return bool(claim.values & facts.held)
    # a whole word, an address whole: "help@x.org" is not in "it-help@x.org"
    return any(
        re.search(rf"(?<![\w{'.+-' * ('@' in v)}]){re.escape(v)}(?!\w)", facts.text) for v in claim.values
    )


def _norm(raw: str) -> str:
    """A number as one string: "1,000" → "1000", "0.30" → "0.3", "007" → "7"."""
    whole, _, frac = raw.replace(",", "").partition(".")
    whole, frac = whole.lstrip("0") or "0", frac.rstrip("0")
    return f"{whole}.{frac}" if frac else whole


def _numbers(m: re.Match[str]) -> list[str]:
    """A digit match's value, then, with a multiplier after it ("3万", "2 million"), the product."""
    value, power = _norm(m["n"]), _POWER.get((m["en"] or m["zh"] or "").lower(), 0)
    whole, _, frac = value.partition(".")
    frac += "0" * power
    return [value, _norm(f"{whole}{frac[:power]}.{frac[power:]}")] if power else [value]


def _spelled(words: list[str]) -> int:
    total = current = 0
    for w in words:
        if w in _SMALL or w == "hundred":
            current = current + _SMALL[w] if w in _SMALL else (current or 1) * 100
        else:
            total, current = total + (current or 1) * _SCALE[w], 0
    return total + current


def _zh_values(run: str) -> frozenset[str]:
    """A Chinese numeral's value ("三十" → 30, "一百零五" → 105); a run of bare digits is read both
    as digits ("二〇二四" → 2024) and one by one ("三四天": three or four days)."""
    if len(run) > 1 and all(c in _ZH_DIGIT for c in run):
        return frozenset({_norm("".join(str(_ZH_DIGIT[c]) for c in run))} | {str(_ZH_DIGIT[c]) for c in run})
    total = wan = section = number = 0
    for c in run:
        if c in _ZH_DIGIT:
            number = _ZH_DIGIT[c]
        elif c in _ZH_TENS:
            section, number = section + (number or 1) * _ZH_TENS[c], 0
        elif c == "万":
            wan, section, number = (wan + section + number) * 10**4, 0, 0
        else:  # 亿
            total, wan, section, number = (total + wan + section + number) * 10**8, 0, 0, 0
    return frozenset({str(total + wan + section + number)})


def _phone(raw: str) -> frozenset[str]:
    """Digits and last seven ("+49 30 1234567" = "030 1234567") of a phone number: +, ( or 0 first."""
    digits = "".join(c for c in raw if c.isdigit())
    if raw[:1] not in ("+", "(", "0") or len(digits) < 7 or _DATE.fullmatch(raw):
        return frozenset()
    return frozenset({f"tel:{digits}", f"tel:…{digits[-7:]}"})
