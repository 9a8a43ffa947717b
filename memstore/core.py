"""The core: opening and creating a store, its parts (git, embedder, index, lock) and the one write
path that ends in one commit. No verb and no feature lives here: the facade (memstore/store.py,
`class Store(Core)`) adds the verbs and wires in what a write does beside its files (topic
placement) and what a new store gets (git hooks). Features take a Core; this module imports only
the ground below it (transaction, repair, gitrepo, format/, index/, secrets/, adapters/)."""

from __future__ import annotations

import gc
import os
import signal
import time
from pathlib import Path

from . import FORMAT_VERSION, storefile
from .errors import EmbedderMismatch, FormatError, MemstoreError, NotAStoreError, UsageError
from .format import config as configfmt
from .format import layout
from .format.layout import META_DIR, find_root, meta_dir_for  # noqa: F401  (the core's names for them)
from .format import log as logfmt
from .format import record as recordfmt
from .format import pack as packfmt
from .format import seal
from .format.timeutil import from_iso, local_day, zone
from .locking import file_lock, lock_timeout
from .results import WriteResult  # noqa: F401  (re-exported: writers import it from here)

EMBED_CHARS = 32_768
PLAIN_PRIVATE_WARNING = (
    "warning: {root} is not encrypted: a private record is only labelled and filtered here, and "
    'anyone with a copy of the repository can read it (docs/security.md, "Scopes"; '
    "an encrypted store, ct init --encrypt, seals it to your key)."
)


class Core:
    """A memory store's core: a git repository of plain files plus a disposable index in `.memstore/`."""

    def __init__(
        self, root: Path, embedder_override: str | None = None, *, without_key: bool = False
    ):
        self.root = Path(root).resolve()
        if not (self.root / configfmt.FILENAME).is_file():
            raise NotAStoreError(self.root)
        self.config = configfmt.read(self.root)
        self.tz = zone(self.config.timezone)
        self.meta_dir = meta_dir_for(self.root)
        self.no_key = None  # why no identity opened an encrypted store opened `without_key`
        self._keys_seen = keys_signature(self.root)
        try:
            self.sealer = open_sealer(self.root, self.meta_dir)
        except Exception as exc:
            # `ct fsck` checks what it can of a store no key of this user opens: every sealed
            # file stays shut (reading one raises NoKeyError), nothing is written
            if not without_key or getattr(exc, "exit_code", None) != 10:
                raise
            self.sealer, self.no_key = None, str(exc).splitlines()[0]
        self._embedder = None
        self._git = None
        self._index = None
        self._tx = None  # the write transaction in progress (memstore/transaction.py)
        if embedder_override and embedder_override != self.config.embedder["name"]:
            raise EmbedderMismatch(
                f"{self.root}: the store's vectors were made by the {self.config.embedder['name']!r} "
                f"embedder ({self.config.embedder['model']}), not {embedder_override!r}.",
                f'Run "ct -C {self.root} reembed --embedder {embedder_override}" to switch (one commit).',
            )

    # ----- opening and creating -------------------------------------------------------------

    @classmethod
    def open(
        cls, path: Path | str | None = None, search_parents: bool = True, without_key: bool = False
    ):
        """The store at (or above) `path`. `without_key`: an encrypted store no identity of this
        user opens is opened all the same, shut (`no_key` says why; only fsck uses it)."""
        start = Path(path).expanduser() if path else None
        root = find_root(start) if search_parents else start
        return cls(root, without_key=without_key)

    @classmethod
    def init(
        cls,
        path: Path | str,
        embedder: str = "minilm",
        timezone: str | None = None,
        dtype: str = "float32",
        embedder_options: dict | None = None,
        *,
        dim: int | None = None,
        model: str | None = None,
        encrypt: bool = False,
        recipients: list[str] | None = None,
    ):
        """Create a memory store (a git repository) in `path` (`ct init`); `dim` and `model` are
        shorthands for `embedder_options` (the hash and openai embedders' vector size, model name).
        `encrypt`: seal every committed line to `recipients` and the user's own identity
        (`ct init --encrypt`, memstore/keyring.py)."""
        from . import adapters
        from .gitrepo import GitRepo

        root = Path(path).expanduser().resolve()
        if (root / configfmt.FILENAME).exists():
            raise MemstoreError(f"{root} is already a memory store.", "Nothing was changed.")
        if dtype not in ("float32", "int8"):
            raise MemstoreError(f"--dtype must be float32 or int8, not {dtype!r}")
        tzname = timezone or _local_timezone_name()
        try:
            zone(tzname)  # validate before touching the disk
        except ValueError as exc:
            raise UsageError(f"--timezone: {exc}.", "Nothing was changed.") from None
        opts = {
            **(embedder_options or {}),
            **{k: v for k, v in (("dim", dim), ("model", model)) if v is not None},
        }
        adapters.check(embedder, opts)
        desc = adapters.describe(embedder, **opts)
        readers = _init_recipients(recipients) if encrypt else []
        made = not root.exists()
        root.mkdir(parents=True, exist_ok=True)
        try:
            repo = GitRepo(root) if (root / ".git").exists() else GitRepo.init(root)
        except Exception:
            if made and not any(root.iterdir()):  # no git: leave no empty folder behind
                root.rmdir()
            raise
        cfg = configfmt.Config.new(tzname, desc, dtype)
        cfg.settings["vector_dtype"] = dtype
        cfg.write(root)
        (root / ".gitignore").write_text(layout.GITIGNORE, encoding="utf-8")
        (root / ".gitattributes").write_text(layout.GITATTRIBUTES, encoding="utf-8")
        files = [configfmt.FILENAME, ".gitignore", ".gitattributes"]
        if readers:
            from . import keyring

            files += keyring.wrap_epoch(root, 1, keyring.new_key(), readers)
            keyring.write_recipients(root / keyring.RECIPIENTS, readers)
            files.append(keyring.RECIPIENTS)
        store = cls(root)
        store.set_up_git()
        repo.commit(
            f"Initialise memory store (format {FORMAT_VERSION}, embedder {desc['name']}, timezone {tzname}"
            + (", encrypted)" if readers else ")"),
            files,
        )
        return store

    def set_up_git(self) -> None:
        """What a new store's git repository gets before its first commit: nothing in the core; the
        facade installs memstore's git hooks (hooks/)."""

    # ----- parts ------------------------------------------------------------------------------

    @property
    def git(self):
        if self._git is None:
            from .gitrepo import GitRepo

            self._git = GitRepo(self.root)
        return self._git

    @property
    def embedder(self):
        """The store's embedder, loaded on first use (model weights are not loaded by open())."""
        if self._embedder is None:
            from . import adapters
            from .userconfig import embedder_options

            # dim from the store (what its vectors are); paths and endpoints only from the user.
            opts = {
                **embedder_options(),
                "model": self.config.embedder["model"],
                "dim": self.config.embedder["dim"],
            }
            emb = adapters.get_embedder(self.config.embedder["name"], **opts)
            if (
                emb.dim != int(self.config.embedder["dim"])
                or emb.model != self.config.embedder["model"]
            ):
                raise EmbedderMismatch(
                    f"{self.root / configfmt.FILENAME}: the store was embedded with "
                    f"{self.config.embedder['model']} ({self.config.embedder['dim']}-d) but the "
                    f"embedder gives {emb.model} ({emb.dim}-d).",
                    f'Run "ct -C {self.root} reembed" to re-embed the store (one commit).',
                )
            self._embedder = emb
        return self._embedder

    @property
    def author(self) -> str | None:
        """Who writes (docs/format.md, "Records": `author`): the store's `git config
        memstore.author`, else `author` in the user's config file, else the git identity of the
        store's repository as "name <email>"; None when there is none (records then carry no
        `author`, as old ones do). A bad configured value stops the write (exit 4)."""
        if not hasattr(self, "_author"):
            from .userconfig import user_file

            from .userconfig import config_path

            who, where = self.git.configured_author(), "git config memstore.author"
            if who is None:
                who, where = user_file().get("author"), f"{config_path()}: author"
            if who is not None:
                problem = recordfmt.author_problem(who)
                if problem:
                    raise FormatError(where, problem)
            else:
                who = self.git.author_identity()
            self._author = who
        return self._author

    def reload_config(self) -> None:
        """Read memstore.toml again. A writer calls it holding the write lock (after rolling back a
        crashed writer, which may put the file back): another process may have changed the embedder
        (`ct reembed`) since this one opened the store, and vectors must be made with the one the
        store says now. The embedder and index are dropped only when the embedder changed."""
        fresh = configfmt.read(self.root)
        if fresh.embedder != self.config.embedder:
            self._embedder = None
            if self._index is not None:
                self._index.close()
                self._index = None
        self.config = fresh
        self.tz = zone(fresh.timezone)

    def set_embedder(self, embedder) -> None:
        """Use an already-built embedder object (tests, benchmarks); it must match the store."""
        if (
            embedder.dim != int(self.config.embedder["dim"])
            or embedder.model != self.config.embedder["model"]
        ):
            raise EmbedderMismatch(
                f"embedder {embedder.model} does not match the store's {self.config.embedder['model']}"
            )
        self._embedder = embedder

    def index(
        self,
        update: bool = True,
        quiet: bool = True,
        *,
        rebuild: bool = False,
        dry_run: bool = False,
        progress=None,
    ):
        """The disposable index, brought up to date first unless `update` is False (`ct index`).

        Only the days whose files changed are reindexed; `rebuild` redoes everything, `dry_run`
        only plans. What was planned or done is in the returned index's `last_plan`.
        """
        from .index.build import Index

        if self._index is None:
            self._index = Index(self)
        if dry_run:
            self._index.last_plan = self._index.plan(rebuild)
        elif update or rebuild:
            from .repair import recover_if_crashed

            recover_if_crashed(self)  # one stat unless a writer died mid-write
            self._index.last_plan = self._index.update(
                rebuild=rebuild, quiet=quiet, progress=progress
            )
        return self._index

    def warnings(self) -> list[str]:
        """What a reader should be told about the store now: git waiting in the middle of an
        operation, and each file the index met damaged while it read (a record with no vector, a
        line that does not parse, a forgotten line a merge brought back); `ct fsck` says what to
        run. Only what this process's index saw: no extra reads."""
        note = self._index.note if self._index is not None else None  # a damaged index, rebuilt
        return [w for w in [self.unfinished(), note] if w] + self.index_problems()

    def sealing_note(self) -> str | None:
        """An encrypted store with key epochs this user's identity does not open (a removed
        recipient): the lines sealed under them are left out of every read, and that is said."""
        if self.sealer is None:
            return None
        from .keyring import epoch_files

        sealer = self.sealer
        doubt = sorted(sealer.doubtful)
        missing = [e for e in epoch_files(self.root) if e not in sealer.keys and e not in doubt]
        notes = []
        if doubt:
            notes.append(
                f"{self.root}: key epoch(s) {', '.join(map(str, doubt))} open with your identity "
                'but this clone does not trust them ("ct keys list" says why): what was written '
                "under them is left out of what you read, and nothing is written until that is "
                "settled"
            )
        if missing:
            notes.append(
                f"{self.root}: your identity does not open key epoch(s) {', '.join(map(str, missing))} "
                "(you are no longer a recipient): what was written under them is left out of what you read"
            )
        return "\n".join(notes) or None

    def index_problems(self) -> list[str]:
        """The damaged files the index met (paths relative to the store), if it was opened here."""
        index = self._index
        if index is None or index._conn is None:
            return []
        return [p.replace(f"{self.root}{os.sep}", "") for p in index.problems()]

    def detached_head(self) -> str | None:
        """HEAD's commit when HEAD is detached (a commit made there is on no branch), else None."""
        from .gitrepo import detached_head

        return detached_head(self.root)

    def unfinished(self) -> str | None:
        """A warning when git is in the middle of a merge, rebase, … here (reads show the files as
        they are; writes refuse), else None."""
        from .gitrepo import unfinished_operation

        state = unfinished_operation(self.root)
        if state is None:
            return None
        from .repair import crashed_journal

        if state[0] == "a merge" and (crashed_journal(self) or {}).get("merge"):
            return f'ct sync was killed in its merge in {self.root}: "ct fsck --repair" (or the next write) undoes it'
        return (
            f"git is in the middle of {state[0]} in {self.root}; results show the files as "
            f'they are now (finish with "{state[1]}" or "{state[2]}")'
        )

    def lock(self, what: str = "write"):
        if what == "write":  # journalled, so a crashed writer is rolled back (memstore/repair.py)
            from .transaction import write_lock

            return write_lock(self)
        return file_lock(self.meta_dir / f"{what}.lock", timeout=lock_timeout(), what=what)

    def rel(self, path: Path) -> str:
        """`path` relative to the store; a link inside the store is not followed out of it."""
        try:
            return Path(os.path.abspath(path)).relative_to(self.root).as_posix()
        except ValueError:  # reached another way (a linked working folder): as the system sees it
            return Path(path).resolve().relative_to(self.root).as_posix()

    # ----- the one write path ---------------------------------------------------------------

    def normalize(self, raw: dict, defaults: dict | None = None, derive_id: bool = False) -> dict:
        return recordfmt.normalize(raw, self.tz, defaults=defaults, derive_id=derive_id)

    def refresh_keys(self) -> None:
        """Open the store's keys again when keys/ changed since they were opened (a long-running
        server, or a sync by another process, took in a new epoch or a removal): a write must never
        seal under the key a removed reader holds, nor miss a key that arrived in doubt."""
        if self.no_key:
            return
        now = keys_signature(self.root)
        if now != self._keys_seen:
            self._keys_seen = now
            self.sealer = open_sealer(self.root, self.meta_dir)

    def transaction(self, message, allow_old_format: bool = False, check_logs: bool = True):
        """`with store.transaction(msg) as tx:` — lock, journal, files, one commit (memstore/transaction.py)."""
        from .transaction import transaction

        return transaction(self, message, allow_old_format=allow_old_format, check_logs=check_logs)

    def write(
        self,
        records: list[dict],
        message,
        embed_inputs: list[str] | None = None,
        progress=None,
        extra_paths: list[str] | None = None,
        dedupe: bool = True,
        after_write=None,
        before_write=None,
        given_vectors: dict | None = None,
        secrets: str = "refuse",
        origins: dict | None = None,
    ) -> WriteResult:
        """Embed, write packs, append day logs and make one commit — one transaction.

        `records` are normalised records (see `normalize`). Records whose id is already in the
        store (or repeated in the batch) are skipped, which makes imports idempotent. `message`
        is the commit message, or a function of the records actually added that returns it.
        `after_write(store, records, vectors)` runs before the commit and returns extra paths to
        stage; by default conversation records are placed in the topic tree, and
        `after_write=False` skips that. `before_write(store, records)` runs in the transaction once
        duplicates are dropped, before anything is embedded: it may queue blobs for the records'
        packs (`store._tx.add_blob`) and fill in their fields, and returns paths to stage.
        `given_vectors` maps id(record) to a vector stored as is instead of embedding that record
        (imports that keep their vectors).
        `secrets` says what to do with records holding a detected secret (memstore/secrets/policy.py:
        refuse, skip, redact, allow); `origins` maps id(record) to "file:line" for its messages.
        """
        from .progress import stage, tick
        from .secrets import policy as secret_policy

        result = WriteResult()
        scope_records(records, self.config.default_scope())
        if records:
            self.author  # noqa: B018  (a bad configured author stops the write before it starts)
        inputs_by_rec = {id(r): t for r, t in zip(records, embed_inputs)} if embed_inputs else {}
        records, result.notes = secret_policy.apply(records, secrets, origins)
        records = self._drop_forgotten(records, result)
        for r in records:  # a redacted record is embedded from its redacted text
            if "redacted" in (r.get("meta") or {}):
                inputs_by_rec.pop(id(r), None)
                (given_vectors or {}).pop(id(r), None)

        def subject() -> str:  # derived text: never a detected secret, whatever the mode
            return secret_policy.scrub(message(result.added) if callable(message) else message)

        # work of placement that needs only the records' texts, started on the second core while
        # this process prepares, embeds and writes (see `place_ahead`); what placement did not take
        # is stopped when the write ends, however it ends
        self._ahead = self.place_ahead(records) if after_write is None and records else None
        # A big write makes its records' lines, keys, packs and placement by the hundred thousand,
        # none of them in a cycle: Python's cyclic collector, woken by those allocations, would
        # walk the whole heap again and again (a second of a 100k-turn import's own time). It runs
        # again once the write is over.
        collecting = gc.isenabled() and len(records) >= BESIDE_RECORDS
        if collecting:
            gc.disable()
        try:
            # The write's cost must not grow with the store: git is asked only about the day logs it
            # appends to, and without `dedupe` (fresh ids) only those days are brought into the index.
            # a second process taking in the days written (a big write), see IndexBeside
            beside = None
            try:
                with self.transaction(subject, check_logs=False) as tx:
                    result.notes[:0] = tx.notes  # what a crashed writer left was rolled back first
                    days = sorted({local_day(from_iso(r["ts"]), self.tz) for r in records})
                    from .transaction import refuse_dirty_logs

                    # today's tree shard too: the records' placement is appended to it, and a commit of it would
                    # carry lines someone left uncommitted (a git reset --mixed of an earlier write, say)
                    from .format import treelog
                    from .format.timeutil import now_utc

                    shard = self.rel(treelog.write_shard(self.root, local_day(now_utc(), self.tz)))
                    refuse_dirty_logs(
                        self,
                        [layout.day_log(d) for d in days]
                        + ([shard] if after_write is not False else []),
                    )
                    if dedupe:
                        records, result.skipped = self._drop_known(records)
                    elif records:  # placing the records in the tree reads the index: the days written must be in it
                        from .index import queries

                        index = self.index(update=False)
                        # a clone's first write builds the whole index (a read would have to), later ones only their days
                        index.update(days=days if queries.has_days(index) else None)
                    if records and before_write:
                        tx.stage(list(before_write(self, records) or []))
                    if records:
                        vectors = self._embed_records(
                            records, inputs_by_rec, given_vectors, progress
                        )
                        refuse_non_finite(
                            records, vectors, origins, self.config.embedder.get("model")
                        )
                        tx.stage(self._private_key(records))
                        stage(progress, "Writing logs and packs", len(records))
                        self._stamp(records)
                        beside = FilesBeside.start(self, records, vectors, days)
                        try:
                            if beside is None:
                                tx.stage(self._write_files(records, vectors, stamped=True))
                                beside = IndexBeside.start(self, days, len(records))
                            tick(progress, len(records))
                            result.added = records
                            self._beside = beside
                            try:
                                tx.stage(
                                    self._after_write(
                                        records, vectors, after_write, result, progress
                                    )
                                )
                            finally:
                                self._beside = None
                                if beside is not None:
                                    beside.unpin()
                            if isinstance(beside, FilesBeside):
                                stage(progress, "Writing logs and packs")
                                tx.stage(beside.paths())
                        except BaseException:
                            if beside is not None:
                                beside.stop()  # before the transaction rolls back: nothing writes meanwhile
                            raise
                        if beside is None:
                            self.index(update=False).save_clean_keys(secret_policy.take_fresh())
                    tx.stage(extra_paths or [])
                    if records:
                        stage(progress, "Committing")
            except BaseException:
                if beside is not None:
                    beside.stop()
                raise
            result.commit = tx.commit
            result.notes += self._scope_warning(result.added)
            if result.added and result.commit:
                # The index takes in what this write committed, so the next write (whatever its day) finds
                # these records when it places its own in the topic tree; only the days written are read.
                stage(progress, "Indexing", len(result.added))
                if beside is not None:
                    beside.wait()  # (it took them in while the records were placed; the rest is a check)
                    self.index(update=False).save_clean_keys(secret_policy.take_fresh())
                self.index(update=False).take_in(days)
                tick(progress, len(result.added))
            elif beside is not None:
                beside.wait()
            return result
        finally:
            self.drop_ahead()
            if collecting:
                gc.enable()

    def _after_write(
        self, records: list[dict], vectors, after_write, result: WriteResult, progress=None
    ) -> list[str]:
        """Extra files for the same commit: the caller's, or the topic tree's placement of the records."""
        if after_write is False:
            return []
        if after_write is not None:
            out = after_write(self, records, vectors)
            return [out] if isinstance(out, str) else list(out or [])
        try:
            return self.place(records, vectors, progress)
        except (
            Exception
        ) as exc:  # the verbatim log is the truth; a tree problem must not lose the write
            result.notes.append(f"topic tree not updated: {exc}")
            return []

    def place(self, records: list[dict], vectors, progress=None) -> list[str]:
        """What a write does beside its files by default: nothing in the core; the facade places
        conversation records in the topic tree (telling `progress`, memstore/progress.py). Returns
        the paths to stage in the write's commit."""
        return []

    _beside = None  # a big write's second process, while the write places its records
    _ahead = None  # what `place_ahead` started for the write under way, until placement takes it

    def place_ahead(self, records: list[dict]):
        """What a write's placement can start before the write places anything, from the records'
        texts alone: nothing in the core (the facade counts a big write's words on the second
        core). Returns an object with `close()` (placement takes it: `take_ahead`), or None."""
        return None

    def take_ahead(self):
        """What `place_ahead` started for this write (placement owns it from now on), or None."""
        ahead, self._ahead = self._ahead, None
        return ahead

    def drop_ahead(self) -> None:
        """Stop what `place_ahead` started and placement did not take (the write ended first)."""
        ahead = self.take_ahead()
        if ahead is not None:
            ahead.close()

    def index_read(self) -> None:
        """Said by placement once it has read all it reads of the index (before it writes the
        tree): a big write's second process may then checkpoint the index (see `Unpinned`)."""
        if self._beside is not None:
            self._beside.unpin()

    def _drop_forgotten(self, records: list[dict], result: WriteResult) -> list[dict]:
        """A forgotten record (tombstone in forgotten.jsonl) does not come back by importing its source again."""
        from .format import tombstones

        gone = tombstones.ids(self.root) if records else set()
        kept = [r for r in records if r["id"] not in gone]
        if len(kept) < len(records):
            result.notes.append(
                f"left out {len(records) - len(kept)} records forgotten earlier ({tombstones.FILENAME})"
            )
        return kept

    def _drop_known(self, records: list[dict]) -> tuple[list[dict], int]:
        seen: set[str] = set()
        fresh = []
        for r in records:
            if r["id"] not in seen:
                seen.add(r["id"])
                fresh.append(r)
        known = self.index().known_ids([r["id"] for r in fresh]) if fresh else set()
        kept = [r for r in fresh if r["id"] not in known]
        return kept, len(records) - len(kept)

    def _embed_records(
        self, records: list[dict], inputs_by_rec: dict, given: dict | None, progress=None
    ):
        """One vector per record: the caller's where given (keyed by id(record)), embedded otherwise
        (memstore/turn_embedding.py: a user turn of several sentences is the mean of its sentences).

        An embedding input is cut at EMBED_CHARS: no model reads further (8k tokens at most), and a
        50 MB pasted log would otherwise cost minutes of tokenising for nothing.
        """
        import numpy as np

        from .turn_embedding import record_vectors

        from .progress import stage

        todo = [r for r in records if id(r) not in (given or {})]
        texts = [inputs_by_rec.get(id(r), r["text"])[:EMBED_CHARS] for r in todo]
        stage(progress, "Embedding", len(todo))
        vecs = record_vectors(self.embedder, todo, texts, progress)
        if not given:
            return vecs
        out = np.zeros((len(records), self.embedder.dim), np.float32)
        if not todo:  # every vector given (an import that keeps them): stacked at once
            try:
                out = np.asarray([given[id(r)] for r in records], np.float32)
            except ValueError:  # (shapes that differ: the loop below says which record's)
                out = None
            if out is not None and out.shape == (len(records), self.embedder.dim):
                return out
        out = np.zeros((len(records), self.embedder.dim), np.float32)
        fresh = iter(vecs)
        for i, r in enumerate(records):
            out[i] = np.asarray(given[id(r)], np.float32) if id(r) in given else next(fresh)
        return out

    def _write_files(
        self, records: list[dict], vectors, stamped: bool = False, opened: dict | None = None
    ) -> list[str]:
        """One pack per day touched (complete file, renamed into place), then the day-log lines.

        The pack comes first so that a log line never names a record whose vector is not on disk;
        the line itself names no file (the vector is found by day and record id), so consolidating
        packs never touches a log. A day that already had `consolidate_packs` packs is consolidated
        into one in the same commit. No fsync per file: a killed process leaves the page cache
        intact, and durability against power loss comes from git, which fsyncs the committed
        objects (core.fsync=committed, set with the hooks).

        `opened`, where given, gets for each day whose folder had no pack before, and that holds
        vectors only, what the index would read back from the pack this write made there: the
        pack's name and each record's vector and location in it (see `index_days`).
        """
        import numpy as np

        dtype = self.config.setting("vector_dtype")
        dim = int(self.config.embedder["dim"])
        limit = int(self.config.setting("consolidate_packs") or 0)
        finite = np.isfinite(np.asarray(vectors, dtype=np.float32)).all(axis=1) if records else []
        if not all(finite):  # (checked for all at once, not by each pack as it takes a vector)
            raise packfmt.PackError(packfmt.non_finite(records[int(np.argmin(finite))]["id"]))
        by_day: dict[str, list[tuple[dict, object, int]]] = {}
        for rec, vec in zip(records, vectors):
            when = from_iso(rec["ts"])  # (read once: its day, and the pack's Unix time)
            by_day.setdefault(local_day(when, self.tz), []).append(
                (rec, vec, int(when.timestamp()))
            )
        blobs: dict[str, list[tuple]] = {}
        for b in self._tx.blobs if getattr(self, "_tx", None) else []:
            blobs.setdefault(b[1], []).append(b)
        touched: list[str] = []
        if not stamped:
            self._stamp(records)
        self._note_appends(sorted(by_day))
        for day in sorted(set(by_day) | set(blobs)):
            folder = packfmt.day_dir(self.root, day)
            had = len(packfmt.pack_files(folder))
            writer = packfmt.PackWriter(day, dim)
            keys: dict[str, bytes | None] = {}
            for rec, vec, unix in by_day.get(day, []):
                key = keys[rec["id"]] = seal.key_bytes(rec["vkey"])
                writer.add_vector(rec["id"], key, rec["hash"], vec, dtype, unix, finite=True)
            for rid, _day, payload, data_type, manifest, unix in blobs.get(day, []):
                writer.add_blob(rid, keys[rid], payload, data_type, manifest, unix)
            pack = writer.write(self.root)
            touched.append(self.rel(folder))
            if opened is not None and not had and not blobs.get(day) and dtype == "float32":
                got = _opened(pack.name, writer, by_day.get(day, []), keys)
                if got is not None:
                    opened[day] = got
            if by_day.get(day):
                logpath = logfmt.day_path(self.root, day)
                logfmt.append(logpath, [r for r, _v, _u in by_day[day]], fsync=False)
                touched.append(self.rel(logpath))
            if (
                limit and had >= limit
            ):  # after the lines: a consolidation carries what their keys open
                consolidate_day(self, day)
        return touched

    def _note_appends(self, days) -> None:
        """The write's journal names these days' logs with their sizes before any is appended to
        (one journal write for all; `logfmt.append` notes each again, which finds it named)."""
        from .transaction import note_appends

        if getattr(self, "_journal", None) is not None:
            note_appends(self, [logfmt.day_path(self.root, d) for d in days])

    def _stamp(self, records: list[dict]) -> None:
        """The fields a write gives each record's line: who wrote it, its text's hash, its vector's
        key (whatever the input said of them)."""
        author = self.author
        after = recordfmt.AFTER_STAMPED
        for rec in records:
            rec.pop("seg", None)  # a record names no file
            rec.pop("author", None)  # who put it into memory, never what the input said
            rec["hash"] = recordfmt.text_hash(rec["text"])
            rec["vkey"] = seal.record_key(
                rec["id"], rec["text"], self._vkey_secret(rec)
            )  # only this line opens its vector
            if author is not None:
                rec["author"] = author
            # the fields that follow these in a line moved after them, so that the line is
            # written from the record as it is (recordfmt.ordered copied every record of a write)
            for key in after:
                if key in rec:
                    rec[key] = rec.pop(key)

    def _scope_warning(self, added: list[dict]) -> list[str]:
        """A plain store's first private record says, once per clone, what "private" means there."""
        if self.sealer is not None or not any(recordfmt.is_private(r) for r in added):
            return []
        flag = self.meta_dir / "private-scope-warned"
        if flag.exists():
            return []
        try:
            flag.parent.mkdir(parents=True, exist_ok=True)
            storefile.check(flag, self.meta_dir.parent)  # a link: no touch (OSError)
            flag.touch()
        except OSError:
            pass
        return [PLAIN_PRIVATE_WARNING.format(root=self.root)]

    def _vkey_secret(self, rec: dict) -> bytes | None:
        """What keys a record's pack key: none in a plain store, the writer's private key for a
        private record in an encrypted one, else the newest epoch's."""
        if self.sealer is None:
            return None
        return (
            self.sealer.private_secret() if recordfmt.is_private(rec) else self.sealer.vkey_secret()
        )

    def _private_key(self, records: list[dict]) -> list[str]:
        """An encrypted store's first private record of a writer makes that writer's private key
        (memstore/keyring.py), committed with it; the paths to stage."""
        if self.sealer is None or self.sealer.private_kid() is not None:
            return []
        if not any(recordfmt.is_private(r) for r in records):
            return []
        from . import keyring

        ident = self.sealer.identity
        kid, key, paths = keyring.wrap_private(
            self.root, keyring.recipient_of(ident), keyring.owner_secret(ident)
        )
        self.sealer.add_private(kid, key)
        return paths


def scope_records(records: list[dict], default: str) -> None:
    """Each record's scope as it is written: `"scope":"private"`, or no field for shared (the
    default `default` where a record names none)."""
    for rec in records:
        if (rec.pop("scope", None) or default) == recordfmt.PRIVATE:
            rec["scope"] = recordfmt.PRIVATE


def day_ring(root, day: str) -> list:
    """The (record id, key) pairs the day log's lines hold: what can open that day's packs."""
    path = logfmt.day_path(root, day)
    if not path.exists():
        return []
    return packfmt.ring(ln.record for ln in logfmt.read_lines(path) if ln.record is not None)


def consolidate_day(store, day: str) -> int | None:
    """Merge a day's small packs into one new pack (old ones deleted); how many it merged.

    Only packs that are each at most 45% of the result are merged (`pack.mergeable`), so a write
    never rewrites the day's big pack for a small addition; what the day log's keys no longer open
    (forgotten records) is left behind. 0: nothing worth merging; None: a pack of the day is damaged and
    the day is left as it is for fsck to name (a repack must never drop or launder what it holds).
    The caller stages the day's pack folder in its transaction: deletions and new pack, one commit.
    """
    from .format import tombstones

    had = set(packfmt.pack_files(packfmt.day_dir(store.root, day)))
    gone = tombstones.ids(store.root)  # a line a git merge brought back is forgotten all the same
    ring = day_ring(store.root, day)
    if store.sealer is not None and store.sealer.hides(logfmt.day_path(store.root, day)):
        return 0  # lines this identity cannot open hold keys to some items: leave the day as it is
    try:
        new, old = packfmt.consolidate_safely(
            store.root,
            day,
            int(store.config.embedder["dim"]),
            ring,
            keep=(lambda rid, _h: rid not in gone) if gone else None,
        )
    except (OSError, packfmt.PackError):
        return None
    for p in old:
        p.unlink()
    return len(old) + (1 if new in had else 0) if new else 0


def _opened(pack: str, writer, items: list, keys: dict) -> dict | None:
    """What the index reads back from a pack this write made (Index._pack_vectors): each record's
    float32 vector as the pack holds it and where its sealed item lies, by record id."""
    import numpy as np

    from .index.exact import sealed_location

    ids = [rec["id"] for rec, _vec, _unix in items]
    if any(keys.get(rid) is None for rid in ids):
        return None  # (an item sealed under no key: read back as the index reads it)
    vecs = np.asarray([vec for _rec, vec, _unix in items], dtype="<f4").reshape(len(ids), -1)
    spans, subkeys = writer.spans, writer.subkeys
    places = [sealed_location(subkeys[rid], pack, *spans[rid]) for rid in ids]
    # (the vectors' own buffer, written to the index's file as it is: a day of an import is a
    # hundred megabytes, and this machine's first touch of fresh memory costs ~2 ms a megabyte)
    vectors = memoryview(np.ascontiguousarray(vecs)).cast("B")
    return {"pack": pack, "ids": ids, "vectors": vectors, "places": b"".join(places)}


BESIDE_RECORDS = 5_000  # from this many records, a write's days are indexed beside its placement


class IndexBeside:
    """A second process that takes a big write's days into the index while this one places the
    records in the topic tree (which reads the index, pinned as it was: `Index.pin`), so the two
    longest parts of an import share two cores. The write itself never depends on it: the
    index is disposable, and after the commit the write takes in its days as always, which finds
    nothing left to do when the second process finished, and does the work when it failed. It
    never runs git, never holds the write lock, and reads the day logs and packs only through the
    index's own update (a write rolled back meanwhile changes their fingerprints: indexed again)."""

    def __init__(self, store, days: list[str]):
        import subprocess
        import sys

        self.index = store.index(update=False)
        self.index.pin()
        env = _beside_env()
        self.unpinned = Unpinned()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _BESIDE, str(store.root), str(self.unpinned.fd), "-1"]
                + days,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
                pass_fds=(self.unpinned.fd,),
            )
        except BaseException:
            self.unpinned.say()
            raise
        finally:
            self.unpinned.forked()

    @classmethod
    def start(cls, store, days: list[str], n: int):
        from . import workers

        if n < BESIDE_RECORDS or not workers.second_core():
            return None
        try:
            return cls(store, days)
        except OSError:
            return None  # no second process: the write indexes its days itself, after the commit

    def unpin(self) -> None:
        self.index.unpin()
        self.unpinned.say()

    def wait(self) -> None:
        self.unpin()
        self.proc.wait()

    def stop(self) -> None:
        self.unpin()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


class FilesBeside:
    """A big write's day logs and packs written by a forked child while this process places the
    records in the topic tree; a process the child forks stages them in git (`_stage_beside`: the
    hashing and compressing that was most of the commit's time) while the child becomes the process
    that takes the days into the index (IndexBeside's work, by exec: a fresh interpreter, nothing
    of this one's state).

    The records are stamped before the fork (`Core._stamp`), so both processes hold the same
    lines; placement reads only the records in memory and the index pinned as it was, never the
    files being written; the write stages the child's paths only once the child has said they are
    complete (`paths`), and fails (rolled back by its transaction) if it says otherwise or dies. The
    child holds the write lock's descriptor until it has written its files (an flock shared across
    the fork), so a writer killed meanwhile is not rolled back under it. Not used where a day's
    packs would be consolidated (that rewrites packs placement may read), nor in a process with
    other threads (workers.can_fork).

    While the stager may be staging, this process runs no git command (placement and the tree's
    files need none; tests/test_stage_beside.py holds it): a second writer of .git/index would make
    one of the two fail on its index.lock. The child runs in a process group of its own, with its
    stager, which `stop` kills whole, so a `git add` started there dies with it rather than
    writing the index while the write rolls back; the index.lock such a `git add` leaves is newer
    than the journal, and the rollback removes it."""

    def __init__(self, store, records: list[dict], vectors, days: list[str]):
        import sys

        from . import workers

        self.index = store.index(update=False)
        self.index.pin()
        self._paths: list[str] | None = None
        # The journal names the day logs the child appends to, with their sizes now, so that a
        # rollback cuts exactly what it appended (a note the child made would stay in its memory).
        store._note_appends(days)
        self.unpinned = Unpinned()
        argv = [sys.executable, "-c", _BESIDE, str(store.root), str(self.unpinned.fd), "-1", *days]
        env = _beside_env()
        read_fd, write_fd = os.pipe()
        try:
            pid = os.fork()
        except BaseException:
            for fd in (read_fd, write_fd):
                os.close(fd)
            self.unpinned.forked()
            self.unpinned.say()
            raise
        if pid == 0:  # the child: write, have them staged and said, become the indexing process
            try:
                workers.forked()
                os.close(read_fd)
                self.unpinned.in_child()
                _own_group()
                opened: dict = {}
                paths = store._write_files(records, vectors, stamped=True, opened=opened)
            except BaseException as exc:  # noqa: BLE001 - said to the parent, which fails the write
                try:
                    _send(write_fd, _said_error(exc))
                finally:
                    os._exit(1)
            try:
                _stage_beside(store, paths, time.time(), write_fd)
                argv[5] = str(_hand_over(opened))
                os.close(write_fd)  # (the stager's copy is the parent's answer now)
                os.execve(sys.executable, argv, env)
            finally:
                os._exit(0)  # no indexing process: the write takes its days in itself
        os.close(write_fd)
        self.unpinned.forked()
        try:  # (the child does it too: whichever runs first, stop() finds the group)
            os.setpgid(pid, pid)
        except OSError:
            pass
        self.pid, self._read = pid, read_fd
        self.stage_error: str | None = None  # why the child did not stage its files, if it did not
        self._done = False
        self.returncode: int | None = None  # the indexing process's exit status, once reaped

    @classmethod
    def start(cls, store, records: list[dict], vectors, days: list[str]):
        from . import workers

        if len(records) < BESIDE_RECORDS or not workers.can_fork():
            return None
        limit = int(store.config.setting("consolidate_packs") or 0)
        if limit and any(
            len(packfmt.pack_files(packfmt.day_dir(store.root, d))) >= limit for d in days
        ):
            return None
        return cls(store, records, vectors, days)

    def paths(self) -> list[str]:
        """The files the child wrote, once it has written them all; MemstoreError if it failed."""
        import json

        if self._paths is None:
            chunks = []
            while chunk := os.read(self._read, 1 << 16):
                chunks.append(chunk)
            os.close(self._read)
            self._read = -1
            try:
                said = json.loads(b"".join(chunks) or b"{}")
            except ValueError:
                said = {}
            if not isinstance(said.get("paths"), list):
                self._kill()  # what is left of its group: a `git add` it ran, if it died in one
                self._reap()
                raise MemstoreError(
                    "Writing the day logs and packs failed: "
                    + str(said.get("error") or "the writing process ended without a word"),
                    "Nothing was written.",
                )
            self._paths = [str(p) for p in said["paths"]]
            # A child that could not stage them leaves that to the commit (it stages every path of
            # the write, and finds these already staged and unchanged when the child did it).
            self.stage_error = said.get("stage_error")
        return self._paths

    def unpin(self) -> None:
        self.index.unpin()
        self.unpinned.say()

    def wait(self) -> None:
        self.unpin()
        try:
            self._reap()
        except BaseException:  # (a Ctrl-C while waiting: the child's group does not get it)
            self.stop()
            raise

    def stop(self) -> None:
        """Kill the child and its process group: a `git add` it runs dies with it, so no git is left
        writing .git/index while the write rolls back (its index.lock is dated after the journal:
        the rollback removes it)."""
        self.unpin()
        self._kill()
        self._reap()

    def _kill(self) -> None:
        if self._done:  # reaped: its pid (and group id) may be another's now
            return
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except OSError:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _reap(self) -> None:
        if self._read >= 0:
            os.close(self._read)
            self._read = -1
        if not self._done:
            self._done = True
            try:
                self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
            except ChildProcessError:
                pass


def _own_group() -> None:
    """FilesBeside's child: a process group of its own (so that the parent's stop() kills the git it
    runs with it), with no terminal: stdin, stdout and stderr on /dev/null, as IndexBeside's
    process has them (a background group that wrote to a terminal could be stopped by it)."""
    try:  # (without it the child still works: stop() then kills the child alone)
        os.setpgid(0, 0)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.close(null)
    except OSError:
        pass


def _said_error(exc: BaseException) -> bytes:
    import json

    return json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode()


def _stage_beside(store, paths: list[str], written: float, fd: int) -> None:
    """FilesBeside's child has the files it wrote staged and said to the parent on `fd` by a
    process of its own (forked: in the child's group, so `stop` kills it and its git with the
    rest), and becomes the indexing process at once: the index then starts while git hashes and
    compresses the files (~4 s of a 100k-turn import, after a wait of up to a second for the
    clock, see _stage_written), not after, and the index was what a big write waited for at its
    end. Where it cannot fork, the child stages and says it itself first.

    The stager says nothing else on `fd` and the child writes nothing more to it: the parent reads
    one answer, up to the end of the pipe (the stager's exit)."""
    import json

    try:
        pid = os.fork()
    except OSError:
        pid = -1
    if pid > 0:
        return
    try:
        try:
            said = {"paths": paths, "stage_error": _stage_written(store, paths, written)}
            _send(fd, json.dumps(said).encode())
        except BaseException as exc:  # noqa: BLE001 - said to the parent, which fails the write
            _send(fd, _said_error(exc))
    finally:
        if pid == 0:
            os._exit(0)


def _stage_written(store, paths: list[str], written: float) -> str | None:
    """FilesBeside's child stages the files it wrote (GitRepo.stage_big: the options the commit
    uses for a big write), so that hashing and compressing them runs on this core while the parent
    places the records, and the commit finds them staged. None when done, else git's words: the
    commit then stages them itself.

    First it waits for the clock to pass the second the files were written in (at most 1 s, in the
    child, beside placement): git's index keeps mtimes to the second, and an entry whose file
    changed in the second the index was written is "racily clean", hashed again by the next
    `git add` (the commit's)."""
    from .errors import GitError
    from .transaction import SEALED_UNDER

    wait = int(written) + 1.02 - time.time()
    if wait > 0:
        time.sleep(wait)
    try:
        store.git.stage_big(paths, SEALED_UNDER)
    except (GitError, OSError) as exc:
        return str(exc) or type(exc).__name__
    return None


def _hand_over(opened: dict) -> int:
    """FilesBeside's child: what it wrote into the packs, for the indexing process it becomes
    (`index_days`), in an anonymous file kept across the exec; -1 where there is none (no
    memfd_create, no memory: whatever goes wrong here): that process then reads the packs back,
    and the write, whose files are written and said, never depends on it."""
    from .workers import _dump_parts

    if not opened or not hasattr(os, "memfd_create"):
        return -1
    try:
        fd = os.memfd_create("memstore-opened", 0)
        os.set_inheritable(fd, True)  # (the exec keeps it)
    except OSError:
        return -1
    try:
        with os.fdopen(os.dup(fd), "wb") as f:
            for part in _dump_parts([[opened], []]):  # (no part copied: the vectors as they are)
                f.write(part)
        os.lseek(fd, 0, os.SEEK_SET)
    except Exception:  # noqa: BLE001 - (MemoryError included) the packs are read back instead
        os.close(fd)
        return -1
    return fd


def _send(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _beside_env() -> dict:
    """The environment of a second process: this one's, with this memstore first on its path."""
    import memstore

    here = str(Path(memstore.__file__).resolve().parents[1])  # this memstore, whatever the cwd
    path = os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


_BESIDE = (
    "import sys; from memstore.core import index_days;"
    " index_days(sys.argv[1], sys.argv[4:], int(sys.argv[2]), int(sys.argv[3]))"
)
UNPIN_WAIT = 600.0  # seconds a second process waits for its writer's word (see Unpinned)


def index_days(root: str, days: list[str], unpinned: int | None = None, opened: int = -1) -> None:
    """IndexBeside's second process: bring `days` of the store at `root` into its index; then,
    once the writer has said (`Unpinned`) that it no longer reads the index as it was, move the
    index's write-ahead log into it. `opened`: a file descriptor with what FilesBeside's child
    put into the packs it made (`_hand_over`), so that the vectors are not read back from them
    (a third of reading a day back: opening each sealed item); -1 for none."""
    gc.disable()  # (a process for this one job: its rows form no cycle to collect meanwhile)
    index = Core.open(root, search_parents=False).index(update=False)
    index.update(days=days, opened=_taken_over(opened))
    if unpinned is not None:
        import select

        select.select([unpinned], [], [], UNPIN_WAIT)  # a byte, or the end of the pipe
        index.checkpoint()
    _reap_children()


def _reap_children() -> None:
    """Wait for this process's children: the stager FilesBeside's child forked before it became
    this process (`_stage_beside`; done by now, its answer taken before the commit), so that its
    time and its git's count among the writer's children, as the child's own did."""
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _taken_over(fd: int) -> dict | None:
    """What `_hand_over` wrote into `fd` (closed here): {day: {"pack", "ids", "vectors",
    "places"}}; None where there is none or it is not what the child writes."""
    from .workers import _load

    if fd < 0:
        return None
    import mmap

    try:
        with os.fdopen(fd, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            # mapped, not read: the vectors stay in the file's pages (a read, then a copy of each
            # raw part, touched twice their size of fresh memory in the indexing process)
            data = mmap.mmap(f.fileno(), size, prot=mmap.PROT_READ) if size else b""
            got = _load(data, views=True)[0][0]
    except (OSError, ValueError, TypeError, IndexError):
        return None
    if not isinstance(got, dict):
        return None
    for day in got.values():  # (a location is read as bytes: only the vectors stay mapped)
        if isinstance(day, dict) and isinstance(day.get("places"), memoryview):
            day["places"] = bytes(day["places"])
    return got


class Unpinned:
    """The writer's word to its second process that it has stopped reading the index as it was
    (`Index.pin`): a byte on a pipe, or the pipe's end when the writer is gone.

    The second process writes a big write's days into the index's write-ahead log (248 MB for a
    100k-turn import into a fresh store); the log is copied into index.db by a checkpoint, which
    cannot happen while the writer reads the index pinned as it was before, so the process's own
    checkpoint failed and the writer's first commit to the index after placement made it (0.7-0.9 s
    at 100k, the write's last second spent copying). Now the second process waits for this word,
    then checkpoints, while the writer writes the tree and commits."""

    def __init__(self):
        self.fd, self._w = os.pipe()  # (the read end goes to the second process)

    def in_child(self) -> None:
        """In a forked child that execs the second process: the read end kept across the exec."""
        os.close(self._w)
        os.set_inheritable(self.fd, True)

    def forked(self) -> None:
        """In the writer, once the second process has its end."""
        os.close(self.fd)

    def say(self) -> None:
        if self._w < 0:
            return
        try:
            os.write(self._w, b".")
        except OSError:
            pass  # the second process has ended
        finally:
            os.close(self._w)
            self._w = -1


def keys_signature(root: Path) -> tuple:
    """What changes when a file of keys/ does: each entry's name, size, time and inode."""
    folder = Path(root) / "keys"
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return ()
    out = []
    for name in names:
        try:
            st = os.lstat(folder / name)
        except OSError:
            continue
        out.append((name, st.st_size, st.st_mtime_ns, st.st_ino))
    return tuple(out)


def open_sealer(root: Path, meta_dir: Path):
    """An encrypted store's Sealer (registered, so every committed line read or written under
    `root` is opened or sealed), its disposable folder made private (0700); None for a plain store."""
    from . import keyring, keytrust
    from .format import sealed_lines
    from .gitrepo import git_dir

    gdir = git_dir(root)
    known = gdir / keytrust.MARK if gdir is not None else None
    if not keyring.is_encrypted(root):
        if known is not None and known.exists():
            raise FormatError(
                root / keyring.RECIPIENTS,
                "is gone, and this clone has opened this store as an encrypted one: a commit "
                "removed keys/ (anyone who can push can), and memstore never writes memory of an "
                "encrypted store in the clear",
                hint="Find the commit (git log --diff-filter=D -- keys) and revert it. "
                "Nothing was changed.",
            )
        sealed_lines.register(root, None)
        return None
    record = keytrust.Record.load(gdir)
    migrating = record is None and known is not None and known.exists()
    sealer = keyring.open_store(root, record=record, migrating=migrating)
    if sealer.trust != record:
        sealer.trust.save(gdir)
    if known is not None and not known.exists():
        try:  # this clone now knows the store encrypted, whatever a later pull removes
            known.write_text("this clone opened its memstore store as an encrypted one\n")
        except OSError:
            pass
    sealed_lines.register(root, sealer)
    try:
        meta_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(meta_dir, 0o700)
    except OSError:
        pass  # a read-only store's cache folder elsewhere: made by its first writer
    return sealer


def _init_recipients(given: list[str] | None) -> list[str]:
    """Who a new encrypted store is sealed to: the user's own recipient first, then `given`."""
    from . import keyring

    path = keyring.identity_path()
    if path is None:
        raise UsageError(
            "ct init --encrypt needs your identity, so that you can read the store: none was found.",
            f'Create one with "ct keys new" ({keyring.default_identity_path()}), or give '
            "--identity FILE or MEMSTORE_IDENTITY. Nothing was changed.",
        )
    out = [keyring.normal_recipient(keyring.recipient_of(path))]
    for r in given or []:
        r = keyring.normal_recipient(r)
        if r not in out:
            out.append(r)
    return out


def _local_timezone_name() -> str:
    env = os.environ.get("TZ")
    if env and "/" in env:
        return env
    try:
        link = os.readlink("/etc/localtime")
        if "zoneinfo/" in link:
            return link.split("zoneinfo/", 1)[1]
    except OSError:
        pass
    return "UTC"


def refuse_non_finite(records: list[dict], vectors, origins: dict | None, model) -> None:
    """A vector holding NaN or Infinity ranks first for every query: refuse the write, naming the record."""
    import numpy as np

    bad = (
        np.flatnonzero(~np.isfinite(np.asarray(vectors, dtype=np.float32)).all(axis=1))
        if len(records)
        else []
    )
    if len(bad):
        rec = records[int(bad[0])]
        where = (origins or {}).get(id(rec)) or f"record {rec['id']}"
        raise FormatError(
            where,
            f"its vector holds NaN or Infinity ({len(bad)} of {len(records)} vectors; embedder {model})",
            hint="Nothing was written.",
        )
