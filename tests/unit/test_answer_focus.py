"""What each source shows the model: the lead source its best sentence with its neighbours, the
others their best sentence alone (the prompt is most of a CPU model's time to first token)."""

from __future__ import annotations

from typing import Any, cast

from indexers.text.lexical import Analyzer
from rag_router.answer.flow import Answerer

TEXT = (
    "Warsaw is the capital of Poland. It lies on the Vistula river. "
    "The city has about 1.8 million inhabitants. Its old town was rebuilt after the war. "
    "The Palace of Culture is its tallest building."
)


def answerer(llm: Any, source_tokens: int = 0) -> Answerer:
    return Answerer(
        searcher=cast(Any, None),
        analyzer=Analyzer(),
        count_tokens=lambda texts: [len(t.split()) for t in texts],
        llm=llm,
        timeout_s=5,
        context_tokens=2048,
        source_tokens=source_tokens,
    )


def test_lead_source_keeps_the_sentences_either_side_of_its_best() -> None:
    focused = answerer(object())._focus("How many inhabitants does the city have?", TEXT, 1)
    assert focused == (
        "It lies on the Vistula river. The city has about 1.8 million inhabitants. "
        "Its old town was rebuilt after the war."
    )


def test_lower_sources_give_their_best_sentence_alone() -> None:
    focused = answerer(object())._focus("How many inhabitants does the city have?", TEXT, 2)
    assert focused == "The city has about 1.8 million inhabitants."


def test_extractive_answers_see_the_whole_text() -> None:
    assert answerer(None)._focus("How many inhabitants?", TEXT, 2) == TEXT


def test_under_a_source_budget_the_lead_keeps_its_neighbours_only_if_they_fit() -> None:
    question = "How many inhabitants does the city have?"
    budgeted = answerer(object(), source_tokens=12)  # the three sentences are 21 words, the best one 7
    assert budgeted._focus(question, TEXT, 1) == "The city has about 1.8 million inhabitants."
    assert "Vistula" in answerer(object(), source_tokens=40)._focus(question, TEXT, 1)
    assert budgeted._focus("anything", "One sentence only.", 1) == "One sentence only."
    assert budgeted._focus("anything", "", 1) == ""
