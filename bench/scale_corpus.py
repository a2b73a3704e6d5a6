"""Realistic text at any size for bench/scale.py: the shared sets' sentences, recombined.

    python bench/scale_corpus.py pool --data ../shared/data --out POOL.json.gz
    python bench/scale_corpus.py corpus --pool POOL.json.gz --docs 1000000 --out DIR [--scifact F]

``pool`` gathers the sentences and titles of the shared English sets (Cranfield, GDPR, the US
Constitution, the SQuAD stores, the handbook's English notes) and of the SciFact abstracts that
no SciFact query judges (train or test): on-topic distractors for SciFact's queries that are
never relevant to them. ``corpus`` writes ``--docs`` documents of 2–6 of those sentences each
(about one 200-token chunk), in ``--shards`` JSONL files written in parallel, ids ``x`` + a
number from ``--first``; each carries ``metadata.batch`` (``b00``–``b99``, the id's last two
digits: 1 % of the store per value, what a delete by filter removes) and a date from 1990–2019
(past any hot window: it belongs in the cold tier). ``--scifact`` adds SciFact's corpus as it is,
so its test queries can be judged inside the big store.
"""

from __future__ import annotations

import argparse
import gzip
import json
import multiprocessing
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\"'])")
ENGLISH_SETS = (
    "cranfield",
    "gdpr",
    "us-constitution",
    "qa-squad-dev",
    "qa-squad-wide-dev",
    "qa-handbook-dev",
)


def _records(path: Path) -> Iterator[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def _corpus_file(folder: Path) -> Path:
    return next(p for p in (folder / "corpus.jsonl", folder / "corpus.jsonl.gz") if p.exists())


def _judged(folder: Path) -> set[str]:
    judged: set[str] = set()
    for qrels in (folder / "qrels").glob("*.tsv"):
        for line in qrels.read_text(encoding="utf-8").splitlines()[1:]:
            parts = line.split("\t")
            if len(parts) >= 2:
                judged.add(parts[1])
    return judged


def _is_english(text: str) -> bool:
    return sum(ord(c) > 0x2E80 for c in text) < len(text) / 20


def pool(data: Path) -> dict[str, list[str]]:
    sentences: list[str] = []
    titles: list[str] = []
    sources = [(data / name, set[str]()) for name in ENGLISH_SETS]
    sources.append((data / "scifact", _judged(data / "scifact")))
    for folder, skip in sources:
        for record in _records(_corpus_file(folder)):
            text, title = str(record.get("text") or ""), str(record.get("title") or "")
            if str(record.get("_id")) in skip or not _is_english(text + title):
                continue
            if title:
                titles.append(title)
            sentences += [s.strip() for s in SENTENCE.split(text) if 20 <= len(s.strip()) <= 400]
    return {"sentences": sorted(set(sentences)), "titles": sorted(set(titles))}


def _shard(job: tuple[Path, dict[str, list[str]], int, int, int]) -> int:
    out, words, first, count, seed = job
    sentences, titles = words["sentences"], words["titles"]
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(sentences), size=(count, 8))
    sizes = rng.integers(2, 7, size=count)
    title_picks = rng.integers(0, len(titles), size=count)
    days = rng.integers(0, 30 * 365, size=count)
    with out.open("w", encoding="utf-8") as f:
        for i in range(count):
            n = first + i
            year, day = 1990 + int(days[i]) // 365, int(days[i]) % 365
            record = {
                "id": f"x{n:09d}",
                "title": titles[title_picks[i]],
                "text": " ".join(sentences[j] for j in picks[i, : sizes[i]]),
                "metadata": {
                    "batch": f"b{n % 100:02d}",
                    "date": f"{year}-{1 + day // 31 % 12:02d}-{1 + day % 28:02d}",
                },
            }
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    return count


def corpus(
    words: dict[str, list[str]], docs: int, out: Path, first: int, shards: int, scifact: Path | None
) -> int:
    out.mkdir(parents=True, exist_ok=True)
    per = -(-docs // shards)
    jobs = [
        (out / f"part-{first + at:09d}.jsonl", words, first + at, min(per, docs - at), first + at)
        for at in range(0, docs, per)
    ]
    with multiprocessing.Pool(min(len(jobs), multiprocessing.cpu_count())) as workers:
        written = sum(workers.map(_shard, jobs))
    if scifact is not None:
        with (out / "scifact.jsonl").open("w", encoding="utf-8") as f:
            for record in _records(scifact):
                meta = {"batch": "scifact", "date": "2015-01-01"}
                doc = {
                    "id": record["_id"],
                    "title": record.get("title", ""),
                    "text": record["text"],
                    "metadata": meta,
                }
                f.write(json.dumps(doc, ensure_ascii=False) + "\n")
                written += 1
    return written


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pool")
    p.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    p.add_argument("--out", type=Path, required=True)
    c = sub.add_parser("corpus")
    c.add_argument("--pool", type=Path, required=True)
    c.add_argument("--docs", type=int, required=True)
    c.add_argument("--first", type=int, default=0)
    c.add_argument("--shards", type=int, default=multiprocessing.cpu_count())
    c.add_argument("--scifact", type=Path, help="SciFact's corpus.jsonl.gz, added as it is")
    c.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.cmd == "pool":
        words = pool(args.data)
        with gzip.open(args.out, "wt", encoding="utf-8") as f:
            json.dump(words, f, ensure_ascii=False)
        print(json.dumps({k: len(v) for k, v in words.items()}))
    else:
        with gzip.open(args.pool, "rt", encoding="utf-8") as f:
            words = json.load(f)
        print(
            json.dumps({"written": corpus(words, args.docs, args.out, args.first, args.shards, args.scifact)})
        )


if __name__ == "__main__":
    main()
