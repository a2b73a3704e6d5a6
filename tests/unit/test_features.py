"""Query features against a table of real phrasings (tests/data/features.yaml).

Prints precision and recall per feature kind; each must reach 0.98. A case lists everything
extract() must find; whatever else it finds counts as a false positive (the near-misses).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from indexers.text.structure import chinese_number
from rag_router.search.features import QueryFeatures, extract

TABLE = yaml.safe_load(
    (Path(__file__).resolve().parents[1] / "data" / "features.yaml").read_text(encoding="utf-8")
)
TODAY: dt.date = TABLE["today"]
KINDS = ("years", "range", "clauses", "ids", "quoted", "recency")


def found(f: QueryFeatures) -> dict[str, list[Any]]:
    r = f.date_range
    return {
        "years": list(f.years),
        "range": []
        if r is None
        else [(r.gte.isoformat() if r.gte else None, r.lte.isoformat() if r.lte else None)],
        "clauses": [tuple(c.path) for c in f.clauses],
        "ids": [text for text, _ in f.identifiers],
        "quoted": [text for text, _ in f.quoted],
        "recency": [True] if f.recency else [],
    }


def expected(case: dict[str, Any]) -> dict[str, list[Any]]:
    return {
        "years": list(case.get("years", [])),
        "range": [tuple(case["range"])] if case.get("range") else [],
        "clauses": [tuple(p) for p in case.get("clauses", [])],
        "ids": list(case.get("ids", [])),
        "quoted": list(case.get("quoted", [])),
        "recency": [True] if case.get("recency") else [],
    }


def scores() -> tuple[dict[str, tuple[float, float]], list[str]]:
    tp, fp, fn = Counter[str](), Counter[str](), Counter[str]()
    misses = []
    for case in TABLE["cases"]:
        got, want = found(extract(case["q"], today=TODAY)), expected(case)
        for kind in KINDS:
            g, w = Counter(got[kind]), Counter(want[kind])
            tp[kind] += sum((g & w).values())
            fp[kind] += sum((g - w).values())
            fn[kind] += sum((w - g).values())
            if g != w:
                misses.append(f"{kind}: {case['q']!r} got {got[kind]} want {want[kind]}")
    out = {}
    for kind in KINDS:
        p = tp[kind] / (tp[kind] + fp[kind]) if tp[kind] + fp[kind] else 1.0
        r = tp[kind] / (tp[kind] + fn[kind]) if tp[kind] + fn[kind] else 1.0
        out[kind] = (p, r)
    return out, misses


def test_table_is_large_and_bilingual() -> None:
    cases = TABLE["cases"]
    assert len(cases) >= 150
    assert sum(1 for c in cases if c.get("lang") == "zh") >= 40


def test_precision_and_recall_per_feature_kind(capsys: pytest.CaptureFixture[str]) -> None:
    result, misses = scores()
    with capsys.disabled():
        print("\nfeature      precision  recall")
        for kind, (p, r) in result.items():
            print(f"{kind:<12} {p:9.3f} {r:7.3f}")
    for kind, (p, r) in result.items():
        assert p >= 0.98 and r >= 0.98, f"{kind}: precision {p:.3f}, recall {r:.3f}\n" + "\n".join(misses)


def test_language_and_spans() -> None:
    f = extract("民法典第一千零六十二条 2020年以来", today=TODAY)
    assert f.language == "zh"
    clause = f.clauses[0]
    assert "民法典第一千零六十二条 2020年以来"[slice(*clause.span)] == "第一千零六十二条"
    assert f.date_range is not None and f.date_range.span == (12, 19)
    assert extract("GDPR Art. 6(1)(f)", today=TODAY).language == "en"


def test_backwards_range_is_reported_not_fatal() -> None:
    f = extract("range 2021–2019", today=TODAY)
    assert f.date_range is not None and f.date_range.gte == dt.date(2019, 1, 1)
    assert f.notes and "backwards" in f.notes[0]


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("十二", 12),
        ("二十", 20),
        ("一千零六十二", 1062),
        ("一百零五", 105),
        ("两", 2),
        ("三万五千", 35000),
        ("47", 47),
    ],
)
def test_chinese_numerals(text: str, number: int) -> None:
    assert chinese_number(text) == number


def test_domain_from_a_keyword_table() -> None:
    domains = {"legal": ["article", "liability", "合同"], "medical": ["patient", "clinical"]}
    assert extract("liability under Article 82", today=TODAY, domains=domains).domain == "legal"
    assert extract("clinical outcomes of patients", today=TODAY, domains=domains).domain == "medical"
    assert extract("boundary layer", today=TODAY, domains=domains).domain is None


@pytest.mark.parametrize(
    "query", ["papers from the past 5000 years", "近一万年的气候", "last 0 years", "近零年"]
)
def test_absurd_relative_ranges_are_ignored_and_noted(query: str) -> None:
    f = extract(query, today=TODAY)
    assert f.date_range is None and f.notes and "out of bounds" in f.notes[0]


def test_no_query_makes_extraction_or_routing_fail() -> None:
    """Random mixtures of the trigger words (seeded): features and routes never raise."""
    import random

    from rag_router.search.filters import parse_filters
    from rag_router.search.route import Policy, plan

    words = [
        "Article",
        "Art.",
        "§",
        "Section",
        "第",
        "条",
        "款",
        "十",
        "千",
        "万",
        "零",
        "2019",
        "2100",
        "1899",
        "年",
        "至",
        "以来",
        "之前",
        "since",
        "before",
        "between",
        "and",
        "–",
        "last",
        "past",
        "years",
        "近",
        "个月",
        "最新",
        "“",
        "”",
        "「",
        "(1)",
        "(a)",
        "(iv)",
        "C-131/12",
        "FY",
        "$",
        "page",
        "99999",
        "3.2",
    ]
    rng, policy = random.Random(7), Policy.load()
    for _ in range(3000):
        query = " ".join(rng.choice(words) for _ in range(rng.randint(1, 8)))
        features = extract(query, today=TODAY)
        plan(
            features, "auto", parse_filters(None, "default"), policy=policy, today=TODAY, hot_window_days=365
        )
        features.to_json()


@pytest.mark.parametrize(
    ("query", "labels", "laws"),
    [
        ("刑法第二十条规定了什么", ["20"], [("刑法", "刑法")]),
        ("中华人民共和国刑法 第202条 危害税收征管罪", ["202"], [("中华人民共和国刑法", "刑法")]),
        ("侵犯公民人身权利罪 《刑法》第二百四十八条", ["248"], [("《刑法》", "刑法")]),
        ("刑法第133条之一第一款第二项 醉酒驾驶", ["133-1"], [("刑法", "刑法")]),
        ("第一百三十三条之一和第一百三十三条", ["133-1", "133"], []),
        ("宪法第三十五条", ["35"], [("宪法", "宪法")]),
        ("What does Article 17 GDPR say?", ["17"], [("GDPR", "GDPR")]),
        ("Article 17 of the GDPR", ["17"], [("GDPR", "GDPR")]),
        ("Under Article 33, how fast", ["33"], []),
        ("What does Article IV say?", ["4"], []),
    ],
)
def test_inserted_articles_and_the_law_named_at_a_clause(
    query: str, labels: list[str], laws: list[tuple[str, str]]
) -> None:
    f = extract(query, today=TODAY)
    assert [c.label for c in f.clauses] == labels
    assert [(law.text, law.names[0]) for law in f.laws] == laws
    for law in f.laws:
        assert query[law.span[0] : law.span[1]] == law.text


@pytest.mark.parametrize(
    ("query", "names"),
    [
        # a name is the whole run, never a piece of it (劳动合同法 is not also 合同法, a law of its own)
        ("员工手册第三条规定了什么？", ["员工手册"]),
        ("劳动合同法第十条", ["劳动合同法", "中华人民共和国劳动合同法"]),
        ("公司章程第五条", ["公司章程"]),  # 章 in a name is no chapter
        ("中华人民共和国刑法第二十条", ["刑法", "中华人民共和国刑法"]),
        ("问责条例第五条", ["问责条例", "中华人民共和国问责条例"]),
        ("《员工手册》第1条", ["员工手册"]),  # the state's name goes only with a statute's
        # function words around a name are taken off: an opener, a possessive, a conjunction
        ("请问刑法第二十条", ["刑法", "中华人民共和国刑法"]),
        ("根据劳动合同法第十条", ["劳动合同法", "中华人民共和国劳动合同法"]),
        ("员工手册的第三条", ["员工手册"]),
        ("刑法中的第二十条", ["刑法", "中华人民共和国刑法"]),
    ],
)
def test_a_law_is_the_name_before_the_clause_not_its_pieces(query: str, names: list[str]) -> None:
    [law] = extract(query, today=TODAY).laws
    assert list(law.names) == names
    assert query[law.span[0] : law.span[1]] == law.text


@pytest.mark.parametrize(
    ("query", "laws"),
    [
        ("第三条规定第五条", []),  # words after a clause are its predicate, not a name
        ("员工手册第三条规定第五条", ["员工手册"]),
        ("刑法第二十条与宪法第五条", ["刑法", "宪法"]),  # after a conjunction: a name
        ("刑法第三章第五条", []),  # 第三章 is a reference, not a name
        ("什么是第三条", []),
        ("第三条和第五条", []),
    ],
)
def test_words_that_are_no_name_give_no_law(query: str, laws: list[str]) -> None:
    assert [law.names[0] for law in extract(query, today=TODAY).laws] == laws
