"""The answer's first stage: whether to answer, and from which hits.

The search already judged each hit against the relevance floor (``search.floor``) and checked the
clause the question named (``search.named``). Here:

- a clause that is not stored declines, whatever else was found (``SearchOutcome.missing``);
- a question the floor declined is answered after all from a top hit whose sentence evidence
  clears its model's sentence floor (``answer.evidence``): no cliff at one number;
- the sentences' cosines are kept for the extractive answer's choice of its lead.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Mapping

from rag_router.answer.evidence import SentenceFloor, SentenceScorer
from rag_router.answer.extractive import canned, quotable
from rag_router.search.flow import SearchOutcome
from rag_router.search.fuse import Hit
from rag_router.search.named import document_names

EVIDENCE_S = 2.0  # the most the sentence evidence may take of an answer's time
RESCUE_HITS = 3  # the top hits whose sentences may answer a question the floor declined


async def decide(
    outcome: SearchOutcome,
    question: str,
    scorer: SentenceScorer | None,
    floor: SentenceFloor,
    deadline: float,
) -> bool:
    """Whether to answer. ``outcome.relevance`` gains the hits rescued by sentence evidence, and
    ``outcome.evidence`` each top sentence's evidence in [0, 1]."""
    relevance = outcome.relevance
    if outcome.missing is not None:
        return False
    if relevance is None:
        return True
    declined = not relevance.any
    if scorer is None or not outcome.hits or "dense" in relevance.unweighted:
        return not declined  # no model of the question's language to judge its sentences
    # declined: the top hits that may answer after all; else the first source, whose sentences
    # the extractive answer's lead is chosen from (the cost: one embedding call of its sentences)
    first = next((h for h, ok in zip(outcome.hits, relevance.marks, strict=True) if ok), None)
    if not declined and (first is None or outcome.asked[:1] == [True] or scorer.second(question)):
        # a clause asked for by number is read in order (extractive); e5's sentence cosines chose
        # worse Chinese leads than the question's terms (qa-cmrc-trial gold first 0.68 → 0.67)
        return True
    top = outcome.hits[:RESCUE_HITS] if declined else [first] if first is not None else []
    per_hit = [quotable(h.chunk.text, h.chunk.title) for h in top]
    flat = [s for group in per_hit for s in group]
    started = time.perf_counter()
    try:  # the request's deadline, and at most EVIDENCE_S of it: without evidence the floor decides
        async with asyncio.timeout(max(0.0, min(deadline - time.monotonic(), EVIDENCE_S))):
            cosines = await scorer.cosines(question, flat)
    except TimeoutError:
        outcome.reasons.append("no sentence evidence: the embedder did not answer in time")
        return not declined
    finally:
        outcome.timings_ms["evidence"] = (time.perf_counter() - started) * 1000
    by_sentence: dict[str, tuple[float, str]] = {}
    best: list[tuple[float | None, str]] = []
    at = 0
    for group in per_hit:
        scored = [
            (c, scorer.space(question, s)) for s, c in zip(group, cosines[at : at + len(group)], strict=True)
        ]
        for s, (c, space) in zip(group, scored, strict=True):
            if c is not None:
                by_sentence[s] = (max(c, by_sentence.get(s, (c, space))[0]), space)
        at += len(group)
        known = [(c, space) for c, space in scored if c is not None]
        best.append(max(known, key=lambda x: x[0]) if known else (None, "primary"))
    if declined:
        rescued = [
            floor.clears(chunk=_own_cosine(hit, space), sentence=cos, space=space)
            for hit, (cos, space) in zip(top, best, strict=True)
        ]
        if not any(rescued):
            return False
        marks = [*rescued, *([False] * (len(outcome.hits) - len(rescued)))]
        outcome.relevance = dataclasses.replace(relevance, marks=marks)
        i = rescued.index(True)
        cos, space = best[i]
        outcome.lead = next((t for t in per_hit[i] if by_sentence.get(t, (None, ""))[0] == cos), None)
        chunk = _own_cosine(top[i], space)
        shown = f"chunk {chunk:.3f} + " if space == "primary" and chunk is not None else ""
        outcome.reasons.append(f"answered on sentence evidence ({space}): {shown}best sentence {cos:.3f}")
    outcome.evidence = _scaled(by_sentence)
    return True


def _own_cosine(hit: Hit, space: str) -> float | None:
    """The hit's chunk cosine in the leg of the sentence's space (dense, or xdense across)."""
    kind = "xdense" if space == "cross" else "dense"
    values = [leg.score for name, leg in hit.legs.items() if name.rsplit(".", 1)[-1] == kind]
    return max(values) if values else None


def _scaled(by_sentence: Mapping[str, tuple[float, str]]) -> dict[str, float]:
    """Each sentence's cosine scaled to [0, 1] within the sentences of its space (the models'
    scales differ: e5's unrelated pairs score above MiniLM's answers)."""
    out: dict[str, float] = {}
    spaces: dict[str, list[float]] = {}
    for cos, space in by_sentence.values():
        spaces.setdefault(space, []).append(cos)
    for sentence, (cos, space) in by_sentence.items():
        lo, hi = min(spaces[space]), max(spaces[space])
        out[sentence] = (cos - lo) / (hi - lo) if hi > lo else 1.0
    return out


def declined(outcome: SearchOutcome, language: str | None) -> str:
    """The decline's sentence: what is missing when the question named a clause, else that
    nothing relevant is stored."""
    missing = outcome.missing
    if missing is None:
        return canned("abstain", language)
    if missing.name is None:
        return canned("missing_clause_anywhere", language).format(clause=missing.clause)
    if not missing.stored:
        return canned("missing_document", language).format(name=missing.name, clause=missing.clause)
    document = missing.document or missing.name
    return canned("missing_clause", language).format(document=document, clause=missing.clause)


def named_words(outcome: SearchOutcome, question: str) -> list[str]:
    """What a clause question named: the clause, the document's name, the clause's title."""
    features = outcome.route.features
    if features is None:
        return []
    first = outcome.hits[0].chunk.title if outcome.hits else None
    return [*(c.text for c in features.clauses), *document_names(question, features), first or ""]
