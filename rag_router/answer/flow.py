"""Grounded answers, top to bottom: search → compile → generate → parse → cite; or extractive.

``Answerer.answer`` returns the whole response; ``Answerer.events`` yields it as a stream
(``route``, ``hits``, ``token``…, ``done``). Whatever the LLM does wrong — refuses to connect,
answers 429/503 past the budget, hangs, breaks the stream, truncates — the response is a 200
with the extractive answer and ``degraded: true``, never a partial answer presented as whole.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from indexers.text.lexical import Analyzer
from rag_router.answer.condense import Condenser
from rag_router.answer.decide import decide, declined, named_words
from rag_router.answer.evidence import SentenceFloor, SentenceScorer
from rag_router.answer.extractive import extractive_answer, sentences
from rag_router.answer.limit import limit, past_the_limit
from rag_router.answer.llm import Completion, LLMClient, LLMContextExceeded, LLMError, LLMTruncated
from rag_router.answer.parse import (
    Grounded,
    extractive_json,
    ground,
    hopeless_json,
    json_text,
    parse_citations,
    parse_json,
)
from rag_router.answer.prompting import (
    CompiledPrompt,
    Constraints,
    Source,
    compile_prompt,
    render,
)
from rag_router.answer.verify import supported
from rag_router.search.flow import Searcher, SearchOutcome, SearchParams
from rag_router.search.instructions import strip_instructions

log = logging.getLogger(__name__)

Mode = Literal["llm", "extractive"]
# Each source reaches the model as the sentence that shares most of the question's terms, the
# first LEAD_SOURCES sources with FOCUS_WINDOW sentences either side: on 2 cores llama.cpp reads
# ~120-210 prompt tokens/s, so the prompt is most of the time to first token, and the lower
# sources rarely need more than the sentence that matched (docs/benchmarks.md, "local model").
FOCUS_WINDOW = 1
LEAD_SOURCES = 1
# lines of the user template a model may echo (the system message's lines are taken as rendered)
_TEMPLATE_LINES = (
    "Reply with one JSON object and nothing else",
    "Put source numbers such as [1] inside the string values they support.",
)


@dataclass(frozen=True, slots=True)
class AnswerParams:
    search: SearchParams
    constraints: Constraints | None = None
    schema: dict[str, Any] | None = None
    sources: int = 5
    history: tuple[str, ...] = ()  # the conversation's earlier questions (answer.condense)


@dataclass(slots=True)
class AnswerOutcome:
    search: SearchOutcome
    mode: Mode
    answer: str | None = None
    answer_json: dict[str, Any] | None = None
    citations: list[dict[str, Any]] = field(default_factory=list)
    dropped_citations: list[int] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, int] | None = None
    llm_error: str | None = None
    trimmed: bool = False
    abstained: bool = False  # no hit cleared the relevance floor: the answer says nothing is stored
    notes: list[str] = field(default_factory=list)  # what the answer could not do as asked, and why

    @property
    def degraded(self) -> bool:
        return self.search.degraded or self.llm_error is not None


class Answerer:
    def __init__(
        self,
        *,
        searcher: Searcher,
        analyzer: Analyzer,
        count_tokens: Callable[[Sequence[str]], list[int]],
        llm: LLMClient | None,
        timeout_s: float,
        context_tokens: int,
        max_tokens: int = 512,
        source_tokens: int = 0,
        scorer: SentenceScorer | None = None,
        sentence_floor: SentenceFloor | None = None,
        condenser: Condenser | None = None,
    ) -> None:
        self._condenser = condenser  # rewrites a follow-up the rules left alone; None: no such step
        self._scorer = scorer  # sentence evidence (answer.evidence); None: the floor decides alone
        self._sentence_floor = sentence_floor or SentenceFloor()
        self._searcher = searcher
        self._analyzer = analyzer
        self._count = count_tokens
        self.llm = llm
        self._timeout = timeout_s
        self._context = context_tokens
        self._max_tokens = max_tokens
        self._source_tokens = source_tokens

    async def _prepare(
        self, params: AnswerParams
    ) -> tuple[AnswerParams, SearchOutcome, CompiledPrompt, float]:
        deadline = time.monotonic() + self._timeout  # one deadline: the search's share comes from it
        if self._condenser is not None:  # a follow-up the rules carried nothing to (answer.condense)
            params = replace(
                params, search=await self._condenser.rewrite(params.search, params.history, deadline)
            )
        outcome = await self._searcher.search(replace(params.search, deadline=deadline))
        await decide(outcome, params.search.query, self._scorer, self._sentence_floor, deadline)
        return params, outcome, self._compile(params, outcome), deadline

    def _compile(self, params: AnswerParams, outcome: SearchOutcome) -> CompiledPrompt:
        # only hits that cleared the relevance floor are sources: a hit that only a leg of weight
        # 0 returned (or that no leg scored high enough) is never quoted
        marks = outcome.relevance.marks if outcome.relevance else [True] * len(outcome.hits)
        relevant = [h for h, ok in zip(outcome.hits, marks, strict=True) if ok]
        sources = [
            Source(n, h.chunk_id, h.doc_id, h.chunk.title, self._focus(params.search.query, h.chunk.text, n))
            for n, h in enumerate(relevant[: params.sources], 1)
        ]
        features = outcome.route.features
        return compile_prompt(
            params.search.query,
            sources,
            constraints=params.constraints,
            domain=features.domain if features else None,
            count_tokens=self._count,
            context_tokens=self._context,
            schema=params.schema,
            default_max_tokens=self._max_tokens,
            source_tokens=self._source_tokens,
        )

    def _focus(self, question: str, text: str, n: int) -> str:
        """Source ``n`` cut to what the question needs, for the model (extractive answers quote the
        stored text in full)."""
        if self.llm is None:
            return text
        window = FOCUS_WINDOW if n <= LEAD_SOURCES else 0
        units = sentences(text)
        if len(units) <= 1 or (len(units) <= 2 * window + 1 and self._fits(text, window)):
            return text
        wanted = set(self._analyzer.query_terms(strip_instructions(question)))
        hits = [len(wanted.intersection(self._analyzer.terms(u))) for u in units]
        best = max(range(len(units)), key=hits.__getitem__)
        focused = " ".join(units[max(0, best - window) : best + window + 1])
        return focused if self._fits(focused, window) else units[best]

    def _fits(self, text: str, window: int) -> bool:
        """Whether a source's neighbours fit in the source budget: long Chinese sentences made the
        lead's three alone twice what a CPU model reads in its time to first token."""
        return not (window and self._source_tokens) or self._count([text])[0] <= self._source_tokens

    def _refit(self, params: AnswerParams, outcome: SearchOutcome, exc: LLMContextExceeded) -> CompiledPrompt:
        """The server's window is smaller than we were told (or its tokenizer counts more than ours):
        remember a window that fits, with room for the tokenizers to disagree, and compile again."""
        window = exc.n_ctx or self._context // 2
        if exc.n_prompt and exc.n_ctx and exc.n_prompt > exc.n_ctx:
            window = int(window * 0.85)
        self._context = max(256, min(self._context - 1, window))
        log.warning("the prompt was over the LLM's window; fitting sources to %d tokens", self._context)
        return self._compile(params, outcome)

    async def answer(self, params: AnswerParams) -> AnswerOutcome:
        params, outcome, prompt, deadline = await self._prepare(params)
        if _declines(outcome):
            return _abstain(outcome, prompt)
        if self.llm is None or not prompt.sources:
            return self._extractive(outcome, prompt, params.search.query, None)
        try:
            try:
                completion = await self.llm.complete(
                    prompt.messages, deadline=deadline, **_llm_params(prompt)
                )
            except LLMContextExceeded as exc:  # once: the refit prompt fits the window the server told
                prompt = self._refit(params, outcome, exc)
                if not prompt.sources:
                    raise
                completion = await self.llm.complete(
                    prompt.messages, deadline=deadline, **_llm_params(prompt)
                )
        except LLMTruncated as exc:
            if not past_the_limit(prompt, exc.partial):
                replaced = self._extractive(outcome, prompt, params.search.query, exc)
                return _spent(replaced, exc.spent) if exc.spent is not None else replaced
            completion = exc.spent or Completion(text=exc.partial, finish_reason="length")
        except LLMError as exc:
            return self._extractive(outcome, prompt, params.search.query, exc)
        done = await self._finish(outcome, prompt, completion, deadline, params.search.query)
        return _spent(done, completion)

    async def events(self, params: AnswerParams) -> AsyncIterator[tuple[str, Any]]:
        """(event, data) pairs: route, hits, token (repeated), done (an AnswerOutcome)."""
        params, outcome, prompt, deadline = await self._prepare(params)
        yield "route", outcome
        yield "hits", outcome
        if self.llm is None or not prompt.sources or _declines(outcome):
            result = (
                _abstain(outcome, prompt)
                if _declines(outcome)
                else self._extractive(outcome, prompt, params.search.query, None)
            )
            if result.answer:  # the same events as an LLM answer: the text, then done
                yield "token", result.answer
            yield "done", result
            return
        completion = Completion()
        try:
            for attempt in range(2):
                try:
                    async for delta in self.llm.stream(
                        prompt.messages, deadline=deadline, result=completion, **_llm_params(prompt)
                    ):
                        if prompt.constraints.format == "json" and hopeless_json(completion.text):
                            raise LLMError("the output is prose, not the JSON object asked for")
                        yield "token", delta
                    break
                except LLMContextExceeded as exc:  # raised before any token: safe to ask again
                    if attempt:
                        raise
                    prompt = self._refit(params, outcome, exc)
                    if not prompt.sources:
                        raise
                    completion = Completion()
        except LLMError as exc:
            if not (isinstance(exc, LLMTruncated) and past_the_limit(prompt, completion.text)):
                replaced = self._extractive(outcome, prompt, params.search.query, exc)
                yield "done", _spent(replaced, completion) if isinstance(exc, LLMTruncated) else replaced
                return
        done = await self._finish(outcome, prompt, completion, deadline, params.search.query)
        yield "done", _spent(done, completion)

    async def _finish(
        self,
        outcome: SearchOutcome,
        prompt: CompiledPrompt,
        completion: Completion,
        deadline: float,
        question: str,
    ) -> AnswerOutcome:
        result = AnswerOutcome(outcome, "llm", finish_reason=completion.finish_reason)
        text = completion.text.strip()
        if prompt.constraints.format == "json":
            parsed = parse_json(text, prompt.constraints.json_fields or ("answer",))
            if parsed.value is None and self.llm is not None:
                parsed = await self._self_repair(prompt, text, parsed.error or "", deadline)
            if parsed.value is None:
                log.info("JSON answer unparseable: %s", parsed.error)
                return self._extractive(
                    outcome, prompt, question, LLMError(f"unparseable JSON: {parsed.error}")
                )
            value = dict(parsed.value)
            if isinstance(value.get("answer"), str):  # the prose field; the others are data
                grounded = self._ground(prompt, value["answer"])
                value["answer"], note = supported(grounded.text, _stored(outcome, prompt))
                result.notes.extend([note] if note else [])
                if not value["answer"]:
                    return self._extractive(outcome, prompt, question, LLMError(note or ""))
            else:
                grounded = self._ground(prompt, json_text(value))
            if not grounded.grounded or not grounded.text:
                return self._ungrounded(outcome, prompt, question, grounded)
            result.answer_json = value
            text = json_text(value)
        else:
            grounded = self._ground(prompt, text)
            if not grounded.grounded or not grounded.text:
                return self._ungrounded(outcome, prompt, question, grounded)
            kept, note = supported(grounded.text, _stored(outcome, prompt))
            if not kept:
                return self._extractive(outcome, prompt, question, LLMError(note or ""))
            result.notes.extend([note] if note else [])
            text, result.trimmed = limit(kept, prompt.constraints, len(prompt.sources))
        if grounded.attributed:
            result.notes.append(
                f"{grounded.attributed} citation(s) attributed after generation by term overlap "
                "with the sources (the model did not write them)"
            )
        result.answer = text
        self._cite(result, prompt, text)
        return result

    def _ground(self, prompt: CompiledPrompt, text: str) -> Grounded:
        sources = [f"{s.title or ''} {s.text}" for s in prompt.sources]
        lines = [*prompt.messages[0]["content"].splitlines(), *_TEMPLATE_LINES]
        grounded = ground(text, sources, self._analyzer, lines)
        if grounded.leaked:
            log.warning("removed %d sentence(s) of prompt text from the answer", len(grounded.leaked))
        return grounded

    def _ungrounded(
        self, outcome: SearchOutcome, prompt: CompiledPrompt, question: str, grounded: Grounded
    ) -> AnswerOutcome:
        """No sentence of the model's answer is supported by a source: it is not shown as a
        grounded answer; the quoted sentences are, marked degraded, with the reason."""
        result = self._extractive(
            outcome,
            prompt,
            question,
            LLMError(f"no source supports the model's answer ({grounded.claims} claim(s), none cited)"),
        )
        return result

    async def _self_repair(self, prompt: CompiledPrompt, broken: str, error: str, deadline: float) -> Any:
        """At most one LLM call to fix a JSON answer the repairers could not."""
        assert self.llm is not None
        message = render("repair.j2", broken=broken, error=error, fields=list(prompt.constraints.json_fields))
        try:
            fixed = await self.llm.complete(
                [{"role": "user", "content": message}], deadline=deadline, **_llm_params(prompt)
            )
        except LLMError as exc:
            log.info("self-repair call failed: %s", exc)
            return parse_json("")
        return parse_json(fixed.text, prompt.constraints.json_fields or ("answer",))

    def _extractive(
        self, outcome: SearchOutcome, prompt: CompiledPrompt, question: str, error: Exception | None
    ) -> AnswerOutcome:
        if error is not None:
            log.warning("LLM answer failed, answering extractively: %s", error)
        stored = {h.chunk_id: h.chunk.text for h in outcome.hits}  # quoted as stored, not as cleaned
        sources = [replace(s, text=stored.get(s.chunk_id, s.text)) for s in prompt.sources]
        named = named_words(outcome, question) if outcome.asked[:1] == [True] else ()
        text = extractive_answer(
            question, sources, prompt.constraints, self._analyzer, outcome.evidence, named, outcome.lead
        )
        result = AnswerOutcome(outcome, "extractive", answer=text, llm_error=str(error) if error else None)
        if error is not None and self.llm is not None:  # degraded says that; this says why
            result.notes.append(f"the model's answer was replaced by quoted sentences: {error}")
        if prompt.constraints.format == "json" and sources:
            top = next(h for h in outcome.hits if h.chunk_id == sources[0].chunk_id)
            result.answer_json = extractive_json(text, prompt.constraints.json_fields, top.chunk.metadata)
            result.notes.append(
                "extractive answer (no LLM): answer_json holds the quoted sentences under 'answer' and "
                "other fields from the top source's metadata where it has them, else null"
            )
        self._cite(result, prompt, text)
        return result

    @staticmethod
    def _cite(result: AnswerOutcome, prompt: CompiledPrompt, text: str) -> None:
        cited = parse_citations(text, len(prompt.sources))
        by_n = {s.n: s for s in prompt.sources}
        result.citations = [
            {"n": n, "chunk_id": by_n[n].chunk_id, "doc_id": by_n[n].doc_id} for n in cited.numbers
        ]
        result.dropped_citations = cited.dropped


def _spent(done: AnswerOutcome, completion: Completion) -> AnswerOutcome:
    done.usage = completion.usage()  # the tokens were spent whether the answer was kept or replaced
    return done


def _stored(outcome: SearchOutcome, prompt: CompiledPrompt) -> list[str]:
    """Each source's stored text with its title: what a claim citing it must be found in."""
    stored = {h.chunk_id: h.chunk.text for h in outcome.hits}
    return [f"{s.title or ''}\n{stored.get(s.chunk_id, s.text)}" for s in prompt.sources]


def _declines(outcome: SearchOutcome) -> bool:
    return outcome.missing is not None or (outcome.relevance is not None and not outcome.relevance.any)


def _abstain(outcome: SearchOutcome, prompt: CompiledPrompt) -> AnswerOutcome:
    """Nothing relevant is stored: one sentence saying so in the question's language, no
    citations, no JSON; the route's reason says why (the best leg scores against the floor)."""
    if outcome.missing is None and outcome.relevance is not None:  # else the reason says what is missing
        outcome.reasons.append(outcome.relevance.reason())
    features = outcome.route.features
    language = prompt.constraints.language or (features.language if features else None)
    return AnswerOutcome(outcome, "extractive", answer=declined(outcome, language), abstained=True)


def _llm_params(prompt: CompiledPrompt) -> dict[str, Any]:
    return {"max_tokens": prompt.max_tokens, "response_format": prompt.response_format}
