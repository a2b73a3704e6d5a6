"""Wire models: strict requests (unknown fields are errors), responses as in API.md."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.config import JsonDict

from indexers.ingest.ledger import JobState
from indexers.records import KEYWORD_FIELDS, MAX_ID_CHARS, id_problem, parse_date
from rag_router.answer.flow import AnswerOutcome
from rag_router.answer.prompting import Constraints
from rag_router.search.flow import SearchOutcome


class Strict(BaseModel):
    """A request body: unknown fields refused, and no lax coercion (``0`` is not ``false``, ``true``
    is not ``1``): what the schema says is what is accepted."""

    model_config = ConfigDict(extra="forbid", strict=True)


# Documented in the schema (a JSON Schema pattern matches anywhere); checked by the validators
# below, whose message says what is wrong in words.
NOT_BLANK: JsonDict = {"pattern": r"\S"}
QUERY_MAX_CHARS = 4096


class SearchRequest(Strict):
    query: str = Field(
        ...,
        min_length=1,
        max_length=QUERY_MAX_CHARS,
        description="the question or keywords",
        json_schema_extra=NOT_BLANK,
    )
    top_k: int = Field(10, ge=1, le=100, description="hits to return")
    route: Literal["auto", "hot", "cold", "both"] = Field("auto", description="tiers to search")
    filters: dict[str, Any] | None = Field(
        None,
        description=(
            'e.g. {"year": {"gte": 2019}, "date": {"gte": "2020-01-01"}, "tags": ["a"], "doc_id": ["x"]}; '
            # from the one table of keyword fields, so the description cannot drop one (it had: amendment)
            f"metadata keys: {', '.join(sorted(KEYWORD_FIELDS))}"
        ),
    )
    legs: list[Literal["dense", "lexical"]] | None = Field(
        None, min_length=1, description="restrict retrieval to these legs (default: both)"
    )
    rerank: bool = Field(True, description="false: the fused order (skip the rerank stage)")

    @field_validator("query")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("query must not be empty or whitespace")
        return value


class LegOut(BaseModel):
    rank: int
    score: float


class HitOut(BaseModel):
    chunk_id: str
    doc_id: str
    title: str | None
    text: str
    score: float
    tier: Literal["hot", "cold"]
    metadata: dict[str, Any]
    legs: dict[str, LegOut]
    relevant: bool = Field(True, description="whether the hit cleared the relevance floor")


class MissingOut(BaseModel):  # a clause the question named that no stored chunk is: declined
    clause: str = Field(description="the clause as asked: 'Section 12', '第二十条'")
    law: str | None = Field(None, description="the document or law the question named, as asked")
    document: str | None = Field(None, description="the stored title that name matched")
    stored: bool = Field(False, description="whether a document of that name is stored at all")


class RouteOut(BaseModel):
    tiers: list[str]
    reason: str
    features: dict[str, Any]
    filters: dict[str, Any]
    missing: MissingOut | None = None


class SearchResponse(BaseModel):
    hits: list[HitOut]
    route: RouteOut
    timings_ms: dict[str, float]
    degraded: bool
    unavailable: list[str]
    request_id: str

    @classmethod
    def from_outcome(cls, outcome: SearchOutcome) -> SearchResponse:
        marks = outcome.relevance.marks if outcome.relevance else [True] * len(outcome.hits)
        hits = [
            HitOut(
                chunk_id=h.chunk_id,
                doc_id=h.doc_id,
                title=h.chunk.title,
                text=h.chunk.text,
                score=h.score,
                tier=h.tier,
                metadata=dict(h.chunk.metadata),
                legs={name: LegOut(rank=s.rank, score=s.score) for name, s in h.legs.items()},
                relevant=relevant,
            )
            for h, relevant in zip(outcome.hits, marks, strict=True)
        ]
        return cls(
            hits=hits,
            route=RouteOut(**outcome.route_json()),
            timings_ms={k: round(v, 3) for k, v in outcome.timings_ms.items()},
            degraded=outcome.degraded,
            unavailable=outcome.unavailable,
            request_id=outcome.request_id,
        )


class DocumentIn(Strict):
    id: str | None = Field(
        None, min_length=1, max_length=MAX_ID_CHARS, description="defaults to a content hash"
    )
    text: str = Field(..., description="the document's text (may be empty when the document has a title)")
    title: str | None = Field(None, max_length=2048)
    metadata: dict[str, Any] = Field(
        default_factory=dict, description='e.g. {"date": "2024-05-01", "tags": ["x"]}'
    )

    @field_validator("id")
    @classmethod
    def _addressable(cls, value: str | None) -> str | None:
        """The one id rule of every way in (``indexers.records.id_problem``)."""
        problem = None if value is None else id_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("metadata")
    @classmethod
    def _dates_are_dates(cls, value: dict[str, Any]) -> dict[str, Any]:
        """``date`` places a document hot or cold and filters it: a value that is no date would be
        read as undated (and placed hot) without a word."""
        date = value.get("date")
        if date not in (None, "") and parse_date(date) is None:
            raise ValueError(f"metadata.date must be an ISO date (YYYY-MM-DD), got {date!r}")
        return value

    @model_validator(mode="after")
    def _has_text(self) -> DocumentIn:
        """A title alone is searchable (it is embedded and indexed); a document with neither is nothing."""
        if not self.text.strip() and not (self.title or "").strip():
            raise ValueError("a document needs a text or a title")
        return self


class DocumentsRequest(Strict):
    documents: list[DocumentIn] = Field(..., min_length=1)
    tier: Literal["auto", "hot", "cold"] = "auto"


class DocumentResult(BaseModel):
    id: str
    status: Literal["created", "updated", "unchanged", "failed"]
    chunks: int
    tier: str | None
    error: str | None = None


class DocumentsResponse(BaseModel):
    results: list[DocumentResult]


class JobCreated(BaseModel):
    job_id: str


class JobError(BaseModel):
    id: str
    error: str


class JobOut(BaseModel):
    job_id: str
    status: Literal["queued", "running", "cancelling", "done", "failed", "cancelled"] = Field(
        description="cancelling: a cancel was asked for while it ran; it stops after the batch in flight"
    )
    total: int = Field(description="documents in the job (unique ids)")
    done: int = Field(description="documents durably written (or found unchanged)")
    failed: int
    errors: list[JobError] = Field(description="the first failures, with reasons")
    chunks_per_s: float
    eta_s: float | None = Field(description="seconds left at the rate so far; null before the first batch")
    created_at: float
    updated_at: float
    created: int = Field(0, description="documents new to the index")
    updated: int = Field(0, description="documents whose text or metadata changed")
    unchanged: int = Field(0, description="documents skipped: stored already, byte for byte")
    chunks: int = Field(0, description="chunks written so far")
    seconds: float = Field(0.0, description="time spent writing so far")

    @classmethod
    def of(cls, state: JobState) -> JobOut:
        return cls(
            job_id=state.id,
            status="cancelling" if state.status == "running" and state.cancel else state.status,
            total=state.total,
            done=state.done,
            failed=state.failed,
            errors=[JobError(**e) for e in state.errors],
            chunks_per_s=round(state.chunks_per_s, 2),
            eta_s=None if state.eta_s is None else round(state.eta_s, 1),
            created_at=state.created,
            updated_at=state.updated,
            created=state.created_docs,
            updated=state.updated_docs,
            unchanged=state.unchanged_docs,
            chunks=state.chunks,
            seconds=round(state.seconds, 3),
        )


class JobsOut(BaseModel):
    jobs: list[JobOut]


class FileResult(BaseModel):
    name: str
    documents: int = Field(description="documents read from the file")
    error: str | None = Field(None, description="why the file, or some of its records, could not be read")
    failures: list[JobError] = Field(
        default_factory=list,
        description="each record or file that could not be read: where (`name` or `name:line`) and why",
    )


class FilesAccepted(BaseModel):
    job_id: str
    files: list[FileResult]


class ChunkOut(BaseModel):
    chunk_id: str
    tier: Literal["hot", "cold"]
    text: str
    metadata: dict[str, Any] = Field(default_factory=dict, description="article, section, page, char_start")


class DocumentOut(BaseModel):
    id: str
    title: str | None
    text: str | None = Field(
        None, description="the stored text, byte for byte (ends trimmed); null for chunks of an older version"
    )
    metadata: dict[str, Any]
    tiers: list[str]
    chunks: list[ChunkOut]


class DocumentListed(BaseModel):
    id: str = Field(..., description="the document id (the list is ordered by it, in code-point order)")
    title: str | None = Field(None, description="the document's title, if it has one")
    tiers: list[Literal["hot", "cold"]] = Field(
        ..., description='where its chunks are; both while a retier moves it ("hot", "cold")'
    )
    chunks: int = Field(..., description="its stored chunks (in the tier that holds the most)")
    date: str | None = Field(None, description="its `date` metadata as YYYY-MM-DD, if it has one")
    source: str | None = Field(None, description="its `source` metadata, if it has one")
    metadata: dict[str, Any] = Field(default_factory=dict, description="the user's metadata, as ingested")


class DocumentList(BaseModel):
    documents: list[DocumentListed] = Field(..., description="at most `limit` documents, by id")
    next_cursor: str | None = Field(
        None, description="pass as `cursor` for the next page; null on the last page"
    )
    total: int = Field(
        ...,
        description=(
            "documents matching the filters, on every page; a document a retier is moving at that "
            "moment (in both tiers) counts twice"
        ),
    )


class ErrorBody(BaseModel):
    code: str
    message: str
    type: str
    request_id: str
    failures: list[dict[str, str]] | None = Field(
        None, description='an upload none of whose files could be read: one {"id", "error"} per file'
    )


class ErrorEnvelope(BaseModel):
    error: ErrorBody


# /v1/answer ------------------------------------------------------------------------------------


class ConstraintsIn(Strict):
    max_words: int | None = Field(None, ge=1, le=5000)
    max_chars: int | None = Field(None, ge=1, le=20000)
    max_sentences: int | None = Field(None, ge=1, le=200)
    format: Literal["text", "bullets", "json"] | None = None
    json_schema: dict[str, Any] | None = Field(None, description="JSON schema for vLLM guided decoding")
    language: str | None = Field(None, max_length=8)

    def domain(self) -> Constraints:
        fields = tuple((self.json_schema or {}).get("properties", {}))
        return Constraints(
            max_words=self.max_words,
            max_chars=self.max_chars,
            max_sentences=self.max_sentences,
            format=self.format or ("json" if self.json_schema else "text"),
            json_fields=fields,
            language=self.language,
        )


MAX_HISTORY = 20  # earlier questions a follow-up may lean on


class AnswerRequest(SearchRequest):
    top_k: int = Field(5, ge=1, le=100, description="hits to return (and the sources the model sees)")
    stream: bool = False
    constraints: ConstraintsIn | None = None
    history: list[Annotated[str, Field(max_length=QUERY_MAX_CHARS)]] = Field(
        default_factory=list,
        max_length=MAX_HISTORY,
        description="the conversation's earlier questions, oldest first: a follow-up that names no "
        "subject of its own ('And Article 18?', '那第七条呢？') takes it from them "
        "(route.features.carried says what was carried)",
    )


class Citation(BaseModel):
    n: int
    chunk_id: str
    doc_id: str


class AnswerResponse(SearchResponse):
    answer: str | None
    answer_json: dict[str, Any] | None
    citations: list[Citation]
    mode: Literal["llm", "extractive"]
    finish_reason: str | None
    usage: dict[str, int] | None
    notes: list[str] = Field(default_factory=list, description="what could not be done as asked, and why")
    abstained: bool = Field(
        False, description="no hit cleared the relevance floor: nothing relevant is stored"
    )

    @classmethod
    def from_answer(cls, result: AnswerOutcome) -> AnswerResponse:
        search = SearchResponse.from_outcome(result.search)
        return cls(
            **search.model_dump(exclude={"degraded"}),
            degraded=result.degraded,
            answer=result.answer,
            answer_json=result.answer_json,
            citations=[Citation(**c) for c in result.citations],
            mode=result.mode,
            finish_reason=result.finish_reason,
            usage=result.usage,
            notes=result.notes,
            abstained=result.abstained,
        )


# /v1/retier ------------------------------------------------------------------------------------


class RetierRequest(Strict):
    dry_run: bool = Field(False, description="only count what would move")


class RetierOut(BaseModel):
    aged: int = Field(description="documents past the hot window")
    moved: int
    chunks: int = Field(description="chunks moved to the cold tier")
    errors: list[str]
    dry_run: bool
