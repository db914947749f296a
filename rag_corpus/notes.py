"""The project's own guidance notes: parsing, validation and a content fingerprint.

A note is a Markdown file whose front matter (between two `---` lines) carries the fields the
verifier's diagnosis is matched against: the symptoms an engineer reads off a profile and the
Nsight metric names that reveal them. The fingerprint lets the store notice edited notes and rebuild.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from rag_corpus.errors import RagError

NOTES_DIR = Path(__file__).resolve().parent / "notes"
LIST_FIELDS = ("architectures", "symptoms", "metrics", "related")
TEXT_FIELDS = ("id", "title", "topic")
ID_PATTERN = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


@dataclass(frozen=True)
class Note:
    """One guidance note with its validated front matter."""

    id: str
    title: str
    topic: str
    architectures: tuple[str, ...]
    symptoms: tuple[str, ...]
    metrics: tuple[str, ...]
    related: tuple[str, ...]
    body: str
    path: Path

    def embedding_text(self) -> str:
        """What the store embeds and returns: title, symptoms and metrics lead, then the advice."""
        return "\n".join(
            [
                self.title,
                f"Topic: {self.topic}. Architectures: {', '.join(self.architectures)}.",
                f"Symptoms: {'; '.join(self.symptoms)}.",
                f"Metrics: {', '.join(self.metrics)}.",
                "",
                self.body,
            ]
        )

    def word_count(self) -> int:
        """Words of the body alone (front matter excluded)."""
        return len(self.body.split())


def split_front_matter(text: str, origin: str) -> tuple[str, str]:
    """Return (front matter, body) of a text that starts with a `---` fenced block."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise RagError(f"{origin}: a note must start with a '---' front-matter line")
    for end, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            return "\n".join(lines[1:end]), "\n".join(lines[end + 1 :]).strip()
    raise RagError(f"{origin}: front matter is not closed by a second '---' line")


def parse_note(path: Path) -> Note:
    """Parse and validate one note file; every problem is a one-line `RagError` naming the file."""
    origin = str(path)
    header, body = split_front_matter(path.read_text(encoding="utf-8"), origin)
    try:
        meta = yaml.safe_load(header)
    except yaml.YAMLError as exc:
        raise RagError(f"{origin}: front matter is not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(meta, dict):
        raise RagError(f"{origin}: front matter must be a mapping of fields")
    for name in TEXT_FIELDS:
        if not isinstance(meta.get(name), str) or not meta[name].strip():
            raise RagError(f"{origin}: field '{name}' must be a non-empty string")
    for name in LIST_FIELDS:
        value = meta.get(name)
        if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
            raise RagError(f"{origin}: field '{name}' must be a non-empty list of strings")
    if not ID_PATTERN.match(meta["id"]):
        raise RagError(f"{origin}: id '{meta['id']}' must be a lowercase slug like 'shared-memory-banks'")
    if not body:
        raise RagError(f"{origin}: the note has no body after its front matter")
    return Note(
        id=meta["id"],
        title=meta["title"].strip(),
        topic=meta["topic"].strip(),
        architectures=tuple(meta["architectures"]),
        symptoms=tuple(meta["symptoms"]),
        metrics=tuple(meta["metrics"]),
        related=tuple(meta["related"]),
        body=body,
        path=path,
    )


def note_files(notes_dir: Path = NOTES_DIR) -> list[Path]:
    """The note files in a stable order."""
    return sorted(notes_dir.glob("*.md"))


def load_notes(notes_dir: Path = NOTES_DIR) -> list[Note]:
    """All notes, validated together: unique ids and `related` links that point at real notes."""
    notes = [parse_note(path) for path in note_files(notes_dir)]
    if not notes:
        raise RagError(f"{notes_dir}: no notes (*.md) found")
    seen: dict[str, Path] = {}
    for note in notes:
        if note.id in seen:
            raise RagError(f"{note.path}: id '{note.id}' is already used by {seen[note.id]}")
        seen[note.id] = note.path
    for note in notes:
        unknown = [r for r in note.related if r not in seen]
        if unknown:
            raise RagError(f"{note.path}: related ids not found: {', '.join(unknown)}")
    return notes


def notes_fingerprint(notes_dir: Path = NOTES_DIR) -> str:
    """A hash of every note's name and bytes: it changes whenever a note is added, edited or removed."""
    digest = hashlib.sha256()
    for path in note_files(notes_dir):
        digest.update(path.name.encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()[:16]
