"""Which lexical analysis of Chinese ranks the right document first: jieba words, character
bigrams, characters + bigrams (the analyzer in ``indexers/text/lexical.py``), or jieba + both.

Plain BM25 (k1 1.2, b 0.75) over title + text, no router and no metadata, so only the terms
differ. success@1 per query kind, on the whole set and on its two halves (queries with an even
or odd last digit), so a choice made on one half can be checked on the other.

    pip install jieba   # only this benchmark uses it
    python bench/cjk_analyzers.py --data ../shared/data/cn-criminal-law \
        --out bench/results/bench-cjk-analyzers.json
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from indexers.text.lexical import Analyzer, cjk_terms

_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+|[^\W_]+")


def _jieba(run: str) -> list[str]:
    import jieba

    return [w for w in jieba.lcut(run) if w.strip()]


def _bigrams(run: str) -> list[str]:
    return [run[i : i + 2] for i in range(len(run) - 1)] or [run]


def _runs(segment: Callable[[str], list[str]]) -> Callable[[str], list[str]]:
    def terms(text: str) -> list[str]:
        out: list[str] = []
        for m in _CJK_RUN.finditer(text.lower()):
            run = m.group(0)
            out.extend(segment(run) if run[0] >= "\u3400" else [run])
        return out

    return terms


ANALYZERS: dict[str, Callable[[str], list[str]]] = {
    "jieba words": _runs(_jieba),
    "bigrams": _runs(_bigrams),
    "characters + bigrams (indexers/text/lexical.py)": Analyzer().terms,
    "jieba + characters + bigrams": _runs(lambda r: [w for w in _jieba(r) if len(w) > 1] + cjk_terms(r)),
}


def bm25_top1(docs: list[list[str]], queries: list[list[str]]) -> list[int]:
    n = len(docs)
    avg = sum(map(len, docs)) / n
    df = collections.Counter(t for d in docs for t in set(d))
    tfs = [collections.Counter(d) for d in docs]
    norms = [1.2 * (0.25 + 0.75 * len(d) / avg) for d in docs]
    idf = {t: math.log(1 + (n - c + 0.5) / (c + 0.5)) for t, c in df.items()}
    best = []
    for query in queries:
        terms = [t for t in set(query) if t in idf]
        scores = [
            sum(idf[t] * tf[t] * 2.2 / (tf[t] + norm) for t in terms if t in tf)
            for tf, norm in zip(tfs, norms, strict=True)
        ]
        best.append(max(range(n), key=scores.__getitem__))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    corpus = [json.loads(line) for line in (args.data / "corpus.jsonl").open(encoding="utf-8")]
    queries = [json.loads(line) for line in (args.data / "queries.jsonl").open(encoding="utf-8")]
    with (args.data / "qrels" / "test.tsv").open(encoding="utf-8") as f:
        relevant = dict(line.split("\t")[:2] for line in list(f)[1:])
    report: dict[str, Any] = {}
    for name, analyze in ANALYZERS.items():
        top = bm25_top1(
            [analyze(f"{d.get('title') or ''}\n{d['text']}") for d in corpus],
            [analyze(q["text"]) for q in queries],
        )
        right: dict[str, list[bool]] = collections.defaultdict(list)
        for q, i in zip(queries, top, strict=True):
            hit = corpus[i]["_id"] == relevant[q["_id"]]
            right[q["kind"]].append(hit)
            right[f"{q['kind']} half {int(q['_id'][-1]) % 2}"].append(hit)
        report[name] = {k: round(sum(v) / len(v), 3) for k, v in sorted(right.items())}
        print(f"{name:45} " + "  ".join(f"{k} {v:.3f}" for k, v in report[name].items()), flush=True)
    if args.out:
        args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
