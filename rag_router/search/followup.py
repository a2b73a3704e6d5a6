"""A follow-up question's subject, from the conversation's earlier questions, without an LLM.

"What does GDPR Article 17 say?" then "And Article 18?": the second names a clause but no law,
so it is searched as "And GDPR Article 18?" — the name the last question that had one used, put
where that question put it ("员工手册第六条…" then "那第七条呢？" → "那《员工手册》第七条呢？";
"Section 3 of the travel policy" then "and Section 4?" → "and Section 4 of the travel policy?").
A question with no subject of its own — a follow-up opening ("what about hotels?", "还有呢？")
with at most ``_FEW`` words of content — is searched with the previous question's subject terms
after it (its closing phrase: "…allowance on a business trip?" → "business trip"). Anything
else is searched as asked: a question that names its own document or law, or says enough,
starts a new subject. Pure.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rag_router.search.features import QueryFeatures, extract
from rag_router.search.named import document_names

_FEW = 3  # content words at most in a question that leans on the previous one's subject
_OPENING = re.compile(
    r"^\s*(?:and|also|then|so|ok(?:ay)?|what about|how about|and what about|what of|same for)\b",
    re.IGNORECASE,
)
_CN_OPENING = re.compile(r"^\s*(?:那么?|还有|另外|再问)|呢\s*[？?]?\s*$")  # no \b: no spaces in Chinese
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]+|\d+(?:[.,]\d+)*|[\u4e00-\u9fff]+")
_STOP_WORDS = """a an the and or of to in on at for from by with about what which who how when where why
    is are was were be do does did can could may might will would shall should i me my we our you your
    it its this that these those there say says said tell please also then so ok okay same other again
    more much many any some"""
_STOP = frozenset(_STOP_WORDS.split())
_CN_STOP = (
    "那么",
    "那",
    "还有",
    "另外",
    "呢",
    "吗",
    "什么",
    "怎么",
    "多少",
    "是",
    "的",
    "了",
    "再问",
    "关于",
)


@dataclass(frozen=True, slots=True)
class FollowUp:
    """What is searched for ``question``; ``carried``: what came from an earlier question (None: nothing)."""

    question: str
    query: str
    carried: dict[str, Any] | None = None


def resolve(question: str, earlier: Sequence[str], *, today: dt.date) -> FollowUp:
    """``question`` with its subject carried from ``earlier`` (the conversation's user questions,
    oldest first) where it has none. Each earlier question is resolved first, so a chain of
    follow-ups ("And Article 18?", "And Article 19?") keeps the first one's law."""
    resolved: list[_Turn] = []
    for turn in earlier:
        if turn.strip():
            text = _resolve_one(turn, resolved, today).query
            resolved.append(_Turn(turn, text, extract(text, today=today)))
    return _resolve_one(question, resolved, today)


@dataclass(frozen=True, slots=True)
class _Turn:
    asked: str  # as the user wrote it (what ``carried.from`` shows)
    text: str  # as it was searched, its own follow-up resolved
    features: QueryFeatures


def _resolve_one(question: str, earlier: list[_Turn], today: dt.date) -> FollowUp:
    if not earlier:
        return FollowUp(question, question)
    features = extract(question, today=today)
    if features.clauses:
        if document_names(question, features) or not _bare_clause(question, features):
            return FollowUp(question, question)  # it names its own document, or says more
        for turn in reversed(earlier):
            if names := document_names(turn.text, turn.features):
                name = names[0].strip("《》") or names[0]
                query = _with_name(question, features, turn.text, turn.features, name)
                return FollowUp(question, query, {"from": turn.asked, "document": name})
        return FollowUp(question, question)
    if not _leans_on_previous(question, features):
        return FollowUp(question, question)
    last = earlier[-1]
    terms = _subject_terms(last.text, last.features)
    if not terms:
        return FollowUp(question, question)
    return FollowUp(question, f"{question.rstrip()} {terms}", {"from": last.asked, "terms": terms})


def _with_name(question: str, features: QueryFeatures, text: str, previous: QueryFeatures, name: str) -> str:
    """``question`` with ``name`` put at its first clause as ``text`` put it at its own."""
    clause = features.clauses[0]
    start, end = clause.span
    at = text.find(name)
    before = previous.clauses and at >= 0 and at < previous.clauses[0].span[0]
    if before:
        if _cjk(clause.text[0]):  # 《》: no character before it joins the name ("那考勤管理办法")
            return f"{question[:start]}{name if name.startswith('《') else f'《{name}》'}{question[start:]}"
        return f"{question[:start]}{name} {question[start:]}"
    prefix = text[previous.clauses[0].span[1] : at] if previous.clauses and at >= 0 else " of "
    joint = (
        prefix
        if prefix.strip(" ,").lower() in ("of", "of the", "in", "in the", "from", "from the", "")
        else " of "
    )
    joint = joint if joint.strip() else " of "
    return f"{question[:end]}{joint}{name}{question[end:]}"


def _bare_clause(question: str, features: QueryFeatures) -> bool:
    """A clause and little else ("What does Article 18 say?") or a follow-up opening ("And
    Section 4 on hotels?"): a question about a clause that says more names what it is about."""
    if _follows_on(question):
        return True
    rest = question
    for clause in sorted(features.clauses, key=lambda c: c.span[0], reverse=True):
        rest = rest[: clause.span[0]] + " " + rest[clause.span[1] :]
    return len(_content(rest)) <= 1


def _follows_on(question: str) -> bool:
    """A follow-up's opening: "and …", "what about …", "那…", "…呢？"."""
    return bool(_OPENING.search(question) or _CN_OPENING.search(question))


def _cjk(ch: str) -> bool:
    return "\u4e00" <= ch <= "\u9fff"


def _leans_on_previous(question: str, features: QueryFeatures) -> bool:
    """A follow-up opening and little content of its own ("what about hotels?", "那年假呢？")."""
    if features.laws or features.quoted or features.identifiers:
        return False
    if not _follows_on(question):
        return False
    return len(_content(features.searched_text or question)) <= _FEW


def _content(text: str) -> list[str]:
    words = []
    for word in _WORD.findall(text):
        if _cjk(word[0]):
            for stop in _CN_STOP:
                word = word.replace(stop, " ")
            words += [w for w in word.split() if w]
        elif word.lower() not in _STOP:
            words.append(word)
    return words


_SETTING = re.compile(
    r"\b(?:on|in|for|of|under|during|at|inside|within|about|regarding|per)\s+((?:[\w'-]+\s*){1,6})[?.!]*\s*$",
    re.IGNORECASE,
)


def _subject_terms(text: str, previous: QueryFeatures) -> str:
    """The previous question's subject: the documents it named, else the words of its closing
    phrase ("…the meal allowance on a business trip?" → "business trip": the allowance is what the
    follow-up replaces). None in a question without one, or in Chinese, which has no spaces to
    tell the subject from what is asked ("年休假有几天" then "那婚假呢？": 年休假 is no subject)."""
    names = document_names(text, previous)
    if names:
        return " ".join(names)
    setting = _SETTING.search(previous.searched_text or text)
    return " ".join(_content(setting.group(1))) if setting else ""
