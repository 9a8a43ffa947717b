"""An export's own values of the fields a store sets itself (supersedes, source, scope, hash,
vkey, seg) are what its source said: kept under `meta`, never taken as the store's. A JSONL line's
`supersedes` used to hide committed records and a malformed one made the store damaged; a line's
`"scope": "shared"` skipped the private review `import_scope = "private"` asks for, and TRACE
imports ignored `import_scope` altogether (memstore/ingest/importers.py `as_imported`)."""

from __future__ import annotations

import json
import subprocess

from conftest import ct, log_records, make_store
from test_import_trace import trace_save, write_save

TS = "2026-11-02T10:00:00Z"


def _jsonl(path, *rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _commit_settings(root, line: str) -> None:
    toml = root / "memstore.toml"
    toml.write_text(toml.read_text().replace("[settings]", f"[settings]\n{line}"))
    subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@e"]
        + ["commit", "-qam", "settings"],
        check=True,
    )


def test_an_imported_supersedes_or_source_never_hides_or_damages_committed_records(tmp_path):
    st = make_store(tmp_path / "s")
    kept = st.add("the budget is 2400 euros", ts=TS).added[0]["id"]
    src = _jsonl(
        tmp_path / "x.jsonl",
        {"ts": TS, "role": "user", "text": "an export line", "supersedes": [kept]},
        {"ts": TS, "role": "user", "text": "another line", "supersedes": "abc", "source": "../x"},
    )
    ct("-C", st.root, "import", "jsonl", src)
    by_text = {r["text"]: r for r in log_records(st.root)}
    assert "supersedes" not in by_text["an export line"]
    assert by_text["an export line"]["meta"]["supersedes"] == [kept]
    assert by_text["another line"]["meta"] == {"supersedes": "abc", "source": "../x"}
    hits = json.loads(ct("-C", st.root, "search", "budget", "--json").stdout)["hits"]
    assert kept in [h["id"] for h in hits], "the committed record is still found"
    assert json.loads(ct("-C", st.root, "fsck", "--json").stdout)["ok"]


def test_import_scope_private_holds_whatever_the_export_says(tmp_path):
    st = make_store(tmp_path / "s")
    _commit_settings(st.root, 'import_scope = "private"')
    src = _jsonl(
        tmp_path / "x.jsonl",
        {"ts": TS, "role": "user", "text": "says shared", "scope": "shared"},
        {"ts": TS, "role": "user", "text": "says nothing"},
    )
    ct("-C", st.root, "import", "jsonl", src)
    ct("-C", st.root, "import", "trace", write_save(tmp_path / "t.json", trace_save()))
    scopes = {r.get("scope") for r in log_records(st.root)}
    assert scopes == {"private"}, scopes
    assert len(log_records(st.root)) == 2 + 11


def test_a_line_the_export_marks_private_stays_private_in_a_shared_store(tmp_path):
    st = make_store(tmp_path / "s")
    src = _jsonl(
        tmp_path / "x.jsonl",
        {"ts": TS, "role": "user", "text": "was private where it came from", "scope": "private"},
        {"ts": TS, "role": "user", "text": "an ordinary line"},
    )
    ct("-C", st.root, "import", "jsonl", src)
    scope = {r["text"]: r.get("scope") for r in log_records(st.root)}
    assert scope == {"was private where it came from": "private", "an ordinary line": None}


def test_two_records_under_one_id_in_an_import_are_named_not_counted_as_present(tmp_path):
    st = make_store(tmp_path / "s")
    src = _jsonl(
        tmp_path / "x.jsonl",
        {"ts": TS, "role": "user", "text": "the first X", "id": "X"},
        {"ts": TS, "role": "user", "text": "DIFFERENT TEXT", "id": "X"},
        {"ts": TS, "role": "user", "text": "the first X", "id": "X"},  # the same line again
    )
    out = json.loads(ct("-C", st.root, "import", "jsonl", src, "--json").stdout)
    assert out["added"] == 1 and out["skipped"] == 0, out
    assert any(
        "x.jsonl:2: its id 'X' is also that of" in n and "x.jsonl:1" in n for n in out["notes"]
    )
    assert [r["text"] for r in log_records(st.root)] == ["the first X"]


def test_a_correction_inside_the_export_keeps_its_meaning(tmp_path):
    st = make_store(tmp_path / "s")
    src = _jsonl(
        tmp_path / "x.jsonl",
        {"ts": TS, "role": "user", "text": "the budget is 2000", "id": "old"},
        {"ts": TS, "role": "user", "text": "no: 2400", "id": "new", "supersedes": ["old"]},
    )
    ct("-C", st.root, "import", "jsonl", src)
    by_text = {r["text"]: r for r in log_records(st.root)}
    assert by_text["no: 2400"]["supersedes"] == ["old"] and "meta" not in by_text["no: 2400"]
    hits = json.loads(ct("-C", st.root, "search", "budget", "--json").stdout)["hits"]
    assert [h["id"] for h in hits] == ["new"]
