"""The prompt compiler: query + constraints + passages → chat messages and token-level limits. Pure.

- **Constraints** come from the request and from the query's own words ("at most 200 words",
  "不超过200字", "in three bullet points", "as JSON with fields a, b", "answer in Chinese"); the
  phrasings are data (``prompts/constraints.yaml``). The request wins where both say something.
- **max_tokens** from a word or character limit: tokens per word / per Chinese character were
  measured with the bundled WordPiece tokenizer (UDHR, English: 1.15 tokens/word; Chinese
  UDHR articles 1–2: 1.11 tokens/character); chat models' BPE tokenizers differ by up to ~30 %,
  hence ×1.5 plus room for citations. The limit itself is enforced on the answer text
  (``enforce_limits``), so max_tokens only has to be generous, never exact.
- **Cleaning**: the prompt gets NFKC text without control, zero-width or emoji characters; the
  user's text is kept as given everywhere else.
- **Passages** are fitted to the context budget by tokens, numbered [1..n], inside a block whose
  delimiter carries a per-request nonce; look-alike delimiters inside retrieved text are defused,
  so a document cannot close the block and speak as the user or the system.
"""

from __future__ import annotations

import math
import re
import secrets
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, Literal

import yaml
from jinja2 import StrictUndefined
from jinja2.sandbox import SandboxedEnvironment

from indexers.text.structure import CN_NUMERALS, chinese_number
from rag_router.settings import PROMPTS

Format = Literal["text", "bullets", "json"]
TOKENS_PER_WORD = 1.15  # English, measured (see the module docstring)
TOKENS_PER_CHAR = 1.11  # Chinese characters, measured
SAFETY = 1.5
DEFAULT_MAX_TOKENS = 512

_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20, "thirty": 30, "forty": 40,
    "fifty": 50, "hundred": 100, "a hundred": 100, "single": 1, "a single": 1,
}  # fmt: skip
_N = r"(?P<n>\d+|" + "|".join(sorted(map(re.escape, _WORDS), key=len, reverse=True)) + f"|[{CN_NUMERALS}]+)"
_FIELDS = r"(?P<fields>[A-Za-z_][\w]*(?:\s*(?:,|、|，|and|和|及|与)\s*[A-Za-z_][\w]*)*)"


@dataclass(frozen=True, slots=True)
class Constraints:
    max_words: int | None = None
    max_chars: int | None = None
    max_sentences: int | None = None
    bullets: int | None = None  # number of bullet points (0: a list of any length)
    format: Format = "text"
    json_fields: tuple[str, ...] = ()
    language: str | None = None  # "en" | "zh" | None (the question's own)

    def merged(self, override: Constraints) -> Constraints:
        """``override``'s set values win (the request over the query text)."""
        changes = {
            name: value
            for name in self.__dataclass_fields__
            if (value := getattr(override, name)) not in (None, (), "text")
        }
        return replace(self, **changes)


def _number(raw: str) -> int:
    raw = raw.lower()
    if raw.isdigit():
        return int(raw)
    if raw in _WORDS:
        return _WORDS[raw]
    return chinese_number(raw)


@lru_cache(maxsize=1)
def _rules() -> dict[str, Any]:
    raw = yaml.safe_load((PROMPTS / "constraints.yaml").read_text(encoding="utf-8"))

    def compile_all(patterns: list[str]) -> list[re.Pattern[str]]:
        return [
            re.compile(p.replace("{n}", _N).replace("{fields}", _FIELDS), re.IGNORECASE) for p in patterns
        ]

    rules: dict[str, Any] = {k: compile_all(v) for k, v in raw.items() if k != "language"}
    rules["language"] = {lang: compile_all(v) for lang, v in raw["language"].items()}
    return rules


def _first_number(patterns: list[re.Pattern[str]], text: str) -> int | None:
    for pattern in patterns:
        m = pattern.search(text)
        if m:
            value = _number(m.group("n"))
            if value > 0:
                return value
    return None


def parse_constraints(text: str) -> Constraints:
    """The output constraints stated in the query text."""
    rules = _rules()
    folded = unicodedata.normalize("NFKC", text)
    bullets = _first_number(rules["bullets"], folded)
    if bullets is None and any(p.search(folded) for p in rules["bullets_any"]):
        bullets = 0
    wants_json = any(p.search(folded) for p in rules["json"])
    fields: tuple[str, ...] = ()
    for pattern in rules["json_fields"]:
        m = pattern.search(folded)
        if m:
            fields = tuple(f for f in re.split(r"\s*(?:,|、|，|\band\b|和|及|与)\s*", m.group("fields")) if f)
            wants_json = True
            break
    language = next(
        (lang for lang, patterns in rules["language"].items() if any(p.search(folded) for p in patterns)),
        None,
    )
    fmt: Format = "json" if wants_json else ("bullets" if bullets is not None else "text")
    return Constraints(
        max_words=_first_number(rules["max_words"], folded),
        max_chars=_first_number(rules["max_chars"], folded),
        max_sentences=_first_number(rules["max_sentences"], folded),
        bullets=bullets,
        format=fmt,
        json_fields=fields,
        language=language,
    )


def max_tokens_for(c: Constraints, default: int = DEFAULT_MAX_TOKENS) -> int:
    """A generous token budget from word/character limits (the limits are enforced on the text)."""
    budgets = []
    if c.max_words:
        budgets.append(c.max_words * TOKENS_PER_WORD)
    if c.max_chars:
        budgets.append(c.max_chars * TOKENS_PER_CHAR)
    if not budgets:
        return default
    return min(default * 4, math.ceil(min(budgets) * SAFETY) + 32)


# cleaning -----------------------------------------------------------------------------------

_INVISIBLE = re.compile(
    "[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]"
)
_EMOJI = re.compile("[\U0001f000-\U0001faff\u2600-\u27bf\ufe0f\u200d]")


def clean(text: str) -> str:
    """NFKC; no control, zero-width, bidi-override or emoji characters; whitespace runs kept."""
    return _EMOJI.sub("", _INVISIBLE.sub("", unicodedata.normalize("NFKC", text)))


_DELIMITER = re.compile(r"<\s*/?\s*sources\b", re.IGNORECASE)


def defuse(text: str) -> str:
    """Retrieved text cannot contain our delimiter: '<sources' / '</sources' lose their '<'."""
    return _DELIMITER.sub(lambda m: m.group(0).replace("<", "‹"), text)


# compilation --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Source:
    n: int
    chunk_id: str
    doc_id: str
    title: str | None
    text: str


@dataclass(frozen=True, slots=True)
class CompiledPrompt:
    messages: list[dict[str, str]]
    max_tokens: int
    response_format: dict[str, Any] | None
    constraints: Constraints
    sources: list[Source]
    domain: str | None
    fence: str = field(repr=False, default="")


@lru_cache(maxsize=1)
def _env() -> SandboxedEnvironment:
    from jinja2 import FileSystemLoader

    return SandboxedEnvironment(
        loader=FileSystemLoader(PROMPTS / "templates"), undefined=StrictUndefined, autoescape=False
    )


@lru_cache(maxsize=1)
def system_messages() -> dict[str, str]:
    data: dict[str, str] = yaml.safe_load((PROMPTS / "system_messages.yaml").read_text(encoding="utf-8"))
    return data


def render(template: str, **values: Any) -> str:
    return _env().get_template(template).render(**values).strip()


def json_schema(fields: Sequence[str], max_tokens: int | None = None) -> dict[str, Any]:
    """``response_format`` for guided decoding (OpenAI's json_schema shape; vLLM and llama.cpp
    enforce it by grammar). Each string is bounded by the answer's token budget (~2 characters a
    token, shared by the fields) so the object closes before ``max_tokens`` cuts it."""
    if not fields:
        return {"type": "json_object"}
    string: dict[str, Any] = {"type": "string"}
    if max_tokens:
        string["maxLength"] = max(16, (max_tokens - 8 * len(fields)) * 2 // len(fields))
    schema = {
        "type": "object",
        "properties": {f: dict(string) for f in fields},
        "required": list(fields),
    }
    return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}


def compile_prompt(
    question: str,
    passages: Sequence[Source],
    *,
    constraints: Constraints | None = None,
    domain: str | None = None,
    count_tokens: Callable[[Sequence[str]], list[int]],
    context_tokens: int = 4096,
    schema: Mapping[str, Any] | None = None,
    default_max_tokens: int = DEFAULT_MAX_TOKENS,
    source_tokens: int = 0,
) -> CompiledPrompt:
    """Messages for the chat model, with passages fitted to ``context_tokens`` minus the answer's budget;
    the first source is always given (the window permitting), each next one only while all of them stay
    within ``source_tokens`` (0: no cap)."""
    found = parse_constraints(question)
    c = found.merged(constraints) if constraints else found
    max_tokens = min(max_tokens_for(c, default_max_tokens), max(16, context_tokens // 4))
    fence = secrets.token_hex(6)
    system = render(
        "system.j2",
        domain_message=system_messages().get(domain or "default", system_messages()["default"]),
        language=c.language,
        max_words=c.max_words,
        max_chars=c.max_chars,
        max_sentences=c.max_sentences,
        format=c.format,
        bullets=c.bullets,
    )
    budget = context_tokens - max_tokens - sum(count_tokens([system, question])) - 64
    capped = source_tokens or budget
    fitted: list[Source] = []
    for source, tokens in zip(passages, count_tokens([p.text for p in passages]), strict=True):
        if tokens + 8 > budget or (fitted and tokens + 8 > capped):
            break
        budget -= tokens + 8
        capped -= tokens + 8
        fitted.append(
            replace(
                source, n=len(fitted) + 1, text=defuse(clean(source.text)), title=_clean_title(source.title)
            )
        )
    template = "answer_json.j2" if c.format == "json" else "answer.j2"
    user = render(template, sources=fitted, question=clean(question), fence=fence, fields=list(c.json_fields))
    response_format = None
    if c.format == "json":
        response_format = (
            {"type": "json_schema", "json_schema": {"name": "answer", "schema": dict(schema)}}
            if schema
            else json_schema(c.json_fields or ("answer",), max_tokens)
        )
    return CompiledPrompt(
        messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
        max_tokens=max_tokens,
        response_format=response_format,
        constraints=c,
        sources=fitted,
        domain=domain,
        fence=fence,
    )


def _clean_title(title: str | None) -> str | None:
    return defuse(clean(title)) if title else None


# enforcing limits on the answer -------------------------------------------------------------

_SENTENCES = re.compile(r"(?<=[.!?。！？])\s*")


def enforce_limits(text: str, c: Constraints) -> tuple[str, bool]:
    """The answer cut to whole sentences within the word / character / sentence limits.

    Returns (text, cut). A model that overshoots a stated limit is trimmed, never passed through.
    """
    sentences = [s for s in _SENTENCES.split(text.strip()) if s]
    kept: list[str] = []
    for sentence in sentences:
        candidate = [*kept, sentence]
        joined = " ".join(candidate)
        if c.max_words and count_words(joined) > c.max_words:
            break
        if c.max_chars and len(joined) > c.max_chars:
            break
        if c.max_sentences and len(candidate) > c.max_sentences:
            break
        kept = candidate
    if len(kept) == len(sentences):
        return text.strip(), False
    if not kept:  # the first sentence alone is over the limit: cut it
        return _cut(sentences[0], c), True
    return " ".join(kept), True


def _cut(sentence: str, c: Constraints) -> str:
    if _CJK.search(sentence):
        limit = min(x for x in (c.max_chars, c.max_words, len(sentence)) if x)
        return sentence[:limit]
    out: list[str] = []
    for word in sentence.split():
        candidate = " ".join([*out, word])
        if (c.max_words and count_words(candidate) > c.max_words) or (
            c.max_chars and len(candidate) > c.max_chars
        ):
            break
        out.append(word)
    return " ".join(out)


_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def count_words(text: str) -> int:
    """Words for English-like text; each CJK character counts as one."""
    cjk = len(_CJK.findall(text))
    rest = _CJK.sub(" ", re.sub(r"\[\d+(?:\s*[,–-]\s*\d+)*\]", "", text))
    return cjk + len(re.findall(r"\w+(?:['’-]\w+)*", rest))
