"""The guidance corpus and its Chroma store, end to end on a real persistent Chroma in a temp dir.

No network: HF_HUB_OFFLINE is set, socket connections raise, and the default embedder must be the
built-in hashing one (no model, no download).
"""

from __future__ import annotations

import io
import os
import shutil
import socket
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from rag_corpus import cli
from rag_corpus.chunking import CHUNK_CHARS, chunk_section
from rag_corpus.embedding import EMBEDDER_ENV, HashingEmbeddings, make_embeddings
from rag_corpus.errors import RagError
from rag_corpus.evaluation import evaluate, load_queries
from rag_corpus.loaders import Section, read_html, read_markdown
from rag_corpus.notes import LIST_FIELDS, NOTES_DIR, load_notes, parse_note
from rag_corpus.store import DOC_KIND, NOTE_KIND, GuidanceStore, build_store, ingest, retrieve


def _no_network(*args: object, **kwargs: object) -> None:
    raise AssertionError(f"network access attempted: {args!r}")


@pytest.fixture(scope="module", autouse=True)
def offline():
    """Everything in this module runs with the network cut and no embedder configured."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.delenv(EMBEDDER_ENV, raising=False)
        patch.setattr(socket.socket, "connect", _no_network)
        patch.setattr(socket, "create_connection", _no_network)
        patch.setattr(socket, "getaddrinfo", _no_network)
        yield


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rag-store")
    report = build_store(path)
    assert report.rebuilt and report.notes == len(load_notes())
    return path


# ---------------------------------------------------------------------------------------------- notes


def test_notes_parse_with_complete_metadata_and_unique_ids():
    notes = load_notes()
    assert len(notes) >= 60
    assert len({n.id for n in notes}) == len(notes)
    for note in notes:
        assert note.path.stem == note.id, f"{note.path.name}: file name should be the id"
        assert note.title and note.topic
        for name in LIST_FIELDS:
            assert getattr(note, name), f"{note.id}: empty {name}"
        assert 120 <= note.word_count() <= 300, f"{note.id}: {note.word_count()} words"
        assert note.id not in note.related


def test_notes_cover_every_required_topic():
    text = " ".join((n.title + " " + n.body).lower() for n in load_notes())
    for needle in [
        "coalesc", "float4", "bank conflict", "occupancy", "register", "__shfl", "wmma", "wgmma",
        "tf32", "bf16", "cp.async", "tma", "cublaslt", "epilogue", "cudnn", "cuda graph", "stream",
        "pinned", "block size", "fusion", "fp32", "h100", "h200", "blackwell", "ampere",
        "long_scoreboard", "many short kernels", "dram",
    ]:  # fmt: skip
        assert needle in text, f"no note covers {needle!r}"


def test_malformed_note_is_a_one_line_error(tmp_path: Path):
    bad = tmp_path / "bad.md"
    bad.write_text("---\nid: Bad Id\ntitle: t\ntopic: x\n---\nbody\n")
    with pytest.raises(RagError, match=r"bad\.md: field 'architectures'") as info:
        parse_note(bad)
    assert "\n" not in str(info.value)
    bad.write_text("no front matter\n")
    with pytest.raises(RagError, match="must start with a '---'"):
        parse_note(bad)


# ------------------------------------------------------------------------------------------ embedder


def test_default_embedder_is_offline_hashing_and_deterministic():
    embedder = make_embeddings()
    assert isinstance(embedder, HashingEmbeddings)
    text = "smsp__pcsamp_warps_issue_stalled_long_scoreboard dominant, DRAM at 40%"
    first, second = embedder.embed_query(text), HashingEmbeddings().embed_documents([text])[0]
    assert first == second and len(first) == 2048
    assert abs(sum(v * v for v in first) - 1.0) < 1e-9
    assert not any(embedder.embed_query("the of and"))  # stopwords only: no features
    assert "sentence_transformers" not in sys.modules


def test_inflections_and_metric_names_share_features():
    embedder = HashingEmbeddings()

    def cosine(a: str, b: str) -> float:
        return sum(x * y for x, y in zip(embedder.embed_query(a), embedder.embed_query(b), strict=True))

    assert cosine("coalesced loads", "coalescing load") > 0.9
    assert cosine("long scoreboard stalls", "smsp__pcsamp_warps_issue_stalled_long_scoreboard") > 0.3
    assert cosine("smem bank conflicts", "shared memory bank conflict") > 0.9
    assert cosine("bank conflicts", "pinned host memory") < 0.1


def test_local_model_path_must_exist(tmp_path: Path):
    with pytest.raises(RagError, match="embedding model directory not found"):
        make_embeddings(str(tmp_path / "no-such-model"))


# ------------------------------------------------------------------------------------- store & query


def test_symptom_query_returns_the_right_note_first(store_dir: Path):
    hits = retrieve(
        "shared memory bank conflicts, l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum high",
        k=3,
        store_dir=store_dir,
    )
    assert hits[0].id == "shared-memory-bank-conflicts"
    assert hits[0].score > hits[-1].score > 0
    assert hits[0].source.endswith("rag_corpus/notes/shared-memory-bank-conflicts.md")
    assert hits[0].metadata["kind"] == NOTE_KIND
    assert "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum" in hits[0].metadata["metrics"]

    hits = retrieve("launch-bound: 300 kernels per forward, GPU busy 25%", k=1, store_dir=store_dir)
    assert hits[0].id in {"diag-many-short-kernels", "kernel-launch-overhead"}


def test_where_filters_on_metadata(store_dir: Path):
    hits = retrieve(
        "tensor cores", k=5, where={"architectures": {"$contains": "blackwell"}}, store_dir=store_dir
    )
    assert hits and all("blackwell" in h.metadata["architectures"] for h in hits)
    hits = retrieve("occupancy", k=4, where={"topic": "diagnosis"}, store_dir=store_dir)
    assert hits and {h.metadata["topic"] for h in hits} == {"diagnosis"}


def test_recall_at_3_meets_the_bar(store_dir: Path):
    assert len(load_queries()) >= 40
    report = evaluate(3, store_dir=store_dir)
    assert report.recall >= 0.9, [m.query for m in report.misses]
    assert report.mean_fraction >= 0.75
    assert report.queries == len(load_queries())


def test_bad_queries_are_clear_errors(store_dir: Path):
    with pytest.raises(RagError, match="query is empty"):
        retrieve("   ", store_dir=store_dir)
    with pytest.raises(RagError, match="k must be a positive integer"):
        retrieve("bank conflicts", k=0, store_dir=store_dir)
    with pytest.raises(RagError, match="no searchable words"):
        retrieve("the of and", store_dir=store_dir)


def test_reopened_store_is_current_and_answers(store_dir: Path):
    reopened = GuidanceStore(store_dir)  # a fresh object, not the process cache
    assert reopened.is_current()
    assert reopened.count(NOTE_KIND) == len(load_notes())
    assert reopened.build().rebuilt is False
    assert reopened.retrieve("register spills to local memory", k=1)[0].id == "register-spills-local-memory"


def test_changed_notes_rebuild_on_first_query(tmp_path: Path):
    notes_dir = tmp_path / "notes"
    shutil.copytree(NOTES_DIR, notes_dir)
    store = GuidanceStore(tmp_path / "store", notes_dir=notes_dir)
    assert store.build().rebuilt
    old_stamp = store.stamp()["notes_fingerprint"]

    edited = notes_dir / "atomic-contention.md"
    edited.write_text(edited.read_text() + "\nZebrafish histogram marker for the rebuild test.\n")
    hits = store.retrieve("zebrafish marker", k=1)  # no explicit build: the query notices the change
    assert hits[0].id == "atomic-contention"
    assert store.stamp()["notes_fingerprint"] != old_stamp
    assert store.count(NOTE_KIND) == len(load_notes(notes_dir))


# -------------------------------------------------------------------------------------------- ingest

MARKDOWN_DOC = """# Tuning Guide
Intro text about the fictional Quokka GPU.

## Quokka Warp Scheduler
The quokka scheduler issues two instructions per cycle when operands come from the zygote cache.

```
# not a heading: inside a code fence
```

## Quokka Memory
Quokka memory has 48 banks of 8 bytes.
"""

HTML_DOC = """<html><head><title>Marmot Guide</title><style>h1 {color: red}</style></head>
<body><h1>Marmot Overview</h1><p>General words.</p>
<h2>Marmot Copy Engine</h2><p>The marmot copy engine moves tiles with the tessellate instruction &amp; a
barrier.</p><script>var marmot = 'ignored script text';</script></body></html>
"""


def test_markdown_and_html_readers_keep_sections(tmp_path: Path):
    md = tmp_path / "guide.md"
    md.write_text(MARKDOWN_DOC)
    sections = read_markdown(md)
    assert [s.title for s in sections] == ["Tuning Guide", "Quokka Warp Scheduler", "Quokka Memory"]
    assert "not a heading" in sections[1].text

    page = tmp_path / "guide.html"
    page.write_text(HTML_DOC)
    sections = read_html(page)
    assert [s.title for s in sections] == ["Marmot Overview", "Marmot Copy Engine"]
    assert "tessellate instruction & a" in sections[1].text.replace("\n", " ")
    assert not any("ignored script" in s.text or "color" in s.text for s in sections)


def test_ingest_markdown_and_html_chunks_are_retrievable(tmp_path: Path):
    store_path = tmp_path / "store"
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "quokka.md").write_text(MARKDOWN_DOC)
    (docs / "marmot.html").write_text(HTML_DOC)
    (docs / "ignored.txt").write_text("not a supported type")

    report = ingest(docs, store_dir=store_path)
    assert sorted(Path(f).name for f in report.files) == ["marmot.html", "quokka.md"]
    assert report.chunks == 5

    hit = retrieve("zygote cache quokka scheduler", k=1, store_dir=store_path)[0]
    assert hit.metadata["kind"] == DOC_KIND
    assert hit.source == str((docs / "quokka.md").resolve())
    assert hit.section == "Quokka Warp Scheduler"

    hit = retrieve("marmot copy engine tessellate", k=1, store_dir=store_path)[0]
    assert (hit.source, hit.section) == (str((docs / "marmot.html").resolve()), "Marmot Copy Engine")

    # Re-ingesting replaces a file's chunks instead of duplicating them; notes are untouched.
    again = ingest(docs / "quokka.md", store_dir=store_path)
    store = GuidanceStore(store_path)
    assert again.chunks == 3 and store.count(DOC_KIND) == 5
    assert store.count(NOTE_KIND) == len(load_notes())


def _one_page_pdf(text: str) -> bytes:
    """A minimal valid PDF with one line of Helvetica text (written by hand, no PDF library)."""
    content = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out, offsets = io.BytesIO(), []
    out.write(b"%PDF-1.4\n")
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    out.writelines(b"%010d 00000 n \n" % offset for offset in offsets)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return out.getvalue()


def test_ingest_pdf(tmp_path: Path):
    pytest.importorskip("pypdf")
    pdf = tmp_path / "wombat.pdf"
    pdf.write_bytes(_one_page_pdf("Wombat tensor cores prefer trapezoid tiles"))
    report = ingest(pdf, store_dir=tmp_path / "store")
    assert report.chunks == 1
    hit = retrieve("wombat trapezoid tiles", k=1, store_dir=tmp_path / "store")[0]
    assert hit.section == "page 1" and hit.source == str(pdf.resolve())


def test_pdf_without_pypdf_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "pypdf", None)  # makes `import pypdf` fail
    pdf = tmp_path / "doc.pdf"
    pdf.write_bytes(b"%PDF-1.4\n")
    with pytest.raises(RagError, match="pip install pypdf"):
        ingest(pdf, store_dir=tmp_path / "store")


def test_ingest_rejects_bad_paths(tmp_path: Path):
    with pytest.raises(RagError, match="no such file"):
        ingest(tmp_path / "missing.md", store_dir=tmp_path / "store")
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(RagError, match="unsupported file type"):
        ingest(tmp_path / "notes.txt", store_dir=tmp_path / "store")


def test_long_sections_are_chunked_with_overlap():
    paragraphs = [f"Paragraph {i} " + "word " * 60 for i in range(20)]
    chunks = chunk_section(Section("src.md", "Long", "\n\n".join(paragraphs)))
    assert len(chunks) >= 5
    assert all(len(c.text) <= CHUNK_CHARS + 2 for c in chunks)
    assert [c.index for c in chunks] == list(range(len(chunks)))
    for before, after in zip(chunks, chunks[1:], strict=False):
        assert after.text[:50] in before.text  # the next chunk starts with the previous tail


# ----------------------------------------------------------------------------------------------- CLI


def _run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli.main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_cli_query_eval_and_errors(store_dir: Path, tmp_path: Path):
    code, out, _ = _run_cli(
        "rag", "query", "register spills local memory", "-k", "2", "--store", str(store_dir)
    )
    assert code == 0
    assert "register-spills-local-memory" in out and "source: rag_corpus/notes/" in out and "section:" in out
    assert out.count("source:") == 2

    code, out, _ = _run_cli(
        "rag", "query", "bank conflicts", "-k", "1", "--show-text", "--store", str(store_dir)
    )
    assert code == 0 and "Symptoms:" in out and "32 banks" in out

    code, out, _ = _run_cli("rag", "eval", "--store", str(store_dir))
    assert code == 0 and "recall@3: " in out and float(out.split("recall@3: ")[1].split()[0]) >= 0.9

    code, out, _ = _run_cli("rag", "build", "--store", str(store_dir))
    assert code == 0 and "already current" in out

    code, _, err = _run_cli("rag", "ingest", str(tmp_path / "nothing-here"), "--store", str(store_dir))
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1


def test_add_rag_commands_sets_func_on_each_subcommand():
    import argparse

    parser = argparse.ArgumentParser(prog="stitchcuda")
    cli.add_rag_commands(parser.add_subparsers(dest="command"))
    for argv in (["rag", "build"], ["rag", "ingest", "x"], ["rag", "query", "t", "-k", "4"], ["rag", "eval"]):
        args = parser.parse_args(argv)
        assert callable(args.func), argv
    assert parser.parse_args(["rag", "query", "t", "-k", "4"]).k == 4


def test_nothing_loaded_a_model():
    assert socket.create_connection is _no_network  # the guard was active for the whole module
    assert "sentence_transformers" not in sys.modules
    assert os.environ.get("HF_HUB_OFFLINE") == "1"
