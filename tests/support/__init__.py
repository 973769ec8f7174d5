"""Reusable test support: a scriptable local OpenAI-compatible server and a tiny echo track."""
