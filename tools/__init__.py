"""What the agents call: problem loading, builds, the isolated evaluation worker, checks, profilers.

Everything in this package that runs on the GPU machine (the worker and what it imports) needs only
torch and the standard library.
"""
