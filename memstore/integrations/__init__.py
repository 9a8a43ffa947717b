"""Outward adapters: memstore as a retriever for LangChain and LlamaIndex (optional extras)."""
