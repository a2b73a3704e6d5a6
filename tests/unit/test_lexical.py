from __future__ import annotations

import pytest

from indexers.text.lexical import Analyzer, bm25_document_vector, bm25_query_vector, term_id


def test_english_is_stemmed_and_stopwords_dropped() -> None:
    a = Analyzer()
    assert a.terms("The running dogs were barking") == ["run", "dog", "bark"]
    assert a.query_terms("dogs dog DOGS cats") == ["dog", "cat"]


def test_chinese_runs_become_characters_and_overlapping_bigrams() -> None:
    assert Analyzer().terms("正当防卫") == ["正", "当", "防", "卫", "正当", "当防", "防卫"]
    assert Analyzer().terms("法") == ["法"]


def test_a_chinese_query_matches_a_document_without_a_dictionary() -> None:
    """Bigrams find words no dictionary segments the same way in query and text."""
    doc = set(Analyzer().terms("在道路上驾驶机动车，醉酒驾驶机动车的，处拘役"))
    query = Analyzer().query_terms("醉驾会被判什么刑")
    assert "醉" in doc and "驾驶" in doc and "醉驾" not in doc  # a query-only word is no match
    assert {"醉", "驾"} <= set(query) & doc


def test_mixed_script_and_numbers() -> None:
    assert Analyzer().terms("GDPR Article 17：删除权")[:3] == ["gdpr", "articl", "17"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("第20条", ["第", "20", "条"]),
        ("GDPR第17条", ["gdpr", "第", "17", "条"]),
        ("2019年至2021年", ["2019", "年", "至", "年至", "2021", "年"]),
        ("不超过50字回答", ["不", "超", "过", "不超", "超过", "50", "字", "回", "答", "字回", "回答"]),
    ],
)
def test_latin_letters_and_digits_never_run_into_ideographs(text: str, expected: list[str]) -> None:
    assert Analyzer(stem=False).terms(text) == expected


def test_bm25_weights_saturate_and_normalise_length() -> None:
    one = dict(zip(*bm25_document_vector(["gene"]), strict=True))
    three = dict(zip(*bm25_document_vector(["gene"] * 3), strict=True))
    ten = dict(zip(*bm25_document_vector(["gene"] * 10), strict=True))
    g = term_id("gene")
    assert one[g] < three[g] < ten[g] < 2.2  # k1 + 1 bounds the weight
    short = dict(zip(*bm25_document_vector(["gene", "x"]), strict=True))[g]
    long = dict(zip(*bm25_document_vector(["gene"] + ["x"] * 300), strict=True))[g]
    assert short > long


def test_query_vector_is_unit_weight_per_unique_term() -> None:
    indices, values = bm25_query_vector(["a", "b", "a"])
    assert sorted(indices) == sorted({term_id("a"), term_id("b")}) and values == [1.0, 1.0]
    assert term_id("gene") == term_id("gene") != term_id("genes")


@pytest.mark.parametrize("options", [{}, {"stem": False}, {"stopwords": False}])
def test_terms_from_the_memo_are_those_of_the_general_path(options: dict[str, bool]) -> None:
    """Text without ideographs (ASCII or not) takes its terms from a memo by word; text with
    them takes the general path, word by word in place."""
    import json
    from pathlib import Path

    texts = [
        str(json.loads(line).get("text", ""))
        for path in sorted((Path(__file__).resolve().parents[2] / "data").rglob("*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
    ]
    texts += ["The THE the's a_b x1 don't", "a" * 50 + " b", "", "the and of"]
    texts += ["Über naïve façades: İstanbul's ΣΊΣΥΦΟΣ, ﬁnal \u212aelvin, 5 µm, e\u0301te\u0301, the über"]
    texts += ["Die Straße; les élèves; los niños — " + "é" * 45 + " ok"]
    analyzer = Analyzer(**options)
    plain = [t for t in texts if not any("\u3400" <= ch <= "\u9fff" for ch in t)]
    assert sum(t.isascii() for t in plain) > 50 and sum(not t.isascii() for t in plain) >= 2
    for _ in range(2):  # the memo empty, then full
        for text in plain:
            # an ideograph sends the text down the general path; it adds its own term last
            assert analyzer.terms(text) == analyzer.terms(text + " 好")[:-1]
