"""One-document files → (title, text, metadata): plain text, Markdown, HTML, PDF.

Each reader takes the file's bytes and returns a ``Parsed`` or raises ``Unreadable`` with a
reason a user can act on; ``indexers.ingest.load`` turns that into a per-document failure.
Dates come from the file's own metadata (front matter, ``<meta>``, the PDF info dictionary)
so that tier placement and date filters work on files as well as on JSONL.
"""

from __future__ import annotations

import datetime as dt
import io
import logging
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from indexers.text.structure import FRONT_MATTER

log = logging.getLogger(__name__)
# pypdf logs each repair of a malformed file as a WARNING ("incorrect startxref pointer"); the file
# is read, or refused as Unreadable, either way, so only its errors are news to the user.
logging.getLogger("pypdf").setLevel(logging.ERROR)


class Unreadable(Exception):
    """The file cannot be turned into a document; the message says why."""


@dataclass(frozen=True, slots=True)
class Parsed:
    text: str
    title: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    page_starts: tuple[int, ...] = ()  # PDF: offset in ``text`` where each page begins


_SNIFF = 8192  # bytes looked at to tell text from binary
_CONTROL = frozenset(range(32)) - {9, 10, 12, 13}  # tab, line feed, form feed, carriage return
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def decode(data: bytes) -> str:
    """The file's text; binary content (a NUL byte, or mostly control characters, in its first
    8 KB: an executable, an image, an archive renamed .txt) is refused as binary, whatever the
    file's name says, and text in another encoding is told to convert."""
    head = data[:_SNIFF]
    if head.startswith(_UTF16_BOMS):
        raise Unreadable("UTF-16 text; convert the file to UTF-8")
    if b"\x00" in head or sum(b in _CONTROL for b in head) > len(head) // 10:
        raise Unreadable("binary content (NUL bytes or control characters), not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise Unreadable(f"not valid UTF-8 (byte {exc.start}); convert the file to UTF-8") from exc


TITLE_CHARS = 100  # a plain-text file's first line up to this long is its title


def read_text(data: bytes) -> Parsed:
    """The text as written; its first line is the title when it is short, more text follows, and
    it does not end a sentence ("Office facilities notes", not "Keep logs for 30 days.")."""
    text = decode(data)
    first, _, rest = text.strip().partition("\n")
    first = first.strip()
    titled = (
        0 < len(first) <= TITLE_CHARS
        and rest.strip()
        and not first.endswith((".", "!", "?", "。", "！", "？", ":", "："))
    )
    return Parsed(text, first if titled else None)


def read_markdown(data: bytes) -> Parsed:
    """The file's whole text, as written (``documents get`` gives back what was stored, byte for
    byte); front matter (YAML between ``---`` lines) → metadata too, its ``title`` → the title,
    else the first level-1 heading (``# 员工手册`` or a setext ``===`` heading). The front matter
    stays in the text: it is part of the file, and its words (tags, authors) are worth finding."""
    text = decode(data)
    metadata: dict[str, Any] = {}
    body = 0
    m = FRONT_MATTER.match(text)
    if m:
        try:
            front = yaml.safe_load(m.group(1))
        except yaml.YAMLError as exc:
            raise Unreadable(f"front matter is not valid YAML: {exc}") from exc
        if front is not None and not isinstance(front, dict):
            raise Unreadable("front matter must be a YAML mapping")
        metadata = {str(k): _jsonable(v) for k, v in (front or {}).items()}
        body = m.end()
    title = metadata.pop("title", None)
    if title is None:
        title = first_heading(text[body:])
    return Parsed(text, str(title) if title is not None else None, metadata)


_ATX_H1 = re.compile(r" {0,3}#[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*")
_SETEXT_H1 = re.compile(r" {0,3}=+[ \t]*")
_FENCE = re.compile(r" {0,3}(```|~~~)")


def first_heading(text: str) -> str | None:
    """The first level-1 heading outside fenced code ("# comment" in a shell block is no title)."""
    fence: str | None = None
    previous = ""
    for line in text.splitlines():
        opened = _FENCE.match(line)
        if fence is not None:
            fence = None if opened and opened.group(1) == fence else fence
        elif opened:
            fence = opened.group(1)
        elif (atx := _ATX_H1.fullmatch(line)) and atx.group(1).strip():
            return atx.group(1).strip()
        elif _SETEXT_H1.fullmatch(line) and previous.strip():
            return previous.strip()
        previous = line if fence is None else ""
    return None


def _jsonable(value: Any) -> Any:
    """YAML gives dates and datetimes; documents keep ISO strings (what JSON carries)."""
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


_BOILERPLATE = "script, style, noscript, template, nav, header, footer, aside, form, svg, iframe"
_DATE_META = (
    'meta[property="article:published_time"]',
    'meta[name="date"]',
    'meta[name="dc.date"]',
    'meta[name="DC.date"]',
    'meta[itemprop="datePublished"]',
)
_BLOCKS = re.compile(r"\n\s*\n+")


def read_html(data: bytes) -> Parsed:
    """Main text of a page: <main>/<article> if present, else <body>, without boilerplate."""
    from selectolax.lexbor import LexborHTMLParser as HTMLParser

    tree = HTMLParser(decode(data))
    title_node = tree.css_first("title") or tree.css_first("h1")
    title = title_node.text(strip=True) if title_node is not None else None
    metadata: dict[str, Any] = {}
    date = _html_date(tree)
    if date:
        metadata["date"] = date
    html = tree.css_first("html")
    lang = html.attributes.get("lang") if html is not None else None
    if lang:
        metadata["lang"] = lang.split("-")[0].lower()
    for node in tree.css(_BOILERPLATE):
        node.decompose()
    root = tree.css_first("main") or tree.css_first("article") or tree.body
    if root is None:
        raise Unreadable("no <body> in the HTML")
    text = _BLOCKS.sub("\n\n", root.text(separator="\n", strip=True))
    return Parsed(text, title or None, metadata)


def _html_date(tree: Any) -> str | None:
    for selector in _DATE_META:
        node = tree.css_first(selector)
        if node is not None and node.attributes.get("content"):
            return str(node.attributes["content"])[:10]
    node = tree.css_first("time[datetime]")
    return str(node.attributes["datetime"])[:10] if node is not None else None


def read_pdf(data: bytes) -> Parsed:
    """Text per page (pypdf), pages joined by blank lines, each page's start offset kept."""
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise Unreadable("the PDF is encrypted")
        pages = [page.extract_text() or "" for page in reader.pages]
        info: dict[str, Any] = dict(reader.metadata or {})
    except Unreadable:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as exc:
        raise Unreadable(f"not a readable PDF: {exc}") from exc
    starts, parts, offset = [], [], 0
    for page in pages:
        starts.append(offset)
        parts.append(page.strip())
        offset += len(parts[-1]) + 2
    text = "\n\n".join(parts)
    if not text.strip():
        raise Unreadable("the PDF has no extractable text (scanned pages need OCR, which is not supported)")
    metadata: dict[str, Any] = {"pages": len(pages)}
    date = _pdf_date(str(info.get("/CreationDate") or ""))
    if date:
        metadata["date"] = date
    title = str(info.get("/Title") or "").strip() or None
    return Parsed(text, title, metadata, tuple(starts))


def _pdf_date(raw: str) -> str | None:
    """PDF dates look like ``D:20240131120000+01'00'``."""
    m = re.match(r"(?:D:)?(\d{4})(\d{2})?(\d{2})?", raw)
    if not m:
        return None
    try:
        return dt.date(int(m.group(1)), int(m.group(2) or 1), int(m.group(3) or 1)).isoformat()
    except ValueError:
        return None


READERS = {
    ".txt": read_text,
    ".md": read_markdown,
    ".markdown": read_markdown,
    ".html": read_html,
    ".htm": read_html,
    ".pdf": read_pdf,
}
