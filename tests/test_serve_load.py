"""`ct serve --tokens --writable` under 20 concurrent clients on loopback, each with its own token:
searches and some adds, a bounded count of requests. No request may fail, and every add is one
commit. The short run is in the default suite; the longer one (the figures of docs/serve.md) is
marked slow: `python tests/serve_load.py --clients 20 --requests 50` prints the same figures."""

from __future__ import annotations

import pytest

from conftest import commits, git_clean, make_store
from serve_load import ct_serve, fill, load, make_tokens


def _run(tmp_path, clients, requests, writers, add_every):
    st = make_store(tmp_path / "s")
    fill(st)
    before = len(commits(st.root))
    path, pairs = make_tokens(tmp_path, clients, writers)
    with ct_serve(st.root, path) as base:
        figures = load(base, pairs, requests, add_every)
    print(figures)  # shown with pytest -s
    assert figures["errors"] == 0, figures["first_errors"]
    assert figures["requests"] == clients * requests
    assert figures["adds"] == writers * (requests // add_every)
    assert len(commits(st.root)) == before + figures["adds"], "each add is one commit"
    assert git_clean(st.root)
    return figures


def test_twenty_clients_at_once_all_answered(tmp_path):
    _run(tmp_path, clients=20, requests=5, writers=2, add_every=5)


@pytest.mark.slow
def test_twenty_clients_a_thousand_requests(tmp_path):
    _run(tmp_path, clients=20, requests=50, writers=4, add_every=10)
