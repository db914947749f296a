"""Cut sections into overlapping chunks small enough to embed and to show as evidence."""

from __future__ import annotations

import re
from dataclasses import dataclass

from rag_corpus.errors import RagError
from rag_corpus.loaders import Section

CHUNK_CHARS = 1500
OVERLAP_CHARS = 200
PARAGRAPH_BREAK = re.compile(r"\n\s*\n")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class Chunk:
    """One piece of a section, numbered within its source file."""

    source: str
    section: str
    index: int
    text: str


def _pieces(text: str, limit: int) -> list[str]:
    """Paragraphs, with any paragraph longer than the limit cut at sentence ends, then hard-cut."""
    pieces: list[str] = []
    for paragraph in PARAGRAPH_BREAK.split(text):
        paragraph = paragraph.strip()
        if len(paragraph) <= limit:
            pieces.extend([paragraph] if paragraph else [])
            continue
        for sentence in SENTENCE_END.split(paragraph):
            pieces.extend(sentence[i : i + limit] for i in range(0, len(sentence), limit))
    return pieces


def _tail(text: str, size: int) -> str:
    """The last `size` characters, starting at a word boundary, carried into the next chunk."""
    if len(text) <= size:
        return text
    cut = text[-size:]
    space = cut.find(" ")
    return cut[space + 1 :] if 0 <= space < size // 2 else cut


def chunk_section(
    section: Section, start_index: int = 0, size: int = CHUNK_CHARS, overlap: int = OVERLAP_CHARS
) -> list[Chunk]:
    """Greedy packing of paragraphs up to `size` characters; each chunk repeats the previous tail."""
    if not 0 <= overlap < size // 2:
        raise RagError(f"chunk overlap must be between 0 and half the chunk size ({size}), got {overlap}")
    chunks: list[Chunk] = []
    current = ""
    for piece in _pieces(section.text, size - overlap):
        if current and len(current) + len(piece) + 2 > size:
            chunks.append(Chunk(section.source, section.title, start_index + len(chunks), current))
            current = _tail(current, overlap)
        current = f"{current}\n\n{piece}" if current else piece
    if current.strip():
        chunks.append(Chunk(section.source, section.title, start_index + len(chunks), current))
    return chunks


def chunk_sections(
    sections: list[Section], size: int = CHUNK_CHARS, overlap: int = OVERLAP_CHARS
) -> list[Chunk]:
    """Chunks of all sections of one file, numbered consecutively."""
    chunks: list[Chunk] = []
    for section in sections:
        chunks.extend(chunk_section(section, len(chunks), size, overlap))
    return chunks
