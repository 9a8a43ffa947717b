"""The LangChain and LlamaIndex retrievers, each tested when its extra is installed."""

from __future__ import annotations

import asyncio
import threading

import pytest

from conftest import make_store


@pytest.fixture
def docs_store(tmp_path):
    """A store with two conversation turns and two document chunks from one file."""
    st = make_store(tmp_path / "s")
    st.add(
        "We settled on a 40k budget for the offsite.",
        role="assistant",
        session="plan",
        ts="2026-03-10T18:00:00Z",
    )
    st.add("The cat knocked over a plant.", role="user", session="home", ts="2026-03-11T09:00:00Z")
    notes = tmp_path / "notes.md"
    notes.write_text("# Venue\n\nThe offsite venue is a farmhouse near Lisbon.\n", encoding="utf-8")
    st.ingest_path(notes)
    return st, notes


def test_langchain_retriever_returns_documents_with_metadata(docs_store):
    pytest.importorskip("langchain_core")
    from langchain_core.documents import Document

    from memstore.integrations.langchain import MemstoreRetriever

    st, notes = docs_store
    retriever = MemstoreRetriever(store=st, k=3, mode="exact")
    docs = retriever.invoke("budget")
    assert len(docs) == 1 and isinstance(docs[0], Document)
    d = docs[0]
    assert d.page_content == "We settled on a 40k budget for the offsite."
    assert d.metadata["role"] == "assistant" and d.metadata["ts"] == "2026-03-10T18:00:00.000000Z"
    assert d.metadata["session"] == "plan" and d.metadata["score"] > 0 and d.id == d.metadata["id"]
    assert d.metadata["source"] is None

    farm = retriever.invoke("farmhouse")
    assert (
        farm[0].metadata["source"] == f"{notes.parent.name}/{notes.name}"
    )  # portable: folder name + path
    assert farm[0].metadata["source_detail"]["chunk"] == 0
    assert "farmhouse near Lisbon" in farm[0].page_content

    # filters pass through to Store.search
    only_user = MemstoreRetriever(store=st, k=5, mode="exact", search_kwargs={"role": "user"})
    assert only_user.invoke("budget") == []


def test_langchain_retriever_works_from_a_path_and_other_threads(docs_store):
    pytest.importorskip("langchain_core")
    from memstore.integrations.langchain import MemstoreRetriever

    st, _ = docs_store
    by_path = MemstoreRetriever(store=str(st.root), k=2, mode="exact")
    assert by_path.invoke("plant")[0].metadata["session"] == "home"
    given = MemstoreRetriever(store=st, k=2, mode="exact")
    assert given.invoke("plant")  # opens the index on this thread first
    # ainvoke runs the sync retriever on an executor thread, where this thread's SQLite handle is unusable
    docs = asyncio.run(given.ainvoke("budget"))
    assert [d.metadata["session"] for d in docs] == ["plan"]
    box = []
    t = threading.Thread(target=lambda: box.append(given.invoke("plant")))
    t.start()
    t.join(timeout=60)
    assert box and box[0][0].metadata["session"] == "home"


def test_llamaindex_retriever_returns_nodes_with_scores(docs_store):
    pytest.importorskip("llama_index.core")
    from llama_index.core.schema import MetadataMode, NodeWithScore

    from memstore.integrations.llamaindex import MemstoreRetriever

    st, notes = docs_store
    retriever = MemstoreRetriever(st, k=3, mode="exact")
    nodes = retriever.retrieve("budget")
    assert len(nodes) == 1 and isinstance(nodes[0], NodeWithScore)
    n = nodes[0]
    assert n.node.get_content() == "We settled on a 40k budget for the offsite."
    assert n.node.node_id == st.search("budget", k=1, mode="exact")[0].id
    assert (
        n.score > 0
        and n.node.metadata["role"] == "assistant"
        and n.node.metadata["session"] == "plan"
    )
    llm_view = n.node.get_content(metadata_mode=MetadataMode.LLM)
    assert "ts: 2026-03-10" in llm_view and "actor" not in llm_view

    farm = retriever.retrieve("farmhouse")
    assert (
        farm[0].node.metadata["source"] == f"{notes.parent.name}/{notes.name}"
        and farm[0].node.metadata["chunk"] == 0
    )

    by_path = MemstoreRetriever(str(st.root), k=5, mode="exact", search_kwargs={"role": "user"})
    assert [x.node.metadata["session"] for x in by_path.retrieve("plant")] == ["home"]
    assert by_path.retrieve("budget") == []
    assert [x.node.node_id for x in asyncio.run(retriever.aretrieve("budget"))] == [n.node.node_id]
