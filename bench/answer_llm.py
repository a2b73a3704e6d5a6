"""Extractive answers vs a local model (llama.cpp, SmolLM2-135M), side by side, on an answer dev set.

    python bench/answer_llm.py /work/shared/data/qa-squad-dev --per-kind 20
    python bench/answer_llm.py /work/shared/data/qa-squad-dev --per-kind 0   # the whole set

Ingests the set's corpus into a temporary data dir once, then asks the first ``--per-kind``
questions of each kind of answers.jsonl (file order, no selection; 0: all of them) through the
answer flow twice: with no LLM (extractive) and with `rag-router llm serve`'s server in this
process (1 thread, OMP_WAIT_POLICY=passive). Scored by ``rag_router.evaluation.answers`` (the scorer of
`rag-router eval --answers`), over all questions and over the held-back second half. For the model: time to
the first token (from the request, retrieval included), completion tokens per second, and how
many answers fell back to extractive (degraded) and why. Prints one JSON object per mode.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

if "PYTHONPATH" not in __import__("os").environ:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from indexers.records import DEFAULT_TENANT, Document
from indexers.tiers.query import Filters
from rag_router.answer.flow import AnswerOutcome, AnswerParams
from rag_router.cli.common import local_services
from rag_router.cli.llm import CPU_SOURCE_TOKENS, LocalConfig, local_server, packaged_gguf
from rag_router.evaluation.answers import Judged, given, load_answer_set, score
from rag_router.evaluation.retrieval import Dataset
from rag_router.search.flow import SearchParams
from rag_router.settings import get_settings


def pick(path: Path, per_kind: int) -> list[Judged]:
    """The first ``per_kind`` questions of each kind (0: all), in file order."""
    judged = load_answer_set(path)
    out: list[Judged] = []
    for kind in ("answerable", "out_of_corpus", "unanswerable"):
        of_kind = [j for j in judged if j.kind == kind]
        out += of_kind[:per_kind] if per_kind else of_kind
    return out


def held_back(path: Path) -> set[str]:
    """The second half of the set in file order: the prompt and focus settings were chosen on
    questions of the first half only, so this half's figures are the honest ones."""
    judged = load_answer_set(path)
    return {j.query_id for j in judged[len(judged) // 2 :]}


async def ask_all(
    data: Path, questions: list[Judged], llm: dict[str, Any], sources: int, later: set[str]
) -> dict[str, Any]:
    rows = []
    written = []  # the answers the model wrote (not declined, not fallen back to extractive)
    ttft: list[float] = []
    rates: list[float] = []
    fallbacks: Counter[str] = Counter()
    async with local_services(get_settings(data_dir=data, llm=llm)) as svc:
        for judged in questions:
            search = SearchParams(query=judged.text, top_k=5, filters=Filters(DEFAULT_TENANT))
            params = AnswerParams(search, sources=sources)
            started = time.perf_counter()
            first: float | None = None
            done: AnswerOutcome | None = None
            async for kind, value in svc.answerer.events(params):
                if kind == "token" and first is None:
                    first = time.perf_counter()
                elif kind == "done":
                    done = value
            ended = time.perf_counter()
            assert done is not None
            rows.append((judged, given(done)))
            if done.mode == "llm":
                written.append((judged, given(done)))
            # every call the model answered, kept or replaced by quotes afterwards (a fallback
            # streams no token of its own); a declined question never reaches it
            if first is not None and not done.abstained and (done.mode == "llm" or done.llm_error):
                ttft.append(first - started)
                if done.usage and ended > first:
                    rates.append(done.usage["completion_tokens"] / (ended - first))
            if llm.get("base_url") and done.llm_error:
                fallbacks[done.llm_error.split(" (")[0][:60]] += 1
    report = score(rows)
    kept = score([r for r in rows if r[0].query_id in later])
    report["held_back"] = {k: v for k, v in kept.items() if k != "by_kind"}
    if ttft:
        ttft.sort()
        report["ttft_s_p50"] = round(statistics.median(ttft), 2)
        report["ttft_s_p95"] = round(ttft[min(len(ttft) - 1, int(0.95 * len(ttft)))], 2)
        report["tokens_per_s"] = round(statistics.median(rates), 1) if rates else None
    report["llm_answers"] = len(written)
    report["model_calls"] = len(ttft)
    if written:
        mine = score(written)
        report["model_written"] = {k: mine[k] for k in ("gold@answer", "cite@gold", "queries")}
    report["fallbacks"] = dict(fallbacks)
    report.pop("by_kind", None)
    return report


async def run(
    path: Path, per_kind: int, sources: int, max_tokens: int, ctx: int, port: int, source_tokens: int
) -> None:
    questions = pick(path, per_kind)
    later = held_back(path)
    temp = Path(tempfile.mkdtemp(prefix="answer-llm-"))
    try:
        async with local_services(get_settings(data_dir=temp)) as svc:
            docs = [d for d in Dataset(path, {}, {}, {}).corpus() if isinstance(d, Document)]
            await svc.pipeline.ingest(docs, placement="auto", optimize=True)
        extractive = await ask_all(temp, questions, {}, sources, later)
        print(json.dumps({"set": path.name, "mode": "extractive", **extractive}), flush=True)
        config = LocalConfig(model=packaged_gguf(), ctx=ctx, threads=1, parallel=1, port=port, alias="local")
        with local_server(config) as running:
            llm = {
                "base_url": running.base_url,
                "model": running.alias,
                "context_tokens": running.slot_ctx,
                "source_tokens": source_tokens,  # what `rag-router llm serve` prints
                "max_tokens": max_tokens,
                "timeout_s": 120,
            }
            local = await ask_all(temp, questions, llm, sources, later)
        print(json.dumps({"set": path.name, "mode": "smollm2-135m", "sources": sources, **local}), flush=True)
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("set", type=Path)
    ap.add_argument("--per-kind", type=int, default=20, help="questions of each kind (0: the whole set)")
    ap.add_argument("--sources", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--source-tokens", type=int, default=CPU_SOURCE_TOKENS, help="0: no cap")
    ap.add_argument("--port", type=int, default=18181, help="the local model port (one per run)")
    args = ap.parse_args()
    a = args
    asyncio.run(run(a.set, a.per_kind, a.sources, a.max_tokens, a.ctx, a.port, a.source_tokens))


if __name__ == "__main__":
    main()
