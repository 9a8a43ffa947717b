"""Documents: reStructuredText and AsciiDoc chunked by sections, exclude patterns and their
defaults, and release histories (changelogs) marked at ingest and ranked below how-to pages."""

from __future__ import annotations

from pathlib import Path

import pytest

from memstore.ingest.chunk import chunk
from memstore.ingest.walk import Excluded, FileItem, doc_kind, kind_of, walk

from conftest import ct


def words(s: str) -> int:
    return len(s.split())


def check_exact(text: str, chunks) -> None:
    assert "".join(c.text for c in chunks) == text
    for i, c in enumerate(chunks):
        assert c.index == i and text[c.start : c.end] == c.text


RST = """.. _guide:

=======
 Guide
=======

Intro paragraph. It has two sentences.

.. _install:

Install
=======

Run the installer::

    pip install memstore

    # a blank line inside the literal block must not split it
    ct init

Then check it.

From source
-----------

.. code-block:: bash

    git clone x

    make install

Options
~~~~~~~

None worth naming.

Usage
=====

Search by meaning. Search by words.
"""


def test_rst_sections_give_heading_paths_at_every_level():
    chunks = chunk(RST, "rst", words, max_tokens=8, overlap_tokens=0)
    check_exact(RST, chunks)
    heads = {c.heading for c in chunks}
    assert "Guide" in heads
    assert "Guide > Install" in heads
    assert "Guide > Install > From source" in heads
    assert "Guide > Usage" in heads  # a "=" title after "~" goes back up to the second level
    usage = next(c for c in chunks if "Search by meaning" in c.text)
    assert usage.heading == "Guide > Usage"
    options = next(c for c in chunks if "None worth naming" in c.text)
    assert options.heading.endswith("From source > Options")


def test_rst_label_opens_its_section_and_literal_blocks_stay_whole():
    chunks = chunk(RST, "rst", words, max_tokens=30, overlap_tokens=0)
    install = next(c for c in chunks if c.heading == "Guide > Install")
    assert install.text.startswith(
        ".. _install:\n\nInstall\n=======\n"
    )  # the label, not the end of "Guide"
    literal = RST[RST.index("Run the installer::") : RST.index("ct init\n") + 8]
    assert any(literal in c.text for c in chunks), "the :: paragraph and its block are one piece"
    directive = RST[RST.index(".. code-block:: bash") : RST.index("make install\n") + 13]
    assert any(directive in c.text for c in chunks)


def test_rst_chunks_end_where_sections_start():
    chunks = chunk(RST, "rst", words, max_tokens=200, overlap_tokens=0)
    check_exact(RST, chunks)
    assert [c.heading for c in chunks] == [
        "Guide",
        "Guide > Install",
        "Guide > Install > From source",
        "Guide > Install > From source > Options",
        "Guide > Usage",
    ]
    # a title with nothing under it yet goes with its first subsection, named by the deeper path
    text = "Top\n===\n\nSub\n---\n\nSome text.\n\nNext\n----\n\nMore text.\n"
    chunks = chunk(text, "rst", words, max_tokens=200, overlap_tokens=0)
    assert [(c.text, c.heading) for c in chunks] == [
        ("Top\n===\n\nSub\n---\n\nSome text.\n\n", "Top > Sub"),
        ("Next\n----\n\nMore text.\n", "Top > Next"),
    ]


def test_rst_giant_literal_block_is_cut_at_lines_only():
    code = "".join(f"    x{i} = {i}\n\n" for i in range(80))
    text = f"Title\n=====\n\nCode::\n\n{code}\nAfter.\n"
    chunks = chunk(text, "rst", words, max_tokens=30, overlap_tokens=0)
    check_exact(text, chunks)
    assert len(chunks) > 2
    assert all(c.text.endswith("\n") for c in chunks)
    assert all(c.heading == "Title" for c in chunks)


def test_rst_text_that_only_looks_like_titles():
    text = "A paragraph line\nand its second line\n----\n\nx::\n\n    Inside\n    ======\n\nEnd.\n"
    chunks = chunk(text, "rst", words, max_tokens=200, overlap_tokens=0)
    check_exact(text, chunks)
    assert [c.heading for c in chunks] == [""]  # no title in mid-paragraph or in a literal block


ADOC = """= Manual

Preface text.

== Install

[source,bash]
----
pip install memstore

ct init
----

=== From source

Clone it.

== Usage

Search.
"""


def test_asciidoc_headings_and_delimited_blocks():
    chunks = chunk(ADOC, "asciidoc", words, max_tokens=6, overlap_tokens=0)
    check_exact(ADOC, chunks)
    by_text = {c.text.split("\n", 1)[0]: c.heading for c in chunks}
    assert any(c.heading == "Manual > Install" and "pip install" in c.text for c in chunks)
    assert by_text["=== From source"] == "Manual > Install > From source"
    assert by_text["== Usage"] == "Manual > Usage"
    wide = chunk(ADOC, "asciidoc", words, max_tokens=12, overlap_tokens=0)
    block = ADOC[ADOC.index("[source,bash]") : ADOC.index("ct init\n----\n") + 13]
    assert any(block in c.text for c in wide), "attributes and the delimited block are one piece"


def test_kinds_by_extension():
    assert kind_of("a/guide.rst") == "rst"
    assert kind_of("a/guide.REST") == "rst"
    assert kind_of("manual.adoc") == "asciidoc"
    assert kind_of("notes.txt") == "text"


def test_ingested_rst_chunks_carry_their_section(tmp_path, store):
    (tmp_path / "docs").mkdir()
    filler = "Words that fill the section so that it needs a chunk of its own. " * 30
    text = f"Guide\n=====\n\n{filler}\n\nInstall\n-------\n\n{filler}\n\nRun pipinstall.\n"
    (tmp_path / "docs" / "guide.rst").write_text(text, encoding="utf-8")
    store.ingest_path(tmp_path / "docs")
    hits = store.search("pipinstall", k=3, mode="exact")
    assert hits[0].source["heading"] == "Guide > Install"


# ---------------------------------------------------------------- exclude patterns


def sphinx_tree(root: Path) -> Path:
    files = {
        "docs/index.rst": "Home\n====\n\nWelcome to the project.\n",
        "docs/cli.rst": "CLI\n===\n\nImporting CSV files with the insert command.\n",
        "docs/conf.py": "project = 'x'\nextensions = []\n",
        "docs/Makefile": "SPHINXBUILD ?= sphinx-build\nhtml:\n\t$(SPHINXBUILD) -b html . _build\n",
        "docs/make.bat": "set SPHINXBUILD=sphinx-build\n",
        "docs/_build/html/cli.html": "<p>Importing CSV files</p>\n",
        "docs/_templates/base.html": "<html>{{ body }}</html>\n",
        "docs/_static/custom.js": "console.log('x')\n",
        "docs/api/page.html": "<p>hand-written page</p>\n",
        "docs/tools/Makefile": "all:\n\techo build the tools\n",  # not Sphinx's: read
        "docs/node_modules/pkg/readme.md": "# pkg\n\nA dependency.\n",
    }
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content, encoding="utf-8")
    return root / "docs"


def ingested(store_dir: Path) -> set[str]:
    """The files the store's current document chunks come from (their paths under the folder)."""
    from memstore.store import Store

    st = Store.open(store_dir)
    return {
        r["source"]["rel"] for d in st.days() for r in st.day(d["day"]) if r.get("type") == "doc"
    }


def test_default_excludes_are_counted_and_reported(tmp_path, store):
    docs = sphinx_tree(tmp_path)
    out = ct("-C", store.root, "ingest-path", docs)
    said = out.stdout + out.stderr
    assert ingested(store.root) == {"index.rst", "cli.rst", "api/page.html", "tools/Makefile"}
    assert "excluded 3 files and 4 folders: " in said
    for shown in (
        "Makefile (Sphinx Makefile)",
        "conf.py (Sphinx conf.py)",
        "_build/",
        "_templates/",
        "node_modules/",
    ):
        assert shown in said
    log = ct("-C", store.root, "log").stdout
    assert "7 excluded" in log


def test_exclude_globs_are_gitignore_patterns_relative_to_the_folder(tmp_path, store):
    docs = sphinx_tree(tmp_path)
    out = ct("-C", store.root, "ingest-path", docs, "--exclude", "*.html", "--exclude", "tools/")
    said = out.stdout + out.stderr
    assert ingested(store.root) == {"index.rst", "cli.rst"}
    assert "api/page.html (*.html)" in said and "tools/" in said


def test_no_default_excludes_reads_everything_and_bang_takes_one_back(tmp_path, store):
    docs = sphinx_tree(tmp_path)
    ct("-C", store.root, "ingest-path", docs, "--exclude", "!conf.py", "--exclude", "!_static/")
    assert {"conf.py", "_static/custom.js"} <= ingested(store.root)
    assert "_build/html/cli.html" not in ingested(store.root)
    out = ct("-C", store.root, "ingest-path", docs, "--no-default-excludes")
    said = out.stdout + out.stderr
    assert "excluded" not in said
    assert {
        "_build/html/cli.html",
        "Makefile",
        "make.bat",
        "node_modules/pkg/readme.md",
    } <= ingested(store.root)


def test_ingest_any_takes_the_same_excludes(tmp_path, store):
    docs = sphinx_tree(tmp_path)
    (docs / "_build" / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 20)
    out = ct("-C", store.root, "ingest-any", docs, "--exclude", "api/")
    said = out.stdout + out.stderr
    got = ingested(store.root)
    assert "index.rst" in got and "api/page.html" not in got
    assert not any(r.startswith("_build/") for r in got)
    assert "excluded 3 files and 5 folders" in said


def test_a_bad_exclude_pattern_is_a_usage_error_and_writes_nothing(tmp_path, store):
    docs = sphinx_tree(tmp_path)
    before = ct("-C", store.root, "log").stdout
    out = ct("-C", store.root, "ingest-path", docs, "--exclude", "!", check=False)
    assert out.returncode == 2 and "--exclude: Invalid git pattern: '!'" in out.stderr
    assert ct("-C", store.root, "log").stdout == before


def test_walk_yields_excluded_items(tmp_path):
    docs = sphinx_tree(tmp_path)
    got = list(walk(docs, patterns=["api/"], default_excludes=False))
    assert [e.rel for e in got if isinstance(e, Excluded)] == ["api/"]
    assert "conf.py" in {f.rel for f in got if isinstance(f, FileItem)}


# ---------------------------------------------------------------- changelogs


@pytest.mark.parametrize(
    "rel, kind",
    [
        ("CHANGELOG.md", "changelog"),
        ("docs/changelog.rst", "changelog"),
        ("NEWS", "changelog"),
        ("HISTORY.txt", "changelog"),
        ("release-notes.md", "changelog"),
        ("docs/whatsnew/3.0.rst", "changelog"),
        ("changes.py", None),
        ("newsletter.md", None),
        ("docs/guide.md", None),
    ],
)
def test_changelog_is_known_by_its_name(rel, kind):
    assert doc_kind(rel) == kind


# Three releases (a chunk each) that repeat the question's words, and a how-to page that says them
# once and more besides: without the changelog prior two releases rank above the page (0.851 and
# 0.805 against 0.757 on the hash embedder), with it none does (0.681 at most).
CHANGES = "".join(f"{v}.0\n---\n\n- Importing CSV files into a table.\n\n" for v in range(1, 4))


def test_changelog_chunks_are_marked_and_rank_below_the_howto(tmp_path, store):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "changelog.rst").write_text("Changelog\n=========\n\n" + CHANGES, encoding="utf-8")
    (docs / "cli.rst").write_text(
        "CLI\n===\n\nImporting CSV files into a table with insert --csv.\n", encoding="utf-8"
    )
    store.ingest_path(docs)
    hits = store.search("importing CSV files into a table", k=5)
    assert [h.source["rel"] for h in hits] == ["cli.rst"] + ["changelog.rst"] * 3
    assert "doc_kind" not in hits[0].source
    for h in hits[1:]:
        assert h.source["doc_kind"] == "changelog" and h.parts["changelog_prior"] == 0.8
    assert sorted(h.source["heading"] for h in hits[1:]) == [
        f"Changelog > {v}.0" for v in (1, 2, 3)
    ]
    # a question about changes, releases or versions weighs the changelog like any page
    about = store.search("importing CSV files into a table: what changed in 2.0", k=5)
    assert about[0].source["rel"] == "changelog.rst"
    assert not any("changelog_prior" in h.parts for h in about)


# ---------------------------------------------------------------- the docs bench


def test_docs_bench_finds_sections_by_its_own_reading_and_ranks_hits(tmp_path, capsys):
    from memstore.bench import docs_quality

    spans = docs_quality.section_spans(RST)
    start, end = spans["Install"]
    assert RST[start:].startswith("Install\n=======")
    assert RST[end:].startswith("Usage\n=====")  # "From source" and "Options" lie inside Install
    assert RST[slice(*spans["Options"])].startswith("Options\n~~~~~~~")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.rst").write_text(RST, encoding="utf-8")
    (docs / "CHANGES.rst").write_text(
        "Changes\n=======\n\n1.0\n---\n\n- First.\n", encoding="utf-8"
    )
    questions = tmp_path / "q.json"
    questions.write_text(
        '[{"q": "pip install memstore", "answers": [["guide.rst", "Install"]]},'
        ' {"q": "search by meaning", "answers": [["guide.rst", "Nowhere"]]}]',
        encoding="utf-8",
    )
    with pytest.raises(SystemExit, match="no section 'Nowhere'"):
        docs_quality.main(
            ["--docs", str(docs), "--questions", str(questions), "--embedder", "hash"]
        )
    questions.write_text(
        '[{"q": "pip install memstore", "answers": [["guide.rst", "Install"]]}]', encoding="utf-8"
    )
    argv = ["--docs", str(docs), "--questions", str(questions), "--embedder", "hash"]
    assert docs_quality.main(argv + ["--store", str(tmp_path / "w"), "--priors", "1,0.8"]) == 0
    out = capsys.readouterr().out
    assert "| pip install memstore | guide.rst › Install | 1 |" in out
    assert (
        "CHANGELOG_PRIOR 0.8:" in out
        and "found in the top 10: 1; in the top 3: 1; at rank 1: 1" in out
    )
    assert "2 files: CHANGES.rst 1, guide.rst 5." in out


def test_a_folder_of_release_notes_is_judged_by_its_stored_location(tmp_path, store):
    notes = tmp_path / "release-notes"
    notes.mkdir()
    (notes / "v1.md").write_text("# 1.0\n\nImporting CSV files into a table.\n", encoding="utf-8")
    store.ingest_path(notes)  # rel "v1.md"; stored as "release-notes/v1.md", as search reads it
    hit = store.search("importing CSV files", k=1)[0]
    assert hit.source["path"] == "release-notes/v1.md"
    assert hit.source["doc_kind"] == "changelog" and hit.parts["changelog_prior"] == 0.8
