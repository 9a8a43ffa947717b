"""The page's side of `ct serve` over real HTTP (no browser): the page and its files, the /view/* data
(secrets masked, corrected records left out), read-only unless writable, and the secret masker."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import pytest

from conftest import REPO, commits, git_clean, make_store
from memstore.secrets.detect import scan
from memstore.serve.http import ENDPOINTS, make_server, url_of
from memstore.serve.web.mask import MARK, mask
from web_store import DAYS, SECRET, build


def get(base, path, accept="application/json", method="GET", body=None):
    """(status, headers, bytes) for one request; error answers are returned, not raised."""
    req = urllib.request.Request(
        base + path,
        method=method,
        data=body,
        headers={"Accept": accept, **({"Content-Type": "application/json"} if body else {})},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


def js(base, path, **kw):
    status, _, data = get(base, path, **kw)
    return status, json.loads(data)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """web_store's store, served read-only from a thread; yields (base URL, store, expected)."""
    cache = tmp_path_factory.getbasetemp() / "cache"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(cache))
        mp.setenv("MEMSTORE_EMBED_CACHE", str(cache / "embeddings.sqlite"))
        mp.delenv("MEMSTORE_DIR", raising=False)
        mp.setenv("TZ", "UTC")
        st, exp = build(tmp_path_factory.mktemp("webapi") / "s")
        server = make_server(st.root, port=0, log=False)
        thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        thread.start()
        try:
            yield url_of(server), st, exp
        finally:
            server.shutdown()
            server.server_close()
            server.app.close()
            thread.join(timeout=5)


def test_the_page_and_its_files_are_served_with_a_strict_policy(served):
    base, st, exp = served
    status, headers, html = get(base, "/", accept="text/html,application/xhtml+xml,*/*;q=0.8")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert b'src="/assets/app.js"' in html and b"http" not in html.replace(
        b"http-equiv", b""
    )  # nothing remote
    csp = headers["Content-Security-Policy"]
    assert (
        "default-src 'none'" in csp and "script-src 'self'" in csp and "connect-src 'self'" in csp
    )
    assert headers["X-Content-Type-Options"] == "nosniff"
    for name, ctype in (("app.js", "text/javascript"), ("app.css", "text/css")):
        status, headers, body = get(base, f"/assets/{name}")
        assert status == 200 and headers["Content-Type"].startswith(ctype) and body
        body = body.replace(b"http://www.w3.org/2000/svg", b"")  # a namespace name, never fetched
        assert b"https://" not in body and b"http://" not in body  # no network at run time
    status, out = js(base, "/assets/../http.py")
    assert status == 404
    status, out = js(base, "/assets/nope.js")
    assert status == 404 and "app.js" in out["error"]
    status, out = js(base, "/")  # programs still get the JSON description
    assert status == 200 and out["page"] == "/" and out["writable"] is False
    assert {p for p in ENDPOINTS if p.startswith("/view/")} <= set(out["endpoints"])


def test_read_only_unless_writable(served, tmp_path):
    base, st, exp = served
    before = commits(st.root)
    status, out = js(base, "/add", method="POST", body=json.dumps({"text": "hello"}).encode())
    assert status == 403 and "read-only" in out["error"] and "--writable" in out["error"]
    assert commits(st.root) == before and git_clean(st.root)


def test_overview_counts_current_records_per_day_and_lists_markers(served):
    base, st, exp = served
    status, out = js(base, "/view/overview")
    assert status == 200 and out["store"] == st.root.name and out["timezone"] == "UTC"
    assert {d["day"]: d["records"] for d in out["days"]} == exp["counts"]
    assert out["records"] == sum(exp["counts"].values()) and out["day_count"] == 3
    assert (out["first_day"], out["last_day"]) == (DAYS[0], DAYS[2])
    assert [(m["day"], m["status"]) for m in out["markers"]] == [(DAYS[1], "open")]
    assert st.days() == out["days"]


def test_a_day_is_verbatim_in_time_order_masked_and_without_corrected_records(served):
    base, st, exp = served
    status, out = js(base, f"/view/day?day={DAYS[2]}")
    assert status == 200 and len(out["records"]) == exp["counts"][DAYS[2]]
    assert [r["ts"] for r in out["records"]] == sorted(r["ts"] for r in out["records"])
    secret = next(r for r in out["records"] if r["id"] == exp["secret_id"])
    assert secret["text"] == f"Here is my GitHub token {SECRET[:4]}{MARK} for the deploy script."
    _, out = js(base, f"/view/day?day={DAYS[1]}")
    ids = [r["id"] for r in out["records"]]
    assert exp["superseded"] not in ids and exp["correction"] in ids
    assert [m["text"] for m in out["markers"]] == ["Compare the Ship of Theseus views in the essay"]
    # the verbatim text is the log's text
    raw = {r["id"]: r["text"] for r in st.day(DAYS[1])}
    assert all(raw[r["id"]] == r["text"] for r in out["records"])
    assert st.records([exp["superseded"], exp["correction"], "nope"])[0]["id"] == exp["correction"]


@pytest.mark.parametrize(
    "path,status,message",
    [
        ("/view/day?day=yesterday", 400, "YYYY-MM-DD"),
        ("/view/day?day=2026-13-01", 400, "is no day of the calendar"),
        ("/view/day", 400, "needs the parameter 'day'"),
        ("/view/commit?rev=--output=/tmp/x", 400, "a revision is a commit id"),
        ("/view/commit?rev=deadbeef", 400, "is not a revision"),
        ("/view/topic?id=t000000000000", 400, "no topic"),
        ("/view/search?query=x&mode=fuzzy", 400, "mode must be one of"),
        ("/view/history?n=x", 400, "must be an integer"),
    ],
)
def test_bad_view_requests_say_what_is_wrong(served, path, status, message):
    base, _, _ = served
    got, out = js(base, path)
    assert got == status and message in out["error"], out


def test_search_hits_carry_days_scores_parts_and_masked_text(served):
    base, st, exp = served
    status, out = js(base, "/view/search?query=GitHub+token+deploy&mode=exact")
    assert status == 200 and out["hits"][0]["id"] == exp["secret_id"]
    hit = out["hits"][0]
    assert hit["day"] == DAYS[2] and hit["score"] > 0 and hit["parts"]["exact"]["rank"] == 1
    assert SECRET not in json.dumps(out) and MARK in hit["text"]
    _, out = js(base, "/view/search?query=Theseus&role=user&k=3")
    assert len(out["hits"]) == 3 and {h["role"] for h in out["hits"]} == {"user"}
    assert set(out["hits"][0]["parts"]) == {"exact", "vector"}


def test_tree_names_the_merged_topics_and_where_they_went(served):
    base, st, exp = served
    _, out = js(base, "/view/tree")
    assert len(out["topics"]) == exp["topics"]
    merged = [g for g in out["gone"] if g["why"] == "merged"]
    assert len(merged) >= exp["merges"] and all(
        g["name"] and g["now_in"] in exp["tree"].topics for g in merged
    )
    assert SECRET not in json.dumps(out)  # a topic named after the secret turn is masked too
    _, gone = js(base, f"/view/topic?id={merged[0]['id']}")
    assert gone["gone"] == "merged" and gone["now_in"] == merged[0]["now_in"]
    big = max(exp["tree"].topics.values(), key=lambda t: len(t.records))
    _, page = js(base, f"/view/topic?id={big.id}&limit=5&offset=2")
    assert page["total"] == len(big.records) and len(page["records"]) == 5


def test_commit_view_is_the_diff_analysis_with_trees_before_and_after(served):
    base, st, exp = served
    _, hist = js(base, "/view/history")
    reorg = [c for c in hist["commits"] if c["reorganize"]]
    assert len(reorg) == 1 and hist["commits"][0] == reorg[0]
    _, out = js(base, f"/view/commit?rev={reorg[0]['sha']}")
    assert out["diff"] == st.diff(f"{reorg[0]['sha']}^", reorg[0]["sha"]).to_json() | {
        "old": out["diff"]["old"]
    }
    assert len(out["diff"]["merged"]) == exp["merges"]
    assert {t["id"] for t in out["after"]} == set(exp["tree"].topics)
    assert {m["id"] for m in out["diff"]["merged"]} <= {t["id"] for t in out["before"]}
    first = hist["commits"][-1]["sha"]
    _, out = js(
        base, f"/view/commit?rev={first}"
    )  # the first commit has no parent: diffed against nothing
    assert out["before"] == [] and out["empty"]
    for rev, i in (("HEAD", 0), ("HEAD~1", 1), (hist["commits"][1]["sha"][:8], 1)):
        _, out = js(base, f"/view/commit?rev={rev}")
        assert out["rev"] == rev and out["commit"]["sha"] == hist["commits"][i]["sha"], rev


@pytest.mark.parametrize(
    "text",
    [
        f"token {SECRET} and key sk-proj-AbCdEf1234567890GhIjKlMn on one line",
        '  password = "Zx9!kQ2mP8vL4nR7tW1yB6"  # quoted',
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtz\n"
        "ZDI1NTE5AAAAIAg4sQf5rKpA7gJbT0nU5X0QZ9v8j1kVxMGrSj0sUGqkAAAAJg\n-----END OPENSSH PRIVATE KEY-----",
        "word " * 60 + f"{SECRET} " + "tail " * 60,
        "x" * 300 + " TOKEN=Zx9kQ2mP8vL4nR7tW1yB6aaa " + "y" * 300,
    ],
)
def test_mask_leaves_nothing_the_detector_calls_a_secret(text):
    assert scan(text), "the case must hold a secret"
    out = mask(text)
    assert scan(out) == [] and MARK in out
    assert len(out) > len(text) // 3  # the secret goes, the text around it stays


def test_mask_leaves_ordinary_text_alone():
    for text in (
        "",
        "The token of our appreciation.",
        "key: value",
        "api_key = os.environ['KEY']",
        None,
        5,
    ):
        assert mask(text) == text


def test_bench_times_a_page_load_and_adds_its_row(served):
    from memstore.bench.speed import Bench
    from memstore.bench.web import page_load_timing

    _, st, _ = served
    b = Bench()
    res = page_load_timing(b, st, 42)
    assert set(res["parts"]) == {
        "/",
        "/assets/app.css",
        "/assets/app.js",
        "/view/overview",
        "/view/day",
    }
    assert 0 < res["p50"] <= res["max"] and res["loads"] == 10
    row = b.rows[-1]
    assert (
        row.measure.startswith("web page load") and row.size == "42" and row.ok is None
    )  # budget only @100k
    assert b.raw["web"][42] is res


def test_overview_names_today_on_the_stores_clock(served):
    from datetime import datetime, timedelta

    base, st, exp = served
    before = datetime.now(st.tz)
    _, out = js(base, "/view/overview")
    after = datetime.now(st.tz)
    assert out["today"] in {before.strftime("%Y-%m-%d"), after.strftime("%Y-%m-%d")}
    assert out["today"] >= out["last_day"] and before - timedelta(days=1) < after


FIXTURES = REPO / "tests" / "fixtures" / "importers"
OPAQUE = "0b7c9e4e-3f1d-4c2a-9d8e-5a6b7c8d9e0f"


@pytest.fixture(scope="module")
def titled(tmp_path_factory):
    """A store with a ChatGPT and a Claude Code import, an opaque session and a readable one."""
    with pytest.MonkeyPatch.context() as mp:
        cache = tmp_path_factory.getbasetemp() / "cache"
        mp.setenv("XDG_CACHE_HOME", str(cache))
        mp.setenv("MEMSTORE_EMBED_CACHE", str(cache / "embeddings.sqlite"))
        mp.setenv("TZ", "UTC")
        st = make_store(tmp_path_factory.mktemp("titled") / "s", timezone="Europe/Berlin")
        st.import_("chatgpt", FIXTURES / "chatgpt_conversations.json")
        st.import_("claude-code", FIXTURES / "5f0c1a2e-7b3d-4c8e-9a61-2d4e8f1b3c70.jsonl")
        long_line = "Plan the garden: " + "tomatoes, beans and basil along the south fence " * 3
        rows = [
            ("2025-09-01T08:00:00Z", "assistant", "Good morning.", OPAQUE),
            ("2025-09-01T08:01:00Z", "user", f"My token is {SECRET}, keep it", OPAQUE + "-x"),
            ("2025-09-01T08:02:00Z", "user", long_line, OPAQUE),
            ("2025-09-01T08:03:00Z", "user", "Standup at 9:15", "ops"),
        ]
        recs = [
            st.normalize(dict(zip(("ts", "role", "text", "session"), r), actor=r[1])) for r in rows
        ]
        st.write(recs, "Add four turns", secrets="allow")
        server = make_server(st.root, port=0, log=False)
        thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        thread.start()
        try:
            yield url_of(server), st, long_line
        finally:
            server.shutdown()
            server.server_close()
            server.app.close()
            thread.join(timeout=5)


def test_records_carry_their_conversations_title(titled):
    base, st, long_line = titled
    titles = lambda out: {r["session"]: r["session_title"] for r in out["records"]}  # noqa: E731
    _, out = js(base, "/view/day?day=2024-06-10")  # ChatGPT keeps the conversation's title
    assert set(titles(out).values()) == {"Budget planning for Q3"}
    _, out = js(base, "/view/day?day=2025-08-14")  # Claude Code's summary row names the session
    assert set(titles(out).values()) == {"Fix flaky budget export test"}
    _, out = js(base, "/view/day?day=2025-09-01")
    got = titles(out)
    # an opaque id with no title kept: its user's first line, on one line and cut short
    assert got[OPAQUE] == " ".join(long_line.split())[:79].rstrip() + "…"
    assert len(got[OPAQUE]) == 80
    assert got[OPAQUE + "-x"] == f"My token is {SECRET[:4]}{MARK}, keep it"  # masked like the text
    assert got["ops"] is None  # a readable name is its own label
    claude = "5f0c1a2e-7b3d-4c8e-9a61-2d4e8f1b3c70"
    assert st.session_titles([claude, "ops", "no-such-session-0000000000", None]) == {
        claude: "Fix flaky budget export test"
    }
    # search hits and a topic's records carry it too
    _, out = js(base, "/view/search?query=hiring+EUR&mode=exact&k=3")
    assert out["hits"][0]["session_title"] == "Budget planning for Q3"
    _, tree = js(base, "/view/tree")
    top = max(tree["topics"], key=lambda t: t["records"])
    _, page = js(base, f"/view/topic?id={top['id']}")
    assert all("session_title" in r for r in page["records"])
    assert any(r["session_title"] for r in page["records"])
    assert SECRET not in json.dumps([out, page])
