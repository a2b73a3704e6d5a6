"""Two versions of one law through the real app (embedded tiers, the real embedder): the words
that pick a version ("新", "修订前", "2018年修正", "current", "the 2016 text") rank that version's
article first, in Chinese and English; a law stored in one version still answers; a query mixing
languages reads its article and law. The documents are written for this test.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from indexers.embed.embedder import SentenceTransformerEmbedder
from tests.conftest import loaded_app

GONGSI_2018 = (
    "第一条 为了规范公司的组织和行为，保护公司、股东和债权人的合法权益，制定本法。\n"
    "第二条 本法所称公司是指依照本法在中国境内设立的有限责任公司和股份有限公司。\n"
    "第五十一条 有限责任公司设监事会，其成员不得少于三人。股东人数较少或者规模较小的有限责任公司，"
    "可以设一至二名监事，不设监事会。\n"
)
GONGSI_2023 = (
    "第一条 为了规范公司的组织和行为，保护公司、股东、职工和债权人的合法权益，"
    "完善中国特色现代企业制度，制定本法。\n"
    "第二条 本法所称公司，是指依照本法在中华人民共和国境内设立的有限责任公司和股份有限公司。\n"
    "第五十一条 有限责任公司成立后，董事会应当对股东的出资情况进行核查，发现股东未按期足额缴纳"
    "公司章程规定的出资的，应当由公司向该股东发出书面催缴书，催缴出资。\n"
)
DPC_2016 = (
    "Article 17 Right to erasure\nThe data subject shall have the right to obtain the erasure of personal "
    "data concerning him or her without undue delay.\n"
    "Article 18 Right to restriction of processing\nThe data subject shall have the right to restriction.\n"
)
DPC_2021 = (
    "Article 17 Right to erasure\nThe data subject may request erasure of personal data, and the "
    "controller shall erase it within one month unless an exemption applies.\n"
    "Article 18 Right to restriction of processing\nThe data subject may ask the controller to restrict.\n"
)
XINGFA_20 = (
    "第二十条 为了使国家、公共利益免受正在进行的不法侵害，"
    "而采取的制止不法侵害的行为，属于正当防卫，不负刑事责任。\n"
)
DOCS: list[dict[str, Any]] = [
    # the version from the title; dates as the laws were passed (both in the cold tier)
    {"id": "gongsi-2018", "title": "中华人民共和国公司法（2018年修正）", "text": GONGSI_2018,
     "metadata": {"date": "2018-10-26"}},
    {"id": "gongsi-2023", "title": "中华人民共和国公司法（2023年修订）", "text": GONGSI_2023,
     "metadata": {"date": "2023-12-29"}},
    # one law in one version only
    {"id": "xingfa", "title": "中华人民共和国刑法", "text": XINGFA_20, "metadata": {"date": "2020-12-26"}},
    # the version from the title (undated: hot), and from the date (cold)
    {"id": "dpc-2016", "title": "Data Protection Code (2016 text)", "text": DPC_2016},
    {"id": "dpc-2021", "title": "Data Protection Code", "text": DPC_2021, "metadata": {"date": "2021-05-01"}},
    {"id": "gdpr-17", "title": "GDPR Article 17 Right to erasure", "text": "The data subject shall have the "
     "right to obtain from the controller the erasure of personal data concerning him or her."},
]  # fmt: skip


@pytest.fixture(scope="module")
def client(
    tmp_path_factory: pytest.TempPathFactory, embedder: SentenceTransformerEmbedder
) -> Iterator[TestClient]:
    with loaded_app(tmp_path_factory.mktemp("versions"), embedder, DOCS) as c:
        yield c


def _top(client: TestClient, query: str) -> tuple[str, dict[str, object]]:
    r = client.post("/v1/search", json={"query": query, "top_k": 3}).json()
    assert r["hits"], r["route"]["reason"]
    return r["hits"][0]["doc_id"], r["route"]


@pytest.mark.parametrize(
    ("query", "doc_id"),
    [
        ("新公司法第五十一条", "gongsi-2023"),
        ("现行公司法第五十一条", "gongsi-2023"),
        ("修订后的公司法第五十一条", "gongsi-2023"),
        ("2023年修订的公司法第 51 条", "gongsi-2023"),
        ("旧公司法第五十一条", "gongsi-2018"),
        ("修订前的公司法第五十一条", "gongsi-2018"),
        ("公司法（2018年修正）第五十一条", "gongsi-2018"),
        ("2018年版公司法第五十一条是怎么规定的", "gongsi-2018"),
        ("Article 17 of the current Data Protection Code", "dpc-2021"),
        ("Data Protection Code Article 17 as amended in 2021", "dpc-2021"),
        ("the 2016 text of Article 17 of the Data Protection Code", "dpc-2016"),
        ("the original Article 17 of the Data Protection Code", "dpc-2016"),
        ("former Art.  17 Data Protection Code", "dpc-2016"),
    ],
)
def test_a_version_word_ranks_that_version_of_the_article_first(
    client: TestClient, query: str, doc_id: str
) -> None:
    top, route = _top(client, query)
    assert top == doc_id, route["reason"]
    assert route["features"]["version"] is not None  # type: ignore[index]


def test_the_version_is_stored_from_the_title_or_the_law_date(client: TestClient) -> None:
    chunks = {
        d: client.get(f"/v1/documents/{d}").json()["chunks"]
        for d in ("gongsi-2018", "gongsi-2023", "dpc-2016")
    }
    assert {c["metadata"]["version"] for c in chunks["gongsi-2018"]} == {2018}
    assert {c["metadata"]["version"] for c in chunks["gongsi-2023"]} == {2023}
    assert {c["metadata"]["version"] for c in chunks["dpc-2016"]} == {2016}
    r = client.post("/v1/search", json={"query": "erasure", "filters": {"version": 2016}, "top_k": 5}).json()
    assert {h["doc_id"] for h in r["hits"]} == {"dpc-2016"}  # a keyword field: filterable


def test_a_law_stored_in_one_version_still_answers(client: TestClient) -> None:
    for query in ("旧刑法第二十条", "现行刑法第二十条", "2018年版刑法第二十条"):
        top, route = _top(client, query)
        assert top == "xingfa", route["reason"]


def test_a_query_mixing_languages_reads_its_article_and_law(client: TestClient) -> None:
    top, route = _top(client, "GDPR 第十七条 right to erasure")
    assert top == "gdpr-17", route["reason"]
    assert route["filters"] == {"article": ["17"], "law": ["GDPR"]}
