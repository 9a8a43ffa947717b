"""build-wiki: fetch listed Wikipedia articles over HTTP, strip them to text, ingest them as chunked documents in one commit.

Each page goes through ingest-path's planner (`plan_files`), keyed by its URL, so re-running is
idempotent and a page that changed supersedes its old chunks. A page that cannot be fetched (HTTP
error, timeout, no article body) is skipped with a note; unlike ContextTape, its title is never
stored as if it were the article.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote

from ..errors import MemstoreError, SecretsFound, UsageError
from ..results import WriteResult

DEFAULT_BASE_URL = "https://en.wikipedia.org/wiki/"
USER_AGENT = "memstore-build-wiki/0.1 (+https://github.com/; Mozilla/5.0 compatible)"
TIMEOUT_S = 15.0
MAX_PAGE_BYTES = 20 * 1024 * 1024  # an article's HTML is a few MB at most; more is not an article

# Whole subtrees that are not prose: footnote markers, infoboxes/tables, code, figures.
DROP_TAGS = frozenset({"sup", "table", "style", "script", "figure", "noscript", "math", "svg"})
# Wikipedia chrome inside the content div: "[edit]" links, reference lists, navigation boxes.
DROP_CLASSES = frozenset(
    {
        "mw-editsection",
        "reflist",
        "references",
        "mw-references-wrap",
        "navbox",
        "noprint",
        "mw-empty-elt",
        "hatnote",
        "metadata",
        "catlinks",
    }
)
VOID_TAGS = frozenset(
    {
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "param",
        "source",
        "track",
        "wbr",
    }
)
BLOCK_TAGS = frozenset(
    {
        "p",
        "div",
        "li",
        "dd",
        "dt",
        "blockquote",
        "pre",
        "ul",
        "ol",
        "dl",
        "section",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "caption",
        "figcaption",
    }
)
HEADINGS = {"h1": "#", "h2": "##", "h3": "###", "h4": "####", "h5": "#####", "h6": "######"}


class FetchError(Exception):
    """A page could not be fetched or has no article body; the message says why."""


@dataclass(frozen=True)
class Page:
    """One fetched article, shaped like a walked file so ingest-path's planner can take it."""

    title: str
    key: str  # the URL: the record's source.path and the identity for re-ingest
    text: str
    sha256: str
    kind: str = "markdown"  # headings are kept as Markdown so chunks carry their section path

    @property
    def path(self) -> str:
        return self.key

    @property
    def rel(self) -> str:
        return self.title

    def read_text(self) -> str:
        return self.text


def read_topics(path) -> list[str]:
    """Titles from a topics file: one per line; blank lines and lines starting with '#' are skipped."""
    p = Path(path).expanduser()
    try:
        raw = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{p}: no such topics file") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{p}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise UsageError(f"{p}: cannot read: {exc.strerror or exc}") from None
    titles, seen = [], set()
    for line in raw.splitlines():
        t = line.strip()
        if t and not t.startswith("#") and t not in seen:
            seen.add(t)
            titles.append(t)
    if not titles:
        raise UsageError(f"{p}: no titles (one per line; '#' starts a comment)")
    return titles


def page_url(base_url: str, title: str) -> str:
    """The article URL for a title: spaces become underscores, the rest is percent-encoded."""
    return base_url + quote(title.replace(" ", "_"), safe="_-.,()'!:~")


def fetch(url: str, timeout: float = TIMEOUT_S) -> str:
    """The page's HTML as text; FetchError naming the HTTP status or network problem otherwise."""
    import socket
    import urllib.error
    import urllib.request

    req = urllib.request.Request(url, headers={"User-Agent": USER_AGENT, "Accept": "text/html"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            body = resp.read(MAX_PAGE_BYTES + 1)
            charset = resp.headers.get_content_charset() or "utf-8"
    except urllib.error.HTTPError as exc:
        raise FetchError(f"HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise FetchError(f"cannot connect: {exc.reason}") from None
    except (socket.timeout, TimeoutError):
        raise FetchError(f"timed out after {timeout:g} s") from None
    except (OSError, ValueError) as exc:  # reset connections, malformed URLs
        raise FetchError(str(exc) or type(exc).__name__) from None
    if len(body) > MAX_PAGE_BYTES:
        raise FetchError(f"larger than {MAX_PAGE_BYTES} bytes")
    try:
        return body.decode(charset, errors="replace")
    except LookupError:
        return body.decode("utf-8", errors="replace")


class _ArticleText(HTMLParser):
    """Collects the prose of `div#mw-content-text` as blocks: Markdown headings, list items, paragraphs."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.content_at: int | None = None  # stack depth where the content div opened
        self.drop_at: int | None = None  # stack depth where a dropped subtree opened
        self.found = False
        self.blocks: list[str] = []
        self.buf: list[str] = []
        self.prefix = ""

    def _flush(self):
        text = " ".join("".join(self.buf).split())
        if text:
            self.blocks.append(self.prefix + text)
        self.buf, self.prefix = [], ""

    def handle_starttag(self, tag, attrs):
        if tag in VOID_TAGS:
            if tag == "br" and self._live():
                self.buf.append(" ")
            return
        if tag in ("p", "li") and self.stack and self.stack[-1] == tag:
            self.handle_endtag(tag)  # HTML lets <p> and <li> close their open sibling implicitly
        self.stack.append(tag)
        depth = len(self.stack)
        a = dict(attrs)
        if self.content_at is None:
            if tag == "div" and a.get("id") == "mw-content-text" and not self.found:
                self.content_at, self.found = depth, True
            return
        if self.drop_at is None and (
            tag in DROP_TAGS or DROP_CLASSES & set((a.get("class") or "").split())
        ):
            self.drop_at = depth
            return
        if self.drop_at is None and tag in BLOCK_TAGS:
            self._flush()
            if tag in HEADINGS:
                self.prefix = HEADINGS[tag] + " "
            elif tag == "li":
                self.prefix = "- "

    def handle_startendtag(self, tag, attrs):
        if tag not in VOID_TAGS:  # <div/> and the like: open and close at once
            self.handle_starttag(tag, attrs)
            self.handle_endtag(tag)
        else:
            self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag):
        if tag in VOID_TAGS or tag not in self.stack:
            return  # a stray end tag changes nothing
        while self.stack:
            depth = len(self.stack)
            open_tag = self.stack.pop()
            if self.drop_at is not None and depth <= self.drop_at:
                self.drop_at = None
            elif self.drop_at is None and self.content_at is not None and open_tag in BLOCK_TAGS:
                self._flush()
            if self.content_at is not None and depth <= self.content_at:
                self._flush()
                self.content_at = None
            if open_tag == tag:
                break

    def handle_data(self, data):
        if self._live():
            self.buf.append(data)

    def _live(self) -> bool:
        return self.content_at is not None and self.drop_at is None


def article_text(html: str, title: str = "") -> str:
    """The article's prose from MediaWiki HTML, as Markdown-ish text (title, headings, paragraphs).

    Raises FetchError when the page has no `div#mw-content-text` (not an article page) or the
    div holds no text.
    """
    parser = _ArticleText()
    parser.feed(html)
    parser.close()
    parser._flush()
    if not parser.found:
        raise FetchError("no article content (div#mw-content-text) in the page")
    body = [b for b in parser.blocks if not re.fullmatch(r"#+ ", b)]
    if not body:
        raise FetchError("the article has no text")
    head = [f"# {title}"] if title else []
    return "\n\n".join(head + body) + "\n"


def fetch_pages(
    titles,
    base_url: str = DEFAULT_BASE_URL,
    min_chars: int = 0,
    timeout: float = TIMEOUT_S,
    progress=None,
):
    """(pages, notes, failed): each title fetched and stripped; failures and short pages become notes."""
    pages, notes, failed = [], [], 0
    for title in titles:
        url = page_url(base_url, title)
        try:
            text = article_text(fetch(url, timeout=timeout), title)
        except FetchError as exc:
            notes.append(f"skipped {title}: {exc} ({url})")
            failed += 1
        else:
            n = len(text) - len(f"# {title}\n\n")
            if n < min_chars:
                notes.append(f"skipped {title}: {n} characters, under --min-chars {min_chars}")
            else:
                pages.append(
                    Page(title, url, text, hashlib.sha256(text.encode("utf-8")).hexdigest())
                )
        if progress is not None:
            progress(1)
    return pages, notes, failed


def build_wiki(
    store,
    topics_file,
    *,
    limit: int | None = None,
    min_chars: int = 0,
    base_url: str = DEFAULT_BASE_URL,
    timeout: float = TIMEOUT_S,
    allow_secrets: bool = False,
    progress=None,
    verbose: int = 0,
    secrets: str | None = None,
) -> WriteResult:
    """Fetch the articles named in `topics_file` and ingest them as document chunks; one commit.

    Nothing is written when no page could be fetched (MemstoreError, exit 1) or nothing is new.
    """
    from ..format.timeutil import now_utc
    from .path import plan_files

    if limit is not None and limit < 1:
        raise UsageError(f"--limit must be at least 1, not {limit}")
    if min_chars < 0:
        raise UsageError(f"--min-chars must be 0 or more, not {min_chars}")
    if not re.match(r"https?://", base_url):
        raise UsageError(f"--base-url must start with http:// or https://, not {base_url!r}")
    if not base_url.endswith("/"):
        base_url += "/"
    titles = read_topics(topics_file)[:limit]
    pages, notes, failed = fetch_pages(titles, base_url, min_chars, timeout, progress=None)
    if failed == len(titles):
        raise MemstoreError(
            f"no page could be fetched ({failed} of {len(titles)} failed):\n  "
            + "\n  ".join(notes[:20]),
            "Nothing was written. Check --base-url and the network.",
        )
    how = secrets or ("allow" if allow_secrets else "refuse")
    plan = plan_files(store, pages, now_utc(), allow_secrets=how != "refuse", verbose=verbose)
    if plan.found:
        raise SecretsFound(
            "Refusing to ingest what looks like credentials:\n  " + "\n  ".join(plan.found[:50]),
            "Nothing was written. Remove them from the topics file, or pass --skip-secrets, "
            "--redact-secrets or --allow-secrets.",
        )
    n_pages = len({r["source"]["path"] for r in plan.records if r["type"] == "doc"})
    n_chunks = sum(1 for r in plan.records if r["type"] == "doc")
    host = re.sub(r"^https?://", "", base_url).split("/", 1)[0]
    msg = f"Build wiki: {n_pages} pages ({n_chunks} chunks) from {host}"
    if plan.files_changed:
        msg += f"; {plan.files_changed} changed"
    res = store.write(plan.records, msg, embed_inputs=plan.inputs, progress=progress, secrets=how)
    res.notes = notes + plan.notes + res.notes
    return res
