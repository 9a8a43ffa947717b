"""The web page of `ct serve`, in a real headless Chromium (Debian's chromium + chromedriver, driven by
selenium) against a real `ct serve` subprocess on a real store: search, timeline, topic tree, history.

The views are checked in one test per store, so that a suite spread over pytest-xdist workers
starts one server per store: web_store.build's three days, and build_years' three years up to today
(the page at real scale: zoom, the chosen day, today's open markers, one timezone, titles). Each
view's screenshot is written to docs/screenshots/ (or $MEMSTORE_SCREENSHOTS); the README and
docs/serve.md link docs/img/, which holds committed copies. The tests skip, saying why, only when no
browser is found.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from datetime import datetime
from pathlib import Path

import pytest

from conftest import REPO
from ct_server import ct_server
import web_store
from web_store import DAYS, SECRET, build, build_years

SHOTS = Path(os.environ.get("MEMSTORE_SCREENSHOTS") or REPO / "docs" / "screenshots")
MARKER = "Compare the Ship of Theseus views in the essay"


def _find_browser() -> tuple[str, str]:
    """(chromium binary, chromedriver), or skip naming what is missing."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        pytest.skip("no browser: the selenium package is not installed (pip install -e '.[test]')")
    chrome = next(
        (
            p
            for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome"))
            if p
        ),
        None,
    )
    driver = shutil.which("chromedriver") or next(
        (
            p
            for p in ("/usr/lib/chromium/chromedriver", "/usr/bin/chromedriver")
            if os.path.exists(p)
        ),
        None,
    )
    if not chrome or not driver:
        missing = " and ".join(
            n for n, p in (("chromium", chrome), ("chromedriver", driver)) if not p
        )
        pytest.skip(
            f"no browser: {missing} not found (run `make install` as root, or "
            "`apt-get install chromium chromium-driver`)"
        )
    return chrome, driver


@pytest.fixture(scope="module")
def browser():
    chrome, driver_path = _find_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    opts.binary_location = chrome
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
        "--force-device-scale-factor=1",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
    ):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(driver_path), options=opts)
    drv.set_page_load_timeout(20)
    try:
        yield drv
        errors = [e for e in drv.get_log("browser") if e["level"] == "SEVERE"]
        assert not errors, f"the page logged errors: {errors}"
    finally:
        drv.quit()


@contextlib.contextmanager
def served(build_store, tmp_path_factory, name):
    """`build_store(path)`'s store, served read-only by `ct serve --port 0` (a real process, TZ=UTC
    as CI runs it); yields (base URL, store, expected)."""
    cache = tmp_path_factory.getbasetemp() / "cache"
    with pytest.MonkeyPatch.context() as mp:  # conftest's per-test isolation, for the module's life
        mp.setenv("XDG_CACHE_HOME", str(cache))
        mp.setenv("MEMSTORE_EMBED_CACHE", str(cache / "embeddings.sqlite"))
        mp.delenv("MEMSTORE_DIR", raising=False)
        mp.setenv("TZ", "UTC")
        st, expected = build_store(tmp_path_factory.mktemp(name) / "memory")
        with ct_server(["-C", st.root, "serve", "--port", "0"], wait=30) as base:
            yield base, st, expected


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A store built by web_store.build: three days of November 2026."""
    with served(build, tmp_path_factory, "web") as out:
        yield out


@pytest.fixture(scope="module")
def years_site(tmp_path_factory):
    """A store built by web_store.build_years: three years up to today, in Europe/Berlin."""
    with served(build_years, tmp_path_factory, "years") as out:
        yield out


def visit(drv, base: str, route: str, view: str | None = None):
    """Open `#/route` and wait until the page has drawn that view."""
    from selenium.webdriver.support.ui import WebDriverWait

    if drv.current_url.startswith(base):
        drv.execute_script(
            "document.body.dataset.ready = '';"
            "if (location.hash !== arguments[0]) location.hash = arguments[0];"
            "else window.dispatchEvent(new HashChangeEvent('hashchange'));",
            "#/" + route,
        )
    else:
        drv.get(f"{base}/#/{route}")
    wait_ready(drv, view or route.split("/")[0].split("?")[0])
    return WebDriverWait(drv, 10)


def then(drv, view: str, action) -> None:
    """Do `action()` (a click, a key) and wait until the page has drawn `view` again."""
    drv.execute_script("document.body.dataset.ready = ''")
    action()
    wait_ready(drv, view)


def wait_ready(drv, view: str):
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(drv, 15).until(
        lambda d: d.execute_script("return document.body.dataset.ready") == view
    )
    error = drv.find_element("id", "error")
    assert not error.is_displayed(), error.text


def shoot(drv, name: str, show: str | None = None) -> None:
    """Save the window as SHOTS/name.png, scrolled to the top or to the element `show` (a CSS selector)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    if show:
        drv.execute_script(
            "document.querySelector(arguments[0]).scrollIntoView({block: 'start'})", show
        )
    else:
        drv.execute_script("window.scrollTo(0, 0)")
    assert drv.save_screenshot(str(SHOTS / f"{name}.png"))


def css(drv, selector):
    return drv.find_elements("css selector", selector)


def check_search_returns_the_expected_record_and_opens_it_in_its_day(site, browser):
    from selenium.webdriver.common.keys import Keys

    base, st, exp = site
    # "How did Plutarch describe the Ship of Theseus ...", second day, and the reply that answers it
    plutarch, answer = exp["theseus_ids"][10]
    visit(browser, base, "search")
    q = browser.find_element("id", "q")
    q.clear()
    then(browser, "search", lambda: q.send_keys("Plutarch decaying planks", Keys.ENTER))
    hits = css(browser, "#results .hit")
    # The question matches best, but the answer comes first, the question right after it.
    assert [h.get_attribute("data-id") for h in hits[:2]] == [answer, plutarch]
    assert "Athenians replaced the ship's decaying planks" in hits[0].text
    meta = hits[1].find_element("css selector", ".meta").text
    assert (
        DAYS[1] in meta and "score" in meta and "exact #" in meta and "vector #" in meta
    )  # --explain parts
    assert "How did Plutarch describe the Ship of Theseus" in hits[1].text
    shoot(browser, "search")

    then(browser, "timeline", hits[1].find_element("link text", f"Open in {DAYS[1]} →").click)
    target = css(browser, "#day li.target")
    assert [t.get_attribute("data-id") for t in target] == [plutarch]
    assert DAYS[1] in browser.find_element("id", "day-title").text

    # the same options as `ct search`: exact mode and a role filter
    visit(browser, base, "search?q=Theseus&mode=exact&role=assistant&k=5", "search")
    hits = css(browser, "#results .hit")
    assert len(hits) == 5 and all(
        h.find_element("css selector", ".role").text == "assistant" for h in hits
    )
    assert all(
        "exact #" in h.text and "vector" not in h.find_element("css selector", ".parts").text
        for h in hits
    )
    assert browser.find_element("id", "mode").get_attribute("value") == "exact"


def check_timeline_shows_the_day_counts_markers_and_a_day_verbatim(site, browser):
    from selenium.webdriver.common.keys import Keys

    base, st, exp = site
    visit(browser, base, f"timeline/{DAYS[2]}?zoom=month")
    bars = {
        b.get_attribute("data-day"): int(b.get_attribute("data-count"))
        for b in css(browser, "#chart rect.bar")
    }
    assert bars == exp["counts"]
    assert [m.get_attribute("data-day") for m in css(browser, "#chart .marker")] == [DAYS[1]]
    # the day asked for is open; its secret is masked, never shown in full
    assert browser.find_element("id", "day-count").get_attribute("data-count") == str(
        exp["counts"][DAYS[2]]
    )
    secret = browser.find_element("css selector", f'#day li[data-id="{exp["secret_id"]}"]').text
    assert "ghp_…[redacted]" in secret and SECRET not in browser.page_source

    # keyboard: the chart moves between days with the arrow keys
    then(
        browser, "timeline", lambda: browser.find_element("id", "chart").send_keys(Keys.ARROW_LEFT)
    )
    visit_day = browser.find_element("id", "day-title").text
    assert DAYS[1] in visit_day
    rows = css(browser, "#day ol.log li")
    assert len(rows) == exp["counts"][DAYS[1]]
    ids = [r.get_attribute("data-id") for r in rows]
    assert (
        exp["superseded"] not in ids and exp["correction"] in ids
    )  # a corrected record never appears
    times = [r.find_element("css selector", ".time").text for r in rows]
    assert times == sorted(times)
    assert MARKER in browser.find_element("css selector", "#day ul.markers").text  # markers on top
    shoot(browser, "timeline")


def check_topic_tree_renders_collapses_and_lists_a_topics_records(site, browser):
    base, st, exp = site
    tree = exp["tree"]
    visit(browser, base, "tree")
    names = css(browser, "#tree .name")
    assert len(names) == exp["topics"]
    merged = css(browser, "#tree li.ghost .badge.merged")
    assert (
        len(merged) == exp["merges"]
    )  # merged topics shown as such, under the topic that holds them now
    biggest = max(tree.topics.values(), key=lambda t: len(t.records))
    then(
        browser,
        "tree",
        browser.find_element("css selector", f'#tree .name[data-topic="{biggest.id}"]').click,
    )
    assert browser.find_element("id", "topic-title").text == biggest.name
    assert len(css(browser, "#topic ol.log li")) == len(biggest.records)
    shoot(browser, "tree")
    # collapsing a topic hides the topics under it
    node = browser.find_element("css selector", f'#tree li[data-topic="{biggest.id}"]')
    child = node.find_element("css selector", "ul li")
    assert child.is_displayed()
    node.find_element("css selector", ".toggle").click()
    assert not child.is_displayed()
    node.find_element("css selector", ".toggle").click()
    assert child.is_displayed()


def check_history_draws_a_reorganization_with_its_merges(site, browser):
    base, st, exp = site
    visit(browser, base, "history")
    links = [
        a
        for a in css(browser, "#commits a")
        if a.text.startswith(f"Reorganize topics: merge {exp['merges']}")
    ]
    assert len(links) == 1
    then(browser, "history", links[0].click)
    lines = browser.find_element("id", "diff-lines").text.splitlines()
    assert sum(line.startswith("merged") for line in lines) == exp["merges"]
    before, after = css(browser, ".beforeafter > div")
    assert len(before.find_elements("css selector", ".badge.merged")) == exp["merges"]
    assert after.find_elements("css selector", ".badge.absorbed")
    assert not after.find_elements("css selector", ".badge.merged")
    shoot(browser, "history", "#commit-title")


def check_keyboard_reaches_every_view(site, browser):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    base, st, exp = site
    visit(browser, base, "timeline")
    browser.find_element("tag name", "body").click()
    then(browser, "tree", ActionChains(browser).send_keys("3").perform)
    # in the tree: ↓ moves to the next topic, ← on an open topic folds it, Enter opens a topic
    names = css(browser, "#tree .name")
    names[0].send_keys(Keys.ARROW_DOWN)
    assert browser.switch_to.active_element == names[1]
    names[0].send_keys(Keys.ARROW_LEFT)
    assert "collapsed" in browser.find_element("css selector", "#tree > ul > li").get_attribute(
        "class"
    )
    names[0].send_keys(Keys.ARROW_RIGHT)
    then(browser, "tree", lambda: names[0].send_keys(Keys.ENTER))
    assert browser.find_element("id", "topic-title").text == names[0].text
    assert browser.switch_to.active_element == names[0]  # the tree stays as it was, focus with it
    then(browser, "search", ActionChains(browser).send_keys("/").perform)
    assert browser.switch_to.active_element.get_attribute("id") == "q"
    then(
        browser,
        "search",
        lambda: browser.switch_to.active_element.send_keys("Hobbes twist", Keys.ENTER),
    )
    first = css(browser, "#results .hit a")[0]
    # Tab walks the form's fields to the first hit's link; Enter opens its day
    browser.find_element("id", "q").click()
    for _ in range(30):
        ActionChains(browser).send_keys(Keys.TAB).perform()
        if browser.switch_to.active_element == first:
            break
    assert browser.switch_to.active_element == first
    then(browser, "timeline", ActionChains(browser).send_keys(Keys.ENTER).perform)
    assert len(css(browser, "#day li.target")) == 1
    then(browser, "history", ActionChains(browser).send_keys("4").perform)


def check_the_page_asks_for_a_token_when_the_server_has_tokens(site, browser, tmp_path):
    """`ct serve --tokens FILE`: the page's first request answers 401, so it shows its token
    form; a wrong token is refused and asked for again; the right one, kept in sessionStorage,
    is sent with every request and the page draws the store."""
    from selenium.webdriver.support.ui import WebDriverWait

    _, st, exp = site
    token = "page-token-for-the-browser-test"
    path = tmp_path / "tokens"
    path.write_text(f"# the page's token\n{token} read\n")
    path.chmod(0o600)
    serve = ["-q", "-C", st.root, "serve", "--port", "0", "--tokens", path]
    with ct_server(serve, wait=30) as base:
        wait = WebDriverWait(browser, 15)

        def give(value):
            field = browser.find_element("id", "token")
            field.clear()
            field.send_keys(value)
            browser.find_element("css selector", "#token-form button[type=submit]").click()

        browser.get(f"{base}/#/timeline")
        wait.until(lambda d: d.find_element("id", "token-form").is_displayed())
        assert "asks for a token" in browser.find_element("id", "token-why").text
        assert browser.find_element("id", "store-name").text == ""
        give("not-the-token-of-this-server")
        wait.until(lambda d: "was refused" in d.find_element("id", "token-why").text)
        assert browser.find_element("id", "token-form").is_displayed()
        give(token)
        wait_ready(browser, "timeline")
        assert not browser.find_element("id", "token-form").is_displayed()
        assert browser.find_element("id", "store-name").text == st.root.name
        assert len(css(browser, "#chart .bar")) == len(DAYS)
        assert browser.execute_script("return sessionStorage.getItem('memstore-token')") == token
        # the browser logs each 401 it was answered; nothing else may be an error
        errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        assert all("401" in e["message"] for e in errors), errors


def test_the_page_in_a_browser(browser, site, tmp_path):
    """One server and one browser session for every view, also when pytest-xdist spreads the suite."""
    check_search_returns_the_expected_record_and_opens_it_in_its_day(site, browser)
    check_timeline_shows_the_day_counts_markers_and_a_day_verbatim(site, browser)
    check_topic_tree_renders_collapses_and_lists_a_topics_records(site, browser)
    check_history_draws_a_reorganization_with_its_merges(site, browser)
    check_keyboard_reaches_every_view(site, browser)
    check_the_page_asks_for_a_token_when_the_server_has_tokens(site, browser, tmp_path)


def test_the_page_shows_who_wrote_a_hit_and_whether_git_verifies_a_commit(browser, tmp_path):
    """A hit card names its author; History badges a signed commit verified or not."""
    if shutil.which("ssh-keygen") is None:
        pytest.skip("ssh-keygen is not installed")
    from conftest import ct, make_store

    st = make_store(tmp_path / "memory")
    git = ["git", "-C", str(st.root), "config"]
    key = tmp_path / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    (tmp_path / "allowed").write_text(f"ana@example.com {(tmp_path / 'key.pub').read_text()}")
    for name, value in (
        ("memstore.author", "Ana Lopez <ana@example.com>"),
        ("user.name", "Ana Lopez"),
        ("user.email", "ana@example.com"),
        ("gpg.format", "ssh"),
        ("user.signingkey", str(key)),
        ("commit.gpgsign", "true"),
        ("gpg.ssh.allowedSignersFile", str(tmp_path / "allowed")),
    ):
        subprocess.run([*git, name, value], check=True)
    ct("-C", st.root, "add", "--ts", "2026-03-01T10:00:00Z", "the ferry leaves at nine")
    subprocess.run([*git, "user.signingkey", str(tmp_path / "other")], check=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other")])
    ct("-C", st.root, "add", "--ts", "2026-03-01T10:05:00Z", "the ferry is late")
    with ct_server(["-C", st.root, "serve", "--port", "0"], wait=30) as base:
        visit(browser, base, "search?q=ferry%20nine", "search")
        authors = [e.text for e in css(browser, "#results .hit .author")]
        assert authors and set(authors) == {"by Ana Lopez"}
        assert (
            css(browser, "#results .hit .author")[0]
            .get_attribute("title")
            .endswith("Ana Lopez <ana@example.com>")
        )
        visit(browser, base, "history", "history")
        badges = [e.text for e in css(browser, "#commits .badge")]
        assert badges[:2] == ["signed, not verified", "verified"]


# ----- the page at real scale: years of records ---------------------------------------------------


def bars_of(drv) -> list[dict]:
    """The chart's bars: unit, first and last day (or hour), count and drawn width in pixels."""
    return drv.execute_script(
        "return [...document.querySelectorAll('#chart rect.bar')].map((b) => ({"
        "unit: b.dataset.unit, from: b.dataset.from, to: b.dataset.to, day: b.dataset.day,"
        "hour: b.dataset.hour, count: Number(b.dataset.count),"
        "selected: b.classList.contains('selected'),"
        "width: b.getBoundingClientRect().width}))"
    )


def zoom_to(drv, name: str) -> None:
    then(
        drv, "timeline", drv.find_element("css selector", f'#zoom button[data-zoom="{name}"]').click
    )
    pressed = css(drv, '#zoom button[aria-pressed="true"]')
    assert [b.get_attribute("data-zoom") for b in pressed] == [name]


def check_the_page_opens_on_today_with_its_open_markers(site, browser):
    base, st, exp = site
    browser.get(base + "/")
    wait_ready(browser, "timeline")
    assert browser.find_element("id", "day-title").text.endswith(f"{exp['today']} · today")
    # no records today, yet both markers still open are there, the one set weeks ago too
    markers = browser.find_element("css selector", "#day ul.markers").text
    assert web_store.OPEN_BEFORE in markers and web_store.OPEN_TODAY in markers
    assert web_store.DONE not in markers
    assert browser.find_element("id", "day-count").text.startswith("2 open markers")
    label = browser.find_element("css selector", "#chart .chosen-label")
    assert label.get_attribute("data-day") == exp["today"] and "today" in label.text
    shoot(browser, "timeline-today")


def check_the_timeline_zooms_from_years_to_a_day_and_marks_the_chosen_day(site, browser):
    base, st, exp = site
    counts = exp["counts"]
    busy = max(counts, key=lambda d: (counts[d], d))  # a day in the busy month
    visit(browser, base, f"timeline/{busy}?zoom=all")
    # every day of three years: a bar per week or month, none thinner than a usable width
    bars = bars_of(browser)
    assert bars and {b["unit"] for b in bars} <= {"week", "month"}, {b["unit"] for b in bars}
    assert min(b["width"] for b in bars) >= 5, min(b["width"] for b in bars)
    assert sum(b["count"] for b in bars) == sum(counts.values())
    chosen = [b for b in bars if b["selected"]]
    assert len(chosen) == 1 and chosen[0]["from"] <= busy <= chosen[0]["to"]
    band = browser.find_element("css selector", "#chart rect.chosen")
    assert band.get_attribute("data-day") == busy and band.size["width"] >= 5
    assert browser.find_element("css selector", "#chart .chosen-label").text == busy
    assert css(browser, "#chart line.today")  # today is marked too, apart from the chosen day
    shoot(browser, "timeline-years")

    zoom_to(browser, "year")
    bars = bars_of(browser)
    assert {b["unit"] for b in bars} <= {"day", "week"} and min(b["width"] for b in bars) >= 5
    lo, hi = min(b["from"] for b in bars), max(b["to"] for b in bars)
    assert lo[:4] <= busy[:4] <= hi[:4] and len({b["from"][:4] for b in bars}) <= 2
    assert sum(b["count"] for b in bars) == sum(n for d, n in counts.items() if lo <= d <= hi)
    assert [b["from"] <= busy <= b["to"] for b in bars].count(True) == 1
    assert next(b for b in bars if b["from"] <= busy <= b["to"])["selected"]

    zoom_to(browser, "month")
    bars = bars_of(browser)
    month = {d: n for d, n in counts.items() if d[:7] == busy[:7]}
    assert {b["day"]: b["count"] for b in bars} == month
    assert [b["day"] for b in bars if b["selected"]] == [busy]
    assert min(b["width"] for b in bars) >= 5
    shoot(browser, "timeline-month")

    zoom_to(browser, "day")
    bars = bars_of(browser)
    assert {b["unit"] for b in bars} == {"hour"} and sum(b["count"] for b in bars) == counts[busy]
    assert (
        browser.find_element("css selector", "#chart .chosen-label").get_attribute("data-day")
        == busy
    )
    # the day's times are on the store's clock, and the hours of the chart with them
    rows = css(browser, "#day ol.log li")
    hours = sorted({int(r.find_element("css selector", ".time").text[:2]) for r in rows})
    assert sorted(int(b["hour"]) for b in bars) == hours
    # the arrow keys keep the zoom; "+" and "-" change it
    from selenium.webdriver.common.keys import Keys

    chart = browser.find_element("id", "chart")
    then(browser, "timeline", lambda: chart.send_keys(Keys.ARROW_RIGHT))
    assert "zoom=day" in browser.current_url
    then(browser, "timeline", lambda: browser.find_element("id", "chart").send_keys("-"))
    assert "zoom=month" in browser.current_url


def check_one_timezone_the_stores_named_on_the_page(site, browser):
    from zoneinfo import ZoneInfo

    base, st, exp = site
    tz = ZoneInfo(web_store.TZ)
    visit(browser, base, "history")
    assert browser.find_element("id", "tz").text == f"times in {web_store.TZ}"
    # the commits were made in a process on UTC; the page shows them on the store's clock
    out = subprocess.run(
        ["git", "-C", str(st.root), "log", "-3", "--format=%H %ct"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for sha, epoch in zip(out[::2], out[1::2]):
        when = datetime.fromtimestamp(int(epoch), tz).strftime("%Y-%m-%d %H:%M")
        info = browser.find_element("css selector", f'#commits a[data-sha="{sha}"] .info').text
        assert info.startswith(when), (info, when)
    # a record's time in its day is the store's time too
    day = exp["late_day"]
    visit(browser, base, f"timeline/{day}")
    rec = next(r for r in st.day(day) if r["id"] == exp["late_id"])
    shown = browser.find_element("css selector", f'#day li[data-id="{rec["id"]}"] .time').text
    assert shown == datetime.fromisoformat(rec["ts"].replace("Z", "+00:00")).astimezone(
        tz
    ).strftime("%H:%M:%S")


def check_conversations_are_named_by_their_titles(site, browser):
    base, st, exp = site
    visit(browser, base, f"timeline/{web_store.IMPORT_DAYS[0]}")
    box = browser.find_element("id", "day").text
    assert [t.text for t in css(browser, "#day .conv-title")] == [web_store.CHATGPT_TITLES[0]], box
    assert (
        "6667a1b0-1111-4000-8000-aaaaaaaaaaaa" not in box
    )  # the long id is not shown, its start is
    shoot(browser, "timeline-titles")
    # Claude Code's summary row opens its day: the title is that row, the session a short id
    visit(browser, base, f"timeline/{web_store.IMPORT_DAYS[1]}")
    box = browser.find_element("id", "day").text
    assert css(browser, "#day .conv")[0].text == f"session {web_store.CLAUDE_SESSION[:8]}…"
    assert web_store.CLAUDE_TITLE in box and web_store.CLAUDE_SESSION not in box
    visit(browser, base, f"search?q=laptop&mode=exact&session={web_store.CLAUDE_SESSION}", "search")
    hit = css(browser, "#results .hit")[0]
    assert hit.find_element("css selector", ".conv-title").text == web_store.CLAUDE_TITLE
    # a session with neither: a short id where its first line opens it (no UUID in full), and that
    # line, cut short, as its title where another of its records is shown alone (a search hit)
    counts = exp["counts"]
    busy = max(counts, key=lambda d: (counts[d], d))
    visit(browser, base, f"timeline/{busy}")
    recs = st.day(busy)
    first, reply = recs[0], next(r for r in recs if r["role"] == "assistant")
    assert css(browser, "#day .conv")[0].text == f"session {first['session'][:8]}…"
    assert not any(r["session"] in browser.find_element("id", "day").text for r in recs)
    words = "+".join(reply["text"].rstrip(".").split()[1:4])
    visit(browser, base, f"search?q={words}&mode=exact&session={first['session']}", "search")
    hit = css(browser, f'#results .hit[data-id="{reply["id"]}"]')[0]
    title = " ".join(first["text"].split())
    title = title if len(title) <= 80 else title[:79].rstrip() + "…"
    assert hit.find_element("css selector", ".conv-title").text == title
    # search hits name their conversation the same way
    visit(browser, base, "search?q=hiring+EUR+Q3&mode=exact", "search")
    hit = css(browser, "#results .hit")[0]
    assert web_store.CHATGPT_TITLES[0] in hit.find_element("css selector", ".conv").text


def test_the_page_at_real_scale(browser, years_site):
    """Three years of records: the page opens on today, zooms from years to a day with the chosen
    day marked, names its one timezone, and names conversations by their titles."""
    check_the_page_opens_on_today_with_its_open_markers(years_site, browser)
    check_the_timeline_zooms_from_years_to_a_day_and_marks_the_chosen_day(years_site, browser)
    check_one_timezone_the_stores_named_on_the_page(years_site, browser)
    check_conversations_are_named_by_their_titles(years_site, browser)


def test_the_private_view_reviews_and_shares_a_record(browser, tmp_path_factory):
    """The Private view lists the user's private records, secrets masked and flagged; its Share
    button asks, then POSTs /share: on a server started with --writable alone the page shows the
    refusal, which names --allow-share; with it (and --allow-secrets-override, for the flagged
    secret) one commit, and the list is empty."""
    from conftest import commits, make_store

    def build_private(path):
        st = make_store(path)
        st.add(f"private deploy note {SECRET}", scope="private", secrets="allow")
        st.add("a shared line", ts="2026-11-02T09:00:00Z")
        return st, None

    cache = tmp_path_factory.getbasetemp() / "cache"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(cache))
        mp.setenv("TZ", "UTC")
        st, _ = build_private(tmp_path_factory.mktemp("private") / "memory")
        before = commits(st.root)
        serve = ["-C", st.root, "serve", "--port", "0", "--writable"]
        with ct_server(serve, wait=30) as base:  # --writable alone: the page says what it takes
            visit(browser, base, "private")
            browser.execute_script("window.confirm = () => true")
            css(browser, "#private-list li.hit")[0].find_element(
                "css selector", "button.share"
            ).click()
            from selenium.webdriver.support.ui import WebDriverWait

            WebDriverWait(browser, 15).until(
                lambda d: "ct serve --allow-share" in d.find_element("tag name", "body").text
            )
            assert commits(st.root) == before and len(css(browser, "#private-list li.hit")) == 1
            logged = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
            assert all("/share" in m and "403" in m for m in logged), logged  # that refusal only
        # the record holds a flagged secret: sharing it takes --allow-secrets-override as well
        flags = ["--allow-share", "--allow-secrets-override"]
        with ct_server([*serve, *flags], wait=30) as base:
            visit(browser, base, "private")
            (item,) = css(browser, "#private-list li.hit")
            assert SECRET not in item.text and "private deploy note" in item.text
            assert "secrets flagged" in item.text
            browser.execute_script("window.confirm = () => true")
            item.find_element("css selector", "button.share").click()
            WebDriverWait(browser, 15).until(
                lambda d: "Shared in commit" in d.find_element("id", "private-summary").text
            )
            assert not css(browser, "#private-list li.hit")
            assert commits(st.root) == ["Share 1 private record", *before]
