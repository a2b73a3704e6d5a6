"""An optional LLM step for follow-ups the rules could not resolve (``RAG_LLM__CONDENSE``).

``search.followup`` carries a named document to a bare clause and a closing phrase to a short
follow-up, without a model. What it leaves — "Does that also apply to contractors?" — a
configured LLM may rewrite as a question that stands alone, from the conversation's earlier
questions. What the model writes is untrusted: one line, at most ``MAX_GROWTH`` times the
question's length plus the last earlier question's, never empty; anything else, a timeout or an
error keeps the question as asked (the answer is never held up by this step past its budget).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence

from rag_router.answer.llm import LLMClient, LLMError
from rag_router.search.flow import SearchParams

log = logging.getLogger(__name__)

SYSTEM = (
    "Rewrite the user's last question so that it can be understood without the conversation: "
    "name what it refers to. Keep its language and meaning. Reply with the question only."
)
EARLIER = 4  # earlier questions shown to the model
MAX_GROWTH = 2  # a rewrite longer than 2 × (question + last earlier question) is no rewrite
BUDGET_S = 5.0  # at most this much of the answer's deadline


class Condenser:
    def __init__(self, llm: LLMClient, *, max_tokens: int = 96) -> None:
        self._llm = llm
        self._max_tokens = max_tokens

    async def rewrite(self, search: SearchParams, history: Sequence[str], deadline: float) -> SearchParams:
        """``search`` with its query rewritten to stand alone, when it is a follow-up the rules
        carried nothing to (``carried`` says so); else as it is."""
        if not history or search.carried is not None:
            return search
        standalone = await self.standalone(search.query, history, deadline)
        if standalone is None:
            return search
        carried = {"from": history[-1], "condensed": standalone}
        return dataclasses.replace(search, query=standalone, carried=carried)

    async def standalone(self, question: str, history: Sequence[str], deadline: float) -> str | None:
        """The question rewritten to stand alone, or None (keep it as asked)."""
        earlier = [h for h in history if h.strip()][-EARLIER:]
        if not earlier:
            return None
        lines = "\n".join(f"{i}. {h}" for i, h in enumerate(earlier, 1))
        messages = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Earlier questions:\n{lines}\n\nLast question: {question}"},
        ]
        try:
            done = await self._llm.complete(
                messages,
                deadline=min(deadline, time.monotonic() + BUDGET_S),
                max_tokens=self._max_tokens,
                temperature=0,
            )
        except LLMError as exc:
            log.info("follow-up kept as asked: the model did not rewrite it (%s)", exc)
            return None
        return rewritten(done.text, question, earlier[-1])


def rewritten(text: str, question: str, last: str) -> str | None:
    """The model's rewrite, if it is one: its first non-empty line without quotes or a label."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    for label in ("Rewritten question:", "Question:", "Standalone question:"):
        if line.lower().startswith(label.lower()):
            line = line[len(label) :].strip()
    line = line.strip("\"'“”‘’「」 ")
    if not line or line == question.strip() or len(line) > MAX_GROWTH * (len(question) + len(last)):
        return None
    return line
