"""Tests for the ingest walker (memstore.ingest.walk) and chunker (memstore.ingest.chunk)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstore.errors import UsageError
from memstore.ingest.chunk import Chunk, chunk, embedding_input
from memstore.ingest.walk import FileItem, Skip, decode_text, walk


def words(s: str) -> int:
    return len(s.split())


def chars(s: str) -> int:
    return len(s)


def with_specials(s: str) -> int:
    """Like a BERT tokenizer's count: two special tokens on every call."""
    return len(s.split()) + 2


def make_tree(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


def run(root: Path, **kw) -> tuple[list[str], dict[str, str]]:
    """(rel paths read, {path relative to root: skip reason})."""
    kw.setdefault("max_bytes", 1_000_000)
    items, skips = [], {}
    for got in walk(root, **kw):
        if isinstance(got, FileItem):
            items.append(got.rel)
        else:
            assert isinstance(got, Skip)
            skips[Path(got.path).relative_to(root).as_posix()] = got.reason
    return items, skips


def make_pdf(pages: list[list[str]]) -> bytes:
    """A minimal valid PDF: one Helvetica text stream per page, one line per string."""
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(len(pages)))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for i, lines in enumerate(pages):
        ops = " ".join(f"({line}) Tj 0 -16 Td" for line in lines)
        stream = f"BT /F1 12 Tf 72 720 Td {ops} ET".encode()
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            f"/Resources << /Font << /F1 3 0 R >> >> /Contents {5 + 2 * i} 0 R >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % off for off in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return out


# ---------------------------------------------------------------- walk: selection and ignore files


def test_nested_gitignore_and_memstoreignore(tmp_path):
    make_tree(
        tmp_path,
        {
            ".gitignore": "build/\nsecret_notes.md\n*.tmp.md\n",
            ".memstoreignore": "drafts/\n",
            "a.md": "a",
            "local.md": "the nested rule below does not reach up here",
            "secret_notes.md": "ignored at the root",
            "x.tmp.md": "ignored",
            "build/out.md": "ignored folder",
            "drafts/d.md": "ignored by .memstoreignore",
            "sub/.gitignore": "local.md\n!secret_notes.md\n/anchored.md\n",
            "sub/local.md": "ignored by the nested file",
            "sub/secret_notes.md": "re-included by the nested negation",
            "sub/anchored.md": "ignored: anchored to sub/",
            "sub/deeper/anchored.md": "not ignored: the anchor is sub/, not sub/deeper/",
            "sub/keep.py": "print(1)\n",
        },
    )
    items, skips = run(tmp_path)
    assert items == [
        "a.md",
        "local.md",
        "sub/deeper/anchored.md",
        "sub/keep.py",
        "sub/secret_notes.md",
    ]
    assert skips == {}  # ignored files pass silently


def test_vcs_folders_exclude_and_extensions(tmp_path):
    make_tree(
        tmp_path,
        {
            ".git/notes.md": "vcs",
            ".hg/x.md": "vcs",
            "store/log/x.md": "the store being ingested into",
            "photo.png": b"\x89PNG\r\n\x1a\n\x00\x00",
            "notes.MD": "upper-case extension",
            "README": "extensionless, read by default",
            "q.sql": "select 1;",
        },
    )
    items, skips = run(tmp_path, exclude=[tmp_path / "store"])
    assert items == ["README", "notes.MD", "q.sql"]
    assert skips == {}
    items, _ = run(tmp_path, exts={"md"}, exclude=[tmp_path / "store"])
    assert items == ["notes.MD"]  # exts replaces the default, README included


def test_order_is_sorted_and_items_are_complete(tmp_path):
    make_tree(tmp_path, {"b/z.txt": "z", "a.txt": "a", "b/a.md": "# A\n", "c.py": "x = 1\n"})
    got = list(walk(tmp_path, max_bytes=100))
    assert [g.rel for g in got] == ["a.txt", "b/a.md", "b/z.txt", "c.py"]
    md = got[1]
    assert md.path == tmp_path / "b" / "a.md" and md.path.is_absolute()
    assert (md.kind, md.size, md.read_text()) == ("markdown", 4, "# A\n")
    assert md.sha256 == hashlib.sha256(b"# A\n").hexdigest()
    assert [g.kind for g in got] == ["text", "markdown", "text", "code"]


def test_single_file_root_ignores_extension_filter(tmp_path):
    f = tmp_path / "notes.weird"
    f.write_text("hello")
    (item,) = walk(f, max_bytes=100)
    assert (item.rel, item.read_text(), item.kind) == ("notes.weird", "hello", "text")


def test_missing_root_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="No such file"):
        list(walk(tmp_path / "nope", max_bytes=10))


# ---------------------------------------------------------------- walk: content problems


@pytest.mark.parametrize(
    "content, reason",
    [
        (b"abc\x00def", "binary file"),
        (bytes(range(1, 9)) * 100, "binary file"),  # control bytes, no NUL
        (b"hello \xff world", "invalid UTF-8 at byte 6"),
        (b"\xef\xbb\xbfok \xc3", "invalid UTF-8 at byte 6"),  # offsets count the BOM
        (b"", "empty file"),
        (b"  \n\n", "no text"),
    ],
)
def test_unreadable_content_is_a_skip(tmp_path, content, reason):
    (tmp_path / "f.txt").write_bytes(content)
    assert run(tmp_path) == ([], {"f.txt": reason})


@pytest.mark.parametrize(
    "data, text",
    [
        (b"\xef\xbb\xbfcaf\xc3\xa9", "café"),
        ("\ufeffhi \u00e9".encode("utf-16-le"), "hi é"),
        ("\ufeffhi".encode("utf-16-be"), "hi"),
        ("日本語\r\n".encode(), "日本語\r\n"),
    ],
)
def test_decoding_is_strict_but_honours_boms(data, text):
    assert decode_text(data) == text


def test_big_file_is_reported_not_truncated(tmp_path):
    (tmp_path / "big.txt").write_text("x" * 101)
    (tmp_path / "ok.txt").write_text("x" * 100)
    assert run(tmp_path, max_bytes=100) == (
        ["ok.txt"],
        {"big.txt": "101 bytes exceeds --max-bytes 100"},
    )


def test_credentials_files_need_allow_secrets(tmp_path):
    make_tree(
        tmp_path,
        {
            "credentials.json": "{}",
            ".env": "A=1",
            ".env.example": "A=your-value",
            "id_rsa": "k",
            "notes.md": "fine",
        },
    )
    exts = {".json", ".md", ".env", ".example"}
    reason = "credentials file (use --allow-secrets to include)"
    items, skips = run(tmp_path, exts=exts)
    assert items == [".env.example", "notes.md"]
    assert skips == {".env": reason, "credentials.json": reason}
    items, skips = run(tmp_path, exts=exts, allow_secrets=True)
    assert items == [".env", ".env.example", "credentials.json", "notes.md"] and skips == {}
    # a file named directly is read whatever its extension, but still not if it holds credentials
    assert [type(x).__name__ for x in walk(tmp_path / "id_rsa", max_bytes=10)] == ["Skip"]


# ---------------------------------------------------------------- walk: symlinks

needs_symlinks = pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symlinks")


@needs_symlinks
def test_symlink_loop_is_detected_when_following(tmp_path):
    root = tmp_path / "root"
    make_tree(root, {"d/a.md": "a"})
    os.symlink(root, root / "d" / "loop")
    items, skips = run(root, follow_symlinks=True)
    assert items == ["d/a.md"]
    assert list(skips) == ["d/loop"] and skips["d/loop"].startswith("symlink loop")
    items, skips = run(root)  # not following: reported as a link, never walked
    assert items == ["d/a.md"] and "symlink inside the root" in skips["d/loop"]


@needs_symlinks
def test_symlink_out_of_root(tmp_path):
    outside = tmp_path / "outside"
    root = tmp_path / "root"
    make_tree(outside, {"o.md": "outside"})
    make_tree(root, {"in.md": "inside"})
    os.symlink(outside, root / "ext")
    os.symlink(outside / "o.md", root / "ext_file.md")
    os.symlink(tmp_path / "missing.md", root / "broken.md")
    items, skips = run(root)
    assert items == ["in.md"]
    assert "outside the root" in skips["ext"] and "--follow-symlinks" in skips["ext"]
    assert "outside the root" in skips["ext_file.md"]
    assert skips["broken.md"].startswith("broken symlink")
    items, skips = run(root, follow_symlinks=True)
    assert items == ["ext/o.md", "ext_file.md", "in.md"]
    assert list(skips) == ["broken.md"]


@needs_symlinks
def test_two_links_to_one_folder_are_walked_once(tmp_path):
    root = tmp_path / "root"
    make_tree(tmp_path, {"shared/s.md": "s"})
    root.mkdir()
    os.symlink(tmp_path / "shared", root / "a")
    os.symlink(tmp_path / "shared", root / "b")
    items, skips = run(root, follow_symlinks=True)
    assert items == ["a/s.md"] and "already walked (a)" in skips["b"]


# ---------------------------------------------------------------- walk + chunk: PDF


def test_pdf_pages_are_read_and_chunked_with_page_numbers(tmp_path):
    pages = [
        ["Page one talks about apples.", "Apples are red and sweet."],
        ["Page two talks about pears.", "Pears are green."],
    ]
    (tmp_path / "doc.pdf").write_bytes(make_pdf(pages))
    (tmp_path / "bad.pdf").write_bytes(b"%PDF-1.4\nthis is not a pdf at all\n")
    got = {Path(g.path).name: g for g in walk(tmp_path, max_bytes=100_000)}
    assert isinstance(got["bad.pdf"], Skip) and got["bad.pdf"].reason.startswith("cannot read PDF")
    item = got["doc.pdf"]
    assert (item.kind, item.pages, item.pages_read) == ("pdf", 2, 2)
    text = item.read_text()
    assert (
        text.count("\f") == 1 and "apples" in text.split("\f")[0] and "pears" in text.split("\f")[1]
    )
    whole = chunk(text, "pdf", words, max_tokens=100, overlap_tokens=0)
    assert len(whole) == 1 and whole[0].pages == (1, 2)
    parts = chunk(text, "pdf", words, max_tokens=12, overlap_tokens=0)
    assert [c.pages for c in parts] == [(1, 1), (2, 2)]
    assert "".join(c.text for c in parts) == text
    (first,) = walk(tmp_path / "doc.pdf", max_bytes=100_000, max_pdf_pages=1)
    assert (first.pages, first.pages_read, "\f" in first.read_text()) == (2, 1, False)


# ---------------------------------------------------------------- chunk: structure


def check_exact(text: str, chunks: list[Chunk]) -> None:
    assert "".join(c.text for c in chunks) == text
    pos = 0
    for i, c in enumerate(chunks):
        assert (c.index, c.start) == (i, pos) and text[c.start : c.end] == c.text and c.text
        pos = c.end


MARKDOWN = """# Guide

Intro paragraph. It has two sentences.

## Install

Run the installer:

```bash
pip install memstore

# a blank line inside the fence must not split it
ct init
```

## Usage

### Search

Search by meaning. Search by words.

### Recall

Recall by time.
"""


def test_markdown_headings_give_paths_and_fences_stay_whole():
    chunks = chunk(MARKDOWN, "markdown", words, max_tokens=24, overlap_tokens=0)
    check_exact(MARKDOWN, chunks)
    fence = MARKDOWN[MARKDOWN.index("```bash") : MARKDOWN.index("ct init\n```") + 11]
    assert any(fence in c.text for c in chunks)
    by_start = {c.text.split("\n", 1)[0]: c.heading for c in chunks}
    assert by_start["# Guide"] == "Guide"
    assert by_start["## Install"] == "Guide > Install"
    # "## Usage" has nothing under it but a sub-heading: it moves on with what it introduces
    assert by_start["## Usage"] == "Guide > Usage"
    recall = next(c for c in chunks if "Recall by time" in c.text)
    assert recall.heading.startswith("Guide > Usage")
    assert all(c.tokens <= 24 for c in chunks)


def test_markdown_giant_fence_is_split_by_lines_and_setext_headings_count():
    code = "".join(f"x{i} = {i}\n" for i in range(60))
    text = f"Title\n=====\n\nSub\n---\n\n```python\n{code}```\n"
    chunks = chunk(text, "markdown", words, max_tokens=30, overlap_tokens=0)
    check_exact(text, chunks)
    assert len(chunks) > 1
    assert all(c.text.endswith("\n") for c in chunks)  # cut at line ends inside the fence
    assert chunks[-1].heading == "Title > Sub"


def test_markdown_giant_paragraph_falls_back_to_sentences_then_words():
    sentence = "word " * 9 + "end. "
    text = "# H\n\n" + sentence * 20 + "\n\n" + "nospaces" * 50
    chunks = chunk(text, "markdown", chars, max_tokens=120, overlap_tokens=20)
    check_exact(text, chunks)
    assert all(c.tokens <= 100 for c in chunks)
    assert sum(c.text.endswith("end. ") for c in chunks) >= 5  # cuts fall after sentences


def test_code_is_cut_at_top_level_definitions():
    text = (
        "import os\n\n\n"
        "@decorator\n"
        "def first(a, b):\n"
        "    total = a + b\n\n"
        "    return total\n"
        "def second():\n"
        "    return 2\n\n\n"
        "class Third:\n"
        "    def method(self):\n"
        "        return 3\n"
    )

    def starts(max_tokens):
        chunks = chunk(text, "code", words, max_tokens=max_tokens, overlap_tokens=0)
        check_exact(text, chunks)
        return [c.text.split("\n", 1)[0] for c in chunks]

    # the decorator stays with its function, and the blank line inside first() is no cut
    assert starts(12) == ["import os", "@decorator", "def second():"]
    assert starts(9)[-1] == "class Third:" and "def first(a, b):" not in starts(9)


def test_plain_text_paragraphs_then_sentences():
    text = "First paragraph, short.\n\nSecond one. " + "It goes on and on. " * 10 + "\n\nThird."
    chunks = chunk(text, "text", words, max_tokens=20, overlap_tokens=0)
    check_exact(text, chunks)
    assert chunks[0].text.startswith("First paragraph, short.\n\nSecond one.")
    assert all(c.text.rstrip().endswith((".", "on.")) for c in chunks)


def test_small_pieces_merge_and_budget_counts_special_tokens():
    text = "\n\n".join(f"Para {i}." for i in range(30))
    chunks = chunk(text, "text", with_specials, max_tokens=40, overlap_tokens=8)
    check_exact(text, chunks)
    assert all(c.tokens == with_specials(c.text) <= 32 for c in chunks)
    assert len(chunks) == 2  # 60 words + specials: merged greedily, not 30 one-line chunks


def test_bad_arguments():
    with pytest.raises(ValueError):
        chunk("x", "docx", words)
    with pytest.raises(ValueError):
        chunk("x", "text", words, max_tokens=32, overlap_tokens=32)
    assert chunk("", "text", words) == []
    assert [c.text for c in chunk(" \n ", "text", words)] == [" \n "]


def test_embedding_input_adds_heading_and_previous_tail():
    text = "# Doc\n\n" + " ".join(f"w{i}." for i in range(60))
    chunks = chunk(text, "markdown", words, max_tokens=24, overlap_tokens=4)
    assert len(chunks) > 2
    first = embedding_input(chunks, 0, 4, words)
    assert first == "Doc\n\n" + chunks[0].text
    second = embedding_input(chunks, 1, 4, words)
    body = second.removeprefix("Doc\n\n")
    assert body.endswith(chunks[1].text)
    tail = body[: -len(chunks[1].text)]
    assert chunks[0].text.endswith(tail) and words(tail) == 4
    assert body in text  # tail + chunk is one contiguous slice of the document
    assert words(embedding_input(chunks, 1, 4, words, max_tokens=24)) <= 24
    assert embedding_input(chunks, 1, 0, words, with_heading=False) == chunks[1].text


def test_one_megabyte_of_markdown_costs_linear_work():
    """Counted work, not wall time (which a loaded machine makes flaky): quadratic re-counting fails."""
    para = "Memory should be verbatim, searchable and owned as plain files. " * 6
    block = f"## Section\n\n{para}\n\n```python\nprint('x')\n```\n\n- item one\n- item two\n\n"

    def work(size):
        counted = [0]

        def count(s):
            counted[0] += len(s)
            return len(s) // 4 + 1

        text = "# Big\n\n" + block * (size // len(block))
        chunks = chunk(text, "markdown", count)
        check_exact(text, chunks)
        return counted[0], len(text)

    small, small_len = work(250_000)
    big, big_len = work(1_000_000)
    assert big <= 20 * big_len, "each character should be counted a bounded number of times"
    assert big / small < 1.5 * big_len / small_len


# ---------------------------------------------------------------- chunk: properties

ALPHABET = st.sampled_from(
    list("ab c.\n\n#`~-*|!?。日\f\t\r")
    + ["```", "# ", "## ", "\n---\n", "def ", "    "]
    + ["\n====\n", "::\n\n", ".. _x:\n", ".. note::\n", "\n----\n", "== ", "[source]\n"]
)
TEXTS = st.lists(ALPHABET, max_size=300).map("".join)


@settings(max_examples=150, deadline=None)
@given(
    text=TEXTS,
    kind=st.sampled_from(["markdown", "rst", "asciidoc", "code", "text", "pdf"]),
    max_tokens=st.integers(2, 40),
    counter=st.sampled_from([words, chars, with_specials]),
)
def test_chunks_reproduce_the_text_exactly_and_fit(text, kind, max_tokens, counter):
    if counter is with_specials:
        max_tokens += 2  # an empty string already costs 2
    chunks = chunk(text, kind, counter, max_tokens=max_tokens, overlap_tokens=1)
    check_exact(text, chunks)
    for c in chunks:
        assert c.tokens == counter(c.text)
        assert c.tokens <= max_tokens - 1 or len(c.text) == 1
        assert (c.pages is not None) == (kind == "pdf")
