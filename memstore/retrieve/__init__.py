"""Retrieval over the index: search (exact, vector, fused), recall by time, context synthesis."""
