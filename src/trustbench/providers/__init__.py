"""Chat-model clients (OpenAI-compatible, Anthropic) that record usage, latency and cost."""

__all__: list[str] = []
