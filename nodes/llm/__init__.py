"""Building blocks of the LLM policy: settings per role, the chat client, structured output, code
extraction, prompts and tracing config.

Importing this package loads no model client (langchain-openai is imported inside the call that
builds one), so `nodes.llm.errors` is safe to import from any node.
"""
