"""A LangChain retriever over a memstore store (`pip install 'memstore[langchain]'`).

    from memstore.integrations.langchain import MemstoreRetriever
    retriever = MemstoreRetriever(store="~/memory", k=5)
    docs = retriever.invoke("what did we decide about the budget")

Each hit becomes a `Document` whose `page_content` is the verbatim record text and whose
metadata carries id, ts, role, source, score (plus actor, session, type, day and the full source
dict). Search runs through `Store.search`, the same call as `ct search`.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

try:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from pydantic import PrivateAttr
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "the LangChain retriever needs langchain-core: pip install 'memstore[langchain]'"
    ) from exc


def hit_metadata(hit) -> dict:
    """Flat metadata for a Hit: LangChain's convention is a string `source` (a path or URL)."""
    src = hit.source
    return {
        "id": hit.id,
        "ts": hit.ts,
        "role": hit.role,
        "actor": hit.actor,
        "type": hit.type,
        "session": hit.session,
        "day": hit.day,
        "score": hit.score,
        "source": src.get("path") if isinstance(src, dict) else src,
        "source_detail": src if isinstance(src, dict) else None,
    }


class MemstoreRetriever(BaseRetriever):
    """Hybrid (or exact, or vector) search over one store, returning LangChain Documents."""

    store: Any
    """A `memstore.Store`, or the path of one."""
    k: int = 5
    mode: str = "hybrid"
    """hybrid | exact | vector"""
    search_kwargs: dict = {}
    """Passed to `Store.search`: since, until, role, actor, type, session, now, alpha."""

    _local: threading.local = PrivateAttr(default_factory=threading.local)
    _home: int = PrivateAttr(default_factory=threading.get_ident)

    def _store(self):
        # The index's SQLite connection belongs to the thread that opened it, and LangChain runs
        # sync retrievers on executor threads for `ainvoke`: a Store given to us serves the thread
        # that made the retriever; every other thread opens its own from the same root.
        from ..store import Store

        given = self.store
        if isinstance(given, Store) and threading.get_ident() == self._home:
            return given
        st = getattr(self._local, "store", None)
        if st is None:
            root = given.root if isinstance(given, Store) else Path(given).expanduser()
            st = self._local.store = Store.open(root)
        return st

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        hits = self._store().search(query, k=self.k, mode=self.mode, **self.search_kwargs)
        return [Document(page_content=h.text, metadata=hit_metadata(h), id=h.id) for h in hits]
