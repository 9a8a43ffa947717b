"""A LlamaIndex retriever over a memstore store (`pip install 'memstore[llamaindex]'`).

    from memstore.integrations.llamaindex import MemstoreRetriever
    nodes = MemstoreRetriever("~/memory", k=5).retrieve("what did we decide about the budget")

Each hit becomes a `NodeWithScore` around a `TextNode` whose id is the record id, whose text is
the verbatim record text and whose metadata carries ts, role, actor, session, type, day and
source. Search runs through `Store.search`, the same call as `ct search`.
"""

from __future__ import annotations

import threading
from pathlib import Path

try:
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "the LlamaIndex retriever needs llama-index-core: pip install 'memstore[llamaindex]'"
    ) from exc

# Shown to the LLM with the text when LlamaIndex synthesises an answer; ids and scores are not.
LLM_KEYS = ("ts", "role", "session", "source")


class MemstoreRetriever(BaseRetriever):
    """Hybrid (or exact, or vector) search over one store, returning NodeWithScore."""

    def __init__(
        self, store, k: int = 5, mode: str = "hybrid", search_kwargs: dict | None = None, **kwargs
    ):
        """`store` is a `memstore.Store` or the path of one; `search_kwargs` go to `Store.search`
        (since, until, role, actor, type, session, now, alpha)."""
        super().__init__(**kwargs)
        self.store, self.k, self.mode = store, k, mode
        self.search_kwargs = dict(search_kwargs or {})
        self._local = threading.local()
        self._home = threading.get_ident()

    def _store(self):
        # The index's SQLite connection belongs to the thread that opened it; `aretrieve` and
        # query engines may call from other threads, which open their own Store from the same root.
        from ..store import Store

        if isinstance(self.store, Store) and threading.get_ident() == self._home:
            return self.store
        st = getattr(self._local, "store", None)
        if st is None:
            root = (
                self.store.root if isinstance(self.store, Store) else Path(self.store).expanduser()
            )
            st = self._local.store = Store.open(root)
        return st

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = self._store().search(
            query_bundle.query_str, k=self.k, mode=self.mode, **self.search_kwargs
        )
        out = []
        for h in hits:
            src = h.source
            meta = {
                "ts": h.ts,
                "role": h.role,
                "actor": h.actor,
                "session": h.session,
                "type": h.type,
                "day": h.day,
                "source": src.get("path") if isinstance(src, dict) else src,
            }
            if isinstance(src, dict) and "chunk" in src:
                meta["chunk"] = src["chunk"]
            node = TextNode(
                id_=h.id,
                text=h.text,
                metadata=meta,
                excluded_llm_metadata_keys=[k for k in meta if k not in LLM_KEYS],
                excluded_embed_metadata_keys=list(meta),
            )
            out.append(NodeWithScore(node=node, score=h.score))
        return out
