"""The persistent Chroma store of guidance: build, ingest, retrieve.

One directory ($STITCHCUDA_RAG_DIR, else ~/.cache/stitchcuda/rag) holds one collection per embedder
(vectors from different embedders are not comparable). The notes' content fingerprint is kept in the
collection's metadata, so the first query after a note changed rebuilds the notes part by itself,
while documents a user ingested stay. The verifier queries with diagnosis text, never with code.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from rag_corpus.chunking import chunk_sections
from rag_corpus.embedding import embeddings_fingerprint, make_embeddings
from rag_corpus.errors import RagError
from rag_corpus.loaders import read_sections, supported_files
from rag_corpus.notes import NOTES_DIR, Note, load_notes, notes_fingerprint

STORE_ENV = "STITCHCUDA_RAG_DIR"
COLLECTION_PREFIX = "guidance"
REPO_ROOT = Path(__file__).resolve().parent.parent
NOTE_KIND = "note"
DOC_KIND = "doc"


def default_store_dir() -> Path:
    """$STITCHCUDA_RAG_DIR, else ~/.cache/stitchcuda/rag."""
    return Path(os.environ.get(STORE_ENV) or Path.home() / ".cache" / "stitchcuda" / "rag").expanduser()


@dataclass(frozen=True)
class Hit:
    """One retrieved note or document chunk; `score` is cosine similarity (1 is identical)."""

    id: str
    title: str
    text: str
    source: str
    section: str
    score: float
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BuildReport:
    """What `build_store` found or did."""

    store_dir: Path
    collection: str
    notes: int
    rebuilt: bool
    fingerprint: str


@dataclass(frozen=True)
class IngestReport:
    """Files read and chunks stored by one `ingest` call."""

    files: list[str]
    chunks: int


def note_document(note: Note) -> Document:
    """A note as a Chroma document: lists stay lists so `where` can use `$contains`."""
    try:
        source = str(note.path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        source = str(note.path)
    metadata: dict[str, Any] = {
        "kind": NOTE_KIND,
        "id": note.id,
        "title": note.title,
        "topic": note.topic,
        "source": source,
        "section": note.title,
        "architectures": list(note.architectures),
        "symptoms": list(note.symptoms),
        "metrics": list(note.metrics),
        "related": list(note.related),
    }
    return Document(page_content=note.embedding_text(), metadata=metadata, id=note.id)


class GuidanceStore:
    """The guidance collection of one embedder in one store directory."""

    def __init__(
        self,
        store_dir: str | Path | None = None,
        embedder: str | Embeddings | None = None,
        notes_dir: Path = NOTES_DIR,
    ) -> None:
        self.store_dir = Path(store_dir).expanduser() if store_dir else default_store_dir()
        self.embeddings = make_embeddings(embedder)
        self.notes_dir = notes_dir
        self.collection_name = f"{COLLECTION_PREFIX}-{embeddings_fingerprint(self.embeddings)}"
        self._vectorstore: Any = None
        self._client: Any = None

    def _open(self) -> None:
        """Open the client and the LangChain wrapper once, always passing our embedder in."""
        import chromadb
        from chromadb.config import Settings
        from langchain_chroma import Chroma

        self.store_dir.mkdir(parents=True, exist_ok=True)
        self._client = chromadb.PersistentClient(
            path=str(self.store_dir), settings=Settings(anonymized_telemetry=False)
        )
        self._vectorstore = Chroma(
            collection_name=self.collection_name,
            embedding_function=self.embeddings,
            client=self._client,
            collection_metadata={"hnsw:space": "cosine"},
        )

    @property
    def vectorstore(self) -> Any:
        """The LangChain Chroma wrapper over the collection (opened on first use)."""
        if self._vectorstore is None:
            self._open()
        return self._vectorstore

    def _collection(self) -> Any:
        """The raw chromadb collection, for its metadata (where the build stamp lives)."""
        if self._client is None:
            self._open()
        return self._client.get_collection(self.collection_name, embedding_function=None)

    def stamp(self) -> dict[str, Any]:
        """The build stamp kept in the collection metadata (empty before the first build)."""
        return dict(self._collection().metadata or {})

    def is_current(self) -> bool:
        """True when the stored notes match the notes on disk."""
        return self.stamp().get("notes_fingerprint") == notes_fingerprint(self.notes_dir)

    def count(self, kind: str | None = None) -> int:
        """Stored entries, optionally only notes or only ingested document chunks."""
        where = {"kind": kind} if kind else None
        return len(self.vectorstore.get(where=where, include=[])["ids"])

    def build(self, force: bool = False) -> BuildReport:
        """(Re)load every note unless the stored fingerprint already matches; ingested docs are kept."""
        fingerprint = notes_fingerprint(self.notes_dir)
        if not force and self.stamp().get("notes_fingerprint") == fingerprint:
            return BuildReport(
                self.store_dir, self.collection_name, self.count(NOTE_KIND), False, fingerprint
            )
        notes = load_notes(self.notes_dir)
        self._collection().modify(metadata={"notes_fingerprint": "rebuilding"})  # a crash leaves it stale
        old_ids = self.vectorstore.get(where={"kind": NOTE_KIND}, include=[])["ids"]
        if old_ids:
            self.vectorstore.delete(ids=old_ids)
        documents = [note_document(note) for note in notes]
        self.vectorstore.add_documents(documents, ids=[note.id for note in notes])
        self._collection().modify(
            metadata={
                "notes_fingerprint": fingerprint,
                "embedder": embeddings_fingerprint(self.embeddings),
                "notes": len(notes),
            }
        )
        return BuildReport(self.store_dir, self.collection_name, len(notes), True, fingerprint)

    def ingest(self, path: str | Path) -> IngestReport:
        """Add a Markdown, HTML or PDF file (or every such file under a directory), replacing older copies."""
        files = supported_files(Path(path).expanduser())
        total = 0
        for file in files:
            source = str(file.resolve())
            chunks = chunk_sections(read_sections(file))
            self.vectorstore.delete(where={"source": source})
            if not chunks:
                continue
            documents = [
                Document(
                    page_content=f"{chunk.section}\n\n{chunk.text}",
                    metadata={
                        "kind": DOC_KIND,
                        "id": self._chunk_id(source, chunk.index),
                        "title": chunk.section,
                        "source": source,
                        "section": chunk.section,
                        "chunk": chunk.index,
                    },
                )
                for chunk in chunks
            ]
            self.vectorstore.add_documents(documents, ids=[d.metadata["id"] for d in documents])
            total += len(documents)
        return IngestReport([str(f) for f in files], total)

    @staticmethod
    def _chunk_id(source: str, index: int) -> str:
        return "doc-" + hashlib.sha1(f"{source}#{index}".encode()).hexdigest()[:16]

    def retrieve(self, query: str, k: int = 3, where: dict[str, Any] | None = None) -> list[Hit]:
        """The k entries nearest to a diagnosis text; builds the notes first when missing or stale."""
        if not isinstance(query, str) or not query.strip():
            raise RagError("query is empty: pass the diagnosis text (bottleneck, symptoms, metric names)")
        if not isinstance(k, int) or k < 1:
            raise RagError(f"k must be a positive integer, got {k!r}")
        if not self.is_current():
            self.build()
        vector = self.embeddings.embed_query(query)
        if not any(vector):
            raise RagError(f"query has no searchable words: {query!r}")
        try:
            results = self.vectorstore.similarity_search_by_vector_with_relevance_scores(
                vector, k=k, filter=where
            )
        except ValueError as exc:
            raise RagError(f"invalid where filter {where!r}: {str(exc).splitlines()[0]}") from None
        return [
            Hit(
                id=str(doc.metadata.get("id") or doc.id),
                title=str(doc.metadata.get("title", "")),
                text=doc.page_content,
                source=str(doc.metadata.get("source", "")),
                section=str(doc.metadata.get("section", "")),
                score=round(1.0 - float(distance), 4),
                metadata=dict(doc.metadata),
            )
            for doc, distance in results
        ]


_OPEN_STORES: dict[tuple[str, str], GuidanceStore] = {}


def open_store(
    store_dir: str | Path | None = None, embedder: str | Embeddings | None = None
) -> GuidanceStore:
    """A store, reused within the process when named by directory and embedder spec (models load once)."""
    if isinstance(embedder, Embeddings):
        return GuidanceStore(store_dir, embedder)
    key = (str(Path(store_dir).expanduser() if store_dir else default_store_dir()), embedder or "")
    if key not in _OPEN_STORES:
        _OPEN_STORES[key] = GuidanceStore(store_dir, embedder)
    return _OPEN_STORES[key]


def build_store(
    store_dir: str | Path | None = None, embedder: str | Embeddings | None = None, force: bool = False
) -> BuildReport:
    """Build (or refresh) the notes collection; a no-op when it is already current, unless forced."""
    return open_store(store_dir, embedder).build(force=force)


def ingest(
    path: str | Path, store_dir: str | Path | None = None, embedder: str | Embeddings | None = None
) -> IngestReport:
    """Add a user's own NVIDIA documentation (Markdown, HTML, PDF; a file or a directory)."""
    return open_store(store_dir, embedder).ingest(path)


def retrieve(
    query: str,
    k: int = 3,
    where: dict[str, Any] | None = None,
    *,
    store_dir: str | Path | None = None,
    embedder: str | Embeddings | None = None,
) -> list[Hit]:
    """Top-k guidance for a diagnosis text, e.g. where={"kind": "note"} or {"topic": "occupancy"}."""
    return open_store(store_dir, embedder).retrieve(query, k=k, where=where)
