"""Does any answer a model wrote, as kept by the service, state a number its cited source lacks?

usage: python bench/answer_claims.py BASE_URL SET_DIR
Against a running service with an LLM (e.g. `rag-router serve --local-llm`): ingests the set's
corpus over POST /v1/documents, asks every question on /v1/answer, and for each answer kept in
`mode: llm` checks every number of every cited sentence against the cited chunks' stored text,
with a check of its own (digits only, independent of rag_router/answer/verify.py). Prints the
counts; exit 1 when a kept sentence states a number its sources do not hold.
"""

from __future__ import annotations

import json
import re
import sys
import urllib.request
from pathlib import Path
from typing import Any

NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
MARK = re.compile(r"\[(\d+)\]")


def call(base: str, path: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(
        base + path, data=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=300) as response:
        return json.loads(response.read())


def unsupported(answer: dict[str, Any]) -> list[str]:
    """The cited sentences with a number none of their sources hold."""
    texts = {h["chunk_id"]: f"{h.get('title') or ''} {h['text']}" for h in answer["hits"]}
    cited = {c["n"]: texts.get(c["chunk_id"], "") for c in answer["citations"]}
    out = []
    for sentence in re.split(r"(?<=[.!?。！？])\s*|\n", answer["answer"]):
        marks = [int(n) for n in MARK.findall(sentence)]
        source = " ".join(cited.get(n, "") for n in marks).replace(",", "")
        numbers = NUMBER.findall(MARK.sub("", sentence))
        if marks and any(n.replace(",", "") not in source for n in numbers):
            out.append(sentence)
    return out


def main() -> int:
    base, folder = sys.argv[1], Path(sys.argv[2])
    docs = [json.loads(line) for line in (folder / "corpus.jsonl").open(encoding="utf-8") if line.strip()]
    call(
        base,
        "/v1/documents",
        {"documents": [{"id": d["_id"], "title": d["title"], "text": d["text"]} for d in docs]},
    )
    queries = [json.loads(line) for line in (folder / "queries.jsonl").open(encoding="utf-8")]
    kept = replaced = declined = bad = 0
    for query in queries:
        answer = call(base, "/v1/answer", {"query": query["text"]})
        if answer.get("abstained"):
            declined += 1
        elif answer["mode"] != "llm":
            replaced += 1
        else:
            kept += 1
            for sentence in unsupported(answer):
                bad += 1
                print(f"unsupported: {query['text'][:60]!r}: {sentence[:120]!r}")
    print(
        f"{folder.name}: {len(queries)} questions; kept model answers {kept}, replaced by quotes {replaced}, "
        f"declined {declined}; kept sentences with a number their cited source lacks: {bad}"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
