"""Embedders for the guidance store: an offline hashing embedder by default, a local model optionally.

The verifier's queries are diagnosis text (bottleneck names, profiler phrases, Nsight metric names),
so exact technical vocabulary carries most of the signal. A deterministic lexical embedder over
stemmed unigrams, bigrams and metric names therefore retrieves well, needs no download and gives the
same vectors on every machine. A sentence-transformers model can replace it, but only from a local
directory: nothing here ever fetches weights.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections import Counter
from pathlib import Path

from langchain_core.embeddings import Embeddings

from rag_corpus.errors import RagError

EMBEDDER_ENV = "STITCHCUDA_RAG_EMBEDDER"
HASHING_SPEC = "hash"

# Words that say nothing about a bottleneck. Dropped outright.
_STOPWORD_TEXT = """a about above after again against all am an and any are as at be because been before being below
    between both but by could did do does doing down during few for from further had has have having he
    her here hers him his how i if in into is it its itself just me more most my no nor not now of off on
    once only or other our out over own same she should so some such than that the their them then there
    these they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours can may might must shall also via per e g eg ie etc x"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())

# Words so common in this corpus, or in every Nsight metric name, that they barely separate one note
# from another: kept, but down-weighted. The whole metric name still counts in full (see `features`).
_COMMON_TEXT = """kernel gpu cuda use make run time data value need much many like way work get give take often
    usually well one two each every first second new good high low bound avg sum pct peak sustained
    elapsed active ratio max min inst executed sass smsp sm pipe op mem per_cycle"""
COMMON_WORDS = frozenset(_COMMON_TEXT.split())
COMMON_WEIGHT = 0.3
NUMBER_WEIGHT = 0.4
BIGRAM_WEIGHT = 0.7
COMPOUND_WEIGHT = 1.5

# Profiler slang and abbreviations folded onto the words the notes use.
ALIASES = {
    "smem": "shared memory",
    "shmem": "shared memory",
    "gmem": "global memory",
    "lmem": "local memory",
    "regs": "registers",
    "reg": "register",
    "hbm": "dram",
    "hbm3": "dram",
    "hbm3e": "dram",
    "occ": "occupancy",
    "sol": "speed of light",
    "gemm": "matmul",
    "gemms": "matmul",
    "matmuls": "matmul",
    "sync": "synchronize",
    "syncs": "synchronize",
    "synchronization": "synchronize",
    "synchronisation": "synchronize",
}

TOKEN_PATTERN = re.compile(r"[a-z0-9]+(?:[._]+[a-z0-9]+)*")
COMPOUND_SPLIT = re.compile(r"[._]+")
DOUBLE_CONSONANT = re.compile(r"([b-df-hj-km-np-rtv-z])\1$")


def stem(word: str) -> str:
    """A small suffix stripper so 'coalesced', 'coalescing' and 'coalesce' meet in one feature."""
    if len(word) <= 3 or word.isdigit():
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("sses"):
        word = word[:-2]
    elif word.endswith("ing") and len(word) > 5:
        word = word[:-3]
    elif word.endswith("ed") and len(word) > 4:
        word = word[:-2]
    elif word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        word = word[:-1]
    if DOUBLE_CONSONANT.search(word) and len(word) > 3 and word[-1] not in "lsz":
        word = word[:-1]
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word


COMMON_STEMS = frozenset(stem(word) for word in COMMON_WORDS)


def word_weight(word: str) -> float:
    """How much a (stemmed) word counts, before sublinear scaling."""
    if word.isdigit():
        return NUMBER_WEIGHT
    if word in COMMON_STEMS:
        return COMMON_WEIGHT
    return 1.0


def expand_aliases(text: str) -> str:
    """Rewrite abbreviations as whole words so 'smem' and 'shared memory' share features."""
    return TOKEN_PATTERN.sub(lambda m: ALIASES.get(m.group(0), m.group(0)), text)


def features(text: str) -> dict[str, float]:
    """Feature values: weight x (1 + ln tf) over stemmed unigrams, adjacent bigrams and metric names.

    A metric like `smsp__pcsamp_warps_issue_stalled_long_scoreboard` adds itself as one feature and
    its parts as words, so a query naming the metric and one saying 'long scoreboard stalls' both match.
    """
    counts: Counter[str] = Counter()
    weights: dict[str, float] = {}
    words: list[str] = []
    for raw in TOKEN_PATTERN.findall(expand_aliases(text.lower())):
        if "_" in raw:
            counts["m:" + raw] += 1
            weights["m:" + raw] = COMPOUND_WEIGHT
        parts = [p for p in COMPOUND_SPLIT.split(raw) if p] if ("_" in raw or "." in raw) else [raw]
        for part in parts:
            for piece in ALIASES.get(part, part).split():
                words.append("" if piece in STOPWORDS else stem(piece))
    for word in words:
        if word:
            counts["u:" + word] += 1
            weights["u:" + word] = word_weight(word)
    for left, right in zip(words, words[1:], strict=False):
        if left and right:
            key = f"b:{left} {right}"
            counts[key] += 1
            weights[key] = BIGRAM_WEIGHT * min(word_weight(left), word_weight(right))
    return {key: weights[key] * (1.0 + math.log(tf)) for key, tf in counts.items()}


def bucket(feature: str, dim: int) -> tuple[int, float]:
    """Signed feature hashing with a stable hash (Python's own hash() is salted per run)."""
    value = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
    return value % dim, (1.0 if (value >> 63) & 1 else -1.0)


class HashingEmbeddings(Embeddings):
    """Deterministic, dependency-free lexical embeddings (LangChain `Embeddings` interface).

    Sublinear term frequency (1 + ln tf) keeps a repeated word from dominating; vectors are
    L2-normalised so Chroma's cosine distance compares direction only.
    """

    version = 1  # bump whenever `features` or `bucket` change: it renames the store's collection

    def __init__(self, dim: int = 2048) -> None:
        if dim < 64:
            raise RagError(f"hashing embedder dimension must be at least 64, got {dim}")
        self.dim = dim

    @property
    def fingerprint(self) -> str:
        """Names the vector space; the store keeps one collection per fingerprint."""
        return f"hash{self.dim}v{self.version}"

    def embed(self, text: str) -> list[float]:
        vector = [0.0] * self.dim
        for feature, value in features(text).items():
            index, sign = bucket(feature, self.dim)
            vector[index] += sign * value
        norm = math.sqrt(sum(v * v for v in vector))
        return [v / norm for v in vector] if norm > 0 else vector

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.embed(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed(text)


class LocalSentenceTransformerEmbeddings(Embeddings):
    """A sentence-transformers model loaded from a local directory, never downloaded."""

    def __init__(self, model_dir: str | Path) -> None:
        path = Path(model_dir).expanduser().resolve()
        if not path.is_dir():
            raise RagError(
                f"embedding model directory not found: {path} (give a local sentence-transformers folder)"
            )
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise RagError(
                "a local embedding model needs sentence-transformers: pip install sentence-transformers"
            ) from None
        self.path = path
        self.model = SentenceTransformer(str(path), device="cpu", local_files_only=True)

    @property
    def fingerprint(self) -> str:
        return "st-" + hashlib.sha1(str(self.path).encode()).hexdigest()[:10]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.model.encode(texts, normalize_embeddings=True).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def make_embeddings(spec: str | Embeddings | None = None) -> Embeddings:
    """The embedder a spec names: None reads $STITCHCUDA_RAG_EMBEDDER; 'hash' (default) or a local model path."""
    if isinstance(spec, Embeddings):
        return spec
    spec = (spec or os.environ.get(EMBEDDER_ENV) or HASHING_SPEC).strip()
    if spec == HASHING_SPEC:
        return HashingEmbeddings()
    if spec.startswith(HASHING_SPEC) and spec[len(HASHING_SPEC) :].isdigit():
        return HashingEmbeddings(int(spec[len(HASHING_SPEC) :]))
    return LocalSentenceTransformerEmbeddings(spec)


def embeddings_fingerprint(embeddings: Embeddings) -> str:
    """A short name for an embedder's vector space (its class name when it does not declare one)."""
    return str(getattr(embeddings, "fingerprint", type(embeddings).__name__.lower()))
