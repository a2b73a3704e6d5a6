"""How far the embedded default goes: one store grown to each size, measured at each.

    python bench/scale.py --pool POOL.json.gz --scifact ../shared/data/scifact \
        --sizes 100000,1000000,10000000 --work /scratch --out bench/results/scale.json

For each size in turn: the documents it adds (``bench/scale_corpus.py``: the shared sets'
sentences recombined; SciFact's corpus in the first step) are ingested into the same data dir
by ``rag-router ingest --engine ray --tier cold`` (``--engine inprocess`` where Ray is not
installed), then ``bench/scale_measure.py`` starts ``rag-router serve`` on it and measures
(start-up, search at 1 and 64 clients, SciFact's nDCG@10, listing, freshness during a bulk
load, retier, delete by filter, memory, disk), and, with the server stopped, the cold tier's
vector index against exact search. Every step's figures are written to ``--out`` as they come,
so a run cut short keeps what it measured. SciFact alone (its own store) is measured first.

The embedder is the service's own settings (``RAG_EMBEDDING__MODEL``, ``RAG_EMBEDDING__DEVICE``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import machine
from bench.scale_measure import measure


def _ingest(paths: list[Path], data_dir: Path, engine: str, log: Path) -> dict[str, Any]:
    env = {**os.environ, "RAG_DATA_DIR": str(data_dir), "RAG_LOG_LEVEL": "WARNING"}
    command = [
        sys.executable,
        "-m",
        "rag_router.cli",
        "ingest",
        *map(str, paths),
        "--tier",
        "cold",
        "--engine",
        engine,
    ]
    began = time.perf_counter()
    with log.open("a") as out:
        done = subprocess.run(command, env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
    seconds = time.perf_counter() - began
    return {"exit": done.returncode, "seconds": round(seconds, 1), "command": " ".join(command[1:])}


def _engine() -> str:
    try:
        import ray  # noqa: F401
    except ImportError:
        return "inprocess"
    return "ray"


def _corpus(args: argparse.Namespace, docs: int, first: int, out: Path, scifact: bool) -> int:
    command = [sys.executable, str(Path(__file__).with_name("scale_corpus.py")), "corpus"]
    command += ["--pool", str(args.pool), "--docs", str(docs), "--first", str(first), "--out", str(out)]
    if scifact:
        command += ["--scifact", str(args.scifact / "corpus.jsonl.gz")]
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return int(json.loads(done.stdout.splitlines()[-1])["written"])


def _save(result: dict[str, Any], out: Path) -> None:
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    tmp.replace(out)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pool", type=Path, required=True, help="bench/scale_corpus.py pool's output")
    parser.add_argument("--scifact", type=Path, required=True, help="SciFact in BEIR layout")
    parser.add_argument(
        "--sizes", default="100000,1000000,10000000", help="documents in the store at each step"
    )
    parser.add_argument("--work", type=Path, required=True, help="where the corpus and the store go")
    parser.add_argument("--engine", choices=["ray", "inprocess"], default=None)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument(
        "--fresh-s", type=float, default=60.0, help="seconds of bulk load while probing freshness"
    )
    parser.add_argument(
        "--cpu-embed", action="store_true", help="also one client with the query embedded on the CPU"
    )
    parser.add_argument("--skip-alone", action="store_true")
    parser.add_argument(
        "--skip-delete", action="store_true", help="no delete by filter (minutes at 10M chunks)"
    )
    parser.add_argument(
        "--measure-only",
        action="store_true",
        help="measure the store already in --work/data (the last --sizes names its documents)",
    )
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    engine = args.engine or _engine()
    sizes = [int(s) for s in args.sizes.split(",")]
    result: dict[str, Any] = {
        "machine": machine(),
        "command": " ".join(sys.argv),
        "engine": engine,
        "steps": [],
    }
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    )
    result["commit"] = commit.stdout.strip() or None
    args.work.mkdir(parents=True, exist_ok=True)
    log = args.work / "scale.log"

    def save() -> None:
        _save(result, args.out)

    if not args.skip_alone:  # SciFact in a store of its own: the figure the big store is held to
        alone = args.work / "alone"
        shutil.rmtree(alone, ignore_errors=True)
        shutil.copytree(args.scifact, alone / "in", ignore=shutil.ignore_patterns("queries*", "qrels"))
        ingest = _ingest([alone / "in"], alone / "data", engine, log)
        result["scifact_alone"] = {"ingest": ingest}
        measure(alone / "data", args, light=True, log=log, out=result["scifact_alone"])
        _save(result, args.out)
    data_dir, have = args.work / "data", 0
    if args.measure_only:  # the store built before (a build whose measuring failed, say)
        only: dict[str, Any] = {"documents": sizes[-1], "measured_only": True}
        result["steps"].append(only)
        measure(data_dir, args, light=False, log=log, delete_batch="b00", out=only, saved=save)
        sizes = []
    for step, size in enumerate(sizes):
        folder = args.work / f"corpus-{step}"
        began = time.perf_counter()
        written = _corpus(args, size - have, have, folder, scifact=step == 0)
        made = round(time.perf_counter() - began, 1)
        entry: dict[str, Any] = {"documents": size, "corpus": {"written": written, "seconds": made}}
        entry["ingest"] = _ingest([folder], data_dir, engine, log)
        shutil.rmtree(folder)  # the disk is the next step's
        result["steps"].append(entry)
        _save(result, args.out)
        batch = None if args.skip_delete else f"b{step:02d}"
        measure(data_dir, args, light=False, log=log, delete_batch=batch, out=entry, saved=save)
        have = size
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
