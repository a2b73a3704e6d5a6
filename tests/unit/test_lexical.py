from __future__ import annotations

from indexers.lexical import Analyzer, bm25_document_vector, bm25_query_vector, term_id


def test_english_is_stemmed_and_stopwords_dropped() -> None:
    a = Analyzer()
    assert a.terms("The running dogs were barking") == ["run", "dog", "bark"]
    assert a.query_terms("dogs dog DOGS cats") == ["dog", "cat"]


def test_chinese_is_segmented_into_words() -> None:
    terms = Analyzer().terms("个人数据保护条例")
    assert len(terms) >= 2 and "".join(terms) == "个人数据保护条例"


def test_mixed_script_and_numbers() -> None:
    assert Analyzer().terms("GDPR Article 17：删除权")[:3] == ["gdpr", "articl", "17"]


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
