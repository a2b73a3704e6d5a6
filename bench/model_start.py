"""What an embedding process pays before its first batch: imports, CUDA, the weights.

    python3 bench/model_start.py MODEL_DIR [--device cuda]

Prints the seconds of ``import torch``, CUDA's first call, ``import transformers``,
``import sentence_transformers`` and loading the model through it, each after the one before,
in a fresh process (run it twice: the first run also warms the file cache). The Ray engine's
embedding actors skip the sentence-transformers import (``indexers/embed/passes.py``).
"""

from __future__ import annotations

import argparse
import json
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    marks = [("start", time.perf_counter())]
    import torch

    marks.append(("torch", time.perf_counter()))
    if args.device.startswith("cuda"):
        torch.zeros(1).to(args.device)
        torch.cuda.synchronize()
    marks.append(("cuda", time.perf_counter()))
    import transformers  # noqa: F401

    marks.append(("transformers", time.perf_counter()))
    import sentence_transformers

    marks.append(("sentence_transformers", time.perf_counter()))
    sentence_transformers.SentenceTransformer(args.model, device=args.device)
    marks.append(("weights", time.perf_counter()))
    print(json.dumps({name: round(t - marks[i][1], 2) for i, (name, t) in enumerate(marks[1:])}))


if __name__ == "__main__":
    main()
