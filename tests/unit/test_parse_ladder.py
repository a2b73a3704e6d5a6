"""The JSON ladder on the classes models (and public parser suites) throw at it, and on hostile
input: content after the first closer, JSON5 line continuations and identifier keys, an object
fenced inside a string value, and strings no parser should be able to make it raise on."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_router.answer.parse import Parsed, parse_json, parse_json_value

FENCE = "```"


def _json_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


# 1. content after the first closing brace/bracket. The rule (json-repair's suite,
# tests/test_parse_object.py::test_parse_object_merge_at_the_end and test_parse_array.py):
# `, "key": …` after a top-level object closed continues that object; a mismatched closer stands
# for the one owed (`["x", "y"}`); a doubled closer is dropped; anything else after the object
# (prose, a second object, an empty one) is not part of it.
CONTINUES: list[tuple[str, Any]] = [
    ('{"a": 1}, "b": 2}', {"a": 1, "b": 2}),
    ('{"key": "value"}, "key2": "value2"}', {"key": "value", "key2": "value2"}),
    ('{"k1": "v1"}, "k2": "v2", "k3": "v3"}', {"k1": "v1", "k2": "v2", "k3": "v3"}),
    ('{"key": "value"}, "key2" "value2"}', {"key": "value", "key2": "value2"}),
    ('{"key": "value"}, "key2": }', {"key": "value", "key2": ""}),
    ("{'a': 'x'}, 'b': 'y'}", {"a": "x", "b": "y"}),
    ('{"answer": "x [1]."},\n  "article": "26"\n}', {"answer": "x [1].", "article": "26"}),
    ('{"k1": ["v1", "v2"}, "k2": ["v3", "v4"]}', {"k1": ["v1", "v2"], "k2": ["v3", "v4"]}),
    ('{"array":[{"key": "value"], "key2": "value2"}', {"array": [{"key": "value"}], "key2": "value2"}),
    ('{"items": ["x", "y"}}', {"items": ["x", "y"]}),
    ('{"a": {"b": 1}}} and more', {"a": {"b": 1}}),
    ('{"a": [1, 2]]}', {"a": [1, 2]}),
    ('{"key": "value"}, {}', {"key": "value"}),
    ('{"a": 1}\n{"b": 2}', {"a": 1}),
    ('{"answer": "x [1]."} Hope this helps!', {"answer": "x [1]."}),
    ('{"answer": "x"}, and that is all.', {"answer": "x"}),
    ('{"answer": "x"}\nNote: the article is 26, "or so": }', {"answer": "x"}),
    ('Here: {"a": 1}. Let me know, "Bob": yes}', {"a": 1}),
    ('{"url": "http://x.org/a}b", "n": 1}, "m": 2}', {"url": "http://x.org/a}b", "n": 1, "m": 2}),
]
ARRAYS: list[tuple[str, Any]] = [
    ('["x", "y"}', ["x", "y"]),
    ("[1, 2, 3}", [1, 2, 3]),
    ('[{"key":"value"}},{"key":"value"}]', [{"key": "value"}, {"key": "value"}]),
    ('[["a"], ["b"}]', [["a"], ["b"]]),
    ('["x", "y"} trailing words', ["x", "y"]),
    ('Sources [1] and [2]: {"a": 1}', {"a": 1}),  # prose brackets are citations, not the value
]

# 2. JSON5 LineContinuation: a backslash before a line terminator is removed with it.
CONTINUATIONS: list[tuple[str, Any]] = [
    ('{"a": "one \\\ntwo"}', {"a": "one two"}),
    ('{"a": "one \\\rtwo"}', {"a": "one two"}),
    ('{"a": "one \\\r\ntwo"}', {"a": "one two"}),
    ('{"a": "one \\\u2028two"}', {"a": "one two"}),
    ("{'a': 'one \\\ntwo'}", {"a": "one two"}),
    ('{"a": "x\\\ny\\\r\nz", "b": ["p\\\rq"]}', {"a": "xyz", "b": ["pq"]}),
    ('{"a": "one \\\ntwo", "ok": True}', {"a": "one two", "ok": True}),  # past json5: the repairer
    ('{"a": "one \\\r\ntwo", // note\n}', {"a": "one two"}),
    ('{"a": "kept \\\\\\\ngone"}', {"a": "kept \\gone"}),  # an escaped backslash, then a continuation
]

# 3. JSON5 identifier keys (ES5 IdentifierName: letters of any script, $, _, digits after the
# first, combining marks, ZWNJ/ZWJ, \\uXXXX escapes).
IDENTIFIERS: list[tuple[str, Any]] = [
    ("{_: 1}", {"_": 1}),
    ("{$: 1}", {"$": 1}),
    ("{_$_: 1, a1: 2}", {"_$_": 1, "a1": 2}),
    ('{$ref: "x", _id: 2}', {"$ref": "x", "_id": 2}),
    ("{ключ: 1, 中文: 2, ä: 3, π: 4}", {"ключ": 1, "中文": 2, "ä": 3, "π": 4}),
    ("{a\u0301: 1, x\u200cy: 2}", {"a\u0301": 1, "x\u200cy": 2}),
    ("{\\u0061bc: 1}", {"abc": 1}),
    ("{null: 1, true: 2}", {"null": 1, "true": 2}),
    ("{_: 1, $: True}", {"_": 1, "$": True}),  # past json5: the repairer, keys quoted first
    ("{\n  _: 'a', // c\n  $: [1, 2,],\n}", {"_": "a", "$": [1, 2]}),
]

# 4. a JSON object fenced (or encoded) inside a JSON string. (raw, fields, expected)
INNER = {"answer": "Everyone has the right to education [1].", "article": "26"}
BOTH = ("answer", "article")


def _fenced(value: Any, lang: str = "json", indent: int | None = None) -> str:
    return f"{FENCE}{lang}\n{json.dumps(value, indent=indent)}\n{FENCE}"


NESTED: list[tuple[str, tuple[str, ...], Any]] = [
    (json.dumps({"answer": _fenced(INNER)}), (), INNER),
    (json.dumps({"answer": _fenced(INNER, "", indent=2)}), ("answer",), INNER),
    (json.dumps({"answer": _fenced(INNER, "JSON"), "article": ""}), BOTH, INNER),
    (json.dumps({"answer": "Here it is:\n" + _fenced(INNER)}), BOTH, INNER),
    (_json_string(_fenced(INNER)), (), INNER),  # the whole output is one JSON string
    ('{"answer": "' + _fenced(INNER).replace('"', '\\"') + '"}', (), INNER),  # raw newlines in it
    (json.dumps({"answer": json.dumps(INNER)}), BOTH, INNER),  # encoded twice, no fence
    (_fenced({"answer": _fenced(INNER)}), (), INNER),  # fenced, holding a fence
    (_fenced({"answer": _fenced(INNER)}), BOTH, INNER),
]
# ... and answers that quote JSON stay as they are
PLAIN: list[tuple[dict[str, Any], tuple[str, ...]]] = [
    ({"answer": 'Set it to {"timeout": 5} [1].'}, ()),
    ({"answer": "{citation needed}"}, ()),
    ({"answer": '{"timeout": 5}'}, ("answer",)),
    ({"answer": f'Example:\n{FENCE}json\n{{"timeout": 5}}\n{FENCE}'}, ("answer",)),
    ({"answer": f'{FENCE}json\n{{"x": 1}}\n{FENCE}', "article": "3"}, ()),
    ({"answer": f'{FENCE}json\n{{"answer": "y"}}\n{FENCE}', "article": "3"}, ("answer", "article")),
]


@pytest.mark.parametrize(("raw", "expected"), CONTINUES)
def test_content_after_the_first_closer(raw: str, expected: Any) -> None:
    parsed = parse_json(raw)
    assert parsed.value == expected and parsed.error is None


@pytest.mark.parametrize(("raw", "expected"), ARRAYS)
def test_arrays_with_mismatched_closers(raw: str, expected: Any) -> None:
    assert parse_json_value(raw).value == expected


def test_the_answer_flow_still_wants_an_object() -> None:
    assert parse_json('["x", "y"}').value is None
    assert parse_json('[{"answer": "x"}]').value == {"answer": "x"}


@pytest.mark.parametrize(("raw", "expected"), CONTINUATIONS)
def test_json5_line_continuations(raw: str, expected: Any) -> None:
    assert parse_json(raw).value == expected


@pytest.mark.parametrize(("raw", "expected"), IDENTIFIERS)
def test_json5_identifier_keys(raw: str, expected: Any) -> None:
    assert parse_json(raw).value == expected


@pytest.mark.parametrize(("raw", "fields", "expected"), NESTED)
def test_an_object_fenced_inside_a_string(raw: str, fields: tuple[str, ...], expected: Any) -> None:
    assert parse_json(raw, fields).value == expected


@pytest.mark.parametrize(("value", "fields"), PLAIN)
def test_answers_quoting_json_are_kept(value: dict[str, Any], fields: tuple[str, ...]) -> None:
    assert parse_json(json.dumps(value), fields).value == value


def test_nesting_is_bounded() -> None:
    raw = json.dumps({"answer": "x"})
    for _ in range(12):
        raw = json.dumps({"answer": f"{FENCE}json\n{raw}\n{FENCE}"})
    parsed = parse_json(raw)
    assert isinstance(parsed.value, dict) and set(parsed.value) == {"answer"}


# 5. never raises --------------------------------------------------------------------------------


def _well_formed(parsed: Parsed) -> bool:
    if parsed.value is None:
        return bool(parsed.error)
    return isinstance(parsed.value, dict) and bool(parsed.value) and parsed.error is None


HOSTILE = [
    "[" * 100_000,
    "{" * 100_000,
    '{"a":' * 50_000,
    '{"a": "' + '{\\"a\\": \\"' * 2_000,
    "}" * 10_000 + "{",
    '"' + "a" * 200_000,
    '{"a": "' + "\\" * 100_001,
    "\\" * 100_000 + "\n",
    "\x00" * 1_000 + '{"a": "\x00"}',
    '{"a": "\ud800", "\udfff": 1}',
    '{"n": 1' + "0" * 10_000 + "}",
    '{"n": 1e999999, "m": -1e-999999}',
    '{"n": 0x' + "f" * 5_000 + "}",
    f"{FENCE}json\n" * 10_000,
    "/*" * 10_000 + "{",
    "//" + "{" * 10_000,
    "'" * 10_000,
    "{'" + "\\'" * 10_000,
    "{a" + ":a" * 20_000,
    "{" + "_:" * 20_000,
    '{"a": 1}, "b": 2}' * 5_000,
    _json_string(_json_string(_json_string("{" * 1_000))),
    '"' + '\\"' * 5_000 + '"',
]


@pytest.mark.parametrize("raw", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_strings_never_raise(raw: str, caplog: pytest.LogCaptureFixture) -> None:
    """A value or a reason, and the reason is the ladder's: the entry points' last-resort catch
    (logged as "JSON parser failed") would also give a reason, so it must not have fired."""
    assert _well_formed(parse_json(raw))
    assert _well_formed(parse_json(raw, ("answer",)))
    parse_json_value(raw)
    assert "JSON parser failed" not in caplog.text


def test_random_bytes_never_raise(caplog: pytest.LogCaptureFixture) -> None:
    rng = random.Random(35)
    alphabet = "{}[]\"':,\\/*`\n\r 0123456789abcjson_$.eE+-tTrRuUfFnN\x00\u2028中“”"
    for _ in range(300):
        raw = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))
        assert _well_formed(parse_json(raw.decode("utf-8", "surrogateescape")))  # lone surrogates
        assert _well_formed(parse_json(raw.decode("latin-1")))
        mixed = "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 300)))
        assert _well_formed(parse_json(mixed, ("answer",)))
        parse_json_value(mixed)
    assert "JSON parser failed" not in caplog.text  # the last-resort catch never fired


JSONISH = st.text(alphabet=st.sampled_from(list("{}[]\"':,\\/*`\n ab1_$\u2028")), max_size=200)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(), JSONISH, st.binary().map(lambda b: b.decode("utf-8", "surrogateescape"))))
def test_any_text_gives_an_object_or_a_reason(raw: str) -> None:
    assert _well_formed(parse_json(raw))
    assert _well_formed(parse_json(raw, ("answer", "article")))
    parse_json_value(raw)
