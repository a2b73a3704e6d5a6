"""What one embedding actor costs, on its own: start (imports, CUDA, weights, first pass) and
steady state (``embed_ids`` over a Ray-sized batch, split into host work and GPU work).

    python3 bench/actor_probe.py MODEL_DIR [--chunks 18600] [--length 240] [--device cuda]

The model is loaded as the Ray engine's actors load it (``indexers.embed.passes``: the
transformer alone), from the same ``Recipe`` the owner builds. Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("--chunks", type=int, default=18_600)  # four 4 MB units of SciFact
    parser.add_argument("--length", type=int, default=240)
    parser.add_argument("--max-batch", type=int, default=1024)
    parser.add_argument("--max-batch-tokens", type=int, default=262_144)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    dev = args.device
    out: dict[str, float] = {}
    t = time.perf_counter()
    import numpy as np
    import torch

    out["import_torch"] = time.perf_counter() - t

    def sync() -> None:
        if dev.startswith("cuda"):
            torch.cuda.synchronize()

    t = time.perf_counter()
    torch.zeros(1).to(dev)
    sync()
    out["cuda_init"] = time.perf_counter() - t
    t = time.perf_counter()
    from indexers.embed.passes import Recipe, TransformerPasses

    recipe = Recipe(
        path=args.model,
        pooling="mean",
        normalize=True,
        dim=384,
        max_len=256,
        pad_id=0,
        dtype="float32",
        max_batch=args.max_batch,
        max_batch_tokens=args.max_batch_tokens,
        device=dev,
    )
    passes = TransformerPasses(recipe)
    out["load_passes"] = time.perf_counter() - t
    rng = np.random.default_rng(0)
    lengths = np.clip(rng.normal(args.length * 0.8, args.length * 0.25, args.chunks), 8, args.length + 2)
    rows = [rng.integers(1000, 29000, int(n), dtype=np.int32) for n in lengths]
    t = time.perf_counter()
    passes.embed_ids(rows[:1024])
    sync()
    out["first_pass"] = time.perf_counter() - t
    for run in range(3):
        t = time.perf_counter()
        passes.embed_ids(rows)  # type: ignore[arg-type]
        out[f"embed_ids_{run}"] = time.perf_counter() - t
    out["chunks_per_s"] = args.chunks / min(out[f"embed_ids_{r}"] for r in range(3))
    # split: host work (padding, tensors) and the GPU alone on tensors already there
    from indexers.embed.passes import pooled
    from indexers.embed.tokens import tensors, token_batches

    batches = list(
        token_batches([len(r) for r in rows], max_batch=args.max_batch, max_tokens=args.max_batch_tokens)
    )
    t = time.perf_counter()
    ready = [tensors([rows[i] for i in b], 0, dev, recipe.max_len) for b in batches]  # as embed_ids
    sync()
    out["host_to_gpu"] = time.perf_counter() - t
    model = passes._model

    def tokens(x: dict[str, torch.Tensor]) -> torch.Tensor:
        if passes.transformers:
            hidden: torch.Tensor = model(**x).last_hidden_state
            return hidden
        return model(x["input_ids"], x["attention_mask"])  # type: ignore[no-any-return]

    t = time.perf_counter()
    with torch.inference_mode():
        got = [pooled(tokens(x), x["attention_mask"], "mean", True) for x in ready]
    sync()
    out["gpu_only"] = time.perf_counter() - t
    t = time.perf_counter()
    for v in got:
        v.float().cpu().numpy()
    out["gpu_to_host"] = time.perf_counter() - t
    out["gpu_only_chunks_per_s"] = args.chunks / out["gpu_only"]
    print(json.dumps({k: round(v, 3) for k, v in out.items()}))


if __name__ == "__main__":
    main()
