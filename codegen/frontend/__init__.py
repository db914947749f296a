"""Frontend: capture the reference (fx on the meta device), classify its ops, count work.

Input: a Task (the problem's source). Output: an fx graph whose nodes carry canonical operator
records (OpInfo) with shapes, FLOPs and compulsory bytes. Imports torch and graph.artifacts only.

`capture` traces, `spellings` maps each PyTorch spelling to a canonical op, `ops` classifies nodes
into `spec.OpSpec` records (the per-family rules in `*_ops.py`), `analysis` counts their work.
"""
