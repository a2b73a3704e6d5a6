"""Serving under load: micro-batched query embeddings, their cache, and admission control."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import httpx
import numpy as np
import pytest
from starlette.types import Receive, Scope, Send

from indexers.embed.embedder import AsyncEmbedder, SentenceTransformerEmbedder
from indexers.embed.query_batcher import QueryBatcher
from indexers.records import Vector
from indexers.workers import Worker
from rag_router.api.limits import InFlightLimit

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice is Linux's")


def _own_nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


async def test_concurrent_queries_share_forward_passes_and_get_their_own_vectors(
    embedder: SentenceTransformerEmbedder,
) -> None:
    batches: list[int] = []
    worker = AsyncEmbedder(embedder, query_batch=8, observe=lambda size, waits: batches.append(size))
    queries = [f"question number {i} about protein folding" for i in range(20)]
    vectors = await asyncio.gather(*(worker.embed_query(q) for q in queries))
    alone = embedder.embed(queries)
    assert np.allclose(np.stack(vectors), alone, atol=1e-5)
    assert sum(batches) == 20 and len(batches) < 20 and max(batches) <= 8
    again = await worker.embed_query("  question number 3 about protein   folding ")  # normalised: a hit
    assert worker.batcher.hits == 1 and np.array_equal(again, vectors[3]) and not again.flags.writeable
    worker.close()


async def test_cancelled_requests_drop_out_and_errors_reach_every_waiter() -> None:
    calls: list[list[str]] = []
    gate, entered = threading.Event(), threading.Event()

    def run(texts: Sequence[str]) -> Vector:  # the model, in the batcher's thread
        calls.append(list(texts))
        entered.set()
        gate.wait(5)
        if "boom" in texts:
            raise RuntimeError("embedder failed")
        return np.ones((len(texts), 2), dtype=np.float32)

    batcher = QueryBatcher([run], max_batch=4, cache_size=0)
    first = asyncio.create_task(batcher.embed("a"))
    assert await asyncio.to_thread(entered.wait, 5)  # "a" is in a forward pass now
    waiting = [asyncio.create_task(batcher.embed(t)) for t in ("b", "c", "d")]
    await asyncio.sleep(0)
    waiting[0].cancel()
    await asyncio.sleep(0)
    gate.set()
    assert (await first).tolist() == [1.0, 1.0]
    assert [r.tolist() for r in await asyncio.gather(*waiting[1:])] == [[1.0, 1.0]] * 2
    assert calls == [["a"], ["c", "d"]]  # "b" was cancelled before its pass and is not embedded
    gate.clear()
    entered.clear()
    blocker = asyncio.create_task(batcher.embed("x"))
    assert await asyncio.to_thread(entered.wait, 5)  # "x" holds the model: the next two share one pass
    failing = [asyncio.create_task(batcher.embed(t)) for t in ("boom", "e")]
    await asyncio.sleep(0)
    gate.set()
    assert (await blocker).tolist() == [1.0, 1.0]
    for task in failing:
        with pytest.raises(RuntimeError, match="embedder failed"):
            await task
    batcher.close()
    with pytest.raises(RuntimeError, match="closed"):
        await batcher.embed("after close")


async def test_admission_control_refuses_at_once_over_the_bound() -> None:
    release = asyncio.Event()

    async def slow(scope: Scope, receive: Receive, send: Send) -> None:
        await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    rejected: list[int] = []
    limited = InFlightLimit(slow, limit=2, on_reject=lambda: rejected.append(1))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=limited), base_url="http://t") as client:
        admitted = [asyncio.create_task(client.post("/v1/search", json={})) for _ in range(2)]
        await asyncio.sleep(0.05)
        over = await asyncio.wait_for(client.post("/v1/search", json={}), timeout=0.5)
        assert over.status_code == 429 and over.headers["retry-after"] == "1"
        assert over.json()["error"]["code"] == "overloaded" and rejected == [1]
        release.set()
        assert [r.status_code for r in await asyncio.gather(*admitted)] == [200, 200]
        assert limited.inflight == 0


@pytest.mark.parametrize("backend", ["onnx", "onnx-int8"])
def test_onnx_backends_are_exported_once_and_match_torch(
    backend: str, embedder: SentenceTransformerEmbedder, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from indexers.embed.onnx import OnnxEmbedder

    cache = tmp_path_factory.getbasetemp() / "onnx-cache"  # shared by both cases: one export
    onnx = OnnxEmbedder("all-MiniLM-L6-v2", backend=backend, cache_dir=cache)  # type: ignore[arg-type]
    texts = ["Can I be held in slavery?", "第十七条 被遗忘权", "right to education " * 40]
    reference = embedder.embed(texts)
    cosine = (onnx.embed(texts) * reference).sum(axis=1)
    assert onnx.count_tokens(texts) == embedder.count_tokens(texts) and onnx.dim == 384
    if backend == "onnx":
        assert np.allclose(cosine, 1.0, atol=1e-5)
        # a query-lane sibling: own session, one thread, sorted passes of 2; same vectors, same order
        mixed = ["a much longer question about the right to a fair and public hearing", "asylum", *texts]
        sibling = onnx.with_threads(1, max_batch=2)
        assert np.allclose(sibling.embed(mixed), onnx.embed(mixed), atol=1e-5)
    else:
        assert cosine.min() > 0.85 and cosine.max() < 0.9999 and onnx.model_name.endswith("@onnx-int8")
    assert len(list(cache.glob("*/model.onnx"))) == 1


async def test_a_batch_is_the_oldest_query_and_those_closest_to_it_in_length() -> None:
    batches: list[list[str]] = []
    gate, entered = threading.Event(), threading.Event()

    def run(texts: Sequence[str]) -> Vector:
        batches.append(list(texts))
        entered.set()
        gate.wait(5)
        return np.ones((len(texts), 2), dtype=np.float32)

    batcher = QueryBatcher([run], max_batch=3, cache_size=0)
    blocker = asyncio.create_task(batcher.embed("hold the model"))
    assert await asyncio.to_thread(entered.wait, 5)
    texts = ["a" * 10, "b" * 80, "c" * 12, "d" * 75, "e" * 9, "f" * 200]  # queued in this order
    waiting = [asyncio.create_task(batcher.embed(t)) for t in texts]
    await asyncio.sleep(0.01)
    gate.set()
    await asyncio.gather(blocker, *waiting)
    batcher.close()
    assert [sorted(len(t) for t in b) for b in batches[1:]] == [[9, 10, 12], [75, 80, 200]]


async def test_a_lone_query_runs_on_the_solo_model_and_concurrent_ones_on_the_lane() -> None:
    used: list[str] = []
    active: dict[str, int] = {}
    most: dict[str, int] = {}
    lock = threading.Lock()

    def model(name: str) -> Callable[[Sequence[str]], Vector]:
        def run(texts: Sequence[str]) -> Vector:
            with lock:
                used.append(name)
                active[name] = active.get(name, 0) + 1
                most[name] = max(most.get(name, 0), active[name])
            time.sleep(0.05)
            with lock:
                active[name] -= 1
            return np.ones((len(texts), 2), dtype=np.float32)

        return run

    batcher = QueryBatcher([model("lane-0"), model("lane-1")], solo=model("solo"), max_batch=1, cache_size=0)
    await batcher.embed("alone")
    assert used == ["solo"]
    await asyncio.gather(*(batcher.embed(f"q{i}") for i in range(6)))
    batcher.close()
    assert used[1] == "solo" and {"lane-0", "lane-1"} & set(used[2:])  # the rest ran beside it
    assert most["solo"] == 1  # the all-core model is never run twice at once


async def test_after_a_pass_that_others_queued_behind_the_next_batch_stays_on_the_lane() -> None:
    """Under load every thread is idle now and then; that is not a lone query."""
    used: list[str] = []
    gate, entered = threading.Event(), threading.Event()

    def model(name: str) -> Callable[[Sequence[str]], Vector]:
        def run(texts: Sequence[str]) -> Vector:
            used.append(name)
            if "hold" in texts:
                entered.set()
                gate.wait(5)
            return np.ones((len(texts), 2), dtype=np.float32)

        return run

    batcher = QueryBatcher([model("lane")], solo=model("solo"), cache_size=0)
    await batcher.embed("first")  # quiet: the whole machine
    held = asyncio.create_task(batcher.embed("hold"))
    assert await asyncio.to_thread(entered.wait, 5)
    queued = asyncio.create_task(batcher.embed("arrived during a pass"))
    await asyncio.sleep(0.01)
    gate.set()
    await asyncio.gather(held, queued)
    await batcher.embed("after a quiet pass")
    batcher.close()
    assert used == ["solo", "solo", "lane", "solo"]


@linux_only
async def test_model_and_engine_threads_run_below_the_event_loop() -> None:
    """The loop (accept, 429, health) keeps its priority; embedder and engine threads yield to it."""
    loop_nice = _own_nice()
    if loop_nice + 3 > 19:
        pytest.skip("this process already runs at the lowest priority")
    seen: list[int] = []

    def run(texts: Sequence[str]) -> Vector:
        seen.append(_own_nice())
        return np.ones((len(texts), 2), dtype=np.float32)

    batcher = QueryBatcher([run], cache_size=0, nice=3)
    engine = Worker("test-engine", threads=1, nice=2)
    try:
        await batcher.embed("a query")
        engine_nice = await engine.run(_own_nice)
    finally:
        batcher.close()
        engine.shutdown()
    assert seen == [loop_nice + 3]
    assert engine_nice == loop_nice + 2
    assert _own_nice() == loop_nice  # the caller's own priority is untouched


def test_onnx_refuses_a_model_that_does_not_pool_by_mean(tmp_path: Path) -> None:
    """bge-m3 and friends pool by CLS; the ONNX path pools by mean, so it must say so, not mis-embed."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules as models

    from indexers.embed.embedder import packaged_model_path
    from indexers.embed.onnx import export

    transformer = models.Transformer(str(packaged_model_path()))
    cls = models.Pooling(transformer.get_embedding_dimension(), pooling_mode="cls")
    SentenceTransformer(modules=[transformer, cls], device="cpu").save(str(tmp_path / "cls-model"))
    with pytest.raises(ValueError, match="RAG_EMBEDDING__BACKEND=torch"):
        export(tmp_path / "cls-model", tmp_path / "out" / "model.onnx")
    assert not (tmp_path / "out" / "model.onnx").exists()
