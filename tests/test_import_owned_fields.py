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
