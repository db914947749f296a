"""The one exception type of the RAG package, so callers and the CLI can report bad input cleanly."""

from __future__ import annotations


class RagError(Exception):
    """Bad input to the guidance store (a missing file, a malformed note, an unknown embedder).

    str() is one line that says what is wrong and, where there is one, how to fix it.
    """
