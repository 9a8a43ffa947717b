"""`ct sync`: merge the remote's memory into this clone (never rebase), reindex, and push.

Git moves the data; memstore's files are laid out so that a plain `git merge` never conflicts:
day logs, tree ops and markers merge by union (.gitattributes), packs are named by their bytes. So sync
is `git pull` + reindex + `git push` with retries, and a plain `git pull` does the same merge.
Sync holds the write lock while it merges and while it pushes, so no local write lands inside either.
"""

from __future__ import annotations

import os
import random
import re
import time
from pathlib import Path

from ..errors import GitError, MemstoreError
from ..gitrepo import IN_MEMSTORE_ENV, git_dir
from ..results import SyncResult

PUSH_TRIES = 20
# git's words for a push another clone's push beat: not a failure, a reason to merge again.
RACE_WORDS = (
    "fetch first",
    "non-fast-forward",
    "failed to update ref",
    "stale info",
    "cannot lock ref",
    "is at ",
)
# A lock file in the remote in the way of the push. Another push holding it (for about a
# millisecond) is a race like the others; one that stays was left by a git that died there (a
# killed push), and no retry gets past it: ct sync stops and names it.
LOCK_IN_THE_WAY = re.compile(r"Unable to create '([^']+\.lock)': File exists")
STALE_LOCK_S = 5.0  # a lock this old in a remote on this machine is a dead git's
STALE_LOCK_ROUNDS = 3  # a remote elsewhere: the same lock in the way of this many pushes in a row


def sync(
    store, push: bool = True, set_upstream: str | None = None, drop_purged: bool = False
) -> SyncResult:
    """Fetch, merge the upstream branch, bring the index up to date, push what the remote lacks.

    A push that loses a race (another clone pushed first) starts the round again: fetch, merge,
    push, up to PUSH_TRIES times with a short randomized back-off, so many clones can sync at once.
    Never merges or pushes a commit that `ct forget --purge-history` removed (purged-history.jsonl);
    `drop_purged` moves a branch that holds one (after a plain `git pull`) onto the upstream."""
    from ..forget import purge
    from . import hooks

    with store.lock():  # journalled: a crashed writer's leftovers are rolled back before the merge
        notes = list(store.recovery_notes)
        if any(
            state == "missing" or state.startswith("outdated")
            for state in hooks.status(store).values()
        ):
            hooks.install(
                store
            )  # an optimisation only: the index is brought up to date below anyway
            notes.append("installed the git hooks in this clone")
        branch = _branch(store)
        remote, upstream = _upstream(store, branch, set_upstream)
        res = SyncResult(remote=remote, branch=branch, upstream=upstream, notes=notes)
        purge.refuse_unpublished_purge(store, res)
    first = set_upstream is not None
    # The index brought up to date (and its code loaded) before the first fetch, so the time from
    # fetch to push holds only the merge and what the merged days need: the shorter that time, the
    # likelier a push wins while other clones push.
    store.index()
    in_the_way: list[str] = []  # per rejected push: the remote lock in its way, or ""
    for attempt in range(PUSH_TRIES):
        if attempt:
            _back_off(attempt)
        _pull_round(store, res, drop_purged)
        if not push:
            break
        with store.lock():
            pushed = _push(store, res, first, in_the_way)
        if pushed:
            break
        first = first and _counts(store, res.upstream) is None
        res.retries += 1
        res.notes.append(f"{res.upstream} moved while syncing (someone pushed); merging again")
    else:
        if in_the_way and in_the_way[-1]:
            _refuse_stale_lock(store, res, in_the_way, last_try=True)
        raise GitError(
            f"{res.upstream} kept moving: {PUSH_TRIES} pushes were rejected because others pushed first.",
            "Everything is merged and kept here; run ct sync again.",
        )
    plan = store.index(update=False).update()
    res.reindexed = plan.changed
    return res


def _back_off(attempt: int) -> None:
    """A short randomized wait before trying again, growing with each lost race (at most ~3.2 s)."""
    time.sleep(random.uniform(0.05, 0.1 * 2 ** min(attempt, 5)))


def _pull_round(store, res: SyncResult, drop_purged: bool = False) -> None:
    """One fetch and merge of the upstream, then what a merge may need: this clone's records moved
    onto a rewritten history, vectors made again in the store's size, forgets of other clones applied."""
    from .. import reapply
    from ..forget import leftovers, purge

    if reapply.load(store) is not None:  # a sync killed after it moved this clone: finish first
        res.notes.append("finished what the last ct sync left to do after moving this clone")
        _reapply(store, res)
    with store.lock():
        before, mark = _last_merged(store, res)
        _fetch(store, res.remote)
        upstream = f"refs/remotes/{res.upstream}"
        _refuse_disposable(store, res, upstream)
        record, change = None, ((), ())
        if store.sealer is not None and before and store.sealer.trust is not None:
            from . import keyclash

            if keyclash.made_since(store, before):  # epochs not pushed: a rewrite may beat them
                made, change = keyclash.unpushed(store, before)
                record = keyclash.without(store.sealer.trust, made)
        moved = purge.follow_rewritten_remote(
            store, res, before, drop_purged=drop_purged, record=record, change=change
        )
        head, embedder = store.git.head(), dict(store.config.embedder)
        if not moved and store.sealer is not None and _ref(store, upstream) is not None:
            from . import keyclash

            if keyclash.clashing(store, upstream):  # both changed the keys: the remote's win
                keyclash.settle(store, res, upstream)
                moved = True
        if not moved:
            purge.refuse_purged(store, res, f"refs/remotes/{res.upstream}", what="merge")
            purge.refuse_purged(store, res, "HEAD", what="push")
            from ..repair import journal_merge

            _refuse_forged(store, res)
            journal_merge(
                store
            )  # a kill inside git's merge is rolled back whole (memstore/repair.py)
            _merge(store, res)
        mark.unlink(missing_ok=True)  # merged or moved: what comes next is in the reapply file
    if moved:
        _reapply(store, res)
    _reembed_merged(store, res, head, embedder)
    _unconflict(store, res)
    applied = leftovers.apply_tombstones(store)
    if applied.commit:
        lines = sum(1 for r in applied.records if r.get("text") is not None)
        rest = len(applied.records) - lines
        said = [f"{lines} records forgotten on another clone"] if lines else []
        said += (
            [
                f"{rest} leftovers of forgotten records the merge kept (vectors, markers, topic summaries)"
            ]
            if rest
            else []
        )
        said = said or ["topic tree entries of records forgotten on another clone"]
        res.notes.append(f"removed {'; and '.join(said)} (commit {applied.commit[:10]})")


def _refuse_disposable(store, res: SyncResult, upstream: str) -> None:
    """The remote's branch holds files under .memstore/ (memstore never commits that folder): git
    would write them over this clone's own, which it ignores (an index, a pending sync), so
    anyone who can push could hand this clone its own search index or what a sync does next."""
    if _ref(store, upstream) is None:
        return
    held = store.git.run("ls-tree", "-r", "--name-only", upstream, "--", ".memstore").split()
    if held:
        more = f" (and {len(held) - 1} more)" if len(held) > 1 else ""
        raise GitError(
            f"Not merging {res.upstream}: it holds {held[0]}{more}, in memstore's disposable "
            "folder, which is never committed (git would write it over this clone's own).",
            f'Nothing was changed. Someone committed it ("git -C {store.root} log {res.upstream} '
            '-- .memstore"); a reader can remove it there ("git rm -r --cached .memstore", '
            "commit, push).",
        )


def _last_merged(store, res: SyncResult) -> tuple[str | None, Path]:
    """The remote's tip this clone last merged or followed, and the file that keeps it from before
    the fetch until the merge is done: a sync killed in between (the fetch had moved the remote-
    tracking ref) still sees the next time that the remote was rewritten, and follows it."""
    mark = git_dir(store.root) / "memstore-sync-from"
    now = _ref(store, f"refs/remotes/{res.upstream}")
    try:
        kept = mark.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        kept = ""
    if re.fullmatch(r"[0-9a-f]{40}", kept) and _ref(store, kept) is not None:
        return kept, mark
    if now:
        mark.write_text(now + "\n", encoding="ascii")
    return now, mark


def _reapply(store, res: SyncResult) -> None:
    """After moving onto the remote (memstore/reapply.py): this clone's change of readers first (a
    removal's new epoch before any record is sealed again), then its records, then its forgets;
    only then is the old history dropped. Each step is one commit and can run twice."""
    from .. import reapply
    from ..forget import purge
    from . import keyclash

    todo = reapply.load(store)
    if todo is None:
        return
    keyclash.redo(store, res, (todo["added"], todo["removed"]))
    if todo["records"]:
        n = len(todo["records"])
        w = store.write(
            todo["records"], f"Re-apply {n} records not on {res.upstream}", secrets="allow"
        )
        res.notes.append(f"re-applied {len(w.added)} records of this clone on {res.upstream}")
    here = {r.get("id") for r in purge.records_here(store)}
    forget = [i for i in todo["forget"] if i in here]
    if forget:
        store.forget(forget)
        res.notes.append(f"forgot again {len(forget)} record(s) this clone had forgotten")
    if todo.get("expire") is not None:  # only now: until here git's reflog kept what it left out
        purge.drop_old_objects(store, res, todo["expire"])
    reapply.clear(store)


def _outgoing(store, res: SyncResult, *where: str, added: bool = False) -> list[str] | None:
    """The files under `where` that HEAD changed (or `added`) since the upstream: what a push
    would carry; None before the first push (no upstream yet: everything)."""
    base = _ref(store, f"refs/remotes/{res.upstream}")
    if base is None:
        return None
    only = ["--diff-filter=A"] if added else []
    out = store.git.run("diff", "--name-only", *only, "-z", base, "HEAD", "--", *where)
    return [p for p in out.split("\0") if p]


def _unconflict(store, res: SyncResult) -> None:
    """Conflict markers a person's merge committed into a line file (the push guard's refusal
    says to run ct sync): removed in one commit before anything is pushed (upkeep/unconflict.py)."""
    from . import unconflict

    commit, files = unconflict.remove(store, _outgoing(store, res, *unconflict.LINE_FILES))
    if commit:
        res.notes.append(
            f"removed the git conflict markers a merge left in {', '.join(files)} (commit {commit[:10]})"
        )


def _reembed_merged(store, res: SyncResult, head: str | None, embedder: dict) -> None:
    """After the merge, vectors of one size only: when a clone re-embedded (memstore.toml changed)
    while this one wrote, the packs made with the other embedder are made again with the store's
    (one commit). Read: the packs the merge added and the packs this clone would push (a plain
    `git pull` may have made the merge), or every pack if this merge changed the embedder."""
    from .reembed import mismatched_days, reembed_days

    store.reload_config()
    if res.merge_commit and head is not None and store.config.embedder != embedder:
        days = mismatched_days(store)
    else:
        added = set(_outgoing(store, res, "packs", added=True) or ())
        if res.merge_commit and head is not None:
            merged = store.git.run(
                "diff", "--name-only", "--diff-filter=A", "-z", head, "HEAD", "--", "packs"
            )
            added.update(p for p in merged.split("\0") if p)
        packs = [store.root / p for p in sorted(added) if p.endswith(".is")]
        days = mismatched_days(store, packs) if packs else []
    if days:
        done = reembed_days(
            store, days, "merged with vectors of another size (a clone re-embedded meanwhile)"
        )
        res.notes.append(
            f"re-embedded {done['records']} records of {len(days)} days that came with vectors of another size "
            f"(commit {done['commit'][:10]})"
        )


def _untouched(err: GitError) -> GitError:
    """A sync error raised before anything here changed (a fetch, a merge git would not start or that
    was aborted): the write lock must leave the work tree alone, a person's edits included."""
    err.nothing_written = True
    return err


def _ref(store, ref: str) -> str | None:
    try:
        return store.git.run("rev-parse", "-q", "--verify", ref)
    except GitError:
        return None


def _branch(store) -> str:
    try:
        return store.git.run("symbolic-ref", "--short", "-q", "HEAD")
    except GitError:
        raise MemstoreError(
            f"{store.root}: HEAD is detached, so there is no branch to sync.",
            f'Check out your branch first: "git -C {store.root} checkout main". Nothing was changed.',
        ) from None


def _upstream(store, branch: str, set_upstream: str | None) -> tuple[str, str]:
    """(remote name, upstream ref such as "origin/main")."""
    git = store.git
    remotes = git.run("remote").split()
    if set_upstream is not None:
        if set_upstream not in remotes:
            # a URL or a path where a remote's name belongs: name it "origin" and point it there
            looks_like_url = any(c in set_upstream for c in "/:\\") or set_upstream.endswith(".git")
            name, url = ("origin", set_upstream) if looks_like_url else (set_upstream, "URL")
            raise MemstoreError(
                f"{store.root} has no remote named {set_upstream!r}"
                + (f" (it has: {', '.join(remotes)})." if remotes else ".")
                + (
                    " --set-upstream takes a remote's name, not its URL or path."
                    if looks_like_url
                    else ""
                ),
                f'Add it with "git -C {store.root} remote add {name} {url}", then run '
                f'"ct -C {store.root} sync --set-upstream {name}". Nothing was changed.',
            )
        return set_upstream, f"{set_upstream}/{branch}"
    try:
        remote = git.run("config", "--get", f"branch.{branch}.remote")
        merge_ref = git.run("config", "--get", f"branch.{branch}.merge")
    except GitError:
        if remotes:
            raise MemstoreError(
                f"Branch {branch} of {store.root} has no upstream, so ct sync does not know where to sync.",
                f'Run "ct -C {store.root} sync --set-upstream {remotes[0]}" to push {branch} to {remotes[0]} and '
                "track it from then on. Nothing was changed.",
            ) from None
        raise MemstoreError(
            f"{store.root} has no remote to sync with.",
            f'Add one ("git -C {store.root} remote add origin URL"), then run '
            f'"ct -C {store.root} sync --set-upstream origin". Nothing was changed.',
        ) from None
    short = merge_ref.removeprefix("refs/heads/")
    return remote, f"{remote}/{short}"


def _url(store, remote: str) -> str:
    try:
        return store.git.run("remote", "get-url", remote)
    except GitError:
        return remote


def _fetch(store, remote: str) -> None:
    try:
        store.git.run("fetch", "--quiet", remote)
    except GitError as exc:
        raise _untouched(
            GitError(
                f"Cannot reach remote {remote!r} ({_url(store, remote)}): {_git_words(exc)}",
                "Nothing was changed; your commits stay here. Check the address or the network and run ct sync again.",
            )
        ) from None


def _counts(store, upstream: str) -> tuple[int, int] | None:
    """(ahead, behind) of HEAD against `upstream`, or None when the remote branch does not exist yet."""
    try:
        store.git.run("rev-parse", "--verify", "-q", f"refs/remotes/{upstream}")
    except GitError:
        return None
    ahead, behind = store.git.run(
        "rev-list", "--left-right", "--count", f"HEAD...refs/remotes/{upstream}"
    ).split()
    return int(ahead), int(behind)


def _refuse_forged(store, res: SyncResult) -> None:
    """An encrypted store's remote adds lines its keys do not open: not merged (memstore/incoming.py)."""
    if store.sealer is None or _ref(store, f"refs/remotes/{res.upstream}") is None:
        return
    from ..incoming import forged_lines

    _refuse_other_key(store, res)
    bad = forged_lines(store, f"refs/remotes/{res.upstream}")
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise GitError(
            f"Not merging {res.upstream}: {bad[0]}{more}",
            "Nothing was changed. No reader of this store sealed that line: someone who can push "
            f'wrote it. To take it out: "git -C {store.root} merge {res.upstream}", then "git '
            'revert COMMIT" (or delete the line and commit), then "ct sync".',
        )


def _refuse_other_key(store, res: SyncResult) -> None:
    """The remote holds a key epoch this clone has too, with another key: two clones made it at
    once and a force push replaced this clone's, or someone who can push did. Said as that, not
    as forged lines (which is what each of the other side's lines would look like here)."""
    from ..forget.purge import _remote_sealer

    upstream = f"refs/remotes/{res.upstream}"
    if not store.git.run("diff", "--name-only", "HEAD", upstream, "--", "keys").strip():
        return  # the same key files on both sides
    try:
        remote = _remote_sealer(store, upstream)
    except MemstoreError:
        return
    changed = [e for e, why in remote.doubtful.items() if "key changed" in why]
    if changed:
        e = max(changed)
        raise GitError(
            f"Not merging {res.upstream}: its key epoch {e} is not the one this clone has (two "
            "clones made that epoch at once and a force push replaced this clone's, or someone "
            "who can push replaced it).",
            "Nothing was changed. See who committed it (git log "
            f"{res.upstream} -- keys/epoch-{e:04d}.age). If a reader of this store made it, move "
            f'onto it: "git -C {store.root} reset --hard {res.upstream}" (this clone\'s unpushed '
            'commits are left out: add their records again), then "ct keys trust '
            f'{e}".',
        )


def _merge(store, res: SyncResult) -> None:
    counts = _counts(store, res.upstream)
    if counts is None or counts[1] == 0:
        return
    ahead, behind = counts
    git = store.git
    before = git.head()
    msg = f"Sync: merge {behind} commit{'s' if behind != 1 else ''} from {res.upstream}"
    try:
        # No rename detection: packs are never renamed, but packs of one day can be byte-similar
        # (same size, many zero bytes), and git pairs a pack one side deleted (consolidated) with one
        # the other side added as a "rename" that then conflicts. git 2.39's ort strategy still
        # detects renames under -X no-renames; the recursive strategy honours it.
        git.run(
            "merge",
            "--no-edit",
            "-s",
            "recursive",
            "-X",
            "no-renames",
            "-m",
            msg,
            f"refs/remotes/{res.upstream}",
            env={IN_MEMSTORE_ENV: "1"},
        )
    except GitError as exc:
        _refuse_local_changes(store, res, exc)
        conflicted = git.run("diff", "--name-only", "--diff-filter=U").split()
        if conflicted == ["keys/recipients"] and _recipients_from_keys(store, res):
            conflicted = None  # resolved and committed
        if conflicted is not None:
            _undo_and_refuse(store, res, exc, conflicted)
    res.merged += behind

    res.merge_commit = git.head()
    res.fast_forward = ahead == 0 and res.merge_commit != before
    how = "fast-forward" if res.fast_forward else f"merge commit {res.merge_commit[:10]}"
    res.notes.append(
        f"{res.upstream} had {behind} new commit{'s' if behind != 1 else ''}: merged ({how})"
    )


def _undo_and_refuse(store, res: SyncResult, exc: GitError, conflicted: list[str]) -> None:
    try:
        store.git.run("merge", "--abort")
    except GitError:
        pass
    raise _untouched(
        GitError(
            f"Merging {res.upstream} into {res.branch} conflicts in {', '.join(conflicted) or '(see git)'}: "
            f"{_git_words(exc) if not conflicted else 'these are not files memstore merges by itself'}.",
            f"The merge was undone; nothing was changed. Resolve it by hand with "
            f'"git -C {store.root} merge {res.upstream}", then run ct sync again.',
        )
    ) from None


def _recipients_from_keys(store, res: SyncResult) -> bool:
    """A merge that conflicts only in the plain keys/recipients (an edit pushed beside this clone's
    key change; anyone who can push can make one): the list is written again from what the
    newest key file, merged cleanly, names inside it (the readers new keys are wrapped to anyway),
    and the merge is committed. False (the merge is undone as any conflict) when it names none."""
    from .. import keyring
    from ..keytrust import Record

    try:
        opened = keyring.open_store(store.root, record=Record.load(git_dir(store.root)))
    except MemstoreError:
        return False
    said = opened.readers.get(opened.newest) if opened.newest in opened.keys else None
    if not said or opened.doubtful:
        return False
    keyring.write_recipients(store.root / keyring.RECIPIENTS, said)
    git = store.git
    git.run("add", "--", keyring.RECIPIENTS)
    git.run("commit", "-q", "--no-edit", env={IN_MEMSTORE_ENV: "1"})
    res.notes.append(
        f"{keyring.RECIPIENTS} conflicted: written again from the readers key epoch "
        f"{opened.newest}'s file names ({len(said)})"
    )
    return True


def _refuse_local_changes(store, res: SyncResult, exc: GitError) -> None:
    """git would not start the merge because a file it changes has uncommitted edits here (say to
    memstore.toml): no conflict, nothing to resolve; commit or stash them, then sync."""
    if "would be overwritten by merge" not in exc.message:
        return
    lines = exc.message.splitlines()
    files = [ln.strip() for ln in lines if ln.startswith(("\t", "        ")) and ln.strip()]
    untracked = "untracked working tree files" in exc.message
    what = "untracked files" if untracked else "uncommitted changes to"
    raise _untouched(
        GitError(
            f"{store.root}: the merge of {res.upstream} did not start: your {what} "
            f"{', '.join(files) or '(see git status)'} would be overwritten by it. This is not a conflict.",
            f'Commit them ("git -C {store.root} commit -am MESSAGE") or put them aside '
            f'("git -C {store.root} stash{" -u" if untracked else ""}", then "git -C {store.root} stash pop" after), '
            "and run ct sync again. Nothing was changed.",
        )
    ) from None


def _push(store, res: SyncResult, first: bool, in_the_way: list[str]) -> bool:
    """Push HEAD: True when pushed (or nothing to push), False when the remote moved meanwhile (or
    a push there held the ref's lock); a lock a dead git left there stops the sync."""
    from ..forget import purge
    from ..repair import journal_push

    purge.refuse_purged(store, res, "HEAD", what="push")
    counts = _counts(store, res.upstream)
    ahead = counts[0] if counts is not None else int(store.git.run("rev-list", "--count", "HEAD"))
    if ahead == 0 and not first:
        return True
    _refuse_damage(store, res)
    args = [
        "push",
        "--quiet",
        *(["-u"] if first else []),
        res.remote,
        f"HEAD:refs/heads/{_remote_branch(res)}",
    ]
    remote_dir = _local_git_dir(store, res.remote)
    if remote_dir is not None:  # a kill now can leave its receive-pack's lock there (repair.py)
        journal_push(store, remote_dir, f"refs/heads/{_remote_branch(res)}", store.git.head())
    try:
        store.git.run(
            *args, env={IN_MEMSTORE_ENV: "1"}
        )  # the pre-push guard: sync applied tombstones itself
    except GitError as exc:
        words = _git_words(exc)
        lock = LOCK_IN_THE_WAY.search(exc.message)
        if lock or any(k in words for k in RACE_WORDS):
            in_the_way.append(lock.group(1) if lock else "")
            if lock:
                _refuse_stale_lock(store, res, in_the_way)
            return False
        raise GitError(
            f"Cannot push to {res.remote!r} ({_url(store, res.remote)}): {words}",
            "Your commits (and any merge) are kept here; run ct sync again when the remote is reachable.",
        ) from None
    res.pushed += ahead
    if first:
        res.notes.append(f"{res.branch} now tracks {res.upstream}")
        _point_remote_head(store, res)
    return True


def _refuse_damage(store, res: SyncResult) -> None:
    """The pre-push guard's check of what this push carries (upkeep/guard.py), run here because
    sync pushes past the hook (it applied the tombstones itself): a file memstore cannot read, or
    a conflict marker left after the repairs above, never reaches the remote and every clone."""
    from ..gitrepo import RevReader
    from .guard import check_tip

    reader = RevReader(git_dir(store.root))
    problems = check_tip(reader, _ref(store, f"refs/remotes/{res.upstream}"), store.git.head())
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise GitError(
            f"Not pushing to {res.remote!r}: {problems[0]}{more}",
            'Nothing was pushed; your commits (and any merge) are kept here. "ct fsck" names '
            "every problem and what fixes it.",
        )


def _local_git_dir(store, remote: str) -> Path | None:
    """The git folder of `remote` when it is a repository on this machine (a path or file:// URL)."""
    url = _url(store, remote)
    if "://" in url and not url.startswith("file://"):
        return None
    path = Path(url.removeprefix("file://"))
    if not path.is_absolute():
        if ":" in url.split("/", 1)[0]:
            return None  # host:path, git's scp-like address
        path = store.root / path
    if (path / ".git").exists():
        return git_dir(path)
    if (path / "HEAD").is_file() and (path / "refs").is_dir():
        return path  # a bare repository
    return None


def _refuse_stale_lock(store, res: SyncResult, in_the_way: list[str], last_try=False) -> None:
    """Stop the sync when the remote lock that rejected the last push is a dead git's leftover, not
    a push holding it (milliseconds): in a remote on this machine, one STALE_LOCK_S old; elsewhere,
    the same lock in the way of STALE_LOCK_ROUNDS pushes in a row (or of the last try). Nothing in
    the remote is removed here: a lock this clone's killed sync left is removed by the rollback of
    its journal (memstore/repair.py), which ran before this push; this one is someone else's."""
    lock = in_the_way[-1]
    rounds = 0
    for seen in reversed(in_the_way):
        if seen != lock:
            break
        rounds += 1
    url = _url(store, res.remote)
    if _local_git_dir(store, res.remote) is not None:
        path = os.path.normpath(lock)
        try:
            age = time.time() - os.stat(path).st_mtime
        except OSError:
            return  # gone: a push held it for a moment
        if age < STALE_LOCK_S and not last_try:
            return
        since = f"it is {age:.0f} s old"
        fix = (
            f'If no git process is writing to {url} now, remove it ("rm {path}") '
            "and run ct sync again."
        )
    else:
        if rounds < STALE_LOCK_ROUNDS and not last_try:
            return
        path = lock
        since = f"it was in the way of {rounds} push{'es' if rounds != 1 else ''} in a row"
        fix = (
            f"On the server, if no git process is running in that repository, remove {path} "
            "there, then run ct sync again."
        )
    raise GitError(
        f"Cannot push to {res.remote!r} ({url}): the lock file {path} is in the way. A push holds "
        f"it for a moment only, and {since}: a git that died there (a killed push) left it.",
        f"Nothing was pushed; your commits (and any merge) are kept here. {fix}",
    )


def _point_remote_head(store, res: SyncResult) -> None:
    """After the first push, a plain `git clone` of the remote must check something out. A bare
    repository made by `git init --bare` names `master` (or init.defaultBranch) as its HEAD whatever
    was pushed; when that branch does not exist there, a remote on this machine is pointed at the
    pushed branch, and for any other the note says what to run on the server."""
    branch = _remote_branch(res)
    try:
        named = store.git.run("ls-remote", "--symref", res.remote, "HEAD")
    except GitError:
        return
    if named.strip():
        return  # HEAD resolves: a clone checks it out
    url = _url(store, res.remote)
    local = Path(url.removeprefix("file://"))
    if not (local.is_absolute() or url.startswith(".")) or not local.is_dir():
        res.notes.append(
            f"{res.remote}'s HEAD names a branch it does not have, so a plain git clone of it checks out nothing: "
            f'on the server run "git symbolic-ref HEAD refs/heads/{branch}" in the repository '
            "(or set its default branch in the host's settings)"
        )
        return
    store.git.set_head_of(store.root / local if not local.is_absolute() else local, branch)
    res.notes.append(
        f"{res.remote}'s HEAD now names {branch}, so a plain git clone of it checks it out"
    )


def _remote_branch(res: SyncResult) -> str:
    return res.upstream.split("/", 1)[1] if "/" in res.upstream else res.branch


def _git_words(exc: GitError) -> str:
    """git's own explanation, without our "git X failed in ROOT:" prefix, on one line."""
    text = exc.message.split(": ", 1)[1] if ": " in exc.message else exc.message
    lines = [
        ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("hint:")
    ]
    return " ".join(lines)[:400]
