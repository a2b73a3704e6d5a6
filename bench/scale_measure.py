"""What bench/scale.py measures on one store: the server's figures, then the vector index alone.

Through ``rag-router serve`` on the store: start-up (process start → ``/readyz`` 200, the model's
load included), RSS, SciFact's test queries one at a time (latency, the server's own timings, and
nDCG@10 of the doc ids returned), the same queries from ``--clients`` clients at once, pages of
``GET /v1/documents`` from three places in the id order, freshness (a probe document posted every
0.5 s while two clients bulk-load documents through ``POST /v1/documents``: ack → first search
that finds it), ``POST /v1/retier`` of what the bulk load put hot, and ``DELETE /v1/documents``
by a metadata filter (1 % of the store). First, before the server starts, the cold tier's FAISS
index against exact search over the stored float vectors: recall@10 at its own nprobe and along
a curve of nprobe, with the milliseconds a query takes (one at a time, as the service asks);
then the parts of a search and of the start, one by one (bench/scale_anatomy.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gzip
import json
import os
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench._common import percentiles, start_server
from bench.scale_anatomy import anatomy

ANATOMY_QUERIES = 100  # each is timed six ways; a third of the queries keeps it to a minute
PROBE = "quorblax"  # no analyzer splits it; no corpus has it


def _disk(data_dir: Path) -> dict[str, float]:
    sizes: dict[str, float] = {}
    for path in data_dir.rglob("*"):
        if path.is_file():
            top = path.relative_to(data_dir).parts
            key = "/".join(top[:2]) if len(top) > 2 else "/".join(top)
            sizes[key] = sizes.get(key, 0.0) + path.stat().st_size
    return {k: round(v / 2**20, 1) for k, v in sorted(sizes.items()) if v >= 2**20} | {
        "total_mb": round(sum(sizes.values()) / 2**20, 1)
    }


def _rss_mb(pid: int) -> float:
    import psutil

    with contextlib.suppress(psutil.Error):
        return round(psutil.Process(pid).memory_info().rss / 2**20, 1)
    return 0.0


def _queries(scifact: Path) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    texts = {}
    with (scifact / "queries.jsonl").open(encoding="utf-8") as f:
        for line in f:
            q = json.loads(line)
            texts[str(q["_id"])] = q["text"]
    qrels: dict[str, dict[str, int]] = {}
    for line in (scifact / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        qid, doc, score = line.split("\t")[:3]
        qrels.setdefault(qid, {})[doc] = int(score)
    return {q: texts[q] for q in qrels}, qrels


def _ndcg(run: dict[str, dict[str, float]], qrels: dict[str, dict[str, int]]) -> float:
    import pytrec_eval

    scores = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(run)
    return round(sum(s["ndcg_cut_10"] for s in scores.values()) / len(qrels), 4)


async def _one_client(client: httpx.AsyncClient, queries: dict[str, str]) -> dict[str, Any]:
    ms, parts, run, errors = [], {}, {}, 0  # parts: every stage the server timed (timings_ms)
    for text in list(queries.values())[:10]:  # warm-up
        await client.post("/v1/search", json={"query": text, "top_k": 10})
    for qid, text in queries.items():
        began = time.perf_counter()
        r = await client.post("/v1/search", json={"query": text, "top_k": 10})
        ms.append((time.perf_counter() - began) * 1000)
        if r.status_code != 200:  # a 503 (every tier timed out) scores the query as nothing found
            errors += 1
            continue
        body = r.json()
        for k, v in body["timings_ms"].items():
            parts.setdefault(k, []).append(float(v or 0.0))
        found: dict[str, float] = {}
        for rank, hit in enumerate(body["hits"]):
            found.setdefault(hit["doc_id"], 1.0 / (rank + 1))
        run[qid] = found
    return {
        "latency_ms": percentiles(ms),
        **{f"server_{k}_ms": percentiles(v) for k, v in sorted(parts.items())},
        "errors": errors,
        "run": run,
    }


async def _many_clients(
    client: httpx.AsyncClient, texts: list[str], clients: int, each: int
) -> dict[str, Any]:
    ms: list[float] = []
    errors = 0

    async def one(c: int) -> None:
        nonlocal errors
        for i in range(each):
            began = time.perf_counter()
            r = await client.post(
                "/v1/search", json={"query": texts[(c * each + i) % len(texts)], "top_k": 10}
            )
            ms.append((time.perf_counter() - began) * 1000)
            errors += r.status_code != 200

    began = time.perf_counter()
    await asyncio.gather(*(one(c) for c in range(clients)))
    seconds = time.perf_counter() - began
    return {
        "clients": clients,
        "latency_ms": percentiles(ms),
        "per_s": round(len(ms) / seconds, 1),
        "errors": errors,
    }


async def _pages(client: httpx.AsyncClient, documents: int) -> dict[str, Any]:
    from rag_router.listing import encode_cursor

    out: dict[str, Any] = {}
    middle, last = encode_cursor(f"x{documents // 2:09d}"), encode_cursor(f"x{max(documents - 2000, 0):09d}")
    for name, cursor in (("first", None), ("middle", middle), ("last", last)):
        ms, params = [], {"limit": 500} | ({"cursor": cursor} if cursor else {})
        for _ in range(4):
            began = time.perf_counter()
            body = (await client.get("/v1/documents", params=params)).raise_for_status().json()
            ms.append((time.perf_counter() - began) * 1000)
            out["total"] = body["total"]
            if body["next_cursor"] is None:
                break
            params["cursor"] = body["next_cursor"]
        out[f"{name}_ms"] = percentiles(ms)
    return out


async def _freshness(
    client: httpx.AsyncClient, words: dict[str, list[str]], seconds: float, tag: str
) -> dict[str, Any]:
    rng = np.random.default_rng(7)
    sentences = words["sentences"]
    stop = asyncio.Event()
    loaded = {"docs": 0, "chunks": 0, "batch_ms": []}

    def text() -> str:
        return " ".join(sentences[j] for j in rng.integers(0, len(sentences), size=int(rng.integers(2, 7))))

    async def bulk(worker: int) -> None:
        n = 0
        while not stop.is_set():
            docs = [
                {
                    "id": f"bulk-{tag}-{worker}-{n + i}",
                    "text": text(),
                    "metadata": {"date": "2001-05-05", "batch": "bulk"},
                }
                for i in range(256)
            ]
            n += len(docs)
            began = time.perf_counter()
            r = await client.post("/v1/documents", json={"documents": docs, "tier": "hot"}, timeout=120)
            loaded["batch_ms"].append((time.perf_counter() - began) * 1000)
            if r.status_code == 200:
                results = r.json()["results"]
                loaded["docs"] += len(results)
                loaded["chunks"] += sum(x["chunks"] for x in results)

    async def probes() -> list[float]:
        found_ms, i = [], 0
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            token = f"{PROBE}{chr(97 + i % 26)}{chr(97 + i // 26 % 26)}{tag}"
            doc = {"id": f"probe-{tag}-{i}", "text": f"{token} {text()}"}
            r = await client.post("/v1/documents", json={"documents": [doc]})
            acked = time.perf_counter()
            r.raise_for_status()
            while time.perf_counter() - acked < 30:
                body = (
                    await client.post("/v1/search", json={"query": token, "route": "both", "top_k": 5})
                ).json()
                if any(h["doc_id"] == doc["id"] for h in body.get("hits", [])):
                    found_ms.append((time.perf_counter() - acked) * 1000)
                    break
                await asyncio.sleep(0.02)
            else:
                found_ms.append(float("inf"))
            i += 1
            await asyncio.sleep(0.5)
        return found_ms

    began = time.perf_counter()
    loaders = [asyncio.create_task(bulk(w)) for w in range(2)]
    found = await probes()
    stop.set()
    await asyncio.gather(*loaders)
    spent = time.perf_counter() - began
    missed = sum(1 for f in found if f == float("inf"))
    return {
        "probe_found_ms": percentiles([f for f in found if f != float("inf")]),
        "probes": len(found),
        "probes_not_found_in_30s": missed,
        "bulk_docs": loaded["docs"],
        "bulk_chunks": loaded["chunks"],
        "bulk_chunks_per_s": round(loaded["chunks"] / spent, 1),
        "bulk_batch_ms": percentiles(loaded["batch_ms"]),
    }


async def _through_server(
    url: str,
    args: argparse.Namespace,
    light: bool,
    documents: int,
    delete_batch: str | None,
    pid: int,
    out: dict[str, Any],
    saved: Callable[[], None],
    delete_first: bool = False,
) -> dict[str, Any]:
    """Fills ``out`` stage by stage, calling ``saved`` after each (a run cut short keeps them).
    ``delete_first``: the delete by filter before the retier (documents still in the hot tier)."""
    queries, qrels = _queries(args.scifact)
    async with httpx.AsyncClient(
        base_url=url, timeout=600, limits=httpx.Limits(max_connections=args.clients + 8)
    ) as client:
        one = await _one_client(client, queries)
        out["ndcg@10_scifact"] = _ndcg(one.pop("run"), qrels)
        out["one_client"] = one
        out["rss_after_search_mb"] = _rss_mb(pid)
        saved()
        if light:
            return out
        out["many_clients"] = await _many_clients(client, list(queries.values()), args.clients, 8)
        out["listing"] = await _pages(client, documents)
        saved()
        with gzip.open(args.pool, "rt", encoding="utf-8") as f:
            words = json.load(f)
        out["freshness"] = await _freshness(client, words, args.fresh_s, delete_batch or "x")
        out["rss_after_bulk_mb"] = _rss_mb(pid)
        saved()
        steps = (_retier, _delete) if not delete_first else (_delete, _retier)
        for step in steps:
            await step(client, delete_batch, out)
            saved()
        out["rss_end_mb"] = _rss_mb(pid)
    return out


async def _retier(client: httpx.AsyncClient, _: str | None, out: dict[str, Any]) -> None:
    began = time.perf_counter()
    r = (await client.post("/v1/retier", json={"dry_run": False}, timeout=3600)).raise_for_status().json()
    out["retier"] = {"seconds": round(time.perf_counter() - began, 2), **r}


async def _delete(client: httpx.AsyncClient, batch: str | None, out: dict[str, Any]) -> None:
    if batch:
        began = time.perf_counter()
        r = (await client.delete("/v1/documents", params={"where": f"batch={batch}"}, timeout=3600)).json()
        out["delete_by_filter"] = {"seconds": round(time.perf_counter() - began, 2), **r}


def _serve(data_dir: Path, log: Path) -> tuple[subprocess.Popen[bytes], str, float]:
    env = {"RAG_DATA_DIR": str(data_dir), "RAG_LOG_LEVEL": "WARNING"}
    url, proc, ready = start_server(env, log, ready_s=3600, mode="a")
    return proc, url, ready


def exact_recall(
    data_dir: Path, texts: list[str], curve: tuple[int, ...] = (32, 64, 128, 256, 512, 1024)
) -> dict[str, Any]:
    """FAISS as the service searches it against exact inner products over every stored vector."""
    import faiss

    from indexers.tiers.cold_vectors import exact_top
    from rag_router.embedders import build_embedder
    from rag_router.settings import get_settings

    index = faiss.read_index(str(data_dir / "cold" / "vectors.faiss"))
    queries = np.ascontiguousarray(
        build_embedder(get_settings(data_dir=data_dir)).embed(texts), dtype=np.float32
    )
    k = 10
    conn = sqlite3.connect(f"file:{data_dir / 'cold' / 'cold.sqlite'}?mode=ro", uri=True)
    cursor = conn.execute("SELECT seq, vector FROM chunks")

    def blocks() -> Iterator[tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]]:
        while rows := cursor.fetchmany(200_000):
            seqs = np.fromiter((r[0] for r in rows), np.int64, len(rows))
            yield seqs, np.frombuffer(b"".join(r[1] for r in rows), np.float32).reshape(len(rows), -1)

    truth = [set(row.tolist()) for row in exact_top(queries, blocks(), k)]
    out: dict[str, Any] = {"vectors": int(index.ntotal), "kind": type(index).__name__}
    ivf = faiss.extract_index_ivf(index) if not isinstance(index, faiss.IndexIDMap2) else None
    settings = [None] if ivf is None else sorted({*curve, ivf.nprobe} & set(range(1, ivf.nlist + 1)))
    out["nlist"], out["nprobe_default"] = (ivf.nlist, ivf.nprobe) if ivf is not None else (None, None)
    faiss.omp_set_num_threads(1)  # the service asks one query at a time from many threads
    out["curve"] = []
    for nprobe in settings:
        params = faiss.SearchParametersIVF(nprobe=nprobe) if nprobe else None
        found, ms = [], []
        for q in queries:
            began = time.perf_counter()
            _, ids = index.search(q.reshape(1, -1), k, params=params)
            ms.append((time.perf_counter() - began) * 1000)
            found.append(set(ids[0].tolist()))
        recall = sum(len(f & t) for f, t in zip(found, truth, strict=True)) / (k * len(truth))
        out["curve"].append({"nprobe": nprobe, "recall@10": round(recall, 4), "ms": percentiles(ms)})
    return out


def measure(
    data_dir: Path,
    args: argparse.Namespace,
    *,
    light: bool,
    log: Path,
    delete_batch: str | None = None,
    out: dict[str, Any] | None = None,
    saved: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """Every figure of the store in ``data_dir``, into ``out`` (a new dict when None), calling
    ``saved`` after each stage: a run cut short, or a stage that fails, keeps what came before."""
    out = {} if out is None else out
    with sqlite3.connect(f"file:{data_dir / 'cold' / 'cold.sqlite'}?mode=ro", uri=True) as conn:
        chunks, documents = conn.execute("SELECT COUNT(*), COUNT(DISTINCT doc_id) FROM chunks").fetchone()
    out.update({"cold_chunks": chunks, "cold_documents": documents, "disk_mb": _disk(data_dir)})
    if not light:  # first: the figure a run cut short must not lose (the store as built, no server)
        queries, _ = _queries(args.scifact)
        out["vectors_vs_exact"] = exact_recall(data_dir, list(queries.values()))
        saved()
        try:  # where the cold tier's, the rerank's and the start's time goes (no server yet)
            out["anatomy"] = anatomy(data_dir, list(queries.values())[:ANATOMY_QUERIES])
        except Exception as exc:  # a part that fails costs its own figures, not the run's
            out["anatomy"] = {"error": repr(exc)}
        saved()
    proc, url, ready = _serve(data_dir, log)
    out["serve_ready_s"] = round(ready, 2)
    out["rss_ready_mb"] = _rss_mb(proc.pid)
    saved()
    try:
        asyncio.run(_through_server(url, args, light, documents, delete_batch, proc.pid, out, saved))
        if args.cpu_embed and not light:
            proc.terminate()
            proc.wait(120)
            os.environ["RAG_EMBEDDING__DEVICE"], device = "cpu", os.environ.get("RAG_EMBEDDING__DEVICE")
            try:
                proc, url, _ = _serve(data_dir, log)
                cpu = argparse.Namespace(**{**vars(args), "clients": 1})
                out["cpu_query_embedding"] = {}
                asyncio.run(
                    _through_server(
                        url, cpu, True, documents, None, proc.pid, out["cpu_query_embedding"], saved
                    )
                )
            finally:
                os.environ.pop("RAG_EMBEDDING__DEVICE")
                if device is not None:
                    os.environ["RAG_EMBEDDING__DEVICE"] = device
    finally:
        stop_serve(proc, data_dir, out, wait_s=600)
    saved()
    return out


def stop_serve(proc: subprocess.Popen[bytes], data_dir: Path, out: dict[str, Any], wait_s: float) -> None:
    """SIGTERM the server, then the seconds it took to stop and the disk it left."""
    began = time.perf_counter()
    proc.terminate()
    proc.wait(wait_s)
    out["serve_stop_s"] = round(time.perf_counter() - began, 2)
    out["disk_mb_end"] = _disk(data_dir)
