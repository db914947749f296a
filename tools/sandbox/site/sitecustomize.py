"""Imported by `site` in every sandboxed interpreter (this folder leads PYTHONPATH there)."""

from tools.sandbox import audit

audit.install()
