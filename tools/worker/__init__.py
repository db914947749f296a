"""The worker island: the child process that builds, checks, times and profiles one candidate.

Everything here runs on the GPU machine in a fresh, killable process. It imports only torch, the
standard library, `tools.protocol` (the JSON wire format) and `tools.build` (the extension builder
the candidate's `load_inline` is routed to), so it runs on any CUDA box, langgraph or not.
`python -m tools.worker --request REQ.json --response RESP.json` is the entry point.
"""
