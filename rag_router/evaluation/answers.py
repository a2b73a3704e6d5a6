"""Answer quality on a set with ``answers.jsonl`` (BEIR layout plus judged answers): every question
through the answer flow, scored exactly as ``shared/tools/answers_eval.py`` scores the HTTP API.

``answers.jsonl`` rows: ``{"query_id", "kind": "answerable"|"out_of_corpus"|"unanswerable",
"doc_id", "answers": [gold spans]}``. An answer holds the gold when a normalised gold span is inside
the normalised answer (SQuAD normalisation; for Chinese, punctuation and spaces removed); it
abstains when it has no citations (or says so). Figures:

- ``gold@answer``: answerable questions whose answer holds a gold span
- ``gold@lead``: ... before its first citation mark (the first claim)
- ``cite@gold``: answerable questions whose first citation is the gold document
- ``false_abst``: answerable questions declined; ``abst@ooc``: out-of-corpus questions declined
  (the right response); ``abst@unans``: SQuAD 2.0 unanswerable questions declined (reported only)
- ``median_chars``: the median length of the answers given to answerable questions
"""

from __future__ import annotations

import json
import re
import string
import time
import unicodedata
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from indexers.records import DEFAULT_TENANT
from indexers.tiers.query import Filters
from rag_router.answer.flow import Answerer, AnswerOutcome, AnswerParams
from rag_router.search.flow import SearchParams

ANSWER_KEYS = (
    "gold@answer",
    "gold@lead",
    "cite@gold",
    "abst@ooc",
    "false_abst",
    "abst@unans",
    "median_chars",
    "latency_ms_p50",
    "queries",
)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_CITATION = re.compile(r"\[\d+\]")
_IDEOGRAPH = re.compile(r"[\u4e00-\u9fff]")


@dataclass(frozen=True, slots=True)
class Judged:
    query_id: str
    text: str
    kind: str
    doc_id: str | None
    answers: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Given:
    """What the service answered: the text, the cited documents in order, whether it declined."""

    answer: str
    cited_docs: tuple[str, ...]
    abstained: bool


def is_answer_set(path: Path) -> bool:
    return (path / "answers.jsonl").is_file()


def load_answer_set(path: Path) -> list[Judged]:
    """The judged questions, in the file's order (queries.jsonl gives their text)."""
    texts: dict[str, str] = {}
    with (path / "queries.jsonl").open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                record = json.loads(line)
                texts[record["_id"]] = record["text"]
    judged = []
    with (path / "answers.jsonl").open(encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            row = json.loads(line)
            if row["query_id"] not in texts:
                raise ValueError(f"answers.jsonl names query {row['query_id']!r}, not in queries.jsonl")
            judged.append(
                Judged(
                    row["query_id"],
                    texts[row["query_id"]],
                    row["kind"],
                    row.get("doc_id"),
                    tuple(row.get("answers") or ()),
                )
            )
    return judged


def norm(text: str) -> str:
    """SQuAD's answer normalisation; Chinese text loses its punctuation and spaces instead."""
    text = unicodedata.normalize("NFKC", text).lower()
    if _IDEOGRAPH.search(text):
        return "".join(ch for ch in text if not (ch.isspace() or unicodedata.category(ch).startswith("P")))
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    return " ".join(_ARTICLES.sub(" ", text).split())


def given(outcome: AnswerOutcome) -> Given:
    docs = tuple(str(c["doc_id"]) for c in outcome.citations)
    return Given(outcome.answer or "", docs, outcome.abstained or not docs)


def score(rows: Sequence[tuple[Judged, Given]]) -> dict[str, Any]:
    """The figures over ``rows`` (module docstring), and the same per answer kind."""
    report = _figures(rows)
    kinds = sorted({j.kind for j, _ in rows})
    report["by_kind"] = {kind: _figures([r for r in rows if r[0].kind == kind]) for kind in kinds}
    return report


def _figures(rows: Iterable[tuple[Judged, Given]]) -> dict[str, Any]:
    stats: dict[str, list[bool]] = {k: [] for k in ("gold", "lead", "cite", "false", "ooc", "unans")}
    lengths: list[int] = []
    count = 0
    for judged, got in rows:
        count += 1
        if judged.kind == "answerable":
            golds = [norm(g) for g in judged.answers if norm(g)]
            answer = norm(got.answer)
            lead = norm(_CITATION.split(got.answer, maxsplit=1)[0])
            stats["gold"].append(any(g in answer for g in golds))
            stats["lead"].append(any(g in lead for g in golds))
            stats["cite"].append(bool(got.cited_docs) and got.cited_docs[0] == judged.doc_id)
            stats["false"].append(got.abstained)
            if not got.abstained:
                lengths.append(len(got.answer))
        elif judged.kind == "out_of_corpus":
            stats["ooc"].append(got.abstained)
        else:
            stats["unans"].append(got.abstained)

    def rate(name: str) -> float | None:
        values = stats[name]
        return sum(values) / len(values) if values else None

    return {
        "gold@answer": rate("gold"),
        "gold@lead": rate("lead"),
        "cite@gold": rate("cite"),
        "abst@ooc": rate("ooc"),
        "false_abst": rate("false"),
        "abst@unans": rate("unans"),
        "median_chars": sorted(lengths)[len(lengths) // 2] if lengths else None,
        "queries": count,
    }


Ask = Callable[[Judged], Awaitable[AnswerOutcome]]


def asker(answerer: Answerer, *, top_k: int = 5, sources: int = 5) -> Ask:
    """Each question as ``POST /v1/answer`` with its defaults asks it (no constraints, route auto)."""

    async def ask(judged: Judged) -> AnswerOutcome:
        search = SearchParams(query=judged.text, top_k=top_k, filters=Filters(DEFAULT_TENANT))
        return await answerer.answer(AnswerParams(search=search, sources=min(top_k, sources)))

    return ask


async def run_answers(
    ask: Ask,
    judged: Sequence[Judged],
    *,
    on_answer: Callable[[Judged, AnswerOutcome], None] | None = None,
) -> dict[str, Any]:
    """Ask every question, score the answers; ``on_answer`` sees each outcome (benchmarks)."""
    rows: list[tuple[Judged, Given]] = []
    latencies: list[float] = []
    for question in judged:
        started = time.perf_counter()
        outcome = await ask(question)
        latencies.append((time.perf_counter() - started) * 1000)
        rows.append((question, given(outcome)))
        if on_answer is not None:
            on_answer(question, outcome)
    report = score(rows)
    latencies.sort()
    report["latency_ms_p50"] = latencies[len(latencies) // 2] if latencies else 0.0
    report["examples"] = _examples(rows)
    return report


def _examples(rows: Sequence[tuple[Judged, Given]], limit: int = 5) -> list[dict[str, str]]:
    """A few misses to read: answerable questions without their gold, out-of-corpus ones answered."""
    out: list[dict[str, str]] = []
    for judged, got in rows:
        missed = judged.kind == "answerable" and not any(
            norm(g) and norm(g) in norm(got.answer) for g in judged.answers
        )
        wrongly = judged.kind == "out_of_corpus" and not got.abstained
        if (missed or wrongly) and len(out) < limit:
            out.append({"kind": judged.kind, "query": judged.text, "answer": got.answer[:200]})
    return out


def table_rows(report: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(figure, value) pairs for a console table: the headline figures, then per kind."""
    rows = [(key, _fmt(report.get(key))) for key in ANSWER_KEYS]
    for kind, figures in report.get("by_kind", {}).items():
        shown = [f"{k} {_fmt(v)}" for k, v in figures.items() if v is not None and k != "queries"]
        rows.append((f"{kind} ({figures['queries']})", ", ".join(shown)))
    return rows


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.4f}" if isinstance(value, float) else str(value)
