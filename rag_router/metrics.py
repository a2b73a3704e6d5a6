"""Prometheus metrics, on a registry owned by the app (no global state)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from indexers.ingest.results import DocResult

_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "rag_http_requests",
            "HTTP requests by route and status",
            ["route", "status"],
            registry=self.registry,
        )
        self.request_seconds = Histogram(
            "rag_http_request_seconds",
            "HTTP request latency",
            ["route"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.stage_seconds = Histogram(
            "rag_stage_seconds",
            "latency of each query stage",
            ["stage"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.route_decisions = Counter(
            "rag_route_decisions",
            "queries by the tiers they were routed to",
            ["tiers"],
            registry=self.registry,
        )
        self.tier_failures = Counter(
            "rag_tier_failures", "searches a tier failed to answer", ["tier"], registry=self.registry
        )
        self.ingested = Counter(
            "rag_ingested_documents", "documents ingested by outcome", ["status"], registry=self.registry
        )
        self.ingested_chunks = Counter("rag_ingested_chunks", "chunks written", registry=self.registry)
        self.rejected = Counter(
            "rag_rejected_requests", "requests refused by admission control", registry=self.registry
        )
        self._answer_metrics()
        self._query_lane_metrics()

    def _answer_metrics(self) -> None:
        self.llm_ttft = Histogram(
            "rag_llm_ttft_seconds", "time to the first answer token", buckets=_BUCKETS, registry=self.registry
        )
        self.llm_tpot = Histogram(
            "rag_llm_tpot_seconds",
            "time per output token after the first",
            buckets=(0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32),
            registry=self.registry,
        )
        self.llm_tokens = Counter("rag_llm_tokens", "LLM tokens by kind", ["kind"], registry=self.registry)
        self.answers = Counter(
            "rag_answers", "answers by mode and outcome", ["mode", "degraded"], registry=self.registry
        )

    def _query_lane_metrics(self) -> None:
        self.query_batch = Histogram(
            "rag_query_batch_size",
            "queries per embedder forward pass",
            buckets=(1, 2, 4, 8, 16, 32, 64),
            registry=self.registry,
        )
        self.query_wait = Histogram(
            "rag_query_batch_wait_seconds",
            "time a query waited for its forward pass",
            buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25),
            registry=self.registry,
        )

    def observe_query_batch(self, size: int, waits: Sequence[float]) -> None:
        self.query_batch.observe(size)
        for wait in waits:
            self.query_wait.observe(wait)

    def observe_llm(
        self, *, ttft_s: float | None, tpot_s: float | None, prompt: int, completion: int
    ) -> None:
        if ttft_s is not None:
            self.llm_ttft.observe(ttft_s)
        if tpot_s is not None:
            self.llm_tpot.observe(tpot_s)
        self.llm_tokens.labels(kind="prompt").inc(prompt)
        self.llm_tokens.labels(kind="completion").inc(completion)

    def count_ingest(self, results: Sequence[DocResult], chunks: int) -> None:
        """One batch of the pipeline (from /v1/documents or a job)."""
        self.ingested_chunks.inc(chunks)
        for r in results:
            self.ingested.labels(status=r.status).inc()

    def observe_search(
        self, tiers: Sequence[str], timings_ms: Mapping[str, float], unavailable: Sequence[str]
    ) -> None:
        self.route_decisions.labels(tiers="+".join(tiers)).inc()
        for stage, ms in timings_ms.items():
            self.stage_seconds.labels(stage=stage).observe(ms / 1000)
        for tier in unavailable:
            self.tier_failures.labels(tier=tier).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
