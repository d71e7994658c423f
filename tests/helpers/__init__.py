"""Helpers for tests (spawn_tree: a real process tree that looks like a vLLM server)."""
