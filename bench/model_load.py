"""The torch embedder's load as ``serve`` does it, in fresh processes: through
sentence-transformers, a first start that also checks the passes, and the starts after it that
read the checked passes (``indexers/embed/quick.py``).

    python bench/model_load.py [--device cpu|cuda] [--model all-MiniLM-L6-v2] [--repeat 5]

Each figure is one fresh process's seconds from its first import to the first embedded text
(imports included), median and all runs; the file cache is warmed by a run not counted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import machine

LOAD = """
import sys, time
began = time.perf_counter()
from pathlib import Path
mode, model, device, cache = sys.argv[1:5]
if mode == "sentence-transformers":
    from indexers.embed.embedder import SentenceTransformerEmbedder
    e = SentenceTransformerEmbedder(model, device=device)
else:
    from indexers.embed.quick import torch_embedder
    e = torch_embedder(model, device=device, max_batch=64, max_batch_tokens=16384, cache_dir=Path(cache))
e.embed(["warm"])
print(time.perf_counter() - began, type(e).__name__, "sentence_transformers" in sys.modules)
"""


def once(mode: str, model: str, device: str, cache: Path) -> tuple[float, str, bool]:
    out = subprocess.run(
        [sys.executable, "-c", LOAD, mode, model, device, str(cache)],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    seconds, kind, imported = out.stdout.split()[-3:]
    return float(seconds), kind, imported == "True"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    result: dict[str, object] = {"machine": machine(), "model": args.model, "device": args.device}
    with tempfile.TemporaryDirectory() as tmp:
        once("sentence-transformers", args.model, args.device, Path(tmp) / "warm")  # the file cache
        runs: dict[str, list[tuple[float, str, bool]]] = {
            "sentence-transformers": [],
            "first": [],
            "checked": [],
        }
        for i in range(args.repeat):
            cache = Path(tmp) / f"cache-{i}"
            runs["sentence-transformers"].append(
                once("sentence-transformers", args.model, args.device, cache)
            )
            runs["first"].append(once("quick", args.model, args.device, cache))  # checks, keeps
            runs["checked"].append(once("quick", args.model, args.device, cache))  # reads the check
    for mode, got in runs.items():
        seconds = [round(s, 2) for s, _, _ in got]
        result[mode] = {
            "median_s": round(statistics.median(seconds), 2),
            "runs_s": seconds,
            "embedder": sorted({k for _, k, _ in got}),
            "imported_sentence_transformers": sorted({i for _, _, i in got}),
        }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
