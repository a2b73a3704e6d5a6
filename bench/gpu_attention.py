"""The embedder on a GPU with and without cuDNN's attention kernel, on batches of new shapes.

torch builds a cuDNN graph for every (rows, length) shape the kernel meets; an embedder's
batches (the rerank stage's sentences, ingest's passes) are ever new shapes. Embeds 40 batches
of 5-44 pool sentences with cuDNN's attention on, then 40 others with it off (the flash and
memory-efficient kernels), and prints the milliseconds of each batch's embed() (tokenizing
included) as percentiles.

    RAG_EMBEDDING__DEVICE=cuda RAG_EMBEDDING__MODEL=<model folder> \\
        python bench/gpu_attention.py --pool pool.json.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
from pathlib import Path

from bench._common import machine, percentiles


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pool", type=Path, required=True, help="bench/scale_corpus.py pool's output")
    args = parser.parse_args()
    import torch

    from rag_router.embedders import build_embedder
    from rag_router.settings import get_settings

    embedder = build_embedder(get_settings())
    with gzip.open(args.pool, "rt", encoding="utf-8") as f:
        sentences = json.load(f)["sentences"]
    out: dict[str, object] = {"machine": machine()}
    for name, cudnn, start in (("cudnn_on", True, 0), ("cudnn_off", False, 30_000)):
        torch.backends.cuda.enable_cudnn_sdp(cudnn)
        embedder.embed(["warm"])
        ms = []
        for i, n in enumerate(range(5, 45)):
            batch = sentences[start + i * 50 : start + i * 50 + n]
            began = time.perf_counter()
            embedder.embed(batch)
            torch.cuda.synchronize()
            ms.append((time.perf_counter() - began) * 1000)
        out[name] = percentiles(ms)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
