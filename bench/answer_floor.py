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
import random
import re
import shutil
import sys
import tempfile
import time
import zlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from indexers.records import Document
from indexers.text.lexical import Analyzer
from rag_router.cli.common import local_services
from rag_router.evaluation.answers import Judged, asker, load_answer_set
from rag_router.evaluation.retrieval import load_dataset
from rag_router.settings import get_settings

DENSE = [round(-0.05 + 0.05 * i, 2) for i in range(16)] + [2.0]  # 2.0: dense never clears
LEXICAL = [round(0.25 * i, 2) for i in range(33)] + [99.0]  # 99: never clears
COVER = [round(0.05 * i, 2) for i in range(21)] + [99.0]
BIGRAM_WEIGHTS = (1.0, 2.0, 3.0)


_CJK_PAIR = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]{2}")


def coverage(query_terms: Sequence[str], text_terms: Iterable[str], *, bigram_weight: float = 2.0) -> float:
    """The weighted share of the query's distinct terms that occur in the text: no IDF, so it
    means the same in a store of 30 documents and of 30,000. A CJK bigram counts
    ``bigram_weight`` (it carries the specificity a single common character lacks)."""
    wanted = dict.fromkeys(query_terms)
    if not wanted:
        return 0.0
    found = set(text_terms)
    weight = {t: bigram_weight if _CJK_PAIR.fullmatch(t) else 1.0 for t in wanted}
    return sum(w for t, w in weight.items() if t in found) / sum(weight.values())


def half(query_id: str) -> str:
    return "a" if zlib.crc32(query_id.encode("utf-8")) % 2 == 0 else "b"


async def signals(path: Path, small: int = 0, seed: int = 0) -> tuple[list[dict[str, Any]], list[float]]:
    """Per question: kind, half, best dense cosine (None if the leg has weight 0), best BM25, terms,
    the best coverage among the hits the lexical leg found, the chunks searched (N).

    ``small``: a store of that many documents instead (the gold documents of a few answerable
    questions, then random others; ``seed``), asking the answerable questions it holds the gold
    document of and every out-of-corpus one: the floor on a newcomer's own small store."""
    temp = Path(tempfile.mkdtemp(prefix="answer-floor-"))
    settings = get_settings(data_dir=temp)
    settings.retrieval.floor_dense, settings.retrieval.floor_lexical = -1.0, 0.0
    judged = load_answer_set(path)
    docs = [d for d in load_dataset(path).corpus() if isinstance(d, Document)]
    if small:
        docs, judged = _sample(docs, judged, small, seed)
    rows: list[dict[str, Any]] = []
    times: list[float] = []
    try:
        async with local_services(settings) as svc:
            await svc.pipeline.ingest(docs, placement="auto", optimize=True)
            chunks = sum([await t.count() for t in svc.tiers.values()])
            ask = asker(svc.answerer)
            for q in judged:
                started = time.perf_counter()
                outcome = await ask(q)
                times.append((time.perf_counter() - started) * 1000)
                rows.append(_row(q, outcome, svc.analyzer, chunks))
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    return rows, times


def _sample(
    docs: list[Document], judged: list[Judged], size: int, seed: int
) -> tuple[list[Document], list[Judged]]:
    rng = random.Random(seed)
    answerable = sorted({q.doc_id for q in judged if q.kind == "answerable" and q.doc_id})
    gold = set(rng.sample(answerable, min(len(answerable), max(size // 5, 1))))
    others = sorted(d.id for d in docs if d.id not in gold)
    keep = gold | set(rng.sample(others, max(size - len(gold), 0)))
    asked = [q for q in judged if q.kind == "out_of_corpus" or (q.kind == "answerable" and q.doc_id in keep)]
    return [d for d in docs if d.id in keep], asked


def _row(q: Judged, outcome: Any, analyzer: Analyzer, chunks: int) -> dict[str, Any]:
    search = outcome.search
    foreign = any("dense weight 0" in r for r in search.reasons)
    dense = [s.score for h in search.hits for n, s in h.legs.items() if n.endswith("dense")]
    lexical = [s.score for h in search.hits for n, s in h.legs.items() if n.endswith("lexical")]
    terms = analyzer.query_terms(outcome.search.route.searched or q.text)
    found = [
        analyzer.terms(f"{h.chunk.title or ''}\n{h.chunk.text}")
        for h in search.hits
        if any(n.endswith("lexical") for n in h.legs)
    ]
    return {
        "id": q.query_id,
        "kind": q.kind,
        "half": half(q.query_id),
        "dense": None if foreign or not dense else max(dense),
        "bm25": max(lexical, default=0.0),
        "terms": len(terms),
        "n": chunks,
        **{
            f"cov{w:g}": round(max((coverage(terms, f, bigram_weight=w) for f in found), default=0.0), 4)
            for w in BIGRAM_WEIGHTS
        },
    }


def lexical_score(row: dict[str, Any], how: str) -> float:
    """The question's best lexical score by one normalisation (``HOWS``)."""
    if how.startswith("cov"):
        return float(row[how])
    t: int = max(row["terms"], 1)
    n: int = max(row["n"], 1)
    if how == "per_term_maxidf":  # BM25 per term over the largest IDF a term has in N chunks
        return float(row["bm25"]) / t / math.log(1 + (n - 0.5) / 1.5)
    return float(row["bm25"]) / {"raw": 1.0, "per_term": t, "per_sqrt": math.sqrt(t)}[how]


HOWS = ("raw", "per_term", "per_sqrt", "per_term_maxidf", *(f"cov{w:g}" for w in BIGRAM_WEIGHTS))
GRIDS = {
    "per_term": LEXICAL,
    "per_term_maxidf": [round(0.01 * i, 2) for i in range(121)] + [99.0],
    **{f"cov{w:g}": COVER for w in BIGRAM_WEIGHTS},
}
Floors = tuple[float, float, float]  # dense, lexical beside dense, lexical alone
Signal = tuple[str, str]  # the lexical normalisation beside dense, and alone


def auc(pos: list[float], neg: list[float]) -> float:
    """P(answerable scores above out-of-corpus), ties half."""
    if not pos or not neg:
        return float("nan")
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def clears(r: dict[str, Any], floors: Floors, signal: Signal) -> bool:
    """Floor.clears on the question's best scores (the rule is an OR over hits and legs)."""
    dense, lexical, alone = floors
    if r["dense"] is None:  # the dense leg has weight 0: lexical judges alone
        return lexical_score(r, signal[1]) >= alone
    return bool(r["dense"] >= dense or lexical_score(r, signal[0]) >= lexical)


def declined(rows: list[dict[str, Any]], floors: Floors, signal: Signal) -> dict[str, float | None]:
    def rate(kind: str) -> float | None:
        chosen = [r for r in rows if r["kind"] == kind]
        if not chosen:
            return None
        return round(sum(not clears(r, floors, signal) for r in chosen) / len(chosen), 4)

    return {k: rate(k) for k in ("answerable", "out_of_corpus", "unanswerable")}


def choose(sets: dict[str, list[dict[str, Any]]], max_false: float, signal: Signal) -> Floors:
    """On half "a" (module docstring). The two lexical floors act on disjoint questions (dense
    weighted or not), so each is chosen with the other's questions fixed."""
    halves = [[r for r in rows if r["half"] == "a"] for rows in sets.values()]
    best: tuple[float, float, Floors] | None = None
    for floors in ((d, x, y) for d in DENSE for x in GRIDS[signal[0]] for y in GRIDS[signal[1]]):
        rates = [declined(rows, floors, signal) for rows in halves]
        false = [x["answerable"] or 0.0 for x in rates]
        if max(false) > max_false:
            continue
        ooc = sum(x["out_of_corpus"] or 0.0 for x in rates) / len(rates)
        key = (ooc, -sum(false) / len(false))
        if best is None or key > best[:2]:
            best = (*key, floors)
    assert best is not None
    return best[2]


def collect(args: argparse.Namespace) -> dict[str, Any]:
    """Per set: the rows of the whole set, and of each small store (``--small``), and the p50."""
    if args.signals:
        earlier: dict[str, Any] = json.loads(args.signals.read_text(encoding="utf-8"))
        p50 = earlier.get("p50_ms_floor_off", {})
        return {p.name: {**earlier[p.name], "p50_ms": p50.get(p.name)} for p in args.sets}
    out: dict[str, Any] = {}
    for path in args.sets:
        rows, times = asyncio.run(signals(path))
        small = {str(seed): asyncio.run(signals(path, args.small, seed))[0] for seed in args.seeds}
        out[path.name] = {"rows": rows, "p50_ms": sorted(times)[len(times) // 2], "small": small}
    return out


def report_set(
    rows: list[dict[str, Any]], small: dict[str, list[dict[str, Any]]], chosen: Floors, signal: Signal
) -> dict[str, Any]:
    dense, lexical, alone = chosen
    pos = [r for r in rows if r["kind"] == "answerable"]
    neg = [r for r in rows if r["kind"] == "out_of_corpus"]
    return {
        "auc": {
            "dense": auc(
                [r["dense"] for r in pos if r["dense"] is not None],
                [r["dense"] for r in neg if r["dense"] is not None],
            ),
            **{
                f"lexical_{how}": auc(
                    [lexical_score(r, how) for r in pos], [lexical_score(r, how) for r in neg]
                )
                for how in HOWS
            },
        },
        "at_default": {h: declined([r for r in rows if r["half"] == h], chosen, signal) for h in "ab"},
        "small_store": {
            seed: {"chunks": rs[0]["n"] if rs else 0, **declined(rs, chosen, signal)}
            for seed, rs in small.items()
        },
        "curve_dense": [{"dense": x, **declined(rows, (x, lexical, alone), signal)} for x in DENSE],
        "curve_lexical": [
            {"lexical": x, **declined(rows, (dense, x, alone), signal)} for x in GRIDS[signal[0]]
        ],
        "curve_lexical_alone": [
            {"lexical_alone": x, **declined(rows, (dense, lexical, x), signal)} for x in GRIDS[signal[1]]
        ],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("sets", nargs="+", type=Path)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--max-false", type=float, default=0.03)
    ap.add_argument("--signals", type=Path, help="an earlier --out: reuse its rows, ask nothing")
    ap.add_argument("--small", type=int, default=35, help="documents in each small store")
    ap.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2], help="one small store each")
    ap.add_argument(
        "--beside", default="per_term_maxidf", choices=GRIDS, help="the shipped lexical score beside dense"
    )
    ap.add_argument(
        "--alone", default="per_term_maxidf", choices=GRIDS, help="... where the lexical leg judges alone"
    )
    ap.add_argument(
        "--compare", nargs="*", default=[], help="other beside:alone signals, e.g. per_term:per_term"
    )
    args = ap.parse_args()
    data = collect(args)
    sets = {name: data[name]["rows"] for name in (p.name for p in args.sets)}
    compared: dict[str, Any] = {}
    for spec in [f"{args.beside}:{args.alone}", *args.compare]:
        beside, alone = spec.split(":")
        signal: Signal = (beside, alone)
        floors = choose(sets, args.max_false, signal)
        compared[spec] = {
            "chosen": floors,
            **{n: report_set(sets[n], data[n]["small"], floors, signal) for n in sets},
        }
        for n in sets:
            shown = {k: compared[spec][n][k] for k in ("at_default", "small_store")}
            print(spec, floors, n, json.dumps(shown))
    shipped = compared[f"{args.beside}:{args.alone}"]
    dense, lexical, alone = shipped["chosen"]
    report: dict[str, Any] = {
        "signal": {"lexical": args.beside, "lexical_alone": args.alone},
        "chosen": {"dense": dense, "lexical": lexical, "lexical_alone": alone},
        "max_false": args.max_false,
        "small_store_documents": args.small,
        "p50_ms_floor_off": {n: data[n]["p50_ms"] for n in sets},
        "compared": {
            spec: {
                "chosen": c["chosen"],
                **{n: {k: c[n][k] for k in ("at_default", "small_store")} for n in sets},
            }
            for spec, c in compared.items()
        },
    }
    for n in sets:
        report[n] = {**shipped[n], "rows": data[n]["rows"], "small": data[n]["small"]}
    if args.out:
        args.out.write_text(json.dumps(report, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
