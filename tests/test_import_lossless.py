"""ct import lossless-memory: its day files and corpora, role/type mapping, timezone-correct days, idempotence."""

from __future__ import annotations

import json

from conftest import commits, ct, git_clean, make_store

# lossless-memory's seven fields, keys in its order; "ai" is its assistant role.
MAR3 = [
    {
        "ts": "2026-03-03T23:30:00+09:00",
        "actor": "Sam",
        "role": "user",
        "type": "text",
        "text": "Let's move the launch budget review to Thursday.",
        "model": None,
        "session": "a1b2",
    },
    {
        "ts": "2026-03-03T23:31:00+09:00",
        "actor": "Nova",
        "role": "ai",
        "type": "thinking",
        "text": "They want the review on Thursday.",
        "model": "claude-x",
        "session": "a1b2",
    },
    {
        "ts": "2026-03-03T23:31:30+09:00",
        "actor": "Nova",
        "role": "ai",
        "type": "action",
        "text": "Bash: cal 3 2026",
        "model": "claude-x",
        "session": "a1b2",
    },
    {
        "ts": "2026-03-03T23:32:00+09:00",
        "actor": "Nova",
        "role": "ai",
        "type": "text",
        "text": "Done: the budget review is on Thursday 5 March.",
        "model": "claude-x",
        "session": "a1b2",
    },
]
# Older data: ts copied from a source that wrote JST wall-clock time with no offset.
MAR4_NAIVE = [
    {
        "ts": "2026-03-04T07:00:00",
        "actor": "Sam",
        "role": "user",
        "type": "text",
        "text": "Good morning, the flights are booked.",
        "model": None,
        "session": "c3d4",
    },
]
CORPUS = [
    {
        "ts": "2026-03-01T10:00:00+09:00",
        "actor": "user",
        "role": "user",
        "type": "doc",
        "text": "Travel policy: economy class below six hours.",
        "model": None,
        "session": "policy",
    },
]


def _lines(rows) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def make_data_dir(root, mar3=MAR3, mar4=MAR4_NAIVE):
    (root / "main").mkdir(parents=True)
    (root / "corpus" / "handbook").mkdir(parents=True)
    (root / "main" / "2026-03-03.jsonl").write_text(_lines(mar3), encoding="utf-8")
    (root / "main" / "2026-03-04.jsonl").write_text(_lines(mar4), encoding="utf-8")
    (root / "corpus" / "handbook" / "policy.jsonl").write_text(_lines(CORPUS), encoding="utf-8")
    # lossless-memory keeps its own state and indexes in the same folder: not data.
    (root / "_ingest_state.json").write_text(
        '{"fmt": "claude_code", "files": {}}', encoding="utf-8"
    )
    (root / "index_exact.db").write_bytes(b"SQLite format 3\x00")
    return root


def _log(root) -> dict[str, list[dict]]:
    out = {}
    for p in sorted((root / "log").rglob("*.jsonl")):
        out[p.stem] = [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines()]
    return out


def test_import_maps_fields_and_places_days_in_the_store_timezone(tmp_path):
    data = make_data_dir(tmp_path / "ll")
    st = make_store(tmp_path / "s", timezone="UTC")
    out = ct(
        "-C",
        st.root,
        "import",
        "lossless-memory",
        data,
        "--source-timezone",
        "Asia/Tokyo",
        "--json",
    ).stdout
    assert json.loads(out)["added"] == 6
    log = _log(st.root)
    # 23:30 in Tokyo on the 3rd is 14:30 UTC on the 3rd; 07:00 Tokyo on the 4th is 22:00 UTC on the 3rd.
    assert sorted(log) == ["2026-03-01", "2026-03-03"]
    day = log["2026-03-03"]
    assert [r["ts"] for r in day] == [
        "2026-03-03T14:30:00.000000Z",
        "2026-03-03T14:31:00.000000Z",
        "2026-03-03T14:31:30.000000Z",
        "2026-03-03T14:32:00.000000Z",
        "2026-03-03T22:00:00.000000Z",
    ]
    assert [(r["role"], r["type"]) for r in day] == [
        ("user", "text"),
        ("assistant", "meta"),
        ("assistant", "action"),
        ("assistant", "text"),
        ("user", "text"),
    ]
    assert (
        day[1]["meta"]["kind"] == "thinking"
        and day[1]["model"] == "claude-x"
        and day[1]["actor"] == "Nova"
    )
    assert day[4]["meta"]["source_ts"] == "2026-03-04T07:00:00"  # the verbatim original, for audit
    assert "source_ts" not in day[0].get("meta", {})  # it had an offset: nothing to interpret
    assert [r["session"] for r in day] == ["a1b2"] * 4 + ["c3d4"]
    doc = log["2026-03-01"][0]
    assert doc["type"] == "doc" and doc["meta"]["corpus"] == "handbook"
    assert commits(st.root)[0] == "Import 6 lossless-memory records from ll (3 sessions)"
    assert git_clean(st.root)
    assert "ok:" in ct("-C", st.root, "fsck").stdout


def test_naive_times_default_to_the_store_timezone(tmp_path):
    data = make_data_dir(tmp_path / "ll")
    st = make_store(tmp_path / "s", timezone="Asia/Tokyo")
    ct("-C", st.root, "import", "lossless-memory", data)
    log = _log(st.root)
    # In a Tokyo store both files keep their own days: the naive 07:00 is Tokyo time.
    assert sorted(log) == ["2026-03-01", "2026-03-03", "2026-03-04"]
    assert log["2026-03-04"][0]["ts"] == "2026-03-03T22:00:00.000000Z"
    assert len(log["2026-03-03"]) == 4


def test_a_day_boundary_in_another_store_timezone(tmp_path):
    data = make_data_dir(tmp_path / "ll")
    st = make_store(tmp_path / "s", timezone="Pacific/Kiritimati")  # UTC+14
    ct("-C", st.root, "import", "lossless-memory", data, "--source-timezone", "Asia/Tokyo")
    log = _log(st.root)
    # 23:30+09:00 on the 3rd is 04:30 on the 4th at +14, so it belongs to the 4th there.
    assert [r["text"] for r in log["2026-03-04"]][:1] == [MAR3[0]["text"]]
    assert "2026-03-03" not in log


def test_reimport_is_idempotent_and_picks_up_appends_and_rewrites(tmp_path):
    data = make_data_dir(tmp_path / "ll")
    st = make_store(tmp_path / "s")
    args = ("-C", st.root, "import", "lossless-memory", data, "--source-timezone", "Asia/Tokyo")
    ct(*args)
    n = len(commits(st.root))
    out = ct(*args).stderr
    assert "nothing new" in out and len(commits(st.root)) == n
    # A new line appended to today's file: exactly that one is added.
    day = data / "main" / "2026-03-04.jsonl"
    extra = {
        "ts": "2026-03-04T07:05:00",
        "actor": "Sam",
        "role": "user",
        "type": "text",
        "text": "Hotel is booked too.",
        "model": None,
        "session": "c3d4",
    }
    with open(day, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(extra) + "\n")
    assert json.loads(ct(*args, "--json").stdout)["added"] == 1
    # lossless-memory rewrites a day file when a row arrives out of order (inserted, sorted by ts).
    early = {
        "ts": "2026-03-03T23:00:00+09:00",
        "actor": "Sam",
        "role": "user",
        "type": "text",
        "text": "An earlier remark that arrived late.",
        "model": None,
        "session": "a1b2",
    }
    (data / "main" / "2026-03-03.jsonl").write_text(_lines([early, *MAR3]), encoding="utf-8")
    res = json.loads(ct(*args, "--json").stdout)
    assert res["added"] == 1 and res["skipped"] == 4
    texts = [r["text"] for rows in _log(st.root).values() for r in rows]
    assert len(texts) == len(set(texts)) == 8
    # The cursor is disposable: without it everything is read again and nothing is added twice.
    (st.root / ".memstore" / "import-state.json").unlink()
    assert "nothing new" in ct(*args).stderr
    assert git_clean(st.root)


def test_bad_line_names_the_file_and_changes_nothing(tmp_path):
    bad = [*MAR3[:2], {"ts": "yesterday-ish", "role": "user", "text": "x"}]
    data = make_data_dir(tmp_path / "ll", mar3=bad)
    st = make_store(tmp_path / "s")
    before = commits(st.root)
    proc = ct("-C", st.root, "import", "lossless-memory", data, check=False)
    assert proc.returncode == 4
    assert (
        "main/2026-03-03.jsonl:3: field 'ts'" in proc.stderr
        and "Nothing was imported" in proc.stderr
    )
    assert commits(st.root) == before and git_clean(st.root)
    assert not (st.root / "log").exists()


def test_usage_errors(tmp_path):
    st = make_store(tmp_path / "s")
    data = make_data_dir(tmp_path / "ll")
    proc = ct(
        "-C",
        st.root,
        "import",
        "lossless-memory",
        data,
        "--source-timezone",
        "Mars/Olympus",
        check=False,
    )
    assert proc.returncode == 2 and "Mars/Olympus" in proc.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = ct("-C", st.root, "import", "lossless-memory", empty, check=False)
    assert proc.returncode == 2 and "not a lossless-memory data folder" in proc.stderr
    assert len(commits(st.root)) == 1 and git_clean(st.root)
