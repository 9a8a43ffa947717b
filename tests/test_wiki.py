"""ct build-wiki: articles fetched from a loopback HTTP server, stripped, chunked and committed once."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

import pytest

from conftest import commits, ct, git_clean, make_store
from memstore.ingest.wiki import FetchError, article_text, page_url, read_topics

PHOTO = """<!DOCTYPE html><html><head><title>Photosynthesis - Wikipedia</title>
<style>.x{color:red}</style><script>var leaked = "SCRIPT TEXT";</script></head>
<body><div id="mw-navigation">Main page Contents NAVIGATION TEXT</div>
<div id="content"><h1 id="firstHeading">Photosynthesis</h1>
<div id="mw-content-text" class="mw-body-content"><div class="mw-parser-output">
<div class="hatnote">For other uses, see HATNOTE TEXT.</div>
<table class="infobox"><tr><td>INFOBOX TEXT</td></tr></table>
<p><b>Photosynthesis</b> is a process used by plants to convert light energy into chemical energy
that fuels the organism's activities.<sup class="reference"><a href="#cite1">[1]</a></sup> Chlorophyll
absorbs&nbsp;light.<br>Oxygen is released.</p>
<figure><img src="leaf.png"><figcaption>FIGURE CAPTION</figcaption></figure>
<h2><span class="mw-headline">Light reactions</span><span class="mw-editsection">[edit]</span></h2>
<p>In the light-dependent reactions, water is split and ATP is made in the thylakoid membranes.
<p>The Calvin cycle then fixes carbon dioxide into sugar.
<ul><li>Stage one: capture<li>Stage two: fixation</ul>
<div class="reflist"><ol class="references"><li>REFERENCE TEXT</li></ol></div>
</div></div>
<div id="catlinks">Categories: CATEGORY TEXT</div></div></body></html>"""

QUANTUM = """<html><body><div id="mw-content-text"><p>Quantum computing uses qubits, which can be in
superpositions of states, to solve some problems faster than classical computers.</p>
<p>Shor's algorithm factors integers in polynomial time on such a machine.</p></div></body></html>"""

STUB = """<html><body><div id="mw-content-text"><p>A stub.</p></div></body></html>"""
NO_CONTENT = """<html><body><p>This is not an article page.</p></body></html>"""

PAGES = {
    "Photosynthesis": PHOTO,
    "Quantum_computing": QUANTUM,
    "Stub_page": STUB,
    "Search_page": NO_CONTENT,
}


class _Handler(BaseHTTPRequestHandler):
    pages: dict = PAGES
    seen: list

    def do_GET(self):
        title = unquote(self.path.rsplit("/", 1)[-1])
        self.seen.append(title)
        body = self.pages.get(title)
        if body is None:
            self.send_error(404, "Not Found")
            return
        data = body.encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def wiki_server():
    """A loopback server of fixture articles under /wiki/; yields (base_url, handler class)."""
    handler = type("H", (_Handler,), {"pages": dict(PAGES), "seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/wiki/", handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _log_records(root):
    out = []
    for p in sorted((root / "log").rglob("*.jsonl")):
        out += [
            json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line.strip()
        ]
    return out


def test_article_text_keeps_prose_and_drops_chrome():
    text = article_text(PHOTO, "Photosynthesis")
    assert text.startswith("# Photosynthesis\n\nPhotosynthesis is a process used by plants")
    assert "Chlorophyll absorbs light. Oxygen is released." in text  # &nbsp; and <br> become spaces
    assert "\n\n## Light reactions\n\n" in text
    assert "[edit]" not in text
    assert "- Stage one: capture\n\n- Stage two: fixation" in text  # implicitly closed <li>s
    assert "The Calvin cycle then fixes carbon dioxide into sugar." in text  # implicitly closed <p>
    for gone in (
        "SCRIPT",
        "NAVIGATION",
        "INFOBOX",
        "[1]",
        "FIGURE",
        "REFERENCE",
        "CATEGORY",
        "HATNOTE",
        "color:red",
    ):
        assert gone not in text, gone


def test_article_text_without_content_div_is_an_error():
    with pytest.raises(FetchError, match="mw-content-text"):
        article_text(NO_CONTENT, "Search page")
    with pytest.raises(FetchError, match="no text"):
        article_text(
            '<div id="mw-content-text"><table><tr><td>only a table</td></tr></table></div>', "T"
        )


def test_page_url_and_topics_file(tmp_path):
    assert (
        page_url("https://en.wikipedia.org/wiki/", "Renaissance art")
        == "https://en.wikipedia.org/wiki/Renaissance_art"
    )
    assert page_url("http://h/wiki/", "C++ (language)") == "http://h/wiki/C%2B%2B_(language)"
    f = tmp_path / "topics.txt"
    f.write_text(
        "# science\nPhotosynthesis\n\n  Quantum computing  \nPhotosynthesis\n", encoding="utf-8"
    )
    assert read_topics(f) == ["Photosynthesis", "Quantum computing"]
    f.write_text("# only comments\n\n", encoding="utf-8")
    with pytest.raises(Exception, match="no titles"):
        read_topics(f)


def _store_and_topics(tmp_path, *titles):
    """A fresh store and a topics file listing `titles`, one per line."""
    topics = tmp_path / "topics.txt"
    topics.write_text("".join(t + "\n" for t in titles), encoding="utf-8")
    return make_store(tmp_path / "s"), topics


def test_build_wiki_ingests_pages_skips_failures_and_commits_once(tmp_path, wiki_server):
    base, handler = wiki_server
    st, topics = _store_and_topics(
        tmp_path, "Photosynthesis", "Quantum computing", "No such article", "Search page"
    )
    before = len(commits(st.root))
    proc = ct("-C", st.root, "build-wiki", "--topics-file", topics, "--base-url", base)
    assert "skipped No such article: HTTP 404" in proc.stderr
    assert "skipped Search page: no article content" in proc.stderr
    log = commits(st.root)
    assert len(log) == before + 1
    assert log[0].startswith("Build wiki: 2 pages (") and "127.0.0.1" in log[0]
    assert git_clean(st.root)
    recs = _log_records(st.root)
    assert {r["session"] for r in recs} == {"Photosynthesis", "Quantum computing"}
    assert all(r["type"] == "doc" for r in recs)
    assert {r["source"]["path"] for r in recs} == {
        base + "Photosynthesis",
        base + "Quantum_computing",
    }
    # a failed page is never stored under its title
    assert not any("No such article" in r["text"] or "Search page" in r["text"] for r in recs)
    # the stored chunks are exact slices of the stripped text
    photo = "".join(
        r["text"]
        for r in sorted(recs, key=lambda r: r["source"]["chunk"])
        if r["session"] == "Photosynthesis"
    )
    assert photo == article_text(PHOTO, "Photosynthesis")

    hits = json.loads(ct("-C", st.root, "search", "--json", "Calvin cycle carbon dioxide").stdout)
    assert hits["hits"][0]["session"] == "Photosynthesis"

    # running again adds nothing and makes no commit
    proc = ct("-C", st.root, "build-wiki", "--topics-file", topics, "--base-url", base)
    assert "nothing new" in proc.stderr
    assert len(commits(st.root)) == before + 1
    assert git_clean(st.root)


def test_changed_page_supersedes_its_old_chunks(tmp_path, wiki_server):
    base, handler = wiki_server
    st, topics = _store_and_topics(tmp_path, "Quantum computing")
    ct("-C", st.root, "build-wiki", "--topics-file", topics, "--base-url", base)
    handler.pages["Quantum_computing"] = QUANTUM.replace("Shor's algorithm", "Grover's algorithm")
    ct("-C", st.root, "build-wiki", "--topics-file", topics, "--base-url", base)
    assert "1 changed" in commits(st.root)[0]
    out = json.loads(ct("-C", st.root, "search", "--json", "--mode", "exact", "algorithm").stdout)
    texts = " ".join(h["text"] for h in out["hits"])
    assert "Grover" in texts and "Shor" not in texts
    assert git_clean(st.root)


def test_limit_and_min_chars(tmp_path, wiki_server):
    base, handler = wiki_server
    st, topics = _store_and_topics(tmp_path, "Stub page", "Quantum computing", "Photosynthesis")
    proc = ct(
        "-C",
        st.root,
        "build-wiki",
        "--topics-file",
        topics,
        "--base-url",
        base,
        "--limit",
        "2",
        "--min-chars",
        "50",
    )
    assert "skipped Stub page: 8 characters, under --min-chars 50" in proc.stderr
    assert handler.seen == [
        "Stub_page",
        "Quantum_computing",
    ]  # --limit: the third title is never fetched
    assert {r["session"] for r in _log_records(st.root)} == {"Quantum computing"}
    assert git_clean(st.root)


def test_nothing_fetched_is_an_error_and_writes_nothing(tmp_path):
    import socket

    st, topics = _store_and_topics(tmp_path, "Photosynthesis")
    with socket.socket() as s:  # a port that nothing listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        before = commits(st.root)
        proc = ct(
            "-C",
            st.root,
            "build-wiki",
            "--topics-file",
            topics,
            "--base-url",
            f"http://127.0.0.1:{port}/wiki/",
            "--timeout",
            "5",
            check=False,
        )
    assert proc.returncode == 1
    assert "no page could be fetched" in proc.stderr and "cannot connect" in proc.stderr
    assert commits(st.root) == before
    assert not list(st.root.glob("log/**/*.jsonl"))
    assert git_clean(st.root)


def test_bad_arguments_name_the_problem(tmp_path):
    st = make_store(tmp_path / "s")
    proc = ct("-C", st.root, "build-wiki", "--topics-file", tmp_path / "missing.txt", check=False)
    assert proc.returncode == 2 and "missing.txt: no such topics file" in proc.stderr
    topics = tmp_path / "t.txt"
    topics.write_text("X\n", encoding="utf-8")  # a valid topics file, so only --base-url is wrong
    proc = ct(
        "-C", st.root, "build-wiki", "--topics-file", topics, "--base-url", "ftp://x/", check=False
    )
    assert proc.returncode == 2 and "--base-url" in proc.stderr
    assert git_clean(st.root)
