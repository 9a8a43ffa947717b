"""The Python API: the CLI's verbs as methods of `memstore.Store`, each returning a typed result.

`Store` (memstore/store.py) inherits these methods. Each one calls the same library function as
the `ct` command of the same name, so the CLI, the MCP server and Python programs agree. Heavy
modules are imported inside the methods: `import memstore` stays instant.

Result types (all dataclasses): `WriteResult` (add, ingest_path, ingest_any, import_), `Hit`
(search), `RecallResult` (recall), `Marker` (mark, done), `Where` (where), `Stats` (stat),
`Report` (fsck), `Context` (context), `Tree` (tree), `TreeDiff` (diff), `ReorgResult`
(reorganize), `SyncResult` (sync).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

# name -> module, for `memstore.<name>` and `from memstore.api import <name>` without eager imports
RESULT_TYPES = {
    "WriteResult": "memstore.results",
    "Hit": "memstore.results",
    "Filters": "memstore.results",
    "RecallResult": "memstore.results",
    "RecallHit": "memstore.results",
    "Marker": "memstore.format.markers",
    "Where": "memstore.markers",
    "Report": "memstore.check",
    "Context": "memstore.results",
    "Tree": "memstore.format.tree",
    "TreeDiff": "memstore.tree.diff",
    "ReorgResult": "memstore.results",
    "SyncResult": "memstore.sync",
}


def __getattr__(name):
    if name in RESULT_TYPES:
        import importlib

        return getattr(importlib.import_module(RESULT_TYPES[name]), name)
    raise AttributeError(name)


@dataclass
class Stats:
    """What `Store.stat()` returns: the main counts as fields, everything `ct stat --json` prints in `data`."""

    records: int
    current_records: int
    days: int
    first_day: str | None
    last_day: str | None
    sessions: int
    segments: int  # format-1 segment files (0 in format 2)
    by_type: dict
    by_role: dict
    embedder: dict
    packs: int = 0
    data: dict = field(default_factory=dict, repr=False)

    def to_json(self) -> dict:
        return dict(self.data)


def _instant(value, store, now, edge: str) -> float | None:
    """A filter bound as Unix seconds: None, a number, a datetime, or ISO text / a time phrase."""
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, dt.datetime):
        return (value if value.tzinfo else value.replace(tzinfo=store.tz)).timestamp()
    if isinstance(value, dt.date):
        return dt.datetime.combine(value, dt.time(), store.tz).timestamp()
    from .retrieve.timefilter import instant

    return instant(str(value), store, now if now is None or isinstance(now, str) else now.isoformat(), edge=edge)


def _list(v) -> list[str]:
    if v is None:
        return []
    return [v] if isinstance(v, str) else list(v)


class StoreAPI:
    """The verbs shared with `ct`; mixed into `Store`."""

    # ----- writing -------------------------------------------------------------------------------

    def ingest_path(
        self,
        path,
        *,
        exts=None,
        max_bytes: int = 10 * 1024 * 1024,
        max_pdf_pages=None,
        follow_symlinks: bool = False,
        quantize: bool = False,
        allow_secrets: bool = False,
        progress=None,
        secrets: str | None = None,
    ):
        """Ingest a file or folder of text, code and PDFs as document chunks (`ct ingest-path`) → WriteResult."""
        from .ingest.path import ingest_path

        return ingest_path(
            self,
            path,
            exts=exts,
            max_bytes=max_bytes,
            max_pdf_pages=max_pdf_pages,
            follow_symlinks=follow_symlinks,
            quantize=quantize,
            allow_secrets=allow_secrets,
            progress=progress,
            secrets=secrets,
        )

    def ingest_any(
        self,
        path,
        *,
        max_bytes: int | None = None,
        follow_symlinks: bool = False,
        allow_secrets: bool = False,
        progress=None,
        secrets: str | None = None,
    ):
        """Ingest any files: text as chunks, PDFs, images, audio and others as blobs (`ct ingest-any`) → WriteResult."""
        from .ingest.any import DEFAULT_MAX_BYTES, ingest_any

        return ingest_any(
            self,
            path,
            max_bytes=DEFAULT_MAX_BYTES if max_bytes is None else max_bytes,
            follow_symlinks=follow_symlinks,
            allow_secrets=allow_secrets,
            progress=progress,
            secrets=secrets,
        )

    def import_(self, kind: str, path, *, allow_secrets: bool = False, progress=None, **options):
        """Import another tool's data (`ct import KIND PATH`): jsonl, claude-code, chatgpt, contexttape → WriteResult."""
        if kind == "contexttape":
            from .ingest.import_contexttape import import_contexttape

            return import_contexttape(self, path, progress=progress, allow_secrets=allow_secrets, **options)
        from .ingest.run import import_source

        return import_source(self, kind, path, progress=progress, allow_secrets=allow_secrets, **options)

    def forget(
        self,
        ids=(),
        *,
        match: str | None = None,
        session: str | None = None,
        since=None,
        until=None,
        now=None,
        dry_run: bool = False,
        purge_history: bool = False,
    ):
        """Forget records (`ct forget`): by id, every word of `match`, session or time range → ForgetResult.

        One commit removes their text from every committed file and leaves tombstones; `dry_run`
        only selects; `purge_history` also rewrites git history (see memstore/forget.py).
        """
        from .forget import ForgetResult, forget, forgotten_ids, purge, select, texts_in_history

        ids = list(ids or ())
        gone = forgotten_ids(self.root)
        if purge_history and ids and all(i in gone for i in ids) and not (match or session or since or until):
            # forgotten earlier: only the history is left to clean
            res = ForgetResult(records=[{"id": i, "text": "", "ts": ""} for i in ids], purged=not dry_run)
            texts = texts_in_history(self, ids)
            if not dry_run and texts:
                res.notes.append(purge(self, texts))
            return res
        records = select(self, ids, match=match, session=session, since=since, until=until, now=now)
        if dry_run:
            return ForgetResult(records=records)
        return forget(self, records, purge_history=purge_history)

    def mark(self, text: str, now=None):
        """Open a "where are we now" marker (`ct mark TEXT`, one commit) → Marker."""
        from .markers import mark

        return mark(self, text, now=now)

    def done(self, ref: str, now=None):
        """Close the marker whose id starts with `ref` (`ct mark --done REF`) → Marker."""
        from .markers import done

        return done(self, ref, now=now)

    # ----- reading -------------------------------------------------------------------------------

    def search(
        self,
        query: str,
        k: int = 10,
        mode: str = "hybrid",
        *,
        since=None,
        until=None,
        role=None,
        actor=None,
        type=None,
        session=None,
        now=None,
        alpha: float | None = None,
    ) -> list:
        """Ranked hits for `query` (`ct search`): mode hybrid | exact | vector → list[Hit].

        `since`/`until` take a datetime, Unix seconds, ISO text or a phrase ("last week");
        `role`, `actor`, `type`, `session` take one value or a list.
        """
        from .errors import UsageError
        from .retrieve.search import MODES, Filters, search

        if mode not in MODES:
            raise UsageError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        self.index()
        filters = Filters(
            since=_instant(since, self, now, "start"),
            until=_instant(until, self, now, "end"),
            role=_list(role),
            actor=_list(actor),
            type=_list(type),
            session=_list(session),
        )
        return search(self, query, k=k, mode=mode, filters=filters, alpha=alpha)

    def recall(self, question: str, k: int = 10, *, now=None, around: int = 0, docs: bool = False):
        """Verbatim lines for a question with a time phrase, in time order (`ct recall`) → RecallResult."""
        from .retrieve.recall import recall

        return recall(self, question, now=now, k=k, around=around, docs=docs)

    def where(self, markers: int = 10, lines: int = 8, now=None):
        """Open markers and the latest session's last lines (`ct where`) → Where."""
        from .markers import where

        return where(self, markers=markers, lines=lines, now=now)

    def context(self, query: str, budget: int | None = None, k: int = 8, recent: int = 6):
        """Markers, topic paths, recalled lines and recent turns for a prompt, within `budget` tokens → Context."""
        from .tree.context import build_context

        return build_context(self, query, budget=budget, k=k, recent=recent)

    def tree(self, rev: str | None = None):
        """The topic tree (its op log replayed; tree.json in a format-1 store), or as it was at git revision `rev` → Tree."""
        from .format import tree as treefmt

        if rev is None:
            return treefmt.read(self.root)
        from .tree.diff import load_version

        return load_version(self, rev)

    def days(self) -> list[dict]:
        """Current records per day, oldest first: [{"day": "YYYY-MM-DD", "records": n}]."""
        from .index.browse import day_counts

        return [{"day": d, "records": n} for d, n in day_counts(self.index())]

    def day(self, day: str) -> list[dict]:
        """One day's current records, verbatim, in time order (forgotten and superseded ones left out)."""
        import re

        from .errors import UsageError
        from .index.browse import day_records

        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", day or ""):
            raise UsageError(f"a day is written YYYY-MM-DD, not {day!r}")
        return day_records(self.index(), day)

    def records(self, ids) -> list[dict]:
        """The current records with these ids, verbatim, in time order (unknown ids are left out)."""
        from .index.browse import records_by_id

        return records_by_id(self.index(), _list(ids))

    def markers(self) -> list:
        """Every "where are we now" marker, open and done, oldest first → list[Marker]."""
        from .format import markers as markerfmt

        return markerfmt.read(self.root)

    def stat(self) -> Stats:
        """Counts of records, days, sessions, packs and bytes (`ct stat`) → Stats."""
        from .stats import stat

        d = stat(self)
        return Stats(
            records=d["records"],
            current_records=d["current_records"],
            days=d["days"],
            first_day=d["first_day"],
            last_day=d["last_day"],
            sessions=d["sessions"],
            segments=d["segments"],
            by_type=d["by_type"],
            by_role=d["by_role"],
            embedder=d["embedder"],
            packs=d["packs"],
            data=d,
        )

    def fsck(self):
        """Verify every invariant of docs/format.md (`ct fsck`) → Report (`.ok`, `.damage`, `.warnings`)."""
        from .check import fsck

        return fsck(self)

    def diff(self, rev_a: str | None = None, rev_b: str | None = None):
        """How the topic tree changed between two git revisions (`ct diff`) → TreeDiff."""
        from .tree.diff import tree_diff

        return tree_diff(self, rev_a, rev_b)

    def reorganize(
        self, threshold: float = 0.55, prune_trivial: bool = False, dry_run: bool = False, offline: bool = False
    ):
        """Merge related topics and archive trivial turns, one commit unless `dry_run` (`ct reorganize`) → ReorgResult."""
        from .tree.reorganize import reorganize

        return reorganize(self, threshold=threshold, prune_trivial=prune_trivial, dry_run=dry_run, offline=offline)

    def sync(self, push: bool = True, set_upstream: str | None = None):
        """Merge the remote's memory, reindex, push (`ct sync`) → SyncResult."""
        from .sync import sync

        return sync(self, push=push, set_upstream=set_upstream)

    def reembed(self, embedder: str | None = None, options: dict | None = None) -> dict:
        """Re-embed every record, e.g. with another embedder; one commit (`ct reembed`)."""
        from .reembed import reembed

        return reembed(self, embedder, options)

    def history(self, max_count: int = 20) -> list[dict]:
        """The memory's history from git, newest first (`ct log`)."""
        from .history import history

        return history(self, max_count=max_count)
