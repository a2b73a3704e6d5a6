"""The answer's limit stage: a word, character or sentence limit the question stated, kept.

The model's answer (or the kept part of it) is cut to whole sentences within the limits
(``prompting.enforce_limits``); a cut inside the first sentence keeps that sentence's ``[n]``.
The extractive answer chooses within the limits itself (``extractive``).
"""

from __future__ import annotations

from rag_router.answer.extractive import cite
from rag_router.answer.parse import parse_citations
from rag_router.answer.prompting import CompiledPrompt, Constraints, enforce_limits


def limit(text: str, constraints: Constraints, sources: int) -> tuple[str, bool]:
    """``text`` within the limits, and whether it was cut."""
    cut, trimmed = enforce_limits(text, constraints)
    return (_keep_citation(cut, text, sources) if trimmed else cut), trimmed


def _keep_citation(cut: str, whole: str, sources: int) -> str:
    """A limit that cut the answer inside its first sentence also cut that sentence's ``[n]``:
    the part kept is still that source's claim, so it keeps the mark (a mark is no word)."""
    if parse_citations(cut, sources).numbers:
        return cut
    first = parse_citations(whole, sources).numbers[:1]
    if not first:
        return cut
    return cite(cut.rstrip(), first[0])


def past_the_limit(prompt: CompiledPrompt, partial: str) -> bool:
    """A text answer cut at max_tokens after it already passed the asked-for word, character or
    sentence limit is whole: the limit cuts it at a sentence end anyway (``enforce_limits``)."""
    c = prompt.constraints
    if c.format == "json" or not (c.max_words or c.max_chars or c.max_sentences):
        return False
    return enforce_limits(partial, c)[1]
