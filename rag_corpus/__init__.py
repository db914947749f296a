"""StitchCUDA's NVIDIA guidance corpus and its Chroma store.

The verifier grounds its advice in short notes written by the project (`notes/*.md`, each with
front matter naming the symptoms and profiler metrics that reveal the problem) and, optionally, in a
user's own NVIDIA documentation ingested with `rag ingest`. Modules, one job each:

- `notes`: parse and validate the notes and fingerprint their content;
- `embedding`: the offline hashing embedder (default) and a local sentence-transformers option;
- `loaders` and `chunking`: turn Markdown, HTML and PDF files into section-titled chunks;
- `store`: the persistent Chroma collection (`build_store`, `ingest`, `retrieve`);
- `evaluation`: recall@k over `eval_queries.jsonl`;
- `cli`: the `rag build | ingest | query | eval` commands.

Importing this package opens no store and loads no model.
"""
