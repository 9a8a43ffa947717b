"""Two clones that changed an encrypted store's keys at once (docs/format.md "Keys changes").

Each made its own key file for the same epoch number (a `ct keys remove` here while another clone
ran `ct keys rotate`), or rewrapped the same epoch to different newcomers (`ct keys add`). A merge
cannot join two keys, and before this a clone's `ct sync` stopped (or named the other side's honest
lines as forged). `ct sync` settles it: the remote's keys win (they were pushed first); this clone
moves onto the remote, leaving its own unpushed commits out (their lines are sealed under the key
that lost, which may be wrapped to a reader the other side removed, so they are never pushed),
writes its own records again, sealed under the remote's keys, and makes its change of readers
again on top: a removal stays a removal, an addition an addition (a rotation needs nothing more:
the remote's new epoch is a fresh key already). Unpushed markers and topic edits of this clone
are not carried over.
"""

from __future__ import annotations

from .. import keyring, reapply
from ..errors import GitError, MemstoreError


def clashing(store, upstream: str) -> list[str]:
    """The key files (store-relative) that both this clone and `upstream` changed since their merge
    base, differently: epoch files (a new epoch each side, or a rewrap each side) and the list of
    recipients (a removal on one side, an addition on the other)."""
    git = store.git
    try:
        base = git.run("merge-base", "HEAD", upstream).strip()
    except MemstoreError:
        return []
    if not base:
        return []
    ours = _changed(git, base, "HEAD")
    theirs = _changed(git, base, upstream)
    if not any(p.endswith(".age") for p in ours) or not any(p.endswith(".age") for p in theirs):
        return []  # a change of the plain list alone is no key change (anyone can push one)
    both = sorted(set(ours) & set(theirs))
    return [
        p for p in both if ours[p] != theirs[p] and (p.endswith(".age") or p == keyring.RECIPIENTS)
    ]


def _changed(git, base: str, rev: str) -> dict[str, str]:
    """{path under keys/: blob id at `rev`} for the key files `rev` changed or added since `base`."""
    out = git.run("diff", "--raw", "--no-renames", base, rev, "--", keyring.KEYS_DIR)
    got = {}
    for line in out.splitlines():
        meta, _tab, path = line.partition("\t")
        fields = meta.split()
        if len(fields) >= 5 and fields[4] in ("A", "M"):
            got[path] = fields[3]
    return got


def unpushed(store, since: str) -> tuple[list[int], tuple[list[str], list[str]]]:
    """What this clone changed in the keys since `since` (the merge base, or the remote tip it
    last fetched): (the epochs it made, its change of readers: (added, removed))."""
    from ..forget import purge
    from .keys import readers

    had = set(store.git.run("ls-tree", "--name-only", since, f"{keyring.KEYS_DIR}/").split())
    if not any(n.endswith(".age") for n in had):
        return [], ([], [])  # plain then: encrypted since (ct encrypt), nothing to compare
    then = purge._remote_sealer(store, since)
    before = set(
        then.readers.get(then.newest)
        or keyring.recipients_in(store.git.blob(since, keyring.RECIPIENTS))
    )
    now = set(readers(store))
    made = [e for e in store.sealer.keys if f"{keyring.epoch_name(e)}.age" not in had]
    return made, (sorted(now - before), sorted(before - now))


def made_since(store, since: str) -> list[int]:
    """The epochs this clone has that `since` had no file for (a cheap look: names only)."""
    had = set(store.git.run("ls-tree", "--name-only", since, f"{keyring.KEYS_DIR}/").split())
    return [e for e in store.sealer.keys if f"{keyring.epoch_name(e)}.age" not in had]


def without(record, epochs: list[int]):
    """A copy of a clone's trust record without `epochs` (this clone's unpushed ones, which lost)."""
    out = record.copy()
    for e in epochs:
        out.epochs.pop(e, None)
    out.newest = max(out.epochs, default=0)
    return out


def settle(store, res, upstream: str) -> None:
    """Move onto `upstream` as the module says, leaving in memstore/reapply.py's file what the
    caller does next: this clone's change of readers, its records, its forgets. Nothing changes
    when the remote's keys do not check."""
    from ..core import open_sealer
    from ..forget import purge
    from ..format import sealed_lines
    from ..gitrepo import git_dir

    sealer = store.sealer
    base = store.git.run("merge-base", "HEAD", upstream).strip()
    made, change = unpushed(store, base)
    record = without(sealer.trust, made)
    remote = purge._remote_sealer(store, upstream, record)
    if remote.doubtful or remote.newest not in remote.keys:
        why = "; ".join(f"epoch {e}: {w}" for e, w in sorted(remote.doubtful.items()))
        raise GitError(
            f"{store.root}: this clone and {res.upstream} both changed the keys, and the remote's "
            f"newest key epoch is not one this clone can trust ({why or 'it does not open'}).",
            "Nothing was changed. Look at who committed it (git log -- keys) before anything else.",
        )
    mine = purge.records_here(store)
    sealed_lines.register(store.root, remote)
    try:
        theirs = purge._ids_at(store, upstream)
        forgotten = purge.tombstones_at(store, upstream)
    finally:
        sealed_lines.register(store.root, sealer)
    local = [store.normalize(r) for r in mine if r.get("id") not in theirs]
    forget = purge.forgotten_ids(store.root) - forgotten  # this clone's unpushed forgets
    reapply.save(store, local, *change, forget=forget)  # before anything moves
    record.save(git_dir(store.root))
    store.git.run("reset", "--hard", "-q", upstream)
    store.sealer = open_sealer(store.root, store.meta_dir)
    store._keys_seen = None  # the next write opens keys/ again
    res.notes.append(
        f"this clone and {res.upstream} changed the keys at once: the remote's keys were kept, "
        "this clone moved onto them (its unpushed commits stay in git's reflog; their markers and "
        "topic edits are not carried over)"
    )


def redo(store, res, change: tuple[list[str], list[str]]) -> None:
    """This clone's change of readers, made again on the remote's keys (one commit each)."""
    from . import keys

    added, removed = change
    if not added and not removed:
        return
    now = set(keys.readers(store))
    for r in removed:
        if r in now:
            keys.remove(store, r)
            res.notes.append(f"removed {r} again (new key epoch)")
    for r in added:
        if r not in now:
            keys.add(store, r)
            res.notes.append(f"added {r} again")
