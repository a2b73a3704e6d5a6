"""Would the second packaged embedder lift a BEIR set? BM25 + MiniLM + multilingual-e5-small.

    python bench/second_opinion.py ../shared/data/scifact --cache /tmp/so \
        --out bench/results/second-opinion-scifact.json

Issue 41 asks for SciFact nDCG@10 ≥ 0.760; the rerank stage reads one model's sentences. This
asks whether the other packaged model (e5, which the default embedder loads for Chinese) adds an
opinion the first lacks: whole documents (title + text, each model's own truncation), retrieval
over the full corpus by each leg, the union of each leg's top ``--depth`` z-scored per leg and
summed with the weights below, nDCG@10 by pytrec_eval on each qrels split (train to choose,
test to report). BM25 is Okapi (k1 1.2, b 0.75) over the service's analyzer's terms. No store,
no chunking, no router: an upper-level probe of the signals, not the service's figure.

Embedding SciFact takes ~6 min (MiniLM) and ~13 min (e5) on this 2-core machine; ``--cache``
keeps the vectors for a rerun.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import emit, machine
from indexers.text.lexical import Analyzer
from rag_router.embedders import build_embedder
from rag_router.settings import Settings

WEIGHTS: list[dict[str, float]] = [
    {"bm25": 1},
    {"minilm": 1},
    {"e5": 1},
    {"bm25": 1, "minilm": 1},
    {"bm25": 1, "e5": 1},
    {"minilm": 1, "e5": 1},
    {"bm25": 1, "minilm": 1, "e5": 1},
    {"bm25": 1, "minilm": 1, "e5": 0.5},
    {"bm25": 1, "minilm": 0.5, "e5": 1},
]


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    opener: Callable[..., Any] = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        yield from (json.loads(line) for line in f if line.strip())


def _corpus(root: Path) -> tuple[list[str], list[str]]:
    path = next(p for p in (root / "corpus.jsonl", root / "corpus.jsonl.gz") if p.exists())
    docs = list(_lines(path))
    return [d["_id"] for d in docs], [f"{d.get('title', '')}. {d['text']}".strip() for d in docs]


def _vectors(cache: Path, name: str, embed: Callable[[list[str]], Any], texts: list[str]) -> np.ndarray:
    path = cache / f"{name}.npy"
    if not path.exists():
        np.save(path, np.asarray(embed(texts), dtype=np.float32))
    return np.asarray(np.load(path))


class BM25:
    def __init__(self, texts: list[str], k1: float = 1.2, b: float = 0.75) -> None:
        from scipy import sparse  # type: ignore[import-untyped]

        self.analyzer = Analyzer()
        self.vocab: dict[str, int] = {}
        rows, cols, counts = [], [], []
        for i, text in enumerate(texts):
            tf: dict[int, int] = {}
            for term in self.analyzer.terms(text):
                j = self.vocab.setdefault(term, len(self.vocab))
                tf[j] = tf.get(j, 0) + 1
            rows += [i] * len(tf)
            cols += list(tf)
            counts += list(tf.values())
        n, shape = len(texts), (len(texts), len(self.vocab))
        m = sparse.coo_matrix((np.asarray(counts, np.float32), (rows, cols)), shape=shape)
        length = np.asarray(m.sum(1)).ravel()
        df = np.bincount(m.col, minlength=shape[1])
        idf = np.log(1 + (n - df + 0.5) / (df + 0.5))
        tf_part = m.data * (k1 + 1) / (m.data + k1 * (1 - b + b * length[m.row] / length.mean()))
        self.weights = sparse.csr_matrix((tf_part * idf[m.col], (m.col, m.row)), shape=shape[::-1])
        self.n = n

    def scores(self, query: str) -> np.ndarray:
        terms = [self.vocab[t] for t in self.analyzer.terms(query) if t in self.vocab]
        if not terms:
            return np.zeros(self.n, np.float32)
        return np.asarray(self.weights[terms].sum(0), dtype=np.float32).ravel()


def _z(x: np.ndarray) -> np.ndarray:
    return (x - x.mean()) / (x.std() + 1e-9)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset", type=Path)
    p.add_argument("--cache", type=Path, required=True, help="folder for the document vectors")
    p.add_argument("--depth", type=int, default=100, help="each leg's candidates")
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    import pytrec_eval

    args.cache.mkdir(parents=True, exist_ok=True)
    ids, texts = _corpus(args.dataset)
    queries = {q["_id"]: q["text"] for q in _lines(args.dataset / "queries.jsonl")}
    embedder: Any = build_embedder(Settings())
    models = {"minilm": embedder.primary, "e5": embedder.secondary.get()}
    docs = {k: _vectors(args.cache, k, m.embed, texts) for k, m in models.items()}
    bm25 = BM25(texts)
    results: dict[str, list[dict[str, Any]]] = {}
    for qrels_file in sorted((args.dataset / "qrels").glob("*.tsv")):
        qrels: dict[str, dict[str, int]] = {}
        for line in qrels_file.read_text(encoding="utf-8").splitlines()[1:]:
            qid, did, rel = line.split("\t")[:3]
            qrels.setdefault(qid, {})[did] = int(rel)
        qids = [q for q in qrels if q in queries]
        qvec = {k: np.asarray(m.embed_queries([queries[q] for q in qids])) for k, m in models.items()}
        legs = []
        for i, q in enumerate(qids):
            s = {"bm25": bm25.scores(queries[q]), **{k: docs[k] @ qvec[k][i] for k in models}}
            pool = np.unique(np.concatenate([np.argsort(-v)[: args.depth] for v in s.values()]))
            legs.append((q, pool, {k: _z(v[pool]) for k, v in s.items()}))
        rows = []
        for weights in WEIGHTS:
            run = {}
            for q, pool, z in legs:
                total = np.sum([w * z[k] for k, w in weights.items()], axis=0)
                top = np.argsort(-total)[:100]
                run[q] = {ids[pool[j]]: float(total[j]) for j in top}
            per_query = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(run)
            ndcg = float(np.mean([v["ndcg_cut_10"] for v in per_query.values()]))
            rows.append({"weights": weights, "ndcg@10": round(ndcg, 4)})
            print(qrels_file.stem, weights, f"{ndcg:.4f}", flush=True)
        results[qrels_file.stem] = rows
    summary = {"dataset": args.dataset.name, "depth": args.depth, "splits": results}
    emit({**summary, "machine": machine()}, args.out)


if __name__ == "__main__":
    main()
