"""Read a user's NVIDIA documentation (Markdown, HTML, PDF) into titled sections.

Sections follow the document's own structure (headings, or the PDF outline) so every retrieved
chunk can say where in the source it came from. Only local files are read.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from rag_corpus.errors import RagError


@dataclass(frozen=True)
class Section:
    """A run of text under one heading of one source file."""

    source: str
    title: str
    text: str


MARKDOWN_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


def read_markdown(path: Path) -> list[Section]:
    """Split at ATX headings (`#` .. `######`), ignoring `#` lines inside fenced code blocks."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if text.startswith("---\n") and "\n---" in text[4:]:
        text = text[text.index("\n---", 4) + 4 :]
    sections: list[Section] = []
    lines: list[str] = []
    title, in_fence = path.stem, False
    for line in text.splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
        heading = None if in_fence else MARKDOWN_HEADING.match(line)
        if heading:
            sections.append(Section(str(path), title, "\n".join(lines).strip()))
            title, lines = heading.group(2).strip(), []
        else:
            lines.append(line)
    sections.append(Section(str(path), title, "\n".join(lines).strip()))
    return [s for s in sections if s.text]


class _SectionedHTML(HTMLParser):
    """Collects visible text, starting a new section at every h1-h6."""

    HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}
    HIDDEN = {"script", "style", "noscript", "template", "head"}
    BLOCKS = {"p", "div", "li", "tr", "br", "pre", "table", "section", "article", "dd", "dt", "blockquote"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: list[tuple[str, str]] = []
        self.title = ""
        self.page_title = ""
        self.parts: list[str] = []
        self.heading: list[str] | None = None
        self.hidden_depth = 0
        self.in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.HIDDEN:
            self.hidden_depth += 1
        if tag == "title":
            self.in_title = True
        elif tag in self.HEADINGS:
            self.flush()
            self.heading = []
        elif tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self.HIDDEN:
            self.hidden_depth = max(0, self.hidden_depth - 1)
        if tag == "title":
            self.in_title = False
        elif tag in self.HEADINGS and self.heading is not None:
            self.title = " ".join("".join(self.heading).split()) or self.title
            self.heading = None
        elif tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.page_title += data
        elif self.hidden_depth:
            return
        elif self.heading is not None:
            self.heading.append(data)
        else:
            self.parts.append(data)

    def flush(self) -> None:
        lines = (" ".join(line.split()) for line in "".join(self.parts).splitlines())
        text = "\n".join(line for line in lines if line)
        if text:
            self.sections.append((self.title, text))
        self.parts = []


def read_html(path: Path) -> list[Section]:
    """Visible text of an HTML page, one section per heading (scripts and styles dropped)."""
    parser = _SectionedHTML()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    parser.close()
    parser.flush()
    untitled = " ".join(parser.page_title.split()) or path.stem
    return [Section(str(path), title or untitled, text) for title, text in parser.sections]


def read_pdf(path: Path) -> list[Section]:
    """Page text grouped by the PDF's outline (bookmarks); pages without an outline entry keep 'page N'."""
    try:
        from pypdf import PdfReader
    except ImportError:
        raise RagError(f"{path}: reading PDF needs pypdf, install it with: pip install pypdf") from None
    try:
        reader = PdfReader(str(path))
        starts = _outline_starts(reader)
        sections: list[Section] = []
        title = ""
        for number, page in enumerate(reader.pages):
            title = starts.get(number, title) or f"page {number + 1}"
            text = (page.extract_text() or "").strip()
            if not text:
                continue
            if sections and sections[-1].title == title:
                sections[-1] = Section(str(path), title, sections[-1].text + "\n\n" + text)
            else:
                sections.append(Section(str(path), title, text))
    except RagError:
        raise
    except Exception as exc:  # pypdf raises many types for damaged files
        raise RagError(f"{path}: cannot read PDF ({type(exc).__name__}: {exc})") from None
    return sections


def _outline_starts(reader: Any) -> dict[int, str]:
    """Page index -> title of the last outline entry that starts on that page."""
    starts: dict[int, str] = {}

    def walk(items: list[Any]) -> None:
        for item in items:
            if isinstance(item, list):
                walk(item)
                continue
            try:
                starts[reader.get_destination_page_number(item)] = str(item.title).strip()
            except Exception:  # an entry pointing nowhere is skipped
                continue

    try:
        walk(reader.outline)
    except Exception:
        return {}
    return starts


READERS: dict[str, Callable[[Path], list[Section]]] = {
    ".md": read_markdown,
    ".markdown": read_markdown,
    ".html": read_html,
    ".htm": read_html,
    ".pdf": read_pdf,
}


def supported_files(path: Path) -> list[Path]:
    """The file itself, or every supported file under a directory (recursively, sorted)."""
    if not path.exists():
        raise RagError(f"{path}: no such file or directory")
    if path.is_file():
        if path.suffix.lower() not in READERS:
            raise RagError(f"{path}: unsupported file type (supported: {', '.join(sorted(READERS))})")
        return [path]
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in READERS)
    if not files:
        raise RagError(f"{path}: no Markdown, HTML or PDF files found in this directory")
    return files


def read_sections(path: Path) -> list[Section]:
    """Sections of one supported file."""
    return READERS[path.suffix.lower()](path)
