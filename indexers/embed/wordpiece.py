"""BERT WordPiece token ids, each distinct word tokenized once.

BERT's tokenizer normalises a text (control characters out, lower case, accents stripped, CJK
characters spaced out: each character on its own), splits it at whitespace and punctuation, and
reads each word alone (WordPiece), so a text's ids are its words' ids joined. Text is Zipfian: a
few thousand words are most of any corpus. ``WordIds`` splits text where the tokenizer would
(one C-level regex a text), looks each word up in a memo, and asks the tokenizer itself only
for words it has not seen, so the ids are the tokenizer's own. In ingestion the tokenizer was
most of the CPU time (a 4 MB unit of SciFact: 1.27 s in ``encode_batch_fast`` and 0.39 s
turning its encodings into lists).

ASCII text splits into letter-and-digit runs and punctuation marks. In other text a CJK
character is a word, and so is each piece between ASCII whitespace (and CJK characters) that
holds another non-ASCII character: the normaliser works character by character and NFD never
reaches across a space, so such a piece's ids are the same alone as in its text. What cannot be
split exactly goes to the tokenizer whole: text holding an ASCII control character that the
normaliser drops (the words either side would join), or one of the tokenizer's added tokens
("[SEP]" is matched before any splitting). tests/unit/test_wordpiece.py compares the ids with
the tokenizer's on every collection the repo ships, hostile strings and random text.
"""

from __future__ import annotations

import re
import uuid
import weakref
from collections.abc import Callable, Sequence
from itertools import chain
from typing import Any

# An ASCII text is words of letters and digits, punctuation marks (each one a word: BERT counts
# every printable ASCII non-alphanumeric as punctuation) and whitespace. (Memo keys keep their
# case: the tokenizer lower-cases, and Python's ``lower`` is not quite Rust's.)
_WORDS = re.compile(r"[A-Za-z0-9]+|[!-/:-@\[-`{-~]")
# Any other text: a CJK character is a word (the normaliser's ranges, which skip U+2B820-U+2B91F),
# and so is a piece between ASCII whitespace and CJK characters with another non-ASCII character.
_CJK = (
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002a6df"
    "\U0002a700-\U0002b81f\U0002b920-\U0002ceaf\U0002f800-\U0002fa1f"
)
_PIECES = re.compile(
    f"[{_CJK}]|[^ \\t\\n\\r{_CJK}]*[^\\x00-\\x7f{_CJK}][^ \\t\\n\\r{_CJK}]*|" + _WORDS.pattern
)
_DROPPED = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # control characters the normaliser removes

Memo = dict[str, tuple[int, ...]]  # tuples: the collector stops tracking them, lists it walks


class _Memos:
    """A word's ids and their count; shared by the copies of one ``WordIds`` in a process."""

    def __init__(self) -> None:
        self.ids: Memo = {}
        self.sizes: dict[str, int] = {}


_SHARED: weakref.WeakValueDictionary[str, _Memos] = weakref.WeakValueDictionary()  # uid → memos
Split = tuple[int, list[str]]  # a text's place, its words
Encode = Callable[[list[str]], list[list[int]]]


class WordIds:
    """Token ids (no special tokens, untruncated) of texts, memoised by word."""

    def __init__(
        self, encode: Encode, added: Sequence[str], limit: int = 1_000_000, uid: str | None = None
    ) -> None:
        self._encode = encode  # the tokenizer: texts → ids, no special tokens
        self._tokens = [a for a in added if a]
        self._uid = uid or uuid.uuid4().hex
        # text holding an added token (matched before splitting; any case, to be safe) goes whole
        self._added = re.compile("|".join(map(re.escape, self._tokens)), re.I) if self._tokens else None
        self._limit = limit
        # copies unpickled in one process (a worker's tasks) share their memo
        self._memos = _SHARED.setdefault(self._uid, _Memos())

    @classmethod
    def of(cls, counter: Any, encode: Encode) -> WordIds | None:
        """For a tokenizer (``transformers`` fast tokenizer) that splits as BERT's does. Its
        normaliser's options (lower case, accents, cleaning) all work character by character."""
        backend = counter.backend_tokenizer
        parts = (backend.normalizer, backend.pre_tokenizer, backend.model)
        if [type(p).__name__ for p in parts] != ["BertNormalizer", "BertPreTokenizer", "WordPiece"]:
            return None
        if not getattr(backend.normalizer, "clean_text", True):  # control characters kept in words
            return None
        added = [t.content for t in backend.get_added_tokens_decoder().values()]
        return cls(encode, added)

    def __getstate__(self) -> dict[str, Any]:  # travels to workers without its memo
        return {"encode": self._encode, "added": self._tokens, "limit": self._limit, "uid": self._uid}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["encode"], state["added"], state["limit"], state["uid"])  # type: ignore[misc]

    def ids(self, texts: Sequence[str]) -> list[list[int]]:
        memo, _, split, whole = self._learn(texts)
        out: list[list[int]] = [[] for _ in texts]
        for i, words in split:
            out[i] = list(chain.from_iterable(map(memo.__getitem__, words)))
        for i, ids in zip(whole, self._encode([texts[i] for i in whole]) if whole else [], strict=True):
            out[i] = ids
        return out

    def counts(self, texts: Sequence[str]) -> list[int]:
        """``len`` of each text's ids, without putting them together."""
        _, sizes, split, whole = self._learn(texts)
        out = [0] * len(texts)
        for i, words in split:
            out[i] = sum(map(sizes.__getitem__, words))
        for i, ids in zip(whole, self._encode([texts[i] for i in whole]) if whole else [], strict=True):
            out[i] = len(ids)
        return out

    def _learn(
        self, texts: Sequence[str]
    ) -> tuple[Memo, dict[str, int], list[tuple[int, list[str]]], list[int]]:
        """Each text's words (or its place among those to tokenize whole), every word memoised."""
        split: list[Split] = []
        whole: list[int] = []
        seen: set[str] = set()
        added = self._added
        for i, text in enumerate(texts):
            if _DROPPED.search(text) or (added is not None and added.search(text)):
                whole.append(i)
                continue
            words = (_WORDS if text.isascii() else _PIECES).findall(text)
            split.append((i, words))
            seen.update(words)
        memos = self._memos
        memo, sizes = memos.ids, memos.sizes
        new = [w for w in seen if w not in memo]
        if len(memo) + len(new) > self._limit:  # new dicts: a thread still reading the old ones
            memo, sizes = memos.ids, memos.sizes = {}, {}  # keeps them
            new = list(seen)
        found = self._encode(new) if new else []
        memo.update(zip(new, map(tuple, found), strict=True))
        sizes.update(zip(new, map(len, found), strict=True))
        return memo, sizes, split, whole
