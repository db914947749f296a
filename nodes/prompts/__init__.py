"""LLM prompt templates (text files read by nodes/llm/prompting.py)."""
