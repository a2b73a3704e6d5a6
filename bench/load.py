"""Load on /v1/search over loopback, as ratios to this machine's limits measured in the same run.

    python bench/load.py --data-dir /tmp/ev/scifact-onnx --out bench/results/bench-load.json
    python bench/load.py --data-dir … --soak 300      # + RSS of the server over a 5-minute run
    python bench/load.py --data-dir … --levels 64 --profile /tmp/serve.speedscope.json  # + py-spy

Starts ``rag-router serve`` on an already-ingested data dir (e.g. one ``rag-router eval
--data-dir`` left), then: (1) the raw embedder's best batched queries/s and its one-at-a-time
latency, same backend, in a child process; (2) a no-op endpoint of the same app (``/healthz``)
at 64 clients; (3) ``/v1/search`` (route ``both``) at 1, 8, 32, 64, 128 clients for
``--seconds`` each, with real SciFact and Cranfield queries and the query cache off (every
query is embedded); (4) 4× the admission bound, refused clients waiting out ``Retry-After``:
admitted p99 against the 64-client p99, and how fast the rest are refused. Reports
throughput, p50/p95/p99 and errors per level. The server and this load generator share the
machine's cores; at 64 clients the run also reports where the CPU went, per request: each
server thread's CPU time (``/proc``), grouped by its Python name (``py-spy dump``), and the
load generator's own.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import resource
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import emit, machine, percentiles, server

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def load_queries() -> list[str]:
    out = []
    for name in ("scifact", "cranfield"):
        path = DATA / name / "queries.jsonl"
        out += [
            json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
        ]
    return out


def raw_embedder(backend: str, queries: list[str]) -> dict[str, Any]:
    """The embedder alone, in this process: the machine's limit for the search path.

    Two ways to use the cores, and the better one counts: one session with every core, fed
    batches one after another; and the query lane's layout (``query_models``: by default two
    one-thread sessions), each fed its own batches from its own thread at the same time.
    """
    from rag_router.embedders import build_embedder, query_models
    from rag_router.settings import Settings

    settings = Settings(embedding={"backend": backend})
    embedder = build_embedder(settings)
    lane, _ = query_models(embedder, settings.embedding.query_workers)
    sample = queries[:1024]
    for model in {id(m): m for m in [embedder, *lane]}.values():
        model.embed(sample[:64])  # warm-up

    def single(model: Any) -> dict[str, float]:
        times = []
        for q in sample[:200]:
            started = time.perf_counter()
            model.embed([q])
            times.append((time.perf_counter() - started) * 1000)
        return percentiles(times)

    def run(models: list[Any], size: int) -> float:
        def feed(model: Any, part: list[str]) -> None:
            for i in range(0, len(part), size):
                model.embed(part[i : i + size])

        threads = [
            threading.Thread(target=feed, args=(m, sample[i :: len(models)])) for i, m in enumerate(models)
        ]
        started = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return round(len(sample) / (time.perf_counter() - started), 1)

    sizes = (8, 16, 32, 64)
    one = {size: run([embedder], size) for size in sizes}
    shared = {size: run(lane, size) for size in sizes} if len(lane) > 1 else {}
    return {
        "single_ms": single(embedder),
        "single_ms_query_lane_session": single(lane[0]),
        "batched_qps_one_session": one,
        f"batched_qps_{len(lane)}_sessions": shared,
        "best_qps": max([*one.values(), *shared.values()]),
    }


def raw_embedder_apart(data_dir: Path, backend: str) -> dict[str, Any]:
    """``raw_embedder`` in a child process, so that the measuring process holds no model and
    no idle ONNX thread pools afterwards (e.g. while it drives the server)."""
    how = ["--raw-only", "--backend", backend, "--data-dir", str(data_dir)]
    done = subprocess.run([sys.executable, __file__, *how], capture_output=True, text=True, check=True)
    raw: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return raw


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds (user + system) so far of each thread of ``pid``."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[int, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended
            continue
        out[int(task.name)] = (int(fields[11]) + int(fields[12])) / tick
    return out


# Python thread name → what the thread does (rag_router.services names them)
THREAD_GROUPS = (
    ("MainThread", "event loop (HTTP, routing, fusion)"),
    ("embed-query", "query embedder"),
    ("qdrant-edge", "hot tier (Qdrant Edge)"),
    ("local-cold", "cold tier (tantivy + FAISS)"),
)


def thread_groups(pid: int) -> dict[int, str]:
    """Native thread id → group, from the Python thread names ``py-spy dump`` reports."""
    py_spy = str(Path(sys.executable).with_name("py-spy"))
    try:
        spy = subprocess.run([py_spy, "dump", "-p", str(pid)], capture_output=True, text=True, timeout=30)
        dump = spy.stdout
    except (OSError, subprocess.TimeoutExpired):
        dump = ""
    out: dict[int, str] = {}
    for tid, name in re.findall(r'^Thread (\d+) \([^)]*\): "([^"]*)"', dump, flags=re.M):
        out[int(tid)] = next((group for prefix, group in THREAD_GROUPS if name.startswith(prefix)), "other")
    return out


def cpu_per_request(
    pid: int, before: dict[int, float], after: dict[int, float], client_s: float, requests: int
) -> dict[str, float]:
    """Milliseconds of CPU per answered request, by thread group, plus the load generator's."""
    groups = thread_groups(pid)
    spent: dict[str, float] = {}
    for tid, cpu in after.items():
        group = groups.get(tid, "other")
        spent[group] = spent.get(group, 0.0) + cpu - before.get(tid, 0.0)
    spent["load generator (this process)"] = client_s
    ranked = sorted(spent.items(), key=lambda kv: -kv[1])
    per = {name: round(s / max(requests, 1) * 1000, 2) for name, s in ranked}
    per["total"] = round(sum(spent.values()) / max(requests, 1) * 1000, 2)
    return per


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def drive(
    url: str,
    path: str,
    clients: int,
    seconds: float,
    queries: list[str],
    *,
    backoff: bool = False,
    ramp_s: float = 1.0,
) -> dict[str, Any]:
    """``clients`` workers, each one request at a time on its own keep-alive connection.

    aiohttp, not httpx: on this machine httpx spends ~3.6 ms of CPU per request in the client
    (aiohttp ~0.13 ms), and the load generator shares the server's two cores. With ``backoff``
    a refused client sleeps for its ``Retry-After`` plus up to 50 % jitter, as well-behaved
    clients do.
    """
    latencies: list[float] = []
    refused: list[float] = []
    statuses: Counter[int] = Counter()
    retry_after: set[str] = set()
    counter = iter(range(1 << 40))
    stop = time.perf_counter() + seconds
    connector = aiohttp.TCPConnector(limit=clients)
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(base_url=url, connector=connector, timeout=timeout) as session:

        async def once(query: str) -> tuple[int, str]:
            if path == "/healthz":
                request = session.get(path)
            else:
                request = session.post(path, json={"query": query, "top_k": 10, "route": "both"})
            async with request as r:
                await r.read()
                return r.status, r.headers.get("retry-after", "")

        async def worker() -> None:
            await asyncio.sleep(random.uniform(0, ramp_s))  # clients arrive over ramp_s, not at once
            while time.perf_counter() < stop:
                query = queries[next(counter) % len(queries)]
                started = time.perf_counter()
                try:
                    status, after = await once(query)
                except (aiohttp.ClientError, TimeoutError):
                    status, after = 0, ""
                ms = (time.perf_counter() - started) * 1000
                statuses[status] += 1
                if status == 200:
                    latencies.append(ms)
                elif status == 429:
                    refused.append(ms)
                    retry_after.add(after)
                    if backoff and after:  # with jitter, or every refused client comes back at once
                        wait = float(after) * random.uniform(1.0, 1.5)
                        await asyncio.sleep(min(wait, max(stop - time.perf_counter(), 0)))

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        elapsed = time.perf_counter() - began
    return {
        "clients": clients,
        "seconds": round(elapsed, 1),
        "ok_per_s": round(len(latencies) / elapsed, 1),
        "latency_ms": percentiles(latencies),
        "errors": sum(n for s, n in statuses.items() if s not in (200, 429)),
        "status": {str(k): v for k, v in sorted(statuses.items())},
        "refused_429": {
            "n": len(refused),
            "latency_ms": percentiles(refused),
            "retry_after": sorted(retry_after),
        },
    }


def server_env(data_dir: Path, backend: str, max_inflight: int) -> dict[str, str]:
    return {
        "RAG_DATA_DIR": str(data_dir),
        "RAG_EMBEDDING__BACKEND": backend,
        "RAG_EMBEDDING__QUERY_CACHE": "0",  # unique-query load: every request is embedded
        "RAG_MAX_INFLIGHT": str(max_inflight),
        "RAG_LOG_LEVEL": "WARNING",
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--backend", default="onnx")
    parser.add_argument("--levels", default="1,8,32,64,128")
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--max-inflight", type=int, default=64)
    parser.add_argument("--soak", type=float, default=0, help="seconds of 64-client load while sampling RSS")
    parser.add_argument(
        "--profile", type=Path, help="also record the server with py-spy at 64 clients (speedscope file)"
    )
    parser.add_argument("--out", type=Path)
    parser.add_argument("--raw-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    queries = load_queries()
    if args.raw_only:  # the child process below
        print(json.dumps(raw_embedder(args.backend, queries)))
        return
    result: dict[str, Any] = {"machine": machine(), "command": " ".join(sys.argv), "queries": len(queries)}
    result["raw_embedder"] = raw_embedder_apart(args.data_dir, args.backend)
    env = server_env(args.data_dir, args.backend, args.max_inflight)
    with server(env, Path("/tmp/bench-load-server.log"), ready_s=180) as (url, proc):
        asyncio.run(drive(url, "/v1/search", 8, 5, queries))  # warm-up
        result["noop_64"] = asyncio.run(drive(url, "/healthz", 64, args.seconds, queries))
        levels = [int(x) for x in args.levels.split(",")]
        result["search"] = []
        for n in levels:
            before, client = thread_cpu(proc.pid), own_cpu()
            level = asyncio.run(drive(url, "/v1/search", n, args.seconds, queries))
            if n == 64:
                level["cpu_ms_per_request"] = cpu_per_request(
                    proc.pid, before, thread_cpu(proc.pid), own_cpu() - client, level["status"].get("200", 0)
                )
            result["search"].append(level)
        result["overload"] = asyncio.run(
            drive(url, "/v1/search", 4 * args.max_inflight, args.seconds, queries, backoff=True)
        )
        if args.profile:
            py_spy = str(Path(sys.executable).with_name("py-spy"))
            how = [
                "-d",
                str(int(args.seconds)),
                "-r",
                "100",
                "--threads",
                "--nonblocking",
                "-f",
                "speedscope",
            ]
            spy = subprocess.Popen(
                [py_spy, "record", "-p", str(proc.pid), *how, "-o", str(args.profile)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            result["profiled"] = asyncio.run(drive(url, "/v1/search", 64, args.seconds, queries))
            spy.wait(timeout=60)
        if args.soak:
            samples: list[float] = []

            async def soak() -> dict[str, Any]:
                task = asyncio.create_task(drive(url, "/v1/search", 64, args.soak, queries))
                while not task.done():
                    samples.append(round(rss_mb(proc.pid), 1))
                    await asyncio.sleep(10)
                return await task

            result["soak"] = {"run": asyncio.run(soak()), "rss_mb_every_10s": samples}
    by_clients = {r["clients"]: r for r in result["search"]}
    if 64 in by_clients:
        c64 = by_clients[64]
        result["ratios"] = {
            "search_64_over_raw_batched": round(c64["ok_per_s"] / result["raw_embedder"]["best_qps"], 3),
            "p99_over_p50_at_64": round(c64["latency_ms"]["p99"] / c64["latency_ms"]["p50"], 2),
            "overload_admitted_p99_over_64_p99": round(
                result["overload"]["latency_ms"]["p99"] / c64["latency_ms"]["p99"], 2
            ),
        }
    if 1 in by_clients:
        result["single_client_p50_minus_raw_single_ms"] = round(
            by_clients[1]["latency_ms"]["p50"] - result["raw_embedder"]["single_ms"]["p50"], 1
        )
    emit(result, args.out)


if __name__ == "__main__":
    main()
