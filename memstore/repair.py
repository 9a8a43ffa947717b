"""Crash recovery: roll back what an interrupted writer left behind, and `ct fsck --repair`.

The commit is the unit of a write. Every `Store.write` leaves a journal in `.memstore/` while it
works and removes it after its commit; a journal found by someone who can take the write lock
means a writer died. What it left (temp files, packs that were never committed, packs a
consolidation deleted before its commit, segments no commit refers to (format 1), day-log lines
that were never committed, a half-written last line, a git lock file) is rolled back to the last commit:
appended log lines are saved first under `.memstore/rolled-back/` so nothing is thrown away
unseen, and committed data is never changed. We roll back rather than commit the leftovers because
a killed command never told its caller it succeeded, and a partial import or ingest committed under
another message would hide that it was cut short (re-running it adds exactly what is missing).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from . import FORMAT_VERSION, storefile
from .results import Repair

JOURNAL = "write-journal.json"
JOURNAL_LIMIT = 64 << 20  # bytes: a journal names paths, never records
BACKUP_DIR = "rolled-back"
APPEND_ONLY = (
    "markers.jsonl",
    "forgotten.jsonl",
    "purged-history.jsonl",
)  # besides log/**.jsonl: files a writer only appends to
REWRITES = "write-journal-rewrites"  # beside the journal: the bytes of files a writer rewrote whole
OTHER_DATA = (
    "tree.json",
    "memstore.toml",
    ".gitattributes",
    ".gitignore",
)  # rewritten whole, not appended
# File times come from the kernel's coarse clock, which can lag time.time() by a tick.
MTIME_SLACK = 0.05
# Git lock files a killed git child can leave; only removed when a crashed writer's journal is older.
UPGRADE_MARKER = "upgrade-in-progress"  # in .memstore/: an upgrade that dies before its commit is undone by the next
GIT_LOCKS = ("index.lock", "HEAD.lock", "ORIG_HEAD.lock", "packed-refs.lock")


def recover_if_crashed(store) -> Repair | None:
    """For readers: if a writer died (journal present, lock free), roll back before indexing.

    Costs one stat when nothing is wrong. A live writer holds the lock, so it is never disturbed.
    """
    if getattr(store, "_writing", False) or not (store.meta_dir / JOURNAL).exists():
        return None
    from .errors import LockTimeout
    from .gitrepo import unfinished_operation
    from .locking import file_lock

    try:
        with file_lock(store.meta_dir / "write.lock", timeout=0, what="write"):
            journal = read_journal(store)
            abort_own_merge(store, journal)  # a killed ct sync's merge
            if journal is None or unfinished_operation(store.root):
                return None  # never roll back a person's merge: the uncommitted lines may be the other side's
            return rollback(store, journal)
    except LockTimeout:
        return None


def crashed_journal(store) -> dict | None:
    """The journal of a writer that died (present while nobody holds the write lock), else None."""
    if not (store.meta_dir / JOURNAL).exists():
        return None
    from .errors import LockTimeout
    from .locking import file_lock

    try:
        with file_lock(store.meta_dir / "write.lock", timeout=0, what="write"):
            return read_journal(store)
    except LockTimeout:
        return None


def read_journal(store) -> dict | None:
    path = store.meta_dir / JOURNAL
    try:
        data = json.loads(storefile.read_text(path, store.meta_dir.parent, limit=JOURNAL_LIMIT))
    except FileNotFoundError:
        return None
    except (ValueError, UnicodeDecodeError, RecursionError, OSError):
        data = None  # a torn journal still means a writer died
    if not isinstance(data, dict) or not isinstance(data.get("started"), (int, float)):
        try:  # the journal was written as the write began, so its mtime bounds what the writer made
            data = {**(data if isinstance(data, dict) else {}), "started": os.lstat(path).st_mtime}
        except FileNotFoundError:
            return None
    return data


def new_journal(store) -> dict:
    """A writer's journal as it begins: who, when, from which commit, and (filled in as it goes)
    the size each append-only file had before its first append (-1: it did not exist)."""
    return {"pid": os.getpid(), "started": time.time(), "head": store.git.head(), "appended": {}}


def journal_merge(store) -> None:
    """Say in the running writer's journal that git merges now: git writes the day logs, tree shards
    and packs, so no append is noted, and a kill is rolled back by file times (every store file
    changed since the lock was taken came from the merge, which the next sync makes again)."""
    journal = getattr(store, "_journal", None)
    if journal is not None:
        journal["merge"] = True
        _write_journal(store, journal)


def journal_push(store, git_dir: Path, ref: str, commit: str) -> None:
    """Say in the running writer's journal that `ct sync` now pushes `commit` to `ref` of the
    repository `git_dir` on this machine. Its receive-pack runs in the sync's process group, so a
    kill can leave that repository's ref lock behind (every later push then fails on it); the
    rollback removes the locks this push provably left (`_clear_remote_push_locks`)."""
    journal = getattr(store, "_journal", None)
    if journal is not None:
        journal["push"] = {
            "git_dir": str(git_dir),
            "ref": ref,
            "commit": commit,
            "started": time.time(),
        }
        _write_journal(store, journal)


def _finish_committed_merge(store, journal: dict, gdir) -> bool:
    """HEAD is a merge commit of the journal's HEAD and MERGE_HEAD: the merge is done, only git's
    MERGE_* files are left; remove them. Anything else is not this journal's merge: False."""
    from .errors import GitError

    try:
        merged = (gdir / "MERGE_HEAD").read_text().strip()
        parents = store.git.run("rev-list", "--parents", "-n", "1", "HEAD").split()[1:]
    except (OSError, GitError):
        return False
    if parents != [journal.get("head"), merged]:
        return False
    for name in ("MERGE_HEAD", "MERGE_MSG", "MERGE_MODE", "AUTO_MERGE"):
        (gdir / name).unlink(missing_ok=True)
    return True


def abort_own_merge(store, journal: dict | None) -> bool:
    """A `git merge` that `ct sync` began and was killed in (its journal says so, and HEAD has not
    moved): git's MERGE_HEAD is ct's own, so the merge is aborted, leaving what it left to the
    rollback. Caller holds the write lock. A person's merge (no such journal) is never touched."""
    from .errors import GitError
    from .gitrepo import git_dir

    gdir = git_dir(store.root)
    if (
        not journal
        or not journal.get("merge")
        or gdir is None
        or not (gdir / "MERGE_HEAD").exists()
    ):
        return False
    if journal.get("head") not in (None, store.git.head()):
        # a commit landed since: the merge itself, when the kill came after git committed it and
        # before it removed MERGE_HEAD (git runs post-merge in between): finish git's own clean-up
        return _finish_committed_merge(store, journal, gdir)
    _clear_git_locks(store, float(journal.get("started") or 0), Repair())
    try:
        store.git.run("merge", "--abort")
    except (
        GitError
    ):  # git could not put the index back: it is reset to HEAD, the files are left to the rollback
        store.git.run("reset", "-q")
        for name in ("MERGE_HEAD", "MERGE_MSG", "MERGE_MODE", "AUTO_MERGE"):
            (gdir / name).unlink(missing_ok=True)
    return True


def _write_journal(store, journal: dict) -> None:
    path = store.meta_dir / JOURNAL
    storefile.mkdirs(store.meta_dir, store.meta_dir.parent)
    storefile.check(path, store.meta_dir.parent)
    tmp = path.with_name(f".{JOURNAL}.tmp-{os.getpid()}")
    try:
        tmp.write_text(json.dumps(journal), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:  # a full disk: no half-written temp file left behind
        tmp.unlink(missing_ok=True)
        raise


# ----- rolling back ------------------------------------------------------------------------------


def rollback(store, journal: dict | None, foreign: list[str] | None = None) -> Repair:
    """Put every store file back to HEAD except changes a crashed writer did not make.

    `journal` is the crashed writer's journal (None for `ct fsck --repair` without one: then
    tree.json and memstore.toml edits are left alone, because they may be a person's work).
    `foreign`: paths a person had staged before the failed write began (never touched).
    Caller holds the write lock.
    """
    rep = Repair(crashed=journal)
    if _undo_upgrade(store, journal, rep):
        return rep
    if journal is not None:
        _clear_git_locks(store, float(journal.get("started") or 0), rep)
        _clear_remote_push_locks(journal, rep)
        _restore_rewritten(store, journal.get("rewritten"), rep)
    entries = _status(store)
    if foreign:
        keep = set(foreign)
        entries = [(xy, p) for xy, p in entries if p not in keep]
    staged = [p for xy, p in entries if xy[0] not in " ?" and _is_data(p)]
    if staged and journal is not None:  # the crashed writer's own `git add`: undo it with the rest
        store.git.run("reset", "-q", "--", *staged)
        entries = [(xy, p) for xy, p in _status(store) if not foreign or p not in keep]
    elif staged:
        # Without a crashed writer, staged changes are a person's (or git's) work: never undone.
        # Day-log lines beyond the staged version are still rolled back; other staged files are left.
        keep = set(staged)
        rep.untouched += [
            f"{p}: staged changes left alone (commit them, or unstage with git restore --staged)"
            for p in staged
        ]
        entries = [
            (xy, p) for xy, p in entries if p not in keep or (_is_append_only(p) and xy[1] != " ")
        ]
    backup = _Backup(store)
    logs = [(xy, p) for xy, p in entries if _is_append_only(p)]
    segs = [(xy, p) for xy, p in entries if p.startswith("segments/")]
    packs = [(xy, p) for xy, p in entries if p.startswith("packs/")]
    others = [
        (xy, p)
        for xy, p in entries
        if not _is_append_only(p) and not p.startswith(("segments/", "packs/"))
    ]
    started = float(journal.get("started") or 0) if journal is not None else None
    # a merge's journal lists no appends (git wrote the files): what changed since it began is the merge's
    appended = journal.get("appended") if journal is not None and not journal.get("merge") else None
    for xy, p in logs:
        if isinstance(appended, dict):  # the writer said what it appended: cut exactly that
            _rollback_own_appends(store, p, appended.get(p), rep, backup)
            continue
        base = (
            ":" if journal is None and xy[0] not in " ?" else "HEAD:"
        )  # staged: the index is the floor
        _rollback_appended(store, xy, p, rep, backup, started, base)
    for xy, p in segs:
        _rollback_segment(store, xy, p, rep, backup)
    _rollback_packs(store, packs, rep)
    for xy, p in others:
        _rollback_other(store, xy, p, rep, backup, started)
    _prune_empty_dirs(store, [p for _, p in segs + logs + packs])
    rep.backup = backup.where
    if journal is not None:
        try:
            (store.meta_dir / JOURNAL).unlink()
        except FileNotFoundError:
            pass
    return rep


def _undo_upgrade(store, journal: dict | None, rep: Repair) -> bool:
    """A killed `ct upgrade` is undone whole (it began on a clean committed store), never in part."""
    said = interrupted_upgrade(store)
    if said is None:
        return False
    if journal is not None:
        _clear_git_locks(store, float(journal.get("started") or 0), rep)
    undo_interrupted_upgrade(store)
    store.reload_config()  # format 1 again
    rep.upgrade = said.split(": ", 1)[1].split(";")[0]
    (store.meta_dir / JOURNAL).unlink(missing_ok=True)
    return True


def interrupted_upgrade(store) -> str | None:
    """What to tell a person when an upgrade died before its commit (its marker is there and HEAD is
    still an older format), else None: every other command's rollback would only undo part of it."""
    from .errors import GitError, MemstoreError

    marker = store.meta_dir / UPGRADE_MARKER
    try:
        if (
            not marker.exists()
            or store.git.run("show", "HEAD:memstore.toml").find(
                f"format_version = {FORMAT_VERSION}"
            )
            >= 0
        ):
            return None
        pid = storefile.read_bytes(marker, store.meta_dir.parent, limit=64)
        pid = pid.decode("ascii", "replace").strip()
    except (GitError, OSError, MemstoreError):
        return None
    return (
        f".memstore/{UPGRADE_MARKER}: an upgrade to format {FORMAT_VERSION} (pid {pid}) was killed before its commit; "
        'run "ct upgrade": it puts the committed store back and upgrades it again'
    )


def undo_interrupted_upgrade(store) -> bool:
    """An upgrade that died before its commit started from a clean older store: put that store back."""
    if interrupted_upgrade(store) is None:
        return False
    store.git.run("checkout", "HEAD", "--", ".")
    store.git.run("clean", "-fdq", "--", "packs", "tree", "log")
    (store.meta_dir / UPGRADE_MARKER).unlink()
    return True


def _restore_rewritten(store, rewritten, rep: Repair) -> None:
    """Files the writer replaced or removed whole (a forget), put back from the bytes it kept —
    unless the file is as committed at HEAD: then the write's commit landed before it died."""
    import shutil

    from .errors import GitError

    kept = store.meta_dir / REWRITES
    for rel, existed in (rewritten or {}).items() if isinstance(rewritten, dict) else ():
        where = _journal_paths(store, kept, rel)
        if where is None:  # a journal only ever names the store's own files: this one is planted
            rep.untouched.append(
                f"{rel!r}: named by the write journal but not a file of the store; left alone"
            )
            continue
        path, kept_copy = where
        try:  # as committed, through git's own filters (a CRLF checkout is the same file)
            store.git.run("diff", "--quiet", "HEAD", "--", rel)
            continue
        except GitError:
            pass
        if existed and kept_copy.is_file():
            os.replace(kept_copy, path)
        elif not existed:
            path.unlink(missing_ok=True)
        else:
            continue
        rep.restored.append(rel)
    shutil.rmtree(kept, ignore_errors=True)


def _journal_paths(store, kept: Path, rel) -> tuple[Path, Path] | None:
    """(the store file, its kept copy) for a path a journal names, or None unless it is a plain
    relative path that stays inside the store (outside .git and the disposable folder) and whose
    copy stays inside the kept folder, symlinks resolved: `.memstore/` may come from someone else."""
    if not isinstance(rel, str) or not rel or "\\" in rel or rel.startswith("/"):
        return None
    parts = Path(rel).parts
    if ".." in parts or Path(rel).is_absolute() or parts[0] in (".git", store.meta_dir.name):
        return None
    root, kept_root = store.root.resolve(), kept.resolve()
    path, copy = (root / rel).resolve(), (kept_root / rel).resolve()
    if not (path.is_relative_to(root) and copy.is_relative_to(kept_root)) or path == root:
        return None
    return path, copy


def _is_data(p: str) -> bool:
    return p.startswith(("log/", "segments/", "packs/", "tree/")) or p in (
        *APPEND_ONLY,
        *OTHER_DATA,
    )


def _is_append_only(p: str) -> bool:
    return (p.startswith(("log/", "tree/")) and p.endswith(".jsonl")) or p in APPEND_ONLY


def _status(store, *pathspec: str) -> list[tuple[str, str]]:
    out = store.git.run(
        "status",
        "--porcelain=v1",
        "-z",
        "--no-renames",
        "--untracked-files=all",
        "--",
        *pathspec,
        strip_newline_in_stdout=False,
    )
    entries = []
    for item in out.split("\0"):
        if len(item) > 3:
            entries.append((item[:2], item[3:]))
    return entries


def _committed_bytes(store, p: str, base: str = "HEAD:") -> bytes | None:
    from .errors import GitError

    try:
        return store.git.run(
            "cat-file", "blob", f"{base}{p}", stdout_as_string=False, strip_newline_in_stdout=False
        )
    except GitError:
        return None


def _changed_since(path: Path, started: float | None) -> bool:
    """Was the file changed by the writer whose journal began at `started` (None: by anyone)?"""
    if started is None:
        return True
    try:
        return path.stat().st_mtime >= started - MTIME_SLACK
    except FileNotFoundError:
        return True


def _rollback_appended(
    store,
    xy: str,
    p: str,
    rep: Repair,
    backup: "_Backup",
    started: float | None,
    base: str = "HEAD:",
) -> None:
    """A day log or markers.jsonl: cut back to its committed bytes, keeping the cut lines."""
    path = store.root / p
    if not _changed_since(path, started):
        # Lines a person appended before the writer began are theirs (fsck names any damage).
        rep.untouched.append(f"{p}: uncommitted lines older than the interrupted write left alone")
        return
    head = _committed_bytes(store, p, base)
    if not path.exists():
        if head is not None:  # a tracked file went missing: bring the committed one back
            store.git.run("checkout", "HEAD", "--", p)
            rep.restored.append(p)
        return
    try:  # a link (or a file in a linked folder) is damage: never read, cut or replaced
        data = storefile.read_bytes(path, store.root)
    except storefile.StoreLink as exc:
        rep.untouched.append(f"{p}: left alone: {exc.problem}")
        return
    if head is None:
        tail, keep = data, None
    elif data.startswith(head):
        tail, keep = data[len(head) :], len(head)
    else:
        added = _lines_beyond(head, data, path)
        if added is None:
            rep.untouched.append(
                f"{p}: differs from its committed version other than by appended lines"
            )
            return
        # truncated (or lines of it deleted): the committed bytes come back, lines added since are kept aside
        _count_lines(added, rep, p)
        backup.save(p, added)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        tmp.write_bytes(head)
        os.replace(tmp, path)
        rep.restored.append(p)
        return
    _count_lines(tail, rep, p)
    backup.save(p, tail)
    if keep is None:
        path.unlink()
    else:
        storefile.truncate(path, keep, store.root)


def _lines_beyond(head: bytes, data: bytes, path=None) -> bytes | None:
    """The whole record lines of a day log that its committed version lacks, when every other line
    is a committed one (or the cut end of one: a truncation); None when a committed record was
    changed or a line is neither (a person's edit, left alone). In an encrypted store (`path`'s
    store has a Sealer) each sealed line is opened to read its record; the lines kept aside stay
    sealed, and a line that does not open is a person's edit too."""
    from .format import record as recordfmt
    from .format import sealed_lines

    sealer = sealed_lines.sealer_for(path) if path is not None else None

    def plain(line: bytes) -> bytes:
        if sealer is None or not line.startswith(sealed_lines.PREFIX):
            return line
        got = sealed_lines.parse(line)
        key = sealer.keys.get(got[0]) if got else None
        opened = sealed_lines.open_one(key, got[0], sealer.rel(path), got[1]) if key else None
        return b"" if opened is None else opened  # b"": not a record (RecordError below)

    committed = set(head.split(b"\n"))
    ids: set[str] = set()
    for line in head.split(b"\n"):
        try:
            ids.add(str(recordfmt.loads(plain(line))["id"]))
        except recordfmt.RecordError:
            continue
    added = []
    for line in data.split(b"\n"):
        if line in committed or not line.strip():
            continue
        try:
            rec = recordfmt.loads(plain(line))
        except recordfmt.RecordError:
            if any(c.startswith(line) for c in committed):
                continue  # where the file was cut
            return None
        if str(rec["id"]) in ids:
            return None  # a committed record edited
        added.append(line + b"\n")
    return b"".join(added)


def _rollback_own_appends(store, p: str, size_before, rep: Repair, backup: "_Backup") -> None:
    """An append-only file, cut back to the size it had before the crashed writer's first append.

    A file the writer never appended to is left as it is: its uncommitted lines are a person's,
    however recent (an older writer's journal, without sizes, falls back to file times).
    """
    path = store.root / p
    if not isinstance(size_before, int):
        rep.untouched.append(
            f"{p}: uncommitted lines the interrupted write did not make left alone"
        )
        return
    try:
        data = storefile.read_bytes(path, store.root)
    except FileNotFoundError:
        return
    except storefile.StoreLink as exc:  # a link: never read, cut or removed through
        rep.untouched.append(f"{p}: left alone: {exc.problem}")
        return
    if len(data) < size_before:
        rep.untouched.append(f"{p}: shorter than before the interrupted write; left alone")
        return
    tail = data[max(size_before, 0) :]
    _count_lines(tail, rep, p)
    backup.save(p, tail)
    if size_before < 0:  # the writer created it
        path.unlink()
    else:
        storefile.truncate(path, size_before, store.root)


def _count_lines(tail: bytes, rep: Repair, p: str) -> None:
    lines = tail.split(b"\n")
    complete, last = lines[:-1], lines[-1]
    n = sum(1 for ln in complete if ln.strip())
    if p.startswith("log/"):
        rep.records += n
    else:
        rep.other_lines += n
    if last.strip():
        rep.partial_lines += 1


def _rollback_segment(store, xy: str, p: str, rep: Repair, backup: "_Backup") -> None:
    path = store.root / p
    name = path.name
    if xy == "??":
        if name.startswith(".segment_") and ".tmp-" in name:
            path.unlink(missing_ok=True)
            rep.temp_files += 1
        elif name.startswith("segment_") and name.endswith(".is"):
            if _referenced_by_committed(store, p):
                rep.untouched.append(
                    f"{p}: not committed but a committed record refers to it (git add it)"
                )
                return
            path.unlink(missing_ok=True)
            rep.segments += 1
        else:
            rep.untouched.append(f"{p}: unknown untracked file in segments/")
        return
    # A tracked segment changed or vanished: only reembed rewrites segments, and only inside its
    # own commit, so the committed version is the truth (and a vector is derived data: no backup).
    store.git.run("checkout", "HEAD", "--", p)
    rep.restored.append(p)


def _rollback_packs(store, entries: list[tuple[str, str]], rep: Repair) -> None:
    """Format 2: untracked packs and temp files go; committed packs a consolidation deleted come back.

    A pack is removed only when every vector in it is either in a committed pack of its day or
    belongs to no committed record: a pack someone forgot to `git add` under committed log lines
    is left alone and named.
    """
    from .format import pack as packfmt

    restore = [p for xy, p in entries if xy != "??"]
    if (
        restore
    ):  # tracked packs deleted (or damaged) before a commit: the committed bytes are the truth
        store.git.run("checkout", "HEAD", "--", *restore)
        rep.restored += restore
    for xy, p in entries:
        if xy != "??":
            continue
        path = store.root / p
        name = path.name
        if name.startswith(".") and ".tmp-" in name:
            path.unlink(missing_ok=True)
            rep.temp_files += 1
        elif packfmt._NAME.match(name) and len(Path(p).parts) == 4:
            if _pack_needed(
                store, path, Path(p).parts[2], {store.root / q for x, q in entries if x == "??"}
            ):
                rep.untouched.append(
                    f"{p}: not committed but holds the only vector of a committed record (git add it)"
                )
                continue
            path.unlink(missing_ok=True)
            rep.packs += 1
        else:
            rep.untouched.append(f"{p}: unknown untracked file in packs/")


def _pack_needed(store, path: Path, day: str, untracked: set[Path]) -> bool:
    """Does this uncommitted pack hold a vector that a committed record of its day has nowhere else?"""
    from .format import log as logfmt
    from .format import pack as packfmt

    log = logfmt.day_path(store.root, day)
    if not log.exists():
        return False
    keys = packfmt.ring(
        ln.record for ln in logfmt.read_lines(log) if ln.record
    )  # the committed lines' keys

    def held(p: Path) -> set:
        pk = packfmt.read(p)
        return set(pk.vectors(keys if pk.sealed else [(rid, None) for rid, _ in keys]))

    try:
        committed = held(path)
    except (OSError, ValueError):
        return False  # unreadable: it cannot be anybody's vector
    for other in packfmt.pack_files(path.parent):
        if other != path and other not in untracked and committed:
            try:
                committed -= held(other)
            except (OSError, ValueError):
                continue
    return bool(committed)


def _referenced_by_committed(store, p: str) -> bool:
    """Does a record in the (already rolled back) day log point at this segment file?"""
    from .format import log as logfmt
    from .format.segment import segment_name

    parts = Path(p).parts  # segments/YYYY/YYYY-MM-DD/<writer>/segment_<n>.is
    if len(parts) != 5:
        return False
    shard, day = "/".join(parts[:4]), parts[2]
    path = logfmt.day_path(store.root, day)
    if not path.exists():
        return False
    for ln in logfmt.read_lines(path):
        seg = ln.record.get("seg") if ln.record else None
        if isinstance(seg, dict) and seg.get("shard") == shard:
            try:
                if parts[4] in (
                    segment_name(int(seg.get("text", -1))),
                    segment_name(int(seg.get("vec", -1))),
                ):
                    return True
            except (TypeError, ValueError):
                continue
    return False


def _rollback_other(
    store, xy: str, p: str, rep: Repair, backup: "_Backup", started: float | None
) -> None:
    """tree.json, memstore.toml and the like: only undone when a crashed writer changed them."""
    if xy == "??" and p.startswith("tree/") and Path(p).name.startswith(".") and ".tmp-" in p:
        (store.root / p).unlink(
            missing_ok=True
        )  # a tree shard rewrite (forget) that never got renamed
        rep.temp_files += 1
        return
    if xy == "??" and p.startswith(".") and ".tmp-" in p and p[1:].split(".tmp-")[0] in OTHER_DATA:
        (store.root / p).unlink(
            missing_ok=True
        )  # e.g. .tree.json.tmp-<pid>: a rename that never happened
        rep.temp_files += 1
        return
    if p not in OTHER_DATA:
        return  # not store data: the user's own files are none of our business
    path = store.root / p
    try:
        mtime = path.stat().st_mtime
    except FileNotFoundError:
        mtime = None
    ours = started is not None and _changed_since(path, started)
    if not ours:
        rep.untouched.append(
            f"{p}: uncommitted change left alone (commit it, or restore it with git checkout)"
        )
        return
    if mtime is not None:
        try:
            backup.save(p, storefile.read_bytes(path, store.root))
        except storefile.StoreLink as exc:
            rep.untouched.append(f"{p}: left alone: {exc.problem}")
            return
    if xy == "??":
        path.unlink()
    else:
        store.git.run("checkout", "HEAD", "--", p)
    rep.restored.append(p)


def _clear_git_locks(store, started: float, rep: Repair) -> None:
    """Lock files a killed git child left; an orphaned git that is still finishing gets a moment."""
    git_dir = Path(store.git.run("rev-parse", "--absolute-git-dir"))
    candidates = [git_dir / n for n in GIT_LOCKS]
    for refs in ("heads", "remotes"):  # a killed fetch leaves refs/remotes/<remote>/<branch>.lock
        folder = git_dir / "refs" / refs
        if folder.exists():
            candidates += list(folder.rglob("*.lock"))
    deadline = time.monotonic() + 2.0
    for lock in candidates:
        while lock.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        try:
            if lock.stat().st_mtime >= started - MTIME_SLACK:
                lock.unlink()
                rep.git_locks.append(lock.name)
        except FileNotFoundError:
            pass


def _clear_remote_push_locks(journal: dict, rep: Repair) -> None:
    """The lock files a killed sync's push left in a repository on this machine (its receive-pack
    died with it): the pushed ref's lock and HEAD's (a bare remote's HEAD names the branch, so git
    locks both). Only this push's own are removed: made after the push began, empty or holding the
    commit it pushed (git writes the new value into the lock before renaming it over the ref), and
    still there after a live push would long have let go (git holds a ref lock for a millisecond).
    Another clone's push writes its own commit there, and an older lock is not this push's."""
    push = journal.get("push")
    if not isinstance(push, dict):
        return
    try:
        git_dir, ref = Path(str(push["git_dir"])), str(push["ref"])
        commit, started = str(push["commit"]), float(push["started"])
    except (KeyError, TypeError, ValueError):
        return
    if not ref.startswith("refs/heads/") or ".." in ref.split("/"):
        return
    deadline = time.monotonic() + 2.0
    for lock in (git_dir / f"{ref}.lock", git_dir / "HEAD.lock"):
        try:
            if lock.stat().st_mtime < started - MTIME_SLACK:
                continue  # older than the push: not its own (and no wait for it)
        except FileNotFoundError:
            continue
        while lock.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        try:
            if lock.read_bytes()[:100].decode("ascii", "replace").strip() not in ("", commit):
                continue
            lock.unlink()
            rep.git_locks.append(str(lock))
        except FileNotFoundError:
            pass


def _prune_empty_dirs(store, paths: list[str]) -> None:
    for p in paths:
        folder = (store.root / p).parent
        while folder != store.root and folder.name not in ("segments", "log", "packs"):
            try:
                folder.rmdir()
            except OSError:
                break
            folder = folder.parent


class _Backup:
    """Copies of what a rollback removes, under .memstore/rolled-back/<time>-<pid>/<path>."""

    def __init__(self, store):
        self.store = store
        self.folder: Path | None = None

    @property
    def where(self) -> str | None:
        return str(self.folder) if self.folder else None

    def save(self, rel: str, data: bytes) -> None:
        if not data:
            return
        if self.folder is None:
            stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
            self.folder = self.store.meta_dir / BACKUP_DIR / f"{stamp}-{os.getpid()}"
        target, base = self.folder / rel, self.store.meta_dir.parent
        storefile.mkdirs(target.parent, base)
        with storefile.open_file(target, "ab", root=base) as fh:
            fh.write(data)


# ----- ct fsck --repair --------------------------------------------------------------------------


def repair(store) -> Repair:
    """Roll back uncommitted leftovers, drop a temp journal, and bring (or rebuild) the index.

    Never changes committed data: a committed record, segment or tree is only ever restored to
    its committed version, never edited.
    """
    from .gitrepo import refuse_if_unfinished
    from .locking import file_lock, lock_timeout

    # The bare lock, not Store.lock(): a journalled lock would refuse to start on the very
    # uncommitted lines this is here to roll back.
    with file_lock(store.meta_dir / "write.lock", timeout=lock_timeout(), what="write"):
        journal = read_journal(store)
        abort_own_merge(store, journal)  # a killed ct sync's merge is undone; a person's is refused
        refuse_if_unfinished(
            store.root, "repair the store"
        )  # mid-merge, the uncommitted lines may be the other side's
        if journal is None:
            # so that a repair killed inside git is itself rolled back later; without sizes, as a
            # repair cuts every uncommitted line, not only its own appends
            _write_journal(store, {k: v for k, v in new_journal(store).items() if k != "appended"})
        rep = rollback(store, journal)
        (store.meta_dir / JOURNAL).unlink(missing_ok=True)
        _remove_stray_temps(store, rep)
        # A damaged index is only a cache: Index throws it away and builds it again from the files.
        idx = store.index(update=False)
        idx.drop_if_damaged()  # what the cheap check on opening cannot see (SQLite's quick_check)
        plan = idx.update()
        rep.index = {"reindexed": plan.changed, "dropped": plan.vanished, "rebuilt": idx.dropped}
    return rep


def _remove_stray_temps(store, rep: Repair) -> None:
    """Temp files inside committed-but-ignored places git status cannot see (none are expected)."""
    for top in ("segments", "packs"):
        for dirpath, _dirs, files in os.walk(store.root / top):
            for name in files:
                if (
                    name.startswith(".")
                    and ".tmp-" in name
                    and name.split(".tmp-")[0].endswith(".is")
                ):
                    (Path(dirpath) / name).unlink(missing_ok=True)
                    rep.temp_files += 1
