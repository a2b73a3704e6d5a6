"""How well the packaged models can tell an answerable question from an out-of-corpus one, at best.

    python bench/answerability_ceiling.py /work/shared/data/qa-handbook-dev \
        --out bench/results/answerability-ceiling.json

Retrieval-free and threshold-free: every stored document is cut into the rerank stage's
sentences (``indexers.text.chunk.rerank_sentences``), and each sentence embedded by both
packaged models (MiniLM, multilingual-e5-small as the default split embedder loads them). For
each question of the answer set it records the best sentence cosine in the question's own
language by each model, the best e5 cosine in the other language, and how far the best stands
out (z-score of the best e5 cosine among all own-language sentences). Then, per language,
a logistic regression over those signals, cross-validated (5 folds), separates the answer kinds
(answerable, paraphrase, instruction) from out_of_corpus, and the script prints the share of
paraphrases still answered once ≥ 0.85 of the out-of-corpus questions are declined. That share
is an upper bound for any floor built on these signals: it is fitted on the set it is scored on.
For cross_language questions it prints the e5 cosine to the answering document's best sentence
beside the out-of-corpus questions' best cosine in the other language.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from indexers.language import text_language
from indexers.text.chunk import rerank_sentences
from rag_router.embedders import build_embedder
from rag_router.settings import Settings

ANSWER_KINDS = ("answerable", "paraphrase", "instruction")
OOC_DECLINED = 0.85  # issue 40's goal for out-of-corpus questions declined


def _sentences(corpus: Path) -> list[tuple[str, str]]:
    out = []
    for line in corpus.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        doc = json.loads(line)
        for para in re.split(r"\n\s*\n", doc["text"]):
            out += [(doc["_id"], s.strip()) for s in rerank_sentences(para) if len(s.strip()) > 8]
    return out


def _best(mask: np.ndarray, scores: np.ndarray) -> int:
    return int(np.where(mask)[0][scores[mask].argmax()])


def signals(root: Path) -> list[dict[str, Any]]:
    embedder: Any = build_embedder(Settings())
    primary, e5 = embedder.primary, embedder.secondary.get()
    sents = _sentences(root / "corpus.jsonl")
    texts = [t for _, t in sents]
    lang = np.array([text_language(t) == "zh" for t in texts])
    vec_e5 = np.asarray(e5.embed(texts))
    vec_ml = np.asarray(primary.embed(texts))
    queries = {q["_id"]: q["text"] for q in map(json.loads, (root / "queries.jsonl").open(encoding="utf-8"))}
    rows = []
    for line in (root / "answers.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        q = queries[row["query_id"]]
        zh = text_language(q) == "zh"
        s5 = vec_e5 @ np.asarray(e5.embed_queries([q]))[0]
        sm = vec_ml @ np.asarray(primary.embed_queries([q]))[0]
        own, other = lang == zh, lang != zh
        gold = np.array([d == row.get("doc_id") for d, _ in sents])
        own5 = s5[own]
        rows.append(
            {
                "kind": row["kind"],
                "lang": "zh" if zh else "en",
                "e5_own": float(own5.max()),
                "minilm_own": float(sm[own].max()) if not zh else None,
                "e5_other": float(s5[other].max()),
                "e5_gold": float(s5[gold].max()) if gold.any() else None,
                "gold_first_other": bool(gold.any() and sents[_best(other, s5)][0] == row.get("doc_id")),
                "z": float((own5.max() - own5.mean()) / own5.std()),
            }
        )
    return rows


def ceiling(rows: Sequence[dict[str, Any]], lang: str, features: Sequence[str]) -> dict[str, float]:
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import cross_val_predict

    xs = [r for r in rows if r["lang"] == lang and r["kind"] in (*ANSWER_KINDS, "out_of_corpus")]
    x = np.array([[r[f] for f in features] for r in xs]) * 10
    y = np.array([r["kind"] != "out_of_corpus" for r in xs])
    para = np.array([r["kind"] == "paraphrase" for r in xs])
    p = cross_val_predict(LogisticRegression(C=10), x, y, cv=5, method="predict_proba")[:, 1]
    answered = next(
        float((p[para] >= t).mean()) for t in sorted(set(p)) if (p[~y] < t).mean() >= OOC_DECLINED
    )
    auc = round(float(roc_auc_score(y, p)), 3)
    return {"auc": auc, "paraphrase_answered_at_ooc_0.85": round(answered, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("set", type=Path)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rows = signals(args.set)
    report: dict[str, Any] = {"set": args.set.name, "ceilings": {}}
    signal_sets = {
        "en": (["minilm_own"], ["e5_own"], ["minilm_own", "e5_own", "z"]),
        "zh": (["e5_own"], ["e5_own", "z"]),
    }
    for lang, sets in signal_sets.items():
        for features in sets:
            name = f"{lang}: {' + '.join(features)}"
            report["ceilings"][name] = ceiling(rows, lang, features)
            print(f"{name:34} {report['ceilings'][name]}")
    for lang, other in (("en", "zh"), ("zh", "en")):
        cross = [r for r in rows if r["kind"] == "cross_language" and r["lang"] == lang]
        ooc = [r["e5_other"] for r in rows if r["kind"] == "out_of_corpus" and r["lang"] == lang]
        gold = sorted(round(r["e5_gold"], 3) for r in cross)
        line = {
            "answering document first in the other language": sum(r["gold_first_other"] for r in cross),
            "of": len(cross),
            "e5 cosine to it": gold,
            "out-of-corpus best there (max, median)": (round(max(ooc), 3), round(statistics.median(ooc), 3)),
            "cross questions above every out-of-corpus one": sum(g > max(ooc) for g in gold),
        }
        report[f"cross {lang}→{other}"] = line
        print(f"cross {lang}→{other}: {line}")
    report["rows"] = rows
    if args.out:
        args.out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
