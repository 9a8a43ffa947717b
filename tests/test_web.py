"""The web page of `ct serve`, in a real headless Chromium (Debian's chromium + chromedriver, driven by
selenium) against a real `ct serve` subprocess on a real store: search, timeline, topic tree, history.

The views are checked in one test, so that a suite spread over pytest-xdist workers still starts one
server and one browser. Each view's screenshot is written to docs/screenshots/ (or
$MEMSTORE_SCREENSHOTS); the README links there, and docs/img/ holds committed copies. The test
skips, saying why, only when no browser is found.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from conftest import CT, REPO
from web_store import DAYS, SECRET, build

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


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A store built by web_store.build, served read-only by `ct serve --port 0`; yields (base URL, store, expected)."""
    cache = tmp_path_factory.getbasetemp() / "cache"
    with pytest.MonkeyPatch.context() as mp:  # conftest's per-test isolation, for the module's life
        mp.setenv("XDG_CACHE_HOME", str(cache))
        mp.setenv("MEMSTORE_EMBED_CACHE", str(cache / "embeddings.sqlite"))
        mp.delenv("MEMSTORE_DIR", raising=False)
        mp.setenv("TZ", "UTC")
        st, expected = build(tmp_path_factory.mktemp("web") / "memory")
        proc = subprocess.Popen(
            [*CT, "-C", str(st.root), "serve", "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
        )
        try:
            box = []
            reader = threading.Thread(
                target=lambda: box.append(proc.stdout.readline()), daemon=True
            )
            reader.start()
            reader.join(30)
            m = re.search(r"at (http://127\.0\.0\.1:\d+)/", box[0] if box else "")
            assert m, (
                f"ct serve printed no address: {box} {proc.poll() is not None and proc.stderr.read()}"
            )
            yield m.group(1), st, expected
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


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
    visit(browser, base, "timeline")
    bars = {
        b.get_attribute("data-day"): int(b.get_attribute("data-count"))
        for b in css(browser, "#chart rect.bar")
    }
    assert bars == exp["counts"]
    assert [m.get_attribute("data-day") for m in css(browser, "#chart .marker")] == [DAYS[1]]
    # the last day is open; its secret is masked, never shown in full
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
    proc = subprocess.Popen(
        [*CT, "-q", "-C", str(st.root), "serve", "--port", "0", "--tokens", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    try:
        box = []
        reader = threading.Thread(target=lambda: box.append(proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(30)
        m = re.search(r"at (http://127\.0\.0\.1:\d+)/", box[0] if box else "")
        assert m, f"ct serve --tokens printed no address: {box}"
        base = m.group(1)
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
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def test_the_page_in_a_browser(browser, site, tmp_path):
    """One server and one browser session for every view, also when pytest-xdist spreads the suite."""
    check_search_returns_the_expected_record_and_opens_it_in_its_day(site, browser)
    check_timeline_shows_the_day_counts_markers_and_a_day_verbatim(site, browser)
    check_topic_tree_renders_collapses_and_lists_a_topics_records(site, browser)
    check_history_draws_a_reorganization_with_its_merges(site, browser)
    check_keyboard_reaches_every_view(site, browser)
    check_the_page_asks_for_a_token_when_the_server_has_tokens(site, browser, tmp_path)
