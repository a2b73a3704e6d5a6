"""Clause and citation shapes, in queries and in headings; the version of a law a query asks for,
the one a title names, and the re-rank that puts it first (search/clauses.py, search/versions.py,
text/structure.py)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from indexers.records import StoredChunk
from indexers.text.structure import heading_metadata, law_name, split_sections, title_version
from indexers.tiers.query import Filters
from rag_router.search.features import extract
from rag_router.search.fuse import Hit
from rag_router.search.route import Policy, plan
from rag_router.search.versions import Version, prefer_version

TODAY = dt.date(2026, 6, 1)


@pytest.mark.parametrize(
    ("query", "clauses", "laws"),
    [
        ("第 1030 条", [("article", "1030")], []),
        ("第1030 条的规定", [("article", "1030")], []),
        ("刑法第 20 条第 2 款", [("article", "20")], [("刑法", "中华人民共和国刑法")]),
        ("第 133 条之 1", [("article", "133-1")], []),
        ("Article  17 erasure", [("article", "17")], []),
        ("Art.  5 principles", [("article", "5")], []),
        ("Art. 6(1)(a) consent", [("article", "6")], []),
        ("Rule 56 summary judgment", [("section", "56")], []),
        ("18 U.S.C. § 1030 computer fraud", [("section", "1030")], [("18 U.S.C.",)]),
        ("18 USC 1030", [("section", "1030")], [("18 U.S.C.",)]),
        ("42 U.S.C. § 1983(a)", [("section", "1983")], [("42 U.S.C.",)]),
        ("§ 230 immunity", [("section", "230")], []),
        ("§§ 1030-1032", [("section", "1030"), ("section", "1031"), ("section", "1032")], []),
        ("§ 2-207 battle of the forms", [("section", "2")], []),  # one UCC section, no range
        ("Section 2 of the agreement", [("section", "2")], []),
        ("sec. 5 fees", [("section", "5")], []),
        ("GDPR 第十七条 right to erasure", [("article", "17")], [("GDPR",)]),
        # not clauses: a rule without a number, a lowercase "rule"
        ("Rule of law in the EU", [], []),
        ("the rule 5 minutes later", [], []),
    ],
)
def test_clause_shapes(query: str, clauses: list[tuple[str, str]], laws: list[tuple[str, ...]]) -> None:
    f = extract(query, today=TODAY)
    assert [(c.kind, c.label) for c in f.clauses] == clauses
    assert [law.names for law in f.laws] == laws


def test_a_us_code_citation_filters_on_section_and_title_and_the_title_is_dropped_first() -> None:
    policy = Policy.load()
    f = extract("18 U.S.C. § 1030", today=TODAY)
    route = plan(f, "auto", Filters("t"), policy=policy, today=TODAY, hot_window_days=365)
    assert route.filters.keywords == {"section": ("1030",), "law": ("18 U.S.C.",)}
    assert policy.relax_first.index("law") < policy.relax_first.index("section")
    assert f.identifiers and route.weights["lexical"] > route.weights["dense"]


@pytest.mark.parametrize(
    ("query", "want", "year", "laws"),
    [
        (
            "新公司法第五十一条",
            "latest",
            None,
            ("新公司法", "中华人民共和国新公司法", "公司法", "中华人民共和国公司法"),
        ),
        ("现行公司法第五十一条", "latest", None, ("公司法", "中华人民共和国公司法")),
        ("修订后的公司法第五十一条", "latest", None, ("公司法", "中华人民共和国公司法")),
        (
            "旧公司法第五十一条",
            "earlier",
            None,
            ("旧公司法", "中华人民共和国旧公司法", "公司法", "中华人民共和国公司法"),
        ),
        ("修订前的公司法第五十一条", "earlier", None, ("公司法", "中华人民共和国公司法")),
        ("公司法（2018年修正）第十六条", "year", 2018, ("公司法", "中华人民共和国公司法")),
        ("2018年版公司法第十六条", "year", 2018, ("公司法", "中华人民共和国公司法")),
        ("2018年修订的公司法第十六条", "year", 2018, ("公司法", "中华人民共和国公司法")),
        ("公司法2018年修订前第十六条", "before", 2018, ("公司法", "中华人民共和国公司法")),
        ("the 2016 text of GDPR Article 17", "year", 2016, ("GDPR",)),
        ("GDPR Article 17 as amended in 2018", "year", 2018, ("GDPR",)),
        ("Article 17 of the current GDPR", "latest", None, ("GDPR",)),
        ("the original Article 5", "original", None, None),
        ("former Art. 7 of the GDPR", "earlier", None, ("GDPR",)),
        ("GDPR Article 5 before the 2018 amendment", "before", 2018, ("GDPR",)),
        ("the current version of Article 5", "latest", None, None),
        ("Article 5 as amended", "latest", None, None),
        ("Article 5 in its original form", "original", None, None),
    ],
)
def test_the_version_a_query_asks_for(
    query: str, want: str, year: int | None, laws: tuple[str, ...] | None
) -> None:
    f = extract(query, today=TODAY)
    assert f.version is not None and (f.version.want, f.version.year) == (want, year)
    assert f.years == ()  # a version's year at a clause is no time filter
    assert f.laws[0].names == laws if laws else not f.laws
    assert not f.recency  # "现行" at a law: its version, not a document's date


@pytest.mark.parametrize(
    "query",
    [
        "current density in the electrode",  # no clause, no law
        "latest Article 5 guidance",  # about documents: recency
        "Article 17. What was the old rule?",  # the word is in another sentence
        "Smith et al. (2019) on Article 5",  # a year in brackets cites, it is no version
        "Article 36 prior consultation",  # after the clause: its topic
        "Article IV, Section 3 admission of new states",
        "new rules under Article 5",  # before a noun of its own
        "Companies Act 2006 section 172",  # the year is the Act's name, not a version of it
        "New York Penal Law § 120.05",  # capitalised: a name
        "Old Age Security Act section 3",
        "previous CEO of IBM",  # an acronym with no clause is no law
        "新加坡公司法第5条",  # 新 begins a word of its own
        "旧金山市条例第3条",
        "新闻法第三条",
        "新冠肺炎防控规定第三条",
    ],
)
def test_words_that_pick_no_version(query: str) -> None:
    assert extract(query, today=TODAY).version is None


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("新闻法第三条", ("新闻法", "中华人民共和国新闻法")),
        ("新加坡公司法第5条", ("新加坡公司法", "中华人民共和国新加坡公司法")),
        ("旧金山市条例第3条", ("旧金山市条例", "中华人民共和国旧金山市条例")),
    ],
)
def test_a_name_that_starts_with_a_version_word_keeps_its_own_name(
    query: str, names: tuple[str, ...]
) -> None:
    f = extract(query, today=TODAY)
    assert [law.names for law in f.laws] == [names] and f.version is None


@pytest.mark.parametrize(
    ("query", "article"), [("《 》第5条", 5), ("《（修订）》第五条", 5), ("见《（附件一）》第三条", 3)]
)
def test_brackets_with_no_name_in_them_name_no_law(query: str, article: int) -> None:
    f = extract(query, today=TODAY)
    assert f.laws == () and [(c.kind, c.number) for c in f.clauses] == [("article", article)]


@pytest.mark.parametrize(
    ("query", "numbers"),
    [
        ("Civil Procedure Rules 1998 Part 3", []),  # a plural "Rules" names rules, not rule 1998
        ("§ 12101 ADA", []),  # no section read from the first four of five digits
        ("Rule 56 summary judgment", [56]),
    ],
)
def test_rule_names_and_long_numbers_are_not_misread(query: str, numbers: list[int]) -> None:
    assert [c.number for c in extract(query, today=TODAY).clauses] == numbers


def test_a_version_year_without_a_clause_or_law_is_still_a_year() -> None:
    f = extract("the 2018 edition of the report", today=TODAY)
    assert f.version is not None and f.version.year == 2018 and f.years == (2018,)


def _hit(doc_id: str, score: float, title: str | None = None, **metadata: Any) -> Hit:
    return Hit(StoredChunk(f"{doc_id}#0", doc_id, "text", title, metadata, "h"), score, "cold", {})


HITS = [
    _hit("old-51", 0.9, law="公司法", article=51, version=2018),
    _hit("other", 0.8, law="刑法", article=20, version=2020),
    _hit("mid-51", 0.7, law="公司法", article=51, version=2021),
    _hit("new-51", 0.6, law="公司法", article=51, date="2023-12-29"),  # no version: its year
    _hit("old-52", 0.5, law="公司法", article=52, version=2018),
]

AS_IS = [h.doc_id for h in HITS]


@pytest.mark.parametrize(
    ("version", "order"),
    [
        (Version("新", "latest", (0, 1)), ["new-51", "other", "old-51", "mid-51", "old-52"]),
        (Version("修订前", "earlier", (0, 3)), ["mid-51", "other", "old-51", "new-51", "old-52"]),
        (Version("original", "original", (0, 8)), ["old-51", "other", "mid-51", "new-51", "old-52"]),
        (Version("2022年版", "year", (0, 6), 2022), ["mid-51", "other", "old-51", "new-51", "old-52"]),
        (Version("2018年修订前", "before", (0, 8), 2018), AS_IS),  # nothing before 2018 is stored
        (Version("2010年版", "year", (0, 6), 2010), AS_IS),  # before every version: the first
    ],
)
def test_the_wanted_version_takes_its_clauses_best_place(version: Version, order: list[str]) -> None:
    reasons: list[str] = []
    ranked = prefer_version(HITS, version, reasons)
    assert [h.doc_id for h in ranked] == order
    assert [h.score for h in ranked] == [h.score for h in HITS]  # places keep their scores
    assert bool(reasons) == (order != [h.doc_id for h in HITS])


def test_one_version_or_no_version_leaves_the_hits_alone() -> None:
    hits = [_hit("a", 0.9, law="刑法", article=20, version=2020), _hit("b", 0.5, title="Notes")]
    assert prefer_version(hits, Version("旧", "earlier", (0, 1)), []) == hits
    assert prefer_version(HITS, None, []) == HITS


def test_versions_group_by_title_when_no_law_is_stored() -> None:
    hits = [
        _hit("act-1985", 0.9, "Companies Act 1985", section=172, version=1985),
        _hit("act-2006", 0.8, "Companies Act 2006", section=172, version=2006),
    ]
    ranked = prefer_version(hits, Version("Act 2006", "year", (0, 8), 2006), [])
    assert [h.doc_id for h in ranked] == ["act-2006", "act-1985"]


@pytest.mark.parametrize(
    ("title", "version"),
    [
        ("中华人民共和国公司法（2023年修订）", 2023),
        ("公司法（2018年10月26日修正）", 2018),
        ("公司法2018年版", 2018),
        ("Companies Act 2006", 2006),
        ("Data Protection Code (2016 text)", 2016),
        ("Data Protection Act (2018 revision)", 2018),
        ("Consumer Code as amended in 2019", 2019),
        ("Regulation (EU) 2016/679", None),
        ("GDPR Article 17", None),
    ],
)
def test_the_version_a_title_names(title: str, version: int | None) -> None:
    assert title_version(title) == version


def test_headings_read_the_new_shapes_and_the_version() -> None:
    assert heading_metadata("第 1030 条 定义", "", {}) == {"article": 1030}
    assert heading_metadata("18 U.S.C. § 1030", "", {}) == {"section": 1030, "law": "18 U.S.C."}
    assert heading_metadata("Rule 56. Summary Judgment", "", {}) == {"section": 56}
    # a law's date is its version; a dated document of no law has none
    assert heading_metadata("刑法 第二十条", "", {"date": "2020-12-26"})["version"] == 2020
    assert "version" not in heading_metadata("Weekly notes", "", {"date": "2020-12-26"})
    assert heading_metadata("公司法（2018年修正）", "", {"version": 7}) == {}  # metadata wins
    text = "第 一 章 总则\n第 1 条\n为了规范。\n第 2 条\n本法所称。\nRule 3. Scope\nText."
    assert [(s.metadata.get("chapter"), s.metadata.get("article"), s.metadata.get("section")) for s in
            split_sections(text, {})] == [(1, 1, None), (1, 2, None), (1, 2, 3)]  # fmt: skip


def test_law_names_drop_the_version_and_spell_the_us_code_one_way() -> None:
    assert law_name("Companies Act 2006") == "Companies Act"
    assert law_name("公司法2018年修订版") == "公司法"
    assert law_name("18 USC") == law_name("18 U. S. C.") == "18 U.S.C."
