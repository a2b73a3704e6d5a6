"""What a clause question names, and whether it is stored: "Section 12 of the travel policy",
"员工手册第二十条", "第九十九条".

A question that names a clause asks for that clause of that document, not for the closest text:
the clause filter finds the chunks that are the clause in any document (the ladder drops a law
filter whose words match no stored ``law`` exactly), and here a hit counts as the one asked for
only when its document also carries the name the question gave — the name's words (stemmed) all
in the document's title, law or id ("travel policy" → "Northwind Freight Business Travel Policy",
"考勤管理办法" → "北风货运考勤管理办法"). When none does, the clause is missing and the answer
says so (``Missing``) instead of quoting another clause or another document's clause.

English names are read around the clause: "Section 3 of the travel policy", "the Driver and Fleet
Safety Policy's Section 9" is not, "travel policy section 8" is (the words before the clause, back
to a function word). Acronyms and Chinese names are ``features.laws`` (``clauses.find_laws``).

Pure but for ``check_route``, which looks a name up in the tiers when no hit carries it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from indexers.records import StoredChunk, TierName
from indexers.text.lexical import Analyzer
from indexers.tiers.base import SearchTier
from indexers.tiers.query import SearchQuery
from rag_router.errors import BackendUnavailable
from rag_router.search.clauses import Clause
from rag_router.search.features import QueryFeatures
from rag_router.search.floor import is_clause
from rag_router.search.fuse import Hit
from rag_router.search.retrieve import retrieve
from rag_router.search.route import Policy, Route

# words that end a name after the clause ("… of the travel policy say?") or start the question
_WORDS = """a an the of in on at to for from by with about and or is are was were be do does did say says
    said cover covers covered require requires required state states mean means contain contains
    provide provides specify specifies what which who whom whose when where why how whats what's there
    tell me please summarise summarize explain describe show give list read quote this that these
    those it its under according per regarding"""
_STOP = frozenset(_WORDS.split())
# "the travel policy", "Driver and Fleet Safety Policy": up to eight words, "and"/"&" inside
_WORD = r"[A-Za-z][\w'&-]*"
_AFTER = re.compile(rf"^\s*,?\s*(?:of|in|from)\s+(?:the\s+|our\s+|my\s+)?((?:{_WORD}\s*){{1,8}})")
_BEFORE = re.compile(rf"((?:{_WORD}\s+){{1,8}})$")


@dataclass(frozen=True, slots=True)
class Missing:
    """A named clause that no stored chunk is: ``document`` is the stored title the name matched
    (None: no document was named, or none by that name is stored: ``stored``)."""

    clause: str
    name: str | None = None
    document: str | None = None
    stored: bool = False

    def reason(self) -> str:
        """The route's reason."""
        if self.name is None:
            return f"no stored chunk is {self.clause}: nothing to answer from"
        if not self.stored:
            return f"no stored document is named {self.name!r}: nothing to answer {self.clause} from"
        return f"{self.document or self.name} has no {self.clause}: nothing to answer from"

    def to_json(self) -> dict[str, Any]:
        return {"clause": self.clause, "law": self.name, "document": self.document, "stored": self.stored}


def document_names(query: str, features: QueryFeatures) -> list[str]:
    """The names a clause question gives its document: the laws read at the clause ("刑法",
    "GDPR"), else the English words around it ("the travel policy")."""
    names = [law.text for law in features.laws]
    if names or not features.clauses:
        return names
    text = features.searched_text or query
    for clause in features.clauses:
        start, end = clause.span
        after = _AFTER.match(text[end:])
        if after and (name := _trim(after.group(1).split())):
            names.append(name)
            continue
        before = _BEFORE.search(text[:start])
        if before and (name := _trim(before.group(1).split(), from_end=True)):
            names.append(name)
    return list(dict.fromkeys(names))


def _trim(words: list[str], *, from_end: bool = False) -> str | None:
    """The name in a run of words: up to the first function word (from the clause outwards)."""
    kept: list[str] = []
    for word in reversed(words) if from_end else words:
        acronym = len(word) > 1 and word.isupper()  # "IT security policy": IT is no "it"
        if (
            not acronym
            and word.lower().strip("'’") in _STOP
            and not (kept and word.lower() in {"and", "&", "of"})
        ):
            break
        kept.append(word)
    while kept and kept[-1].lower() in {"and", "&", "of"}:
        kept.pop()
    if from_end:
        kept.reverse()
    # "Section 3 of Article I": a clause word is no document name
    if not kept or kept[0].lower() in {"article", "section", "chapter", "part", "amendment", "rule"}:
        return None
    return " ".join(kept)


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).lower()


_CJK = re.compile(r"[\u3400-\u9fff]")


def names_document(name: str, fields: Iterable[Any], analyzer: Analyzer) -> bool:
    """Whether a document whose title / law / id are ``fields`` is the one ``name`` names: a
    Chinese name inside one of them; an English one's words (stemmed) all among theirs."""
    values = [_fold(str(v)) for v in fields if v]
    folded = _fold(name).strip("《》 ")
    if not folded:
        return False
    if _CJK.search(folded):
        bare = folded.removeprefix("中华人民共和国")
        return any(bare in v for v in values)
    wanted = set(analyzer.terms(folded))
    if not wanted:
        return False
    have: set[str] = set()
    for v in values:
        have.update(analyzer.terms(v.replace("-", " ").replace("_", " ")))
    return wanted <= have


def hit_fields(chunk: StoredChunk, law_field: str) -> list[Any]:
    """What may carry a document's name: its title, law, id and source (the file it came from)."""
    return [chunk.title, chunk.metadata.get(law_field), chunk.doc_id, chunk.metadata.get("source")]


def shown_clause(clauses: Sequence[Clause]) -> str:
    return " / ".join(dict.fromkeys(c.text for c in clauses))


@dataclass(slots=True)
class ClauseCheck:
    """The hits with the clause asked for first; per hit, whether it is that clause of the
    document named; and what is missing when none is."""

    hits: list[Hit]
    asked: list[bool]
    missing: Missing | None = None


Lookup = Callable[[str], Awaitable[list[list[Any]]]]


async def check_clause(
    query: str,
    features: QueryFeatures,
    named: Mapping[str, Sequence[str]],
    hits: list[Hit],
    *,
    analyzer: Analyzer,
    law_field: str,
    lookup: Lookup,
) -> ClauseCheck:
    """``named``: the clause filters the question implied (field → labels); ``lookup(name)``:
    the title / law / id fields of stored documents whose words match ``name`` (a lexical search,
    run only when no hit is the clause and a name was given, to tell "has no Section 12" from
    "no such document")."""
    if not named or not features.clauses:
        return ClauseCheck(hits, [False] * len(hits))
    names = document_names(query, features)

    def of_named(fields: Iterable[Any]) -> bool:
        values = list(fields)
        return not names or any(names_document(n, values, analyzer) for n in names)

    fields = [hit_fields(h.chunk, law_field) for h in hits]
    asked = [is_clause(h.chunk.metadata, named) and of_named(f) for h, f in zip(hits, fields, strict=True)]
    if any(asked):
        order = sorted(range(len(hits)), key=lambda i: not asked[i])  # stable: the asked first
        return ClauseCheck([hits[i] for i in order], [asked[i] for i in order])
    clause = shown_clause(features.clauses)
    if not names:
        return ClauseCheck(hits, asked, Missing(clause))
    found = next((f for f in fields if of_named(f)), None)
    for name in names if found is None else ():
        found = next((f for f in await lookup(name) if of_named(f)), None)
        if found is not None:
            break
    document = next((str(v) for v in found if v), None) if found else None
    return ClauseCheck(hits, asked, Missing(clause, names[0], document, found is not None))


async def check_route(
    query: str,
    route: Route,
    hits: list[Hit],
    tiers: Mapping[TierName, SearchTier],
    analyzer: Analyzer,
    policy: Policy,
    deadline: float,
) -> ClauseCheck:
    """``check_clause`` for a routed search: the clause filters are the route's, whether or not
    the ladder dropped them; the name is looked up with a lexical search of both tiers."""
    fields = set(policy.clause_fields.values())
    named = {k: v for k, v in route.filters.keywords.items() if k in fields}
    if route.features is None or not named:
        return ClauseCheck(hits, [False] * len(hits))

    async def lookup(name: str) -> list[list[Any]]:
        search = SearchQuery(
            text=name,
            terms=analyzer.query_terms(name),
            vector=None,
            filters=route.relaxed,
            k=20,
            legs=("lexical",),
        )
        try:
            found = await retrieve(tiers, ("hot", "cold"), search, deadline=deadline)
        except BackendUnavailable:
            return []
        return [
            hit_fields(h.chunk, policy.law_field)
            for leg in found.legs.values()
            for h in leg
            if h.chunk is not None
        ]

    return await check_clause(
        query, route.features, named, hits, analyzer=analyzer, law_field=policy.law_field, lookup=lookup
    )
