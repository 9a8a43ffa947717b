"""The one write transaction: lock, journal, files, one commit — every command that changes a store uses it.

    with store.transaction("Mark: ship it") as tx:
        ...write files...
        tx.stage(["markers.jsonl"])
    tx.commit  # the new commit's sha, or None when nothing changed

Entering takes the store's write lock and writes the journal (read back by memstore/repair.py), rolling back
what a crashed writer left first; a clean exit commits the staged paths with the message (a string,
or a function called at commit time so it can describe what was actually written) and removes the
journal; an exception rolls every uncommitted change back while the lock is still held, so a failed
write leaves the store at its last commit. A format-1 store is refused before anything is touched:
its writes would mix two layouts, so `ct upgrade` has to run first.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from dataclasses import dataclass, field

from . import FORMAT_VERSION, storefile
from .errors import MemstoreError, VersionError
from .format import layout
from .format.log import BEFORE_APPEND, BEFORE_REWRITE
from .repair import (
    BACKUP_DIR,
    JOURNAL,
    REWRITES,
    _status,
    _write_journal,
    abort_own_merge,
    new_journal,
    read_journal,
    rollback,
)


SEALED_UNDER = layout.PACKS + "/"  # a write's ciphertext files: git stores them without zlib


@dataclass
class Transaction:
    """One write in progress: the paths to stage, the commit message, and (after exit) the commit."""

    store: object
    message: object
    paths: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    commit: str | None = None
    blobs: list[tuple] = field(
        default_factory=list
    )  # (record id, day, payload, data type, manifest, unix time)

    def stage(self, paths) -> None:
        """Add store-relative paths (a string or a list) to this transaction's commit."""
        if isinstance(paths, str):
            self.paths.append(paths)
        elif paths:
            self.paths += [p for p in paths if p]

    def add_blob(
        self,
        record_id: str,
        day: str,
        payload: bytes,
        data_type: int,
        manifest: dict,
        unix_time: int,
    ) -> None:
        """An original file (ingest-any) to go into the pack that `Store.write` makes for `day`."""
        self.blobs.append((record_id, day, payload, data_type, manifest, unix_time))

    def _finish(self) -> None:
        if not self.paths:
            return
        text = self.message() if callable(self.message) else self.message
        if not text:
            return
        if getattr(self.store, "sealer", None) is not None:
            text = sealed_subject(text)
        self.commit = self.store.git.commit(
            text,
            sorted(dict.fromkeys(self.paths)),
            only_paths=True,
            sealed_under=SEALED_UNDER,
        )


def sealed_subject(text: str) -> str:
    """An encrypted store's commit message: what kind of write it was, none of its words (the
    remote reads commit messages). The first word of memstore's own subjects names the verb."""
    verb = str(text).split(":", 1)[0].split(" ", 1)[0].strip()
    verb = verb if verb.isalpha() and len(verb) <= 16 and verb[:1].isupper() else "Write"
    return f"{verb} (encrypted store)"


def refuse_old_format(store) -> None:
    """Writes need the current format; reads of a format-1 store keep working."""
    version = store.config.format_version
    if version < FORMAT_VERSION:
        raise VersionError(
            f'{store.root}: this store is format {version}; run "ct upgrade" (one commit) before writing to it.',
            f'Run "ct -C {store.root} upgrade" to convert it to format {FORMAT_VERSION} losslessly; '
            "reading and searching it work as they are. Nothing was changed.",
        )


@contextmanager
def transaction(store, message, allow_old_format: bool = False, check_logs: bool = True):
    """Lock + journal + files + one commit (see the module docstring). `check_logs=False`: the
    writer only appends, and checks the day logs it appends to itself (`refuse_dirty_logs`)."""
    if not allow_old_format:
        refuse_old_format(store)
    with write_lock(store, check_logs):
        tx = Transaction(store, message, notes=list(getattr(store, "recovery_notes", []) or []))
        store._tx = tx
        try:
            yield tx
            tx._finish()
        finally:
            store._tx = None


# ----- the write lock and journal ----------------------------------------------------------------


def refuse_during_git_operation(store, doing: str = "write to the store") -> None:
    """No write (and no repair) while git waits in a merge, rebase, cherry-pick or revert.

    The working files then hold the other side's records uncommitted; a write would commit half of
    the operation and a rollback would throw the other side away (the data loss of issue 12).
    """
    from .gitrepo import refuse_if_unfinished

    refuse_if_unfinished(store.root, doing)


def begin_write(store, check_logs: bool = True) -> list[str]:
    """Called by `Store.write` holding the write lock: recover from a crashed writer, then journal.

    Without a journal, uncommitted day-log changes cannot be ours to roll back silently (a person
    may have edited a log), so the writer refuses and names `ct fsck --repair`. `check_logs=False`:
    the writer checks only the day logs it appends to (`refuse_dirty_logs`), so its cost does not
    grow with the store's days.
    """
    abort_own_merge(
        store, read_journal(store)
    )  # a killed ct sync's merge, before the refusal below
    refuse_during_git_operation(store)
    if store.git.sparse:
        err = MemstoreError(
            f"{store.root} is a sparse checkout (core.sparseCheckout): the day logs, packs and tree shards a write "
            "appends to may not be here, and git refuses to commit paths outside the checkout.",
            f'Check the whole store out first ("git -C {store.root} sparse-checkout disable"); reads work as they '
            "are. Nothing was written.",
        )
        err.nothing_written = True
        raise err
    from .format import attributes

    try:  # git would re-encode (or filter) what this write appends: refuse before any change
        attributes.refuse(store.root)
    except MemstoreError as err:
        err.nothing_written = True
        raise
    notes: list[str] = []
    journal = read_journal(store)
    if journal is not None:
        notes = rollback(store, journal).notes()
    store.reload_config()  # as it is now, under the lock: a reembed may have committed (or been rolled back)
    # The journal goes down before this writer runs any git command: even `git status` takes
    # .git/index.lock, and a kill during it must leave a journal that dates the stale lock.
    store._journal = new_journal(store)
    _write_journal(store, store._journal)
    store._writing = True
    if journal is None and check_logs:
        found = [(xy, p) for xy, p in _status(store, "log") if p.endswith(".jsonl")]
        if found:
            end_write(store)
            raise _dirty_logs_error(
                store, [p for _, p in found], staged=any(xy[0] not in " ?" for xy, _ in found)
            )
    return notes


def _dirty_logs_error(store, dirty: list[str], staged: bool = False) -> MemstoreError:
    if staged:  # a person's `git add` or `git reset --soft`: fsck --repair leaves staged work alone
        fix = (
            f'They are staged: commit them ("git -C {store.root} commit"), or unstage them '
            f'("git -C {store.root} restore --staged {dirty[0]}") and run "ct -C {store.root} fsck --repair" '
            f"to roll them back (the lines are kept in .memstore/{BACKUP_DIR}/). Nothing was written."
        )
    else:
        fix = (
            f'Run "ct -C {store.root} fsck --repair" to roll them back (the lines are kept in '
            f".memstore/{BACKUP_DIR}/), or commit them with git. Nothing was written."
        )
    err = MemstoreError(
        f"{store.root / dirty[0]} has uncommitted changes"
        + (f" (and {len(dirty) - 1} more day logs)" if len(dirty) > 1 else "")
        + "; a write now would commit them.",
        fix,
    )
    err.nothing_written = (
        True  # raised before the writer touched a file: there is nothing to roll back
    )
    return err


def refuse_dirty_logs(store, paths: list[str]) -> None:
    """Refuse (changing nothing) when a day log the write is about to append to differs from HEAD.

    Costs one `git ls-tree` of those paths and a hash of their bytes, whatever the store's size:
    each existing file's git blob id is compared with HEAD's. A mismatch (which a clean/smudge
    filter could also cause) is confirmed by `git status` on those paths before refusing.
    """
    import hashlib

    existing = [p for p in paths if (store.root / p).exists()]
    if not existing:
        return
    committed = store.git.blob_ids(existing)
    suspect = []
    for p in existing:
        data = storefile.read_bytes(store.root / p, store.root)  # a link: refused, nothing written
        oid = committed.get(p)
        algo = hashlib.sha256 if oid and len(oid) == 64 else hashlib.sha1
        if oid is None or algo(b"blob %d\0" % len(data) + data).hexdigest() != oid:
            suspect.append(p)
    found = _status(store, *suspect) if suspect else []
    if found:
        raise _dirty_logs_error(
            store, [p for _, p in found], staged=any(xy[0] not in " ?" for xy, _ in found)
        )


@contextmanager
def write_lock(store, check_logs: bool = True):
    """The store's write lock, journalled: what `Store.lock()` gives every writer.

    On entry a crashed writer's leftovers are rolled back (their notes land in
    `store.recovery_notes`) and a journal is written; a clean exit removes it; an exception rolls
    the failed write back at once, while the lock is still held.
    """
    from .locking import file_lock, lock_timeout

    with file_lock(store.meta_dir / "write.lock", timeout=lock_timeout(), what="write"):
        store.recovery_notes = begin_write(store, check_logs)
        refresh = getattr(store, "refresh_keys", None)
        if refresh is not None:
            refresh()  # keys/ as it is now, under the lock (a server may have held them for days)
        hook = BEFORE_APPEND.set(lambda path: note_append(store, path))
        rehook = BEFORE_REWRITE.set(lambda path: note_rewrite(store, path))
        try:
            yield
        except BaseException as exc:
            if getattr(exc, "nothing_written", False):
                end_write(store)
                raise
            store._writing = False
            try:
                rollback(store, read_journal(store), getattr(exc, "foreign_staged", None))
            except Exception:  # the journal stays; the next writer rolls back instead
                pass
            raise
        finally:
            BEFORE_APPEND.reset(hook)
            BEFORE_REWRITE.reset(rehook)
        end_write(store)


def _journal_entry(store, path, kind: str) -> tuple[dict, dict, str] | None:
    """(journal, its `kind` map, the path relative to the store) when a write is journalling and
    the path is a store file the map does not name yet; else None (nothing to note)."""
    journal = getattr(store, "_journal", None)
    if journal is None:
        return None
    try:
        rel = Path(path).resolve().relative_to(store.root).as_posix()
    except ValueError:
        return None  # not a store file
    entries = journal.setdefault(kind, {})
    return None if rel in entries else (journal, entries, rel)


def note_append(store, path) -> None:
    """Before the writer's first append to `path`: the journal records the size it had, so a
    rollback cuts exactly what this writer appended (memstore/repair.py)."""
    note_appends(store, [path])


def note_appends(store, paths) -> None:
    """`note_append` for several paths, the journal written once (a big write appends to the day
    logs of hundreds of days: one journal rewrite each grew with their number)."""
    journal = None
    for path in paths:
        found = _journal_entry(store, path, "appended")
        if found is None:
            continue
        journal, _, rel = found
        try:
            journal["appended"][rel] = os.stat(path).st_size
        except FileNotFoundError:
            journal["appended"][rel] = -1
    if journal is not None:
        _write_journal(store, journal)


def note_rewrite(store, path) -> None:
    """Before the writer first replaces or removes `path` whole: its bytes are kept beside the
    journal (which names it), so a rollback puts the file back exactly as it was."""
    found = _journal_entry(store, path, "rewritten")
    if found is None:
        return
    journal, rewritten, rel = found
    keep = store.meta_dir / REWRITES / rel
    storefile.mkdirs(keep.parent, store.meta_dir.parent)
    storefile.check(keep, store.meta_dir.parent)
    try:
        keep.write_bytes(storefile.read_bytes(path, store.root))
        rewritten[rel] = True
    except FileNotFoundError:
        rewritten[rel] = False  # it did not exist: a rollback removes it
    _write_journal(store, journal)


def end_write(store) -> None:
    """Called after the write's commit: the write is complete, so the journal goes (the kept
    bytes of rewritten files after it: a journal never names bytes that are gone)."""
    import shutil

    try:
        (store.meta_dir / JOURNAL).unlink()
    except FileNotFoundError:
        pass
    shutil.rmtree(store.meta_dir / REWRITES, ignore_errors=True)
    store._writing = False
