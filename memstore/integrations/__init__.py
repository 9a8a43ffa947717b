"""Outward adapters (a face): memstore as a retriever for LangChain and LlamaIndex (optional extras),
calling the public `Store` only."""
