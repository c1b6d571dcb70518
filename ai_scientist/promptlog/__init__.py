"""Prompt-log records: the request key, the redacted JSON record of every LLM call and its
markdown rendering. Above ``context`` (it renders ledgers), below ``llm`` (the client writes them)."""
