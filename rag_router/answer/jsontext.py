"""Model output mended into text a JSON parser can read: the object (or array) cut out of code
fences and prose, its closers mended the way json-repair's suite reads them, and what models get
wrong normalised (Chinese quotes, thousands separators, JSON5 line continuations and identifier
keys). Scanners only: the parsers are tried in ``parse``. Iterative, so no input recurses."""

from __future__ import annotations

import re
import unicodedata

FENCE = re.compile(r"```(?:json|JSON|json5)?\s*\n?(.*?)(?:```|\Z)", re.DOTALL)
_CN_QUOTES = str.maketrans({"“": '"', "”": '"', "„": '"', "‘": "'", "’": "'", "：": ":", "，": ","})
_THOUSANDS = re.compile(
    r"(?<=[:\[,]\s)(-?\d{1,3}(?:,\d{3})+(?:\.\d+)?)(?=\s*[,}\]])|(?<=[:\[,])(-?\d{1,3}(?:,\d{3})+(?:\.\d+)?)(?=\s*[,}\]])"
)
# JSON5 LineContinuation: an unescaped backslash before a line terminator is no character at all.
_CONTINUATION = re.compile(r"(?<!\\)((?:\\\\)*)\\(?:\r\n|[\r\n\u2028\u2029])")
# After a top-level object closed, `, "key":` means the object goes on (json-repair's rule,
# tests/test_parse_object.py::test_parse_object_merge_at_the_end): `{"a": 1}, "b": 2}` is
# {"a": 1, "b": 2}. Only a quoted key counts, so prose after the object ("…}, note: …") does not.
_GOES_ON = re.compile(r"""\s*,\s*(?:"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')\s*[:"']""")
_OWED = {"{": "}", "[": "]"}
_MAX_NESTING = 256  # brackets inside brackets


class TooDeep(ValueError):
    """Nested past ``_MAX_NESTING``: no answer is, and json-repair is quadratic in the depth."""


def extract(text: str, openers: str) -> str | None:
    """The first JSON value opening with one of ``openers`` (``"{"``, or ``"{["``), mended;
    ``TooDeep`` past ``_MAX_NESTING``."""
    fenced = FENCE.search(text)
    first = min((i for i in map(text.find, openers) if i >= 0), default=len(text))
    if fenced and fenced.start() < first and any(o in fenced.group(1) for o in openers):
        # scanned on past the fence's end, which a string inside the object may hold; cut
        # there only when the object does not close
        found = _scan_from(text, openers, fenced.start(1))
        if found is not None and found[1]:
            return found[0]
        text = fenced.group(1)
    found = _scan_from(text, openers, 0)
    return None if found is None else found[0]


def _scan_from(text: str, openers: str, pos: int) -> tuple[str, bool] | None:
    lead = text[pos:].lstrip()[:1]  # an output that opens with an array is one; else `{`
    # before `[`, which in prose is more often a citation ("see [1]: {…}")
    for opener in lead if lead and lead in openers else openers:
        if (start := text.find(opener, pos)) >= 0:
            return _balanced(text, start)
    return None


def _balanced(text: str, start: int) -> tuple[str, bool]:
    """From the opener at ``start`` to where it closes (and whether it does), strings and
    comments skipped."""
    out: list[str] = []
    stack: list[str] = []  # the closers owed, innermost last
    quote, prev, i = "", "", start
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                out.append(text[i : i + 2])
                i += 2
                continue
            quote = "" if ch == quote else quote
        elif ch == '"' or (ch == "'" and prev in "{[,:"):  # not the apostrophe in `It's`
            quote = ch
        elif ch == "/" and text.startswith(("//", "/*"), i) and text[i - 1 : i] != ":":  # not `http://`
            end = text.find("\n" if text[i + 1] == "/" else "*/", i + 2)
            end = len(text) if end < 0 else end + (1 if text[i + 1] == "/" else 2)
            out.append(text[i:end])
            i = end
            continue
        elif ch in _OWED:
            stack.append(_OWED[ch])
            if len(stack) > _MAX_NESTING:
                raise TooDeep(f"nested deeper than {_MAX_NESTING} levels")
        elif ch in "}]":
            ch = _close(stack, ch, prev)
            if not stack:
                if not (ch.endswith("}") and _GOES_ON.match(text, i + 1)):
                    return "".join(out) + ch, True
                ch, stack = ch[:-1], ["}"]
        out.append(ch)
        prev = ch[-1:] if ch and not ch.isspace() and not quote else prev
        i += 1
    return "".join(out), False  # truncated: the repairers close it


def _close(stack: list[str], ch: str, prev: str) -> str:
    """The closers a ``}`` or ``]`` stands for, as json-repair's suite reads them:
    ``["x", "y"}`` closes the array; ``[{"k": 1], …`` also closes the object left open;
    the second of ``[{"k": 1}}, …`` is dropped."""
    if stack[-1] == ch:
        return stack.pop()
    if ch == "]" and "]" in stack:
        k = len(stack) - 1 - stack[::-1].index("]")
        closed = "".join(reversed(stack[k:]))
        del stack[k:]
        return closed
    if prev in ("}", "]"):
        return ""
    return stack.pop()


def normalise(candidate: str) -> str:
    """Chinese quotes and punctuation outside the ASCII set, JSON5 line continuations and
    identifier keys (quoted), and 1,234-style numbers."""
    out = _CONTINUATION.sub(r"\1", candidate.translate(_CN_QUOTES))
    out = _quote_keys(out)
    return _THOUSANDS.sub(lambda m: (m.group(1) or m.group(2)).replace(",", ""), out)


def _quote_keys(text: str) -> str:
    """``{_: 1, $a: 2, ключ: 3}`` → quoted keys: ES5 IdentifierNames before a colon."""
    out: list[str] = []
    quote, prev, i = "", "", 0
    while i < len(text):
        ch = text[i]
        if quote:
            step = 2 if ch == "\\" else 1
            quote = "" if ch == quote else quote
            out.append(text[i : i + step])
            i += step
            continue
        if prev in ("{", ","):
            end = _identifier_end(text, i)
            colon = end
            while colon < len(text) and text[colon] in " \t\r\n":
                colon += 1
            if end > i and text[colon : colon + 1] == ":":
                out.append(f'"{text[i:end]}"')
                i, prev = end, '"'
                continue
        if ch == '"' or (ch == "'" and prev in "{[,:"):
            quote = ch
        prev = ch if not ch.isspace() else prev
        out.append(ch)
        i += 1
    return "".join(out)


_ID_START = {"Lu", "Ll", "Lt", "Lm", "Lo", "Nl"}
_ID_PART = _ID_START | {"Mn", "Mc", "Nd", "Pc"}
_UNICODE_ESCAPE = re.compile(r"\\u[0-9a-fA-F]{4}")


def _identifier_end(text: str, i: int) -> int:
    """Where the ES5 IdentifierName starting at ``i`` ends (``i`` when there is none)."""
    start = i
    while i < len(text):
        ch = text[i]
        if ch == "\\" and _UNICODE_ESCAPE.match(text, i):
            i += 6
            continue
        allowed = _ID_START if i == start else _ID_PART
        if ch in "$_" or unicodedata.category(ch) in allowed or (i > start and ch in "\u200c\u200d"):
            i += 1
            continue
        break
    return i
