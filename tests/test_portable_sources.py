"""Portable sources: no absolute machine path is committed; a moved or renamed folder adds nothing new."""

from __future__ import annotations

import json
import subprocess

from conftest import commits, ct, git_clean, log_records

DOCS = {
    "budget.md": "# Budget\n\nThe household budget is 1,650 euros a month. Review it on the tenth.\n",
    "trips/lisbon.md": "# Lisbon\n\nThe trip budget is 2,400 euros for two; tram 28 crosses the old town.\n",
    "notes.txt": "Releases happen on Thursdays only, after the full test run passes.\n",
}


def _docs(folder):
    for rel, text in DOCS.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    (folder / "scan.bin").write_bytes(bytes(range(256)) * 8)  # a blob for ingest-any
    return folder


def _committed_bytes(root) -> str:
    """Every committed file's bytes and every commit message, as one text to search."""
    files = subprocess.run(
        ["git", "-C", str(root), "ls-files"], capture_output=True, text=True
    ).stdout.split()
    # format-1 blob manifests (segments/) still name the original's path; format 2 packs do not
    body = [
        (root / f).read_bytes().decode("utf-8", "replace")
        for f in files
        if not f.startswith("segments/")
    ]
    log = subprocess.run(
        ["git", "-C", str(root), "log", "--format=%B"], capture_output=True, text=True
    ).stdout
    return "\n".join(body + [log])


def test_no_absolute_path_is_committed_and_a_moved_folder_adds_nothing(tmp_path, store):
    work = tmp_path / "work"
    _docs(work / "docs")
    first = json.loads(ct("-C", store.root, "ingest-path", "./docs", "--json", cwd=work).stdout)
    assert first["added"] == 3
    recs = log_records(store.root)
    assert sorted(r["source"]["path"] for r in recs) == [
        "docs/budget.md",
        "docs/notes.txt",
        "docs/trips/lisbon.md",
    ]
    assert commits(store.root)[0] == "Ingest 3 files (3 chunks) from docs/"

    (work / "docs").rename(work / "papers")
    moved = json.loads(ct("-C", store.root, "ingest-path", str(work / "papers"), "--json").stdout)
    assert moved["added"] == 3  # three meta records noting the moves, no chunks
    new = log_records(store.root)[3:]
    assert [r["type"] for r in new] == ["meta"] * 3
    assert {(r["source"]["moved_from"], r["source"]["path"]) for r in new} == {
        ("docs/budget.md", "papers/budget.md"),
        ("docs/notes.txt", "papers/notes.txt"),
        ("docs/trips/lisbon.md", "papers/trips/lisbon.md"),
    }
    assert commits(store.root)[0] == "Ingest 0 files (0 chunks) from papers/; 3 moved"
    again = json.loads(ct("-C", store.root, "ingest-path", work / "papers", "--json").stdout)
    assert again["added"] == 0 and again["commit"] is None

    # search shows where the document is now, and remembers where it was ingested
    hits = json.loads(
        ct("-C", store.root, "search", "tram old town lisbon", "--mode", "exact", "--json").stdout
    )["hits"]
    assert hits[0]["source"]["path"] == "papers/trips/lisbon.md"
    assert hits[0]["source"]["ingested_as"] == "docs/trips/lisbon.md"
    text = ct("-C", store.root, "search", "tram old town lisbon", "--mode", "exact").stdout
    assert "papers/trips/lisbon.md#0" in text

    # a second move follows the first: the hit shows the newest place
    (work / "papers").rename(work / "notes")
    ct("-C", store.root, "ingest-path", work / "notes")
    hits = json.loads(
        ct("-C", store.root, "search", "tram old town lisbon", "--mode", "exact", "--json").stdout
    )["hits"]
    assert hits[0]["source"]["path"] == "notes/trips/lisbon.md"
    assert log_records(store.root)[-1]["source"]["moved_from"] in (
        "papers/budget.md",
        "papers/notes.txt",
        "papers/trips/lisbon.md",
    )
    (work / "notes").rename(
        work / "papers"
    )  # and back: papers is a location it had, so nothing new
    assert (
        json.loads(ct("-C", store.root, "ingest-path", work / "papers", "--json").stdout)["added"]
        == 0
    )

    # a later change at the new place supersedes the chunk made at the old place
    (work / "papers" / "budget.md").write_text(
        "# Budget\n\nThe household budget is now 1,800 euros a month.\n"
    )
    changed = json.loads(ct("-C", store.root, "ingest-path", work / "papers", "--json").stdout)
    assert changed["added"] == 2  # the new chunk and the superseding meta record
    hits = json.loads(
        ct("-C", store.root, "search", "household budget euros", "--mode", "exact", "--json").stdout
    )["hits"]
    texts = [h["text"] for h in hits if h["type"] == "doc"]
    assert any("1,800" in t for t in texts) and not any("1,650" in t for t in texts)

    assert str(tmp_path) not in _committed_bytes(store.root)
    assert json.loads(ct("-C", store.root, "fsck", "--json").stdout)["ok"]
    assert git_clean(store.root)


def test_ingest_any_blobs_and_pdf_free_folder_move_too(tmp_path, store):
    work = tmp_path / "w"
    _docs(work / "inbox")
    first = json.loads(ct("-C", store.root, "ingest-any", work / "inbox", "--json").stdout)
    assert first["added"] == 4
    (work / "inbox").rename(work / "archive-2026")
    moved = json.loads(ct("-C", store.root, "ingest-any", work / "archive-2026", "--json").stdout)
    assert moved["added"] == 4 and {r["type"] for r in log_records(store.root)[4:]} == {"meta"}
    assert commits(store.root)[0].endswith("; 4 moved")
    assert str(tmp_path) not in _committed_bytes(store.root)
    assert git_clean(store.root)


def test_same_named_folders_stay_apart_and_a_single_file_is_named_by_its_folder(tmp_path, store):
    a, b = _docs(tmp_path / "a" / "docs"), tmp_path / "b" / "docs"
    b.mkdir(parents=True)
    (b / "budget.md").write_text(
        "# Budget\n\nA different project's budget: 90 euros for stickers.\n"
    )
    ct("-C", store.root, "ingest-path", a / "budget.md")
    ct("-C", store.root, "ingest-path", b)
    paths = sorted(r["source"]["path"] for r in log_records(store.root))
    assert paths == ["b/docs/budget.md", "docs/budget.md"]
    assert not any(r.get("supersedes") for r in log_records(store.root))
    assert str(tmp_path) not in _committed_bytes(store.root)


def test_a_copied_folder_adds_nothing_and_keeps_the_original_sources(tmp_path, store):
    """A copy of an ingested folder, ingested while the original is still there, is not a move:
    nothing is added, each file is named as a copy, and hits keep the original location."""
    import shutil

    work = tmp_path / "work"
    _docs(work / "docs")
    ct("-C", store.root, "ingest-any", work / "docs")
    before = commits(store.root)
    shutil.copytree(work / "docs", work / "docs-copy")
    for cmd in ("ingest-path", "ingest-any"):
        out = ct("-C", store.root, cmd, work / "docs-copy", "--json")
        assert json.loads(out.stdout)["added"] == 0, out.stdout
        assert (
            f"{work / 'docs-copy' / 'budget.md'}: a copy of docs/budget.md, which is still there"
            in (out.stderr + out.stdout)
        )
    assert commits(store.root) == before
    hits = json.loads(
        ct("-C", store.root, "search", "tram old town lisbon", "--mode", "exact", "--json").stdout
    )["hits"]
    assert hits[0]["source"]["path"] == "docs/trips/lisbon.md"
    assert git_clean(store.root)
