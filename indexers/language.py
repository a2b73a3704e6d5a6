"""Which language a text is in, as far as the embedders care: Chinese, or not.

One rule for queries (the router's ``language`` feature) and for chunks (which dense model
embeds them, ``indexers.embed.split``), so that a query and the chunks it should meet land in
the same vector space. A text is Chinese when its ideographs are at least half its Latin letters:
a Chinese sentence that names "GDPR" or "Article 17" stays Chinese, an English one quoting 第十七条
stays English.
"""

from __future__ import annotations

import re
from typing import Literal, get_args

Language = Literal["zh", "en"]  # "en": anything that is not Chinese (the packaged models' split)
LANGUAGES: tuple[Language, ...] = get_args(Language)

_CJK = re.compile(r"[\u3400-\u9fff]+")
_LATIN = re.compile(r"[A-Za-z]+")


def text_language(text: str) -> Language:
    if _CJK.search(text) is None:  # most English text: one scan
        return "en"
    cjk = len(text) - len(_CJK.sub("", text))  # runs, not one match a character: 10× faster
    latin = len(text) - len(_LATIN.sub("", text))
    return "zh" if cjk * 2 >= latin else "en"
