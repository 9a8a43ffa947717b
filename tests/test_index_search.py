"""Index (make-style updates, -B equals incremental, hooks) and search (modes, filters, fusion, CJK)."""

from __future__ import annotations

import json
import random
import subprocess

import pytest

from conftest import ct, fts_terms, git_clean, make_store, write_turns


@pytest.fixture
def filled(store):
    write_turns(
        store,
        [
            (
                "2026-03-01T09:00:00Z",
                "user",
                "The budget for the trip is 2400 euros.",
                "trip",
                "ana",
            ),
            (
                "2026-03-01T09:01:00Z",
                "assistant",
                "Noted: trip budget capped at 2400 euros.",
                "trip",
                "bot",
            ),
            (
                "2026-03-02T10:00:00Z",
                "user",
                "Let us plan the garden: tomatoes and basil.",
                "garden",
                "ana",
            ),
            (
                "2026-03-03T11:00:00Z",
                "user",
                "東京タワーに行きました。とても楽しかった。",
                "travel",
                "ken",
            ),
            ("2026-03-04T12:00:00Z", "user", "我们明天去北京大学参观。", "travel", "li"),
            (
                "2026-03-05T08:00:00Z",
                "tool",
                'NOT a -problem "quoted" * star (paren',
                "misc",
                "tool",
            ),
        ],
    )
    return store


def canonical(store):
    """What the index holds, independent of where a row sits in the matrix (back-dated rows sit in
    its unsorted tail until it is folded in): each row with its own vector and time. The vector is
    the exact one its location in the store gives: int8 codes depend on the scales of the
    generation they were first written in, so a rebuild may code a row differently."""
    from memstore.index import exact

    idx = store.index()
    rows = idx.conn.execute(
        "SELECT id, day, line_no, off, len, ts, actor, role, type, session, source, fsha, hidden, vrow, vkey "
        "FROM records ORDER BY day, ts, line_no, id"
    ).fetchall()
    vecs, times = idx.matrix()
    assert sorted(r[13] for r in rows if r[13] >= 0) == list(
        range(vecs.shape[0])
    )  # every matrix row is one record's
    ordered = idx.sorted_rows()
    assert list(times[:ordered]) == sorted(times[:ordered])  # the prefix is in time order
    rows = [
        (
            *r[:13],
            (exact.rows(idx, [r[13]])[0].tobytes(), float(times[r[13]])) if r[13] >= 0 else None,
            r[14],
        )
        for r in rows
    ]
    days = idx.conn.execute("SELECT day, content_fp, n FROM days ORDER BY day").fetchall()
    return rows, days, fts_terms(idx.conn)


def test_modes_return_the_right_hits(filled):
    from memstore.retrieve.search import search

    filled.index()
    for mode in ("exact", "vector", "hybrid"):
        hits = search(filled, "trip budget euros", k=3, mode=mode)
        assert "budget" in hits[0].text, mode
        assert hits[0].day == "2026-03-01"


def test_filters(filled):
    from memstore.retrieve.search import Filters, search

    filled.index()
    f = Filters(role=["assistant"])
    assert {h.role for h in search(filled, "budget", mode="hybrid", filters=f)} == {"assistant"}
    f = Filters(actor=["ana"], session=["garden"])
    hits = search(filled, "plan", mode="hybrid", filters=f)
    assert hits and all(h.session == "garden" and h.actor == "ana" for h in hits)
    f = Filters(type=["doc"])
    assert search(filled, "budget", filters=f) == []
    proc = ct("-C", filled.root, "search", "budget", "--since", "2026-03-02", "--json")
    assert all(h["ts"] >= "2026-03-02" for h in json.loads(proc.stdout)["hits"])
    proc = ct(
        "-C", filled.root, "search", "budget", "--until", "2026-03-02", "--mode", "vector", "--json"
    )
    hits = json.loads(proc.stdout)["hits"]
    assert hits and all(h["ts"] < "2026-03-02" for h in hits)


def test_cjk_queries_match(filled):
    from memstore.retrieve.search import search

    filled.index()
    assert "東京タワー" in search(filled, "東京", mode="exact")[0].text
    assert "北京大学" in search(filled, "北京", mode="exact")[0].text
    assert "楽しかった" in search(filled, "楽しい", mode="exact")[0].text  # inflected: shares 楽し
    assert "東京タワー" in search(filled, "タワー", mode="hybrid")[0].text
    assert search(filled, "京", mode="exact")  # one character: prefix over bigrams


@pytest.mark.parametrize(
    "q", ["NOT", "-problem", '"quoted', "*", "star (paren", "AND OR NEAR", '"', "'", "a:b", "^x"]
)
def test_fts_syntax_in_user_text_never_errors(filled, q):
    proc = ct("-C", filled.root, "search", "--mode", "exact", "--json", "--", q)
    json.loads(proc.stdout)


def test_json_shape_explain_and_batch(filled, tmp_path):
    out = json.loads(
        ct("-C", filled.root, "search", "budget", "--json", "--explain", "-k", "2").stdout
    )
    assert out["query"] == "budget" and len(out["hits"]) == 2
    for key in ("id", "ts", "actor", "role", "type", "text", "score", "session", "source", "parts"):
        assert key in out["hits"][0]
    qf = tmp_path / "q.txt"
    qf.write_text("budget\ngarden\n東京\n")
    lines = ct("-C", filled.root, "search", "--queries", qf, "-k", "1").stdout.splitlines()
    assert [json.loads(x)["query"] for x in lines] == ["budget", "garden", "東京"]
    assert "garden" in json.loads(lines[1])["hits"][0]["text"]


def test_text_output_shows_dates(filled):
    out = ct("-C", filled.root, "search", "budget").stdout
    assert "2026-03-01 09:00" in out


def test_alpha_blend(filled):
    out = json.loads(
        ct(
            "-C", filled.root, "search", "budget euros", "--alpha", "0.7", "--json", "--explain"
        ).stdout
    )
    assert "budget" in out["hits"][0]["text"] and "lex" in json.dumps(out["hits"][0]["parts"])


def test_multi_store_results_are_labelled(tmp_path, filled):
    other = make_store(tmp_path / "other")
    write_turns(
        other,
        [("2026-04-01T09:00:00Z", "user", "Another budget: the office rent.", "office", "bo")],
    )
    out = json.loads(ct("-C", filled.root, "-C", other.root, "search", "budget", "--json").stdout)
    stores = {h["store"] for h in out["hits"]}
    assert stores == {str(filled.root), str(other.root)}


def test_index_plan_and_vanished_days(filled, tmp_path):
    idx = filled.index()
    assert idx.plan().empty
    write_turns(filled, [("2026-03-08T09:00:00Z", "user", "a day ct wrote", "s", "ana")])
    assert filled.index(update=False).plan().empty, (
        "a write leaves the index holding what it committed"
    )
    other = tmp_path / "other"  # a day that arrives by git (a pull), which no ct command indexed
    subprocess.run(["git", "clone", "-q", str(filled.root), str(other)], check=True)
    from memstore.store import Store

    write_turns(Store.open(other), [("2026-03-09T09:00:00Z", "user", "a new day", "s", "ana")])
    subprocess.run(
        [
            "git",
            "-C",
            str(filled.root),
            "-c",
            "core.hooksPath=/dev/null",
            "pull",
            "-q",
            "--ff-only",
            str(other),
            "main",
        ],
        check=True,
    )  # no hook indexes it
    assert filled.index(update=False).plan().changed == ["2026-03-09"]
    out = ct("-C", filled.root, "index", "-n").stdout
    assert "would reindex 2026-03-09" in out
    ct("-C", filled.root, "index")
    (filled.root / "log/2026/2026-03-02.jsonl").unlink()
    plan = filled.index(update=False).plan()
    assert plan.vanished == ["2026-03-02"]
    filled.index()
    assert (
        filled.index()
        .conn.execute("SELECT COUNT(*) FROM records WHERE day='2026-03-02'")
        .fetchone()[0]
        == 0
    )


def test_rewritten_day_is_reindexed(filled):
    """The library-contamination lesson: a rewritten (not appended) file must replace its rows."""
    filled.index()
    log = filled.root / "log/2026/2026-03-01.jsonl"
    lines = log.read_text().splitlines()
    log.write_text(lines[1] + "\n")  # same size class, different content
    filled.index()
    ids = [
        r[0] for r in filled.index().conn.execute("SELECT id FROM records WHERE day='2026-03-01'")
    ]
    assert ids == [json.loads(lines[1])["id"]]


def test_rebuild_equals_incremental_after_random_writes_and_deletions(tmp_path):
    rng = random.Random(7)
    st = make_store(tmp_path / "r")
    words = "budget garden tomato rent office trip euro plan basil tower river cake".split()
    for step in range(12):
        n = rng.randint(1, 6)
        items = []
        for _ in range(n):
            day = rng.randint(1, 9)
            items.append(
                (
                    f"2026-05-0{day}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00Z",
                    rng.choice(["user", "assistant"]),
                    " ".join(rng.choices(words, k=6)),
                    rng.choice("ab"),
                    "x",
                )
            )
        write_turns(st, items)
        if rng.random() < 0.3:
            days = sorted((st.root / "log/2026").glob("*.jsonl"))
            if days:
                victim = rng.choice(days)
                victim.unlink()
        if rng.random() < 0.3:
            days = sorted((st.root / "log/2026").glob("*.jsonl"))
            if days:
                victim = rng.choice(days)
                lines = victim.read_text().splitlines()
                victim.write_text("\n".join(lines[: max(1, len(lines) // 2)]) + "\n")
        st.index()
        # history rewritten by hand (as a git reset or a merge could): committed, so writers go on
        subprocess.run(["git", "-C", str(st.root), "add", "-A"], check=True)
        subprocess.run(
            [
                "git",
                "-C",
                str(st.root),
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-qm",
                "edit",
                "--allow-empty",
            ],
            check=True,
        )
    incremental = canonical(st)
    st.index(update=False).update(rebuild=True)
    assert canonical(st) == incremental
    # and from nothing at all, as on a fresh copy
    st.index(update=False).close()
    for p in st.meta_dir.glob("index.db*"):
        p.unlink()
    from memstore.store import Store

    fresh = Store(st.root)
    assert canonical(fresh) == incremental


def test_appending_writes_extend_the_index_in_place_and_equal_a_rebuild(tmp_path):
    """The common write (lines appended after everything indexed) adds rows to the current vector
    generation instead of copying the matrix, and still gives exactly what a rebuild gives."""
    st = make_store(tmp_path / "a")
    write_turns(
        st,
        [
            (f"2026-05-01T0{h}:00:00Z", "user", f"note {h} about the garden", "s", "x")
            for h in range(4)
        ],
    )
    idx = st.index()
    gen = idx.conn.execute("SELECT value FROM meta WHERE key = 'gen'").fetchone()[0]
    first = (
        st.index(update=False)
        .conn.execute("SELECT id FROM records ORDER BY vrow LIMIT 1")
        .fetchone()[0]
    )
    for h in range(4, 8):  # same day and the next, each after the last indexed row
        write_turns(
            st,
            [
                (
                    f"2026-05-0{1 + h // 6}T1{h}:00:00Z",
                    "assistant",
                    f"reply {h} on tomatoes",
                    "s",
                    "x",
                )
            ],
        )
        st.index()
    # a correction hides an old row; a repeated id is hidden as a duplicate
    st.write(
        [
            st.normalize(
                {
                    "ts": "2026-05-02T20:00:00Z",
                    "role": "user",
                    "text": "fixed note",
                    "supersedes": [first],
                }
            )
        ],
        "Correct",
        dedupe=False,
    )
    st.index()
    idx = st.index(update=False)
    assert idx.conn.execute("SELECT value FROM meta WHERE key = 'gen'").fetchone()[0] == gen
    assert idx.conn.execute("SELECT hidden FROM records WHERE id = ?", (first,)).fetchone()[0] == 1
    incremental = canonical(st)
    idx.update(rebuild=True)
    assert canonical(st) == incremental


def test_pull_runs_hook_that_indexes_new_days(tmp_path, filled):
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(filled.root), str(remote)], check=True)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(remote), str(clone)], check=True)
    ct("-C", clone, "hooks", "install")
    ct("-C", clone, "index")
    subprocess.run(
        ["git", "-C", str(filled.root), "remote", "add", "origin", str(remote)], check=True
    )
    write_turns(filled, [("2026-03-20T09:00:00Z", "user", "pulled later", "s", "ana")])
    subprocess.run(["git", "-C", str(filled.root), "push", "-q", "origin", "main"], check=True)
    subprocess.run(
        ["git", "-C", str(clone), "pull", "-q", "--no-rebase", "origin", "main"], check=True
    )
    from memstore.store import Store

    st = Store(clone)
    idx = st.index(update=False)
    assert idx.plan().empty, idx.plan()
    assert (
        idx.conn.execute("SELECT COUNT(*) FROM records WHERE day='2026-03-20'").fetchone()[0] == 1
    )
    assert "installed" in ct("-C", clone, "hooks", "status").stdout


def test_index_never_writes_store_files(filled):
    ct("-C", filled.root, "index", "-B")
    assert git_clean(filled.root)


def test_a_garbage_index_is_rebuilt_not_a_traceback(filled):
    filled.index().close()
    db = filled.meta_dir / "index.db"
    for p in filled.meta_dir.glob("index.db-*"):
        p.unlink()
    db.write_bytes(b"this is not an sqlite database" * 100)
    out = json.loads(ct("-C", filled.root, "search", "budget", "--json").stdout)
    assert out["hits"] and "budget" in out["hits"][0]["text"]


def test_a_search_that_indexes_first_embeds_its_query_meanwhile_with_the_same_hits(filled):
    """Store.search loads the embedder and embeds the query in a thread while it brings the index
    up to date; the hits are those of a search on an index already current."""
    ct(
        "-C", filled.root, "add", "--ts", "2026-03-21T10:00:00Z", "a new day: Kyoto trip budget"
    )  # a day to index
    from memstore.store import Store

    fresh = Store(filled.root)  # a new process's view: no embedder loaded yet
    overlapped = fresh.search("trip budget", k=5)
    assert fresh._embedder is not None
    assert [h.id for h in overlapped] == [
        h.id for h in fresh.search("trip budget", k=5, update_index=False)
    ]
    assert overlapped and "Kyoto" in overlapped[0].text


def test_a_query_still_being_embedded_ranks_its_words_first_with_the_same_hits(filled, monkeypatch):
    """search() given a Future of the query vector runs the keyword query while the vector is
    computed, then scans; the hits equal those of a search given the vector itself."""
    import threading
    from concurrent.futures import Future

    from memstore.retrieve.search import search

    filled.index()
    qvec = filled.embedder.embed_query("trip budget")
    pending: Future = Future()
    release = threading.Event()

    def finish():
        release.wait(60)  # (a bound only so that a broken search fails instead of hanging)
        pending.set_result(qvec)

    threading.Thread(target=finish).start()
    seen = []
    from memstore.retrieve import search as searchmod

    real = searchmod.exact_candidates

    def spy(*args, **kwargs):
        seen.append(pending.done())  # the words are ranked before the vector exists
        out = real(*args, **kwargs)
        release.set()
        return out

    monkeypatch.setattr(searchmod, "exact_candidates", spy)
    waited = search(filled, "trip budget", k=5, qvec=pending)
    monkeypatch.undo()
    assert seen == [False]
    given = search(filled, "trip budget", k=5, qvec=qvec)
    assert [(h.id, round(h.score, 9)) for h in waited] == [(h.id, round(h.score, 9)) for h in given]
    assert waited and "budget" in waited[0].text


@pytest.mark.parametrize(
    "question,about_user",
    [
        ("Which camera did I buy last month?", True),
        ("what's my sister's name", True),
        ("I've been thinking about a new phone, any tips?", True),
        ("Can you remind me of the restaurant you recommended in Rome?", False),
        ("I was going through our previous conversation about music theory", False),
        ("I think we discussed work from home jobs earlier", False),
        ("what did the assistant say about the budget", False),
        ("Can you recommend a lens for my camera?", True),  # a request, not a memory of a reply
        ("what did you say about my lens", False),
        ("trip budget euros", False),  # no person at all: both sides alike
    ],
)
def test_first_person_questions_are_about_the_user(question, about_user):
    from memstore.retrieve.search import about_the_user

    assert about_the_user(question) is about_user


def test_a_first_person_question_weighs_the_users_turns_above_the_assistants_echo(store):
    """The user states a fact once; the assistant's long reply repeats its words. "my ..." asks
    about the user's life, so the user's turn leads; asked about the assistant's words, the reply can."""
    from memstore.retrieve.search import ROLE_PRIOR, search

    write_turns(
        store,
        [
            (
                "2026-03-01T09:00:00Z",
                "user",
                "I adopted a rescue greyhound called Pixel.",
                "s1",
                "ana",
            ),
            (
                "2026-03-01T09:01:00Z",
                "assistant",
                "Congratulations on adopting a rescue greyhound! Greyhound rescue dogs like Pixel settle in "
                "well: a rescue greyhound needs a soft bed, short walks and a quiet corner.",
                "s1",
                "bot",
            ),
        ],
    )
    store.index()
    plain = search(store, "rescue greyhound", k=2)
    mine = search(store, "what is my rescue greyhound called", k=2)
    assert mine[0].role == "user"
    asst = next(h for h in mine if h.role == "assistant")
    assert asst.parts["role_prior"] == ROLE_PRIOR
    assert all("role_prior" not in h.parts for h in plain)
    theirs = search(store, "what did you say about my rescue greyhound", k=2)
    assert all("role_prior" not in h.parts for h in theirs)


def _fts_segments(index) -> int:
    return index.conn.execute("SELECT COUNT(DISTINCT segid) FROM fts_idx").fetchone()[0]


def test_a_bulk_load_leaves_the_full_text_index_in_one_segment(tmp_path, monkeypatch):
    """A rebuild, or an update that brings in FTS_MERGE_ROWS rows or more, merges FTS5's segments
    into one (a third of the bytes at 100k); a small write leaves them to FTS5's own merging.
    FTS5's in-memory buffer is made tiny here so that a few hundred rows make many segments."""
    from memstore.index import build

    st = make_store(tmp_path / "s")
    turns = [
        (
            f"2026-01-{1 + i // 100:02d}T{(i // 4) % 24:02d}:{i % 60:02d}:00Z",
            "user",
            f"note {i} on the garden budget and word{i % 97} with other{i % 13}",
            "s1",
            "me",
        )
        for i in range(400)
    ]
    write_turns(st, turns[:200])
    index = st.index()
    with index.conn:
        index.conn.execute("INSERT INTO fts(fts, rank) VALUES ('hashsize', 2048)")
        # pages freed before the rebuild (as a forget's or an old layout's would be): 2 MB
        index.conn.execute("CREATE TABLE scratch (b BLOB)")
        index.conn.executemany("INSERT INTO scratch VALUES (?)", [(bytes(4096),)] * 512)
        index.conn.execute("DROP TABLE scratch")
    index.update(rebuild=True)
    assert _fts_segments(index) == 1
    free, pages = (
        index.conn.execute(f"PRAGMA {k}").fetchone()[0] for k in ("freelist_count", "page_count")
    )
    assert free * 10 < pages  # the freed pages went back to the disk
    monkeypatch.setattr(build, "FTS_MERGE_ROWS", 150)
    write_turns(st, turns[200:210])  # a small write: its own segments stay
    index = st.index()
    assert _fts_segments(index) > 1
    write_turns(st, turns[210:])  # 190 rows: merged
    index = st.index()
    assert _fts_segments(index) == 1
    hits = index.conn.execute("SELECT COUNT(*) FROM fts WHERE fts MATCH 'word5'").fetchone()[0]
    assert hits == len([i for i in range(400) if i % 97 == 5])  # every row still found


def test_a_bulk_merge_gives_back_free_pages_from_a_tenth_of_the_file(tmp_path):
    """After a rebuild's merge, free pages of 15% of index.db go back to the disk (a `ct index -B`
    of the 100k bench store left 120 B a record free under the old quarter rule)."""
    from memstore.sqlitedb import sqlite3

    from memstore.index import build

    conn = sqlite3.connect(tmp_path / "i.db")
    conn.execute("CREATE VIRTUAL TABLE fts USING fts5(body)")
    conn.execute("CREATE TABLE kept (b BLOB)")
    conn.execute("CREATE TABLE scratch (b BLOB)")
    with conn:
        conn.executemany("INSERT INTO kept VALUES (?)", [(bytes(4000),)] * 850)
        conn.executemany("INSERT INTO scratch VALUES (?)", [(bytes(4000),)] * 150)
    conn.execute("DROP TABLE scratch")
    free, pages = (
        conn.execute(f"PRAGMA {k}").fetchone()[0] for k in ("freelist_count", "page_count")
    )
    assert 0.1 <= free / pages < 0.25  # between the two rules
    build.Index._merge_fts(conn)
    free, pages = (
        conn.execute(f"PRAGMA {k}").fetchone()[0] for k in ("freelist_count", "page_count")
    )
    assert free * 10 < pages
