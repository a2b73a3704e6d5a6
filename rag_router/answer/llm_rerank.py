"""An LLM reranker over the configured OpenAI-compatible server (``RAG_RERANK__MODEL=llm``):
listwise, one call per search. The model reads the question and the numbered passages and
answers with the numbers of those that answer it, best first; a passage it lists scores by its
place, one it leaves out scores lowest. It is opt-in: a 7B model on vLLM reranks well, the
packaged 135M model does not (treat what it writes as untrusted: numbers outside the list,
repeats and prose are ignored). Whatever fails — timeout, an open circuit, no list — leaves the
fused order (``rag_router.search.rerank.Rerank``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

import json_repair

from rag_router.answer.jsontext import extract
from rag_router.answer.llm import LLMClient
from rag_router.search.fuse import Hit

PASSAGE_CHARS = 600  # of each passage in the prompt
SYSTEM = (
    "You rank passages by how well they answer a question. Reply with JSON only: "
    '{"ranking": [numbers of the passages that answer the question, best first]}.'
)


class LLMReranker:
    name = "llm"

    def __init__(self, llm: LLMClient, *, max_tokens: int = 64) -> None:
        self._llm = llm
        self._max_tokens = max_tokens

    async def scores(self, query: str, hits: Sequence[Hit], deadline: float) -> list[float | None]:
        passages = "\n\n".join(
            f"[{i}] {' '.join(h.chunk.text.split())[:PASSAGE_CHARS]}" for i, h in enumerate(hits, 1)
        )
        messages = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Passages:\n\n{passages}\n\nQuestion: {query}"},
        ]
        done = await self._llm.complete(
            messages, deadline=deadline, max_tokens=self._max_tokens, temperature=0
        )
        ranking = ranked(done.text, len(hits))
        if not ranking:
            raise ValueError("the model listed no passage")
        places = {n: place for place, n in enumerate(ranking)}
        return [float(len(hits) - places[i]) if i in places else 0.0 for i in range(1, len(hits) + 1)]


def ranked(text: str, n: int) -> list[int]:
    """The passage numbers in 1..n the model listed, first mention first: from a JSON object's
    "ranking" (or any list in it), else from the numbers in the text ("[3] > [1] > [2]")."""
    values: list[object] = []
    found = extract(text, "{")  # "[2] > [1]" is no JSON array
    if found is not None:
        try:
            parsed = json_repair.loads(found)
        except (ValueError, json.JSONDecodeError, RecursionError):
            parsed = None
        if isinstance(parsed, dict):
            parsed = parsed.get("ranking", next((v for v in parsed.values() if isinstance(v, list)), []))
        if isinstance(parsed, list):
            values = list(parsed)
    if not values:
        values = [int(m) for m in re.findall(r"\d+", text)]
    out: list[int] = []
    for value in values:
        number = value if isinstance(value, int) else _number(value)
        if number is not None and 1 <= number <= n and number not in out:
            out.append(number)
    return out


def _number(value: object) -> int | None:
    match = re.fullmatch(r"\s*\[?(\d+)\]?\s*", str(value))
    return int(match.group(1)) if match else None
