"""Node support code: the worker client, the run's report and the budget clock.

Node modules import from here; nothing here imports a node module.
"""
