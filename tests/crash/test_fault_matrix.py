"""The fault matrix: each engine made down, slow past its deadline, or hung — one at a time and
two at once — under a real server process, during search, answer, ingest and retier.

The hot and cold tiers and the embedder lane get their faults from the server's failpoints
(``RAG_FAULTS_FILE``, rag_router/faults.py); the LLM's come over its wire from the scripted
OpenAI-compatible server (tests/fakes/vllm.py): a dropped connection, tokens too slow for the
deadline, a stream that stops. Each cell records the status, the latency and a data check; the
table is written to the run's folder (and to docs/fault-matrix.md with RAG_WRITE_FAULT_MATRIX=1).

What must hold in every cell: no 500 and no request left hanging; a search or an answer answers
(degraded) while one tier and the lexical leg can, and 503 only when no tier can; a write is
acknowledged only when stored (checked after the faults are gone); nothing acknowledged is lost
and nothing is stored twice.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.crash.test_sigkill import free_port, server
from tests.fakes.vllm import ScriptedLLM, Step, serve, words

pytestmark = pytest.mark.slow

DEADLINE_S = 1.5  # RAG_RETRIEVAL__TIMEOUT_S
BATCH_S = 2.0  # RAG_INGEST__BATCH_TIMEOUT_S
LLM_S = 3.0  # RAG_LLM__TIMEOUT_S (the answer's whole deadline)
SLOW_S = 4.0  # "slow": past every deadline above
ENGINES = ("hot", "cold", "embedder", "llm")
MODES = ("down", "slow", "hang")
PAIRS = [
    {"hot": "down", "cold": "down"},
    {"hot": "down", "embedder": "down"},
    {"cold": "hang", "llm": "down"},
    {"hot": "slow", "embedder": "slow"},
]
SCENARIOS = [{e: m} for e in ENGINES for m in MODES] + PAIRS
OPERATIONS = ("search", "answer", "ingest", "retier")
QUERY = "Which rule covers cargo insurance for river pilots?"


def text(doc_id: str) -> str:
    return f"Rule {doc_id}: cargo insurance for river pilots is the carrier's duty, ledger {doc_id}. " * 2


@dataclass
class Cell:
    scenario: str
    operation: str
    status: str
    latency_s: float
    check: str


class Harness:
    def __init__(self, client: httpx.Client, faults: Path, llm: ScriptedLLM) -> None:
        self.client, self.faults, self.llm = client, faults, llm
        self.acked: dict[str, str] = {}  # doc id → text, acknowledged by a 200
        self.aged: list[str] = []  # placed hot with an old date: retier moves them
        self.n = 0

    def set_faults(self, scenario: dict[str, str]) -> None:
        plan = {e: {"mode": m, "seconds": SLOW_S} for e, m in scenario.items() if e != "llm"}
        self.faults.write_text(json.dumps(plan), encoding="utf-8")
        mode = scenario.get("llm")
        step = Step(words("River pilots insure cargo [1]."))
        if mode == "down":  # the connection drops before the first token, every time
            step = Step(words("River pilots"), reset_after=0)
        elif mode == "slow":
            step = Step(words("River pilots insure cargo [1]."), delay_s=SLOW_S)
        elif mode == "hang":
            step = Step(words("River"), hang_after=0)
        self.llm.play(step)

    def docs(self, prefix: str, dated: str | None) -> list[dict[str, Any]]:
        self.n += 1
        ids = [f"{prefix}-{self.n}-a", f"{prefix}-{self.n}-b"]
        return [{"id": i, "text": text(i), **({"metadata": {"date": dated}} if dated else {})} for i in ids]

    def run(self, operation: str) -> tuple[httpx.Response | None, float, list[dict[str, Any]]]:
        sent: list[dict[str, Any]] = []
        began = time.perf_counter()
        try:
            if operation == "search":
                r = self.client.post("/v1/search", json={"query": QUERY, "route": "both"})
            elif operation == "answer":
                r = self.client.post("/v1/answer", json={"query": QUERY, "route": "both"})
            elif operation == "ingest":  # one document for each tier
                sent = self.docs("new", None)[:1] + self.docs("old", "2001-05-01")[:1]
                r = self.client.post("/v1/documents", json={"documents": sent})
            else:
                r = self.client.post("/v1/retier", json={})
        except httpx.TimeoutException:
            r = None
        return r, time.perf_counter() - began, sent

    def prepare_retier(self) -> None:
        """Two documents past the hot window, placed hot (fault-free), for retier to move."""
        batch = self.docs("aged", "2001-05-01")
        r = self.client.post("/v1/documents", json={"documents": batch, "tier": "hot"})
        assert r.status_code == 200, r.text
        self.acked.update({d["id"]: d["text"] for d in batch})
        self.aged += [d["id"] for d in batch]

    def verify(self) -> str:
        """With the faults gone: every acknowledged document once, byte for byte, in one tier
        (a document mid-retier may be in both until the next retier; ``final`` checks that)."""
        for doc_id, want in self.acked.items():
            r = self.client.get(f"/v1/documents/{doc_id}")
            assert r.status_code == 200, (doc_id, r.text)
            got = r.json()
            assert got["text"] == want, (doc_id, got["text"][:200])
            ids = [c["chunk_id"] for c in got["chunks"]]
            per_tier = {
                t: [i for c, i in zip(got["chunks"], ids, strict=True) if c["tier"] == t]
                for t in got["tiers"]
            }
            assert all(len(v) == len(set(v)) for v in per_tier.values()), per_tier
        return f"{len(self.acked)} acked docs intact"


def expected(scenario: dict[str, str], operation: str) -> set[int]:
    tiers_down = {t for t in ("hot", "cold") if t in scenario}
    if operation in ("search", "answer"):
        return {503} if tiers_down == {"hot", "cold"} else {200}
    if operation == "ingest":
        return {503} if tiers_down or "embedder" in scenario else {200}
    return {200, 503}  # retier: done, or its errors reported; the data check says the rest


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    root = tmp_path_factory.mktemp("faults")
    faults = root / "faults.json"
    faults.write_text("{}", encoding="utf-8")
    llm = ScriptedLLM()
    with serve(llm.app) as llm_url:
        env = {
            "RAG_FAULTS_FILE": str(faults),
            "RAG_RETRIEVAL__TIMEOUT_S": str(DEADLINE_S),
            "RAG_INGEST__BATCH_TIMEOUT_S": str(BATCH_S),
            "RAG_LLM__BASE_URL": f"{llm_url}/v1",
            "RAG_LLM__TIMEOUT_S": str(LLM_S),
            "RAG_LLM__MAX_RETRIES": "1",
            "RAG_TIERS__HOT_WINDOW_DAYS": "365",
        }
        with server(root / "data", free_port(), **env) as proc:
            port = json.loads((root / "data" / "serve.json").read_text())["url"].rsplit(":", 1)[1]
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
                h = Harness(client, faults, llm)
                base = h.docs("base", None) + h.docs("base", "2003-02-01")
                assert client.post("/v1/documents", json={"documents": base}).status_code == 200
                h.acked.update({d["id"]: d["text"] for d in base})
                yield h
            assert proc.poll() is None


def test_the_fault_matrix(harness: Harness, tmp_path: Path) -> None:
    h = harness
    cells: list[Cell] = []
    for scenario in SCENARIOS:
        name = " + ".join(f"{e} {m}" for e, m in scenario.items())
        for operation in OPERATIONS:
            h.set_faults({})
            if operation == "retier":
                h.prepare_retier()
            h.set_faults(scenario)
            r, latency, sent = h.run(operation)
            h.set_faults({})
            status = "client timeout (30 s)" if r is None else str(r.status_code)
            note = ""
            if r is not None and r.status_code == 200 and operation in ("search", "answer"):
                body = r.json()
                note = f"{len(body['hits'])} hits, degraded={str(body.get('degraded')).lower()}"
                if operation == "answer":
                    note += f", mode={body.get('mode')}" + "".join(
                        f" ({n})" for n in body.get("notes", [])[:1]
                    )
            if r is not None and r.status_code == 200 and operation == "ingest":
                h.acked.update({d["id"]: d["text"] for d in sent})
            if r is not None and r.status_code >= 400:
                note = r.json()["error"]["code"]
            check = h.verify()
            cells.append(Cell(name, operation, status, latency, f"{note}; {check}".strip("; ")))
            assert r is not None, (name, operation, "no answer within 30 s")
            assert r.status_code in expected(scenario, operation), (
                name,
                operation,
                r.status_code,
                r.text[:300],
            )
            if r.status_code >= 400:
                assert set(r.json()) == {"error"}, r.text
            elif operation in ("search", "answer"):  # the tier that answered kept its hits
                assert r.json()["hits"], (name, operation, r.text[:300])
    # the faults gone: one more retier moves every aged document, each then in cold only, once
    assert h.client.post("/v1/retier", json={}).status_code == 200
    for doc_id in h.aged:
        assert h.client.get(f"/v1/documents/{doc_id}").json()["tiers"] == ["cold"], doc_id
    h.verify()
    table = render(cells)
    (tmp_path / "fault-matrix.md").write_text(table, encoding="utf-8")
    print(table)
    if os.environ.get("RAG_WRITE_FAULT_MATRIX"):
        (Path(__file__).resolve().parents[2] / "docs" / "fault-matrix.md").write_text(table, encoding="utf-8")


def render(cells: list[Cell]) -> str:
    lines = [
        "# Fault matrix",
        "",
        "Generated by `RAG_WRITE_FAULT_MATRIX=1 pytest tests/crash/test_fault_matrix.py` against a real",
        f"server process: search deadline {DEADLINE_S} s, ingest batch deadline {BATCH_S} s, answer deadline",
        f'{LLM_S} s; "slow" waits {SLOW_S} s, "hang" never returns. Latency is what the client saw on the',
        "machine that ran it (not asserted). The data check runs after each cell with the faults gone.",
        "",
        "| fault | operation | status | latency | result; data check |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {c.scenario} | {c.operation} | {c.status} | {c.latency_s:.2f} s | {c.check} |" for c in cells
    ]
    return "\n".join(lines) + "\n"
