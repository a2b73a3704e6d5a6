"""The answer flow's p50 (what ``POST /v1/answer`` spends past HTTP), in process, no LLM.

    python bench/answer_p50.py /work/shared/data/qa-squad-dev --limit 200
    PYTHONPATH=/tmp/base python bench/answer_p50.py …   # the same on another checkout (before/after)

Ingests the set's corpus into a temporary data dir, warms up on the last 50 questions of
queries.jsonl, then times the first ``--limit`` once each (distinct questions: the query
embedding cache never answers); prints p50 and p90 in ms as JSON, of the wall time and of the
process's CPU time per answer (all threads: the embedder's too), which a loaded machine moves
far less than the wall time. Uses only the answer flow's
API that older checkouts also have.
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
from pathlib import Path

if "PYTHONPATH" not in __import__("os").environ:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from indexers.records import DEFAULT_TENANT, Document
from indexers.tiers.query import Filters
from rag_router.answer.flow import AnswerParams
from rag_router.cli.common import local_services
from rag_router.evaluation.retrieval import Dataset
from rag_router.search.flow import SearchParams
from rag_router.settings import get_settings


async def run(path: Path, limit: int) -> dict[str, float]:
    questions = [
        json.loads(line)["text"] for line in (path / "queries.jsonl").open(encoding="utf-8") if line.strip()
    ]
    temp = Path(tempfile.mkdtemp(prefix="answer-p50-"))
    times: list[float] = []
    cpu: list[float] = []
    try:
        async with local_services(get_settings(data_dir=temp)) as svc:
            docs = [d for d in Dataset(path, {}, {}, {}).corpus() if isinstance(d, Document)]
            await svc.pipeline.ingest(docs, placement="auto", optimize=True)
            for i, text in enumerate(questions[-50:] + questions[:limit]):
                params = AnswerParams(SearchParams(query=text, top_k=5, filters=Filters(DEFAULT_TENANT)))
                started, started_cpu = time.perf_counter(), time.process_time()
                await svc.answerer.answer(params)
                if i >= 50:  # the first 50 warm up
                    times.append((time.perf_counter() - started) * 1000)
                    cpu.append((time.process_time() - started_cpu) * 1000)
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    return {
        "p50_ms": round(statistics.median(times), 2),
        "p90_ms": round(statistics.quantiles(times, n=10)[-1], 2),
        "cpu_p50_ms": round(statistics.median(cpu), 2),
        "cpu_p90_ms": round(statistics.quantiles(cpu, n=10)[-1], 2),
        "answers": len(times),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("set", type=Path)
    ap.add_argument("--limit", type=int, default=200)
    args = ap.parse_args()
    print(json.dumps({"set": args.set.name, **asyncio.run(run(args.set, args.limit))}))


if __name__ == "__main__":
    main()
