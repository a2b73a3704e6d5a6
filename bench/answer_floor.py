"""The relevance floor's curve on answer sets (BEIR layout + answers.jsonl), and /v1/answer p50.

    python bench/answer_floor.py /work/shared/data/qa-squad-dev /work/shared/data/qa-cmrc-trial \
        --out bench/results/answer-floor.json

For each set: ingest it into a temporary data dir, ask every question through the answer flow
with the floor off (every hit counts) and record, per question, the best raw dense cosine and
the best BM25 among the hits (and the dense leg's weight: 0 where the embedder does not read
the query's language). Then, offline, for each threshold: the share of out-of-corpus questions
declined and of answerable ones declined. The questions are split in two halves by a hash of
the query id: the defaults (dense, lexical beside dense, lexical alone: rag_router/search/floor.py)
are chosen on half "a" — the most out-of-corpus questions declined (mean over the sets) while
no set declines more than ``--max-false`` of its answerable ones, then the fewest of those —
and reported on half "b" too. ``--signals FILE`` reuses the per-question rows of an earlier run.
Three lexical normalisations are compared by AUC (answerable vs out-of-corpus): raw BM25,
BM25 / distinct query terms, BM25 / √terms. Also: the answers' p50 with the floor off.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import shutil
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from indexers.records import Document
from rag_router.answer_eval import Judged, asker, load_answer_set
from rag_router.cli.common import local_services
from rag_router.evaluate import load_dataset
from rag_router.settings import get_settings

DENSE = [round(-0.05 + 0.05 * i, 2) for i in range(16)] + [2.0]  # 2.0: dense never clears
LEXICAL = [round(0.25 * i, 2) for i in range(33)] + [99.0]  # 99: never clears


def half(query_id: str) -> str:
    return "a" if zlib.crc32(query_id.encode("utf-8")) % 2 == 0 else "b"


async def signals(path: Path) -> tuple[list[dict[str, Any]], list[float]]:
    """Per question: kind, half, best dense cosine (None if the leg has weight 0), best BM25, terms."""
    temp = Path(tempfile.mkdtemp(prefix="answer-floor-"))
    settings = get_settings(data_dir=temp)
    settings.retrieval.floor_dense, settings.retrieval.floor_lexical = -1.0, 0.0
    judged = load_answer_set(path)
    rows: list[dict[str, Any]] = []
    times: list[float] = []
    try:
        async with local_services(settings) as svc:
            docs = [d for d in load_dataset(path).corpus() if isinstance(d, Document)]
            await svc.pipeline.ingest(docs, placement="auto", optimize=True)
            ask = asker(svc.answerer)
            for q in judged:
                started = time.perf_counter()
                outcome = await ask(q)
                times.append((time.perf_counter() - started) * 1000)
                rows.append(_row(q, outcome, len(svc.analyzer.query_terms(q.text))))
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    return rows, times


def _row(q: Judged, outcome: Any, terms: int) -> dict[str, Any]:
    search = outcome.search
    foreign = any("dense weight 0" in r for r in search.reasons)
    dense = [s.score for h in search.hits for n, s in h.legs.items() if n.endswith("dense")]
    lexical = [s.score for h in search.hits for n, s in h.legs.items() if n.endswith("lexical")]
    return {
        "id": q.query_id,
        "kind": q.kind,
        "half": half(q.query_id),
        "dense": None if foreign or not dense else max(dense),
        "bm25": max(lexical, default=0.0),
        "terms": terms,
    }


def lexical_score(row: dict[str, Any], how: str) -> float:
    t = max(row["terms"], 1)
    return float(row["bm25"]) / {"raw": 1.0, "per_term": t, "per_sqrt": math.sqrt(t)}[how]


def auc(pos: list[float], neg: list[float]) -> float:
    """P(answerable scores above out-of-corpus), ties half."""
    if not pos or not neg:
        return float("nan")
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def clears(r: dict[str, Any], dense: float, lexical: float, alone: float) -> bool:
    """Floor.clears on the question's best scores (the rule is an OR over hits and legs)."""
    if r["dense"] is None:  # the dense leg has weight 0: lexical judges alone
        return lexical_score(r, "per_term") >= alone
    return bool(r["dense"] >= dense or lexical_score(r, "per_term") >= lexical)


def declined(rows: list[dict[str, Any]], floors: tuple[float, float, float]) -> dict[str, float | None]:
    def rate(kind: str) -> float | None:
        chosen = [r for r in rows if r["kind"] == kind]
        if not chosen:
            return None
        return round(sum(not clears(r, *floors) for r in chosen) / len(chosen), 4)

    return {k: rate(k) for k in ("answerable", "out_of_corpus", "unanswerable")}


def choose(sets: dict[str, list[dict[str, Any]]], max_false: float) -> tuple[float, float, float]:
    """On half "a" (module docstring)."""
    halves = [[r for r in rows if r["half"] == "a"] for rows in sets.values()]
    best: tuple[float, float, tuple[float, float, float]] | None = None
    for floors in ((d, lex, alone) for d in DENSE for lex in LEXICAL for alone in LEXICAL):
        rates = [declined(rows, floors) for rows in halves]
        false = [x["answerable"] or 0.0 for x in rates]
        if max(false) > max_false:
            continue
        ooc = sum(x["out_of_corpus"] or 0.0 for x in rates) / len(rates)
        key = (ooc, -sum(false) / len(false))
        if best is None or key > best[:2]:
            best = (*key, floors)
    assert best is not None
    return best[2]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("sets", nargs="+", type=Path)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--max-false", type=float, default=0.03)
    ap.add_argument("--signals", type=Path, help="an earlier --out: reuse its rows, ask nothing")
    args = ap.parse_args()
    sets: dict[str, list[dict[str, Any]]] = {}
    p50: dict[str, float] = {}
    earlier = json.loads(args.signals.read_text(encoding="utf-8")) if args.signals else None
    for path in args.sets:
        if earlier is not None:
            sets[path.name] = earlier[path.name]["rows"]
            continue
        rows, times = asyncio.run(signals(path))
        sets[path.name] = rows
        p50[path.name] = sorted(times)[len(times) // 2]
    if earlier is not None:
        p50 = earlier.get("p50_ms_floor_off", {})
    chosen = choose(sets, args.max_false)
    dense, lexical, alone = chosen
    report: dict[str, Any] = {
        "chosen": {"dense": dense, "lexical": lexical, "lexical_alone": alone},
        "max_false": args.max_false,
        "p50_ms_floor_off": p50,
    }
    for name, rows in sets.items():
        pos = [r for r in rows if r["kind"] == "answerable"]
        neg = [r for r in rows if r["kind"] == "out_of_corpus"]
        report[name] = {
            "auc": {
                "dense": auc(
                    [r["dense"] for r in pos if r["dense"] is not None],
                    [r["dense"] for r in neg if r["dense"] is not None],
                ),
                **{
                    f"lexical_{how}": auc(
                        [lexical_score(r, how) for r in pos], [lexical_score(r, how) for r in neg]
                    )
                    for how in ("raw", "per_term", "per_sqrt")
                },
            },
            "at_default": {h: declined([r for r in rows if r["half"] == h], chosen) for h in "ab"},
            "curve_dense": [{"dense": x, **declined(rows, (x, lexical, alone))} for x in DENSE],
            "curve_lexical": [{"lexical": x, **declined(rows, (dense, x, alone))} for x in LEXICAL],
            "curve_lexical_alone": [
                {"lexical_alone": x, **declined(rows, (dense, lexical, x))} for x in LEXICAL
            ],
            "rows": rows,
        }
        print(name, json.dumps({k: v for k, v in report[name].items() if k in ("auc", "at_default")}))
    print("chosen", report["chosen"], "p50 ms", p50)
    if args.out:
        args.out.write_text(json.dumps(report, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
