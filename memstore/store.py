"""The facade: `memstore.Store`, the core (memstore/core.py) with every verb of `ct` as a method,
each returning a typed result (memstore/results.py).

Each verb calls the same feature function as the `ct` command of the same name, so the CLI, the
HTTP page, the MCP server and Python programs agree. This is the one module that knows every
feature: features (ingest/, tree/, retrieve/, upkeep/, forget/) take a Core and never import it;
it also wires in what a write does beside its files (topic placement, `place`) and what a new
store gets (git hooks, `set_up_git`). Feature modules are imported inside the methods, so
`import memstore` stays instant. The faces (cli/, serve/, integrations/, bench/) import this.
"""

from __future__ import annotations

import datetime as dt
import os

from .core import Core
from .results import WriteResult
from .results import Stats


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

    return instant(
        str(value),
        store,
        now if now is None or isinstance(now, str) else now.isoformat(),
        edge=edge,
    )


def _reference(store, now):
    """A reference time: None, a datetime, or ISO text (on the store's clock when it has no offset)."""
    if now is None or not isinstance(now, str):
        return now
    from .retrieve.timefilter import reference_now

    return reference_now(now, store.tz)


def _list(v) -> list[str]:
    if v is None:
        return []
    return [v] if isinstance(v, str) else list(v)


class Store(Core):
    """A memory store: the core's parts and write path, and the verbs shared with `ct`."""

    _searched = False  # set by the first search: the query model is loaded from then on

    # ----- what the facade wires into the core ---------------------------------------------------

    def set_up_git(self) -> None:
        """A new store's git repository gets memstore's hooks (hooks/) before its first commit."""
        from .upkeep import hooks

        hooks.install(self)

    def place_ahead(self, records: list[dict]):
        """A big write's turns have their words counted on the second core from the start of the
        write (tree/assign.py: count_ahead)."""
        from .tree.assign import count_ahead

        return count_ahead(self, records)

    def place(self, records: list[dict], vectors, progress=None) -> list[str]:
        """A write places its conversation records in the topic tree, in the write's commit."""
        from .format.record import is_private
        from .tree.assign import assign_records, topics_enabled

        # A topic's name and summary are read by the whole team: private records stay out of it.
        keep = [i for i, r in enumerate(records) if not is_private(r)]
        if len(keep) < len(records):
            import numpy as np

            records, vectors = [records[i] for i in keep], np.asarray(vectors)[keep]
        if not records or not topics_enabled(self):
            return []
        return assign_records(self, records, vectors, progress)

    # ----- writing -------------------------------------------------------------------------------

    def add(
        self,
        text: str,
        role: str = "user",
        actor: str | None = None,
        session: str | None = None,
        ts=None,
        type: str = "text",
        model: str | None = None,
        meta: dict | None = None,
        secrets: str | None = None,
        allow_secrets: bool = False,
        scope: str | None = None,
    ) -> WriteResult:
        """One turn, one commit (`ct add`). `secrets`: refuse (default), redact or allow (`allow_secrets=True`).
        `scope`: private (its writer's only) or shared; None takes the store's `[settings] scope`."""
        from .errors import UsageError
        from .format import record as recordfmt
        from .format.timeutil import now_utc
        from .secrets.policy import preview

        secrets = secrets or ("allow" if allow_secrets else "refuse")
        if type not in ("text", "action", "meta"):
            raise UsageError(
                f"type must be text, action or meta, not {type!r} (documents come in with ingest-path)"
            )
        if not isinstance(text, str) or not text.strip():
            raise UsageError(
                "Refusing to add an empty turn: the text is empty or only whitespace.",
                "Nothing was written. Pass the text to remember (or - to read it from stdin).",
            )
        raw = {
            "ts": ts or now_utc(),
            "role": role,
            "actor": actor,
            "session": session,
            "type": type,
            "text": text,
            "model": model,
        }
        if meta:
            raw["meta"] = meta
        if scope is not None:
            raw["scope"] = scope
        try:
            rec = self.normalize(
                raw
            )  # a fresh id: nothing in the store can hold it, so no look-up by id
            return self.write(
                [rec],
                lambda added: (
                    f"Add private {rec['role']} turn"  # its text stays out of the history too
                    if added[0].get("scope") == "private"
                    else f"Add {rec['role']} turn: {preview(added[0]['text'])}"
                ),
                secrets=secrets,
                dedupe=False,
            )
        except recordfmt.RecordError as exc:  # one message for every face: CLI, HTTP, MCP
            raise UsageError(f"cannot add: {exc}") from None

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
        verbose: int = 0,
        exclude=(),
        default_excludes: bool = True,
    ):
        """Ingest a file or folder of text, code and PDFs as document chunks (`ct ingest-path`) → WriteResult.

        `exclude`: gitignore patterns matched against paths relative to `path`; `default_excludes`
        also leaves out build output, caches and Sphinx scaffolding (memstore/ingest/walk.py)."""
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
            verbose=verbose,
            exclude=exclude,
            default_excludes=default_excludes,
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
        exclude=(),
        default_excludes: bool = True,
    ):
        """Ingest any files: text as chunks, PDFs, images, audio and others as blobs (`ct ingest-any`) → WriteResult.

        `exclude` and `default_excludes` as for `ingest_path`."""
        from .ingest.any import DEFAULT_MAX_BYTES, ingest_any

        return ingest_any(
            self,
            path,
            max_bytes=DEFAULT_MAX_BYTES if max_bytes is None else max_bytes,
            follow_symlinks=follow_symlinks,
            allow_secrets=allow_secrets,
            progress=progress,
            secrets=secrets,
            exclude=exclude,
            default_excludes=default_excludes,
        )

    def import_(
        self,
        kind: str,
        path,
        *,
        source_timezone: str | None = None,
        model: str | None = None,
        allow_secrets: bool = False,
        progress=None,
        secrets: str | None = None,
    ):
        """Import another tool's data (`ct import KIND PATH`) → WriteResult.

        KIND: jsonl, claude-code, chatgpt, trace, lossless-memory (`source_timezone`: the zone of
        times written without an offset; default the store's) or contexttape (`model`: the model
        that made its vectors, kept when it is this store's). Idempotent: records already in the
        store are skipped.
        """
        from .errors import UsageError

        if source_timezone is not None and kind != "lossless-memory":
            raise UsageError(f"source_timezone is for lossless-memory imports, not {kind}")
        if model is not None and kind != "contexttape":
            raise UsageError(f"model is for contexttape imports, not {kind}")
        if kind == "contexttape":
            from .ingest.import_contexttape import import_contexttape

            return import_contexttape(
                self,
                path,
                model=model,
                progress=progress,
                allow_secrets=allow_secrets,
                secrets=secrets,
            )
        from .ingest.run import import_source

        opts = {"source_timezone": source_timezone} if kind == "lossless-memory" else {}
        return import_source(
            self,
            kind,
            path,
            progress=progress,
            allow_secrets=allow_secrets,
            secrets=secrets,
            **opts,
        )

    def watch(
        self,
        paths,
        *,
        kind: str | None = None,
        interval: float = 5.0,
        debounce: float = 2.0,
        max_delay: float = 60.0,
        once: bool = False,
        secrets: str | None = None,
        report=None,
    ) -> int:
        """Follow growing transcripts and import new complete lines in batches, one commit each (`ct watch`).

        Runs until SIGINT/SIGTERM, or one pass with `once`; `report(batch)` is called per batch.
        Returns the number of commits made.
        """
        from .ingest.watch import watch

        return watch(
            self,
            [paths] if isinstance(paths, (str, os.PathLike)) else list(paths),
            kind=kind,
            interval=interval,
            debounce=debounce,
            max_delay=max(max_delay, debounce),
            once=once,
            secrets=secrets,
            report=report,
        )

    def build_wiki(
        self,
        topics_file,
        *,
        limit: int | None = None,
        min_chars: int = 0,
        base_url: str | None = None,
        timeout: float | None = None,
        secrets: str | None = None,
        progress=None,
        verbose: int = 0,
    ):
        """Fetch Wikipedia articles and ingest them as document chunks, one commit (`ct build-wiki`) → WriteResult."""
        from .ingest.wiki import DEFAULT_BASE_URL, TIMEOUT_S, build_wiki

        return build_wiki(
            self,
            topics_file,
            limit=limit,
            min_chars=min_chars,
            base_url=base_url or DEFAULT_BASE_URL,
            timeout=TIMEOUT_S if timeout is None else timeout,
            secrets=secrets,
            progress=progress,
            verbose=verbose,
        )

    def forget(
        self,
        ids=(),
        *,
        match: str | None = None,
        session: str | None = None,
        since=None,
        until=None,
        now=None,
        commit: str | None = None,
        dry_run: bool = False,
        purge_history: bool = False,
    ):
        """Forget records (`ct forget`): by id, every word of `match`, session, time range or the
        commit that added them → ForgetResult.

        One commit removes their text from every committed file and leaves tombstones; `dry_run`
        only selects; `purge_history` also rewrites git history (memstore/forget/purge.py).
        """
        from .forget.purge import keys_in_history, purge, refuse_shallow_purge, texts_in_history
        from .forget.remove import forget, forgotten_ids, record_vkey
        from .forget.select import Criteria, select
        from .results import ForgetResult

        ids = list(ids or ())
        criteria = Criteria(
            match=match,
            session=session,
            since=_instant(since or None, self, now, "start"),
            until=_instant(until or None, self, now, "end"),
            now=now,
            commit=commit,
        )
        if purge_history:
            refuse_shallow_purge(self)
        gone = forgotten_ids(self.root)
        if purge_history and ids and all(i in gone for i in ids) and not criteria.given():
            # forgotten earlier: only the history is left to clean
            res = ForgetResult(
                records=[{"id": i, "text": "", "ts": ""} for i in ids], purged=not dry_run
            )
            texts = texts_in_history(self, ids)
            if not dry_run and texts:
                res.notes.append(purge(self, texts, ids, keys_in_history(self, ids)))
            return res
        records = select(self, ids, criteria)
        if dry_run:
            return ForgetResult(records=records)
        res = forget(self, records)
        if purge_history and records:
            full = [r for r in records if r["text"] is not None]
            res.notes.append(
                purge(
                    self,
                    [r["text"] for r in full],
                    [r["id"] for r in full],
                    [record_vkey(r) for r in full],
                )
            )
            res.purged = True
        return res

    def share(self, ids, dry_run: bool = False):
        """Make private records shared (`ct share`), one commit → ShareResult; `dry_run` shows
        each record's text and the secrets flagged in it, and changes nothing."""
        from .upkeep.share import share

        return share(self, ids, dry_run=dry_run)

    def mark(
        self, text: str | None = None, *, done: str | None = None, now=None, secrets: str = "refuse"
    ):
        """Open a "where are we now" marker with `text`, or close the open marker whose id starts
        with `done` (`ct mark TEXT`, `ct mark --done ID`; one commit) → Marker. A marker holding a
        detected secret is refused unless `secrets` is "redact" or "allow"."""
        from .upkeep import marks as markers
        from .errors import UsageError

        if bool(text) == bool(done):
            raise UsageError("give either TEXT (a new marker) or --done ID (close one)")
        return (
            markers.done(self, done, now=now)
            if done
            else markers.mark(self, text, now=now, secrets=secrets)
        )

    def done(self, ref: str, now=None):
        """Close the marker whose id starts with `ref`: the same as `mark(done=ref)` → Marker."""
        return self.mark(done=ref, now=now)

    def reembed(
        self, embedder: str | None = None, options: dict | None = None, *, dim=None, model=None
    ) -> dict:
        """Re-embed every record, e.g. with another embedder; one commit (`ct reembed`).

        `dim` and `model` are shorthands for `options` (the embedder's vector size and model name).
        """
        from .upkeep.reembed import reembed

        return reembed(
            self,
            embedder,
            {
                **(options or {}),
                **{k: v for k, v in (("dim", dim), ("model", model)) if v is not None},
            },
        )

    def gc(self, dry_run: bool = False):
        """Consolidate every day that has several packs into one pack, one commit (`ct gc`) → GcResult."""
        from .upkeep.gc import gc

        return gc(self, dry_run=dry_run)

    def upgrade(self, dry_run: bool = False):
        """Turn a format-1 store into format 2 in one commit, losslessly (`ct upgrade`) → UpgradeResult."""
        from .upkeep.upgrade import upgrade

        return upgrade(self, dry_run=dry_run)

    def hooks(self, action: str = "status", name: str | None = None, args=(), stdin=None):
        """The git hook stubs (`ct hooks install|uninstall|status`): install → names installed,
        uninstall → names removed, status → {hook name: state}; run → what the stub `name` does
        when git calls it with `args` (`ct hook NAME ARGS…`: refresh the index)."""
        from .upkeep import hooks
        from .errors import UsageError

        if action == "run":
            return hooks.run_hook(self, name, list(args), stdin=stdin)
        if action not in ("install", "uninstall", "status"):
            raise UsageError(
                f"hooks: the action is install, uninstall, status or run, not {action!r}"
            )
        return getattr(hooks, action)(self)

    @staticmethod
    def bare_remote(path):
        """`path`, resolved, when it is a bare git repository (a shared remote to guard), else None."""
        from pathlib import Path

        from .gitrepo import is_bare

        p = Path(path).expanduser()
        return p.resolve() if is_bare(p) else None

    @staticmethod
    def install_guard(gdir) -> list[str]:
        """`ct -C REMOTE.git hooks install`: the bare remote's pre-receive guard → hook names."""
        from .upkeep.hooks import install_bare

        return install_bare(gdir)

    @staticmethod
    def check_push(gdir, lines: list[str]) -> list[str]:
        """The pre-receive guard's check of a push (`old new ref` lines) → the problems that refuse it."""
        from .gitrepo import RevReader
        from .upkeep.guard import pre_receive

        return pre_receive(RevReader(gdir), lines)

    @staticmethod
    def before_hook(name: str, root) -> None:
        """Before a hook opens the store: a post-merge hook names the merge git has just committed, so
        the store does not count it as unfinished (git keeps MERGE_HEAD while post-merge runs)."""
        import os

        from .upkeep.hooks import MERGED_ENV, finished_merge

        if name == "post-merge":
            os.environ[MERGED_ENV] = finished_merge(root) or ""

    def sync(self, push: bool = True, set_upstream: str | None = None, drop_purged: bool = False):
        """Merge the remote's memory, reindex, push (`ct sync`) → SyncResult."""
        from .upkeep.sync import sync

        return sync(self, push=push, set_upstream=set_upstream, drop_purged=drop_purged)

    # ----- who can read an encrypted store (docs/security.md) ------------------------------------

    @staticmethod
    def new_identity(path=None) -> dict:
        """Write a new age identity (mode 0600; default beside the user's config) → {path, recipient}
        (`ct keys new`)."""
        from pathlib import Path

        from . import keyring

        target = Path(path).expanduser() if path else keyring.default_identity_path()
        return {"path": str(target), "recipient": keyring.new_identity(target)}

    @staticmethod
    def identity_recipient(path=None) -> dict:
        """The recipient of the identity in use (--identity, MEMSTORE_IDENTITY or the default)."""
        from . import keyring
        from .errors import UsageError

        found = keyring.identity_path(path)
        if found is None:
            raise UsageError('no identity found; create one with "ct keys new".')
        return {"path": str(found), "recipient": keyring.recipient_of(found)}

    def encrypt(self, recipients=(), rewrite_history: bool = False) -> dict:
        """Seal this plaintext store to your identity and `recipients` in one commit, as `ct init
        --encrypt` and the same writes would have (`ct encrypt`); `rewrite_history` rewrites every
        earlier commit too, so no plain line stays in history → {commit, recipients, files, notice}."""
        from .upkeep.encrypt import encrypt

        return encrypt(self, recipients, rewrite_history)

    def keys(
        self,
        action: str = "list",
        recipient: str | None = None,
        path: str | None = None,
        rewrite: bool = False,
        which: list | None = None,
    ) -> dict:
        """`ct keys ACTION`: the recipients and key epochs of an encrypted store.

        list → {recipients, epoch, epochs_opened}; add → `recipient` may read the whole store
        (every epoch rewrapped, one commit); remove → a new key epoch without `recipient` (what
        is written after it is sealed from it; one commit); rotate → a new key epoch for the same
        recipients (one commit; `rewrite`: every line of every commit sealed again under it, the
        older epochs' key files gone, history rewritten); trust → this clone trusts `which` (key
        epochs, or private key ids) that open but carry no vouch or `auth` it can check
        (memstore/keytrust.py; no commit). new and show concern the identity alone, not a store, and may be
        called on the class: `Store.keys(None, "new", path=FILE)` writes a new identity (→ path,
        recipient), `Store.keys(None, "show", path=FILE)` names the one in use."""
        from .errors import UsageError

        if action == "new":
            return Store.new_identity(path)
        if action == "show":
            return Store.identity_recipient(path)
        from .upkeep import keys

        if action == "list":
            return keys.listing(self)
        if action == "trust":
            return keys.trust(self, list(which or []))
        if action not in ("add", "remove", "rotate"):
            raise UsageError(
                f"keys: the action is new, show, list, add, remove, rotate or trust, not {action!r}"
            )
        if action == "rotate":
            return keys.rotate(self, rewrite=rewrite)
        if not recipient:
            raise UsageError(f"keys {action}: name the recipient (age1… or 'ssh-ed25519 AAAA…')")
        return getattr(keys, action)(self, recipient)

    def place_existing(self) -> int:
        """Place every conversation record the topic tree does not hold yet, one commit
        (`ct tree --place-existing`); returns how many were placed."""
        from .tree.assign import place_existing

        placed = {"n": 0}
        with self.transaction(
            lambda: f"Place {placed['n']} existing conversation records in the topic tree"
        ) as tx:
            paths, placed["n"] = place_existing(self)
            tx.stage(paths)
        return placed["n"]

    def reorganize(
        self,
        threshold: float = 0.55,
        prune_trivial: bool = False,
        dry_run: bool = False,
        offline: bool = False,
    ):
        """Merge related topics and archive trivial turns, one commit unless `dry_run` (`ct reorganize`) → ReorgResult."""
        from .tree.reorganize import reorganize

        return reorganize(
            self, threshold=threshold, prune_trivial=prune_trivial, dry_run=dry_run, offline=offline
        )

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
        author=None,
        now=None,
        alpha: float | None = None,
        also=(),
        update_index: bool = True,
        progress=None,
        scope: str | None = None,
    ) -> list:
        """Ranked hits for `query` (`ct search`): mode hybrid | exact | vector → list[Hit].

        `since`/`until` take a datetime, Unix seconds, ISO text or a phrase ("last week");
        `role`, `actor`, `type`, `session` take one value or a list; `author` one or a list of
        names or emails (any case) of who put the records into memory. `also`: more stores searched
        together with this one (`ct -C a -C b search`), their hits ranked as one list.
        `update_index=False` reads the index as it is (`--no-index`); `progress(n)` is called as
        days are indexed. `scope`: private | shared, records of that scope only.
        """
        from .errors import UsageError
        from .retrieve.search import MODES, Filters, search, search_many, searchable

        if mode not in MODES:
            raise UsageError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        from .format.record import ROLES, TYPES

        for name, given, known in (("role", role, ROLES), ("type", type, TYPES)):
            wrong = [v for v in _list(given) or [] if v not in known]
            if wrong:
                raise UsageError(f"--{name} must be one of {', '.join(known)}, not {wrong[0]!r}")
        if scope is not None and scope not in ("private", "shared"):
            raise UsageError(f"--scope must be one of private, shared, not {scope!r}")
        if isinstance(now, str):
            from .retrieve.timefilter import reference_now

            reference_now(now, self.tz)  # a bad --now is an error even when no phrase needs it
        stores = [self, *also]
        pending = None
        cold = not self._searched  # a warm process has the model loaded: a thread would cost more
        self._searched = True
        if cold and update_index and mode != "exact" and not also and searchable(query):
            # A fresh process loads the model (~0.1 s for MiniLM) while the index is brought up to
            # date and the words are ranked, instead of after them: they overlap on two cores.
            from concurrent.futures import ThreadPoolExecutor

            pool = ThreadPoolExecutor(1, thread_name_prefix="memstore-embed")
            pending = pool.submit(lambda: self.embedder.embed_query(query))
            pool.shutdown(wait=False)
        if update_index:
            for st in stores:
                st.index(progress=progress)
        filters = Filters(
            since=_instant(since, self, now, "start"),
            until=_instant(until, self, now, "end"),
            role=_list(role),
            actor=_list(actor),
            type=_list(type),
            session=_list(session),
            scope=scope,
            author=_list(author),
        )
        from .results import Hits
        from .retrieve.search import NO_WORDS_NOTE

        if also:
            hits = Hits(search_many(stores, query, k, mode, filters, alpha))
        else:
            hits = Hits(
                search(self, query, k=k, mode=mode, filters=filters, alpha=alpha, qvec=pending)
            )
        hits.note = None if searchable(query) else NO_WORDS_NOTE
        return hits

    def recall(
        self,
        question: str,
        k: int = 10,
        *,
        now=None,
        around: int = 0,
        docs: bool = False,
        author=None,
        update_index: bool = True,
    ):
        """Verbatim lines for a question with a time phrase, best first (`ct recall`) → RecallResult.

        `now` (datetime or ISO; naive means the store's timezone) anchors phrases like "yesterday";
        `author` (a name or email, or a list) keeps only the lines those people put into memory.
        """
        from .retrieve.recall import recall

        return recall(
            self,
            question,
            now=_reference(self, now),
            k=k,
            around=around,
            docs=docs,
            author=_list(author),
            update_index=update_index,
        )

    def where(self, markers: int = 10, lines: int = 8, now=None):
        """Open markers and the latest session's last lines (`ct where`) → Where."""
        from .retrieve.where import where

        return where(self, markers=markers, lines=lines, now=_reference(self, now))

    def context(self, query: str, budget: int | None = None, k: int = 8, recent: int = 6):
        """Markers, topic paths, recalled lines and recent turns for a prompt, within `budget` tokens → Context."""
        from .retrieve.context import build_context

        return build_context(self, query, budget=budget, k=k, recent=recent)

    def tree(self, rev: str | None = None, *, place_existing: bool = False):
        """The topic tree (its op log replayed; tree.json in a format-1 store), or as it was at git
        revision `rev` (`ct tree`) → Tree. `place_existing` first places the conversation records the
        tree does not hold yet (one commit; see `place_existing()` for the count)."""
        from .format import tree as treefmt

        if place_existing:
            self.place_existing()
        if rev is None:
            from .forget.leftovers import without_stale_summaries

            return without_stale_summaries(self, treefmt.read(self.root))
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
        import datetime as dt

        try:
            dt.date.fromisoformat(day)
        except ValueError:
            raise UsageError(f"{day!r} is no day of the calendar") from None
        return day_records(self.index(), day)

    def records(self, ids) -> list[dict]:
        """The current records with these ids, verbatim, in time order (unknown ids are left out)."""
        from .index.browse import records_by_id

        return records_by_id(self.index(), _list(ids))

    def session_titles(self, sessions) -> dict[str, str]:
        """{session: title} for those of `sessions` that have one: the title the source kept
        (ChatGPT's conversation title, a Claude Code summary), else an opaque id's first user
        line."""
        from .index.browse import session_titles

        return session_titles(self.index(), _list(sessions))

    def markers(self) -> list:
        """Every "where are we now" marker, open and done, oldest first → list[Marker]."""
        from .format import markers as markerfmt

        return markerfmt.read(self.root)

    def stat(self) -> Stats:
        """Counts of records, days, sessions, packs and bytes (`ct stat`) → Stats."""
        from .upkeep.stats import stat

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

    def fsck(self, repair: bool = False):
        """Verify every invariant of docs/format.md (`ct fsck`) → Report (`.ok`, `.damage`, `.warnings`).

        `repair` first rolls back what an interrupted write left and brings the index up to date
        (committed data is never changed); what it did is in `Report.repair`.
        """
        from .upkeep.fsck import fsck

        if getattr(self, "no_key", None):  # an encrypted store no key of this user opens
            if repair:
                from . import keyring

                keyring.open_store(self.root)  # raises the NoKeyError that says what to do
            from .upkeep.fsck_sealed import fsck_without_key

            return fsck_without_key(self, self.no_key)
        fixed = None
        if repair:
            from .repair import repair as roll_back

            fixed = roll_back(self)
            self.reload_config()  # the rollback may have put memstore.toml back (a killed reembed)
            self._unconflict(fixed)
            self._honour_forgets(fixed)
        rep = fsck(self)
        rep.repair = fixed
        return rep

    def _unconflict(self, fixed) -> None:
        """fsck --repair: remove the git conflict markers a person's merge committed into a line
        file (one commit; upkeep/unconflict.py), unless git is in the middle of an operation."""
        from .gitrepo import unfinished_operation
        from .upkeep import unconflict

        if unfinished_operation(self.root) is None:
            fixed.unmarked_commit, fixed.unmarked = unconflict.remove(self)

    def _honour_forgets(self, fixed) -> None:
        """fsck --repair: remove what a plain git merge brought back of forgotten records (one commit),
        unless git is in the middle of an operation (writes refuse then; fsck still names it)."""
        from .forget.leftovers import apply_tombstones
        from .format import tombstones
        from .gitrepo import unfinished_operation

        if not tombstones.ids(self.root) or unfinished_operation(self.root) is not None:
            return
        applied = apply_tombstones(self)
        if applied.commit:
            fixed.forgotten, fixed.forgotten_commit = (
                len(applied.records) or len(applied.paths),
                applied.commit,
            )

    def diff(self, rev_a: str | None = None, rev_b: str | None = None):
        """How the topic tree changed between two git revisions (`ct diff`) → TreeDiff."""
        from .tree.diff import tree_diff

        return tree_diff(self, rev_a, rev_b)

    def commit_id(self, rev: str) -> str:
        """The full id of the commit `rev` names (a commit id or its prefix, HEAD, HEAD~N, a branch);
        UsageError when it names none."""
        from .errors import GitError, UsageError

        try:
            return self.git.run("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
        except GitError:
            raise UsageError(
                f"{rev!r} is not a revision of {self.root}", 'See "ct log" for revisions.'
            ) from None

    def log(self, max_count: int = 20) -> list[dict]:
        """The memory's history from git, newest first (`ct log`): sha, date, subject, counts per kind."""
        from .upkeep.history import history

        return history(self, max_count=max_count)

    def history(self, max_count: int = 20) -> list[dict]:
        """The same as `log` (its name before `log` matched the command)."""
        return self.log(max_count)

    def export(self, kind: str, dest, *, progress=None) -> dict:
        """Write the store in another tool's format (`ct export contexttape DEST`); the store is not changed."""
        from .errors import UsageError

        if kind != "contexttape":
            raise UsageError(f"export: the only format is contexttape, not {kind!r}")
        from .upkeep.export import export_contexttape

        self.index()
        return export_contexttape(self, dest, progress=progress)

    def chat(
        self,
        session: str | None = None,
        budget: int = 1500,
        *,
        verbose: bool = False,
        secrets=None,
        send_secrets: bool = False,
    ):
        """A chat session with memory (`ct chat`): `.ask(text)` answers through the configured
        OpenAI-compatible LLM with context from the store and stores both turns → ChatSession.
        Secrets in what is sent (records stored with --allow-secrets) are masked unless `send_secrets`."""
        from .retrieve.chat import ChatSession

        return ChatSession(
            self,
            session=session,
            budget=budget,
            verbose=verbose,
            secrets=secrets,
            send_secrets=send_secrets,
        )
