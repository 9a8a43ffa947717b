"""The one write transaction: lock, journal, files, one commit — every command that changes a store uses it.

    with store.transaction("Mark: ship it") as tx:
        ...write files...
        tx.stage(["markers.jsonl"])
    tx.commit  # the new commit's sha, or None when nothing changed

Entering takes the store's write lock and writes the journal (memstore/repair.py), rolling back
what a crashed writer left first; a clean exit commits the staged paths with the message (a string,
or a function called at commit time so it can describe what was actually written) and removes the
journal; an exception rolls every uncommitted change back while the lock is still held, so a failed
write leaves the store at its last commit. A format-1 store is refused before anything is touched:
its writes would mix two layouts, so `ct upgrade` has to run first.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field

from . import FORMAT_VERSION
from .errors import VersionError


@dataclass
class Transaction:
    """One write in progress: the paths to stage, the commit message, and (after exit) the commit."""

    store: object
    message: object
    paths: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    commit: str | None = None
    blobs: list[tuple] = field(default_factory=list)  # (record id, day, payload, data type, manifest, unix time)

    def stage(self, paths) -> None:
        """Add store-relative paths (a string or a list) to this transaction's commit."""
        if isinstance(paths, str):
            self.paths.append(paths)
        elif paths:
            self.paths += [p for p in paths if p]

    def add_blob(
        self, record_id: str, day: str, payload: bytes, data_type: int, manifest: dict, unix_time: int
    ) -> None:
        """An original file (ingest-any) to go into the pack that `Store.write` makes for `day`."""
        self.blobs.append((record_id, day, payload, data_type, manifest, unix_time))

    def _finish(self) -> None:
        if not self.paths:
            return
        text = self.message() if callable(self.message) else self.message
        if not text:
            return
        self.commit = self.store.git.commit(text, sorted(dict.fromkeys(self.paths)), only_paths=True)


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
    writer only appends, and checks the day logs it appends to itself (`repair.refuse_dirty_logs`)."""
    if not allow_old_format:
        refuse_old_format(store)
    from .repair import write_lock

    with write_lock(store, check_logs):
        tx = Transaction(store, message, notes=list(getattr(store, "recovery_notes", []) or []))
        store._tx = tx
        try:
            yield tx
            tx._finish()
        finally:
            store._tx = None
