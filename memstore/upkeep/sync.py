"""`ct sync`: merge the remote's memory into this clone (never rebase), reindex, and push.

Git moves the data; memstore's files are laid out so that a plain `git merge` never conflicts:
day logs, tree ops and markers merge by union (.gitattributes), packs are named by their bytes. So sync
is `git pull` + reindex + `git push` with retries, and a plain `git pull` does the same merge.
Sync holds the write lock the whole time, so no local write lands between the merge and the push.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import GitError, MemstoreError
from ..gitrepo import IN_MEMSTORE_ENV

PUSH_TRIES = 3


@dataclass
class SyncResult:
    remote: str
    branch: str
    upstream: str
    merged: int = 0  # commits that came from the remote
    merge_commit: str | None = None
    fast_forward: bool = False
    pushed: int = 0  # commits the remote did not have
    reindexed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "remote": self.remote,
            "branch": self.branch,
            "upstream": self.upstream,
            "merged": self.merged,
            "merge_commit": self.merge_commit,
            "fast_forward": self.fast_forward,
            "pushed": self.pushed,
            "reindexed": self.reindexed,
            "notes": self.notes,
        }


def sync(store, push: bool = True, set_upstream: str | None = None) -> SyncResult:
    """Fetch, merge the upstream branch, bring the index up to date, push what the remote lacks."""
    from .. import forget as forgetting
    from . import hooks

    with store.lock():  # journalled: a crashed writer's leftovers are rolled back before the merge
        notes = list(store.recovery_notes)
        if any(state == "missing" or state.startswith("outdated") for state in hooks.status(store).values()):
            hooks.install(store)  # an optimisation only: the index is brought up to date below anyway
            notes.append("installed the git hooks in this clone")
        branch = _branch(store)
        remote, upstream = _upstream(store, branch, set_upstream)
        res = SyncResult(remote=remote, branch=branch, upstream=upstream, notes=notes)
        before = _ref(store, f"refs/remotes/{upstream}")
        forgetting.refuse_unpublished_purge(store, res)
        _fetch(store, remote)
        local = forgetting.follow_rewritten_remote(store, res, before)
        head, embedder = store.git.head(), dict(store.config.embedder)
        if local is None:
            from ..repair import journal_merge

            journal_merge(store)  # a kill inside git's merge is rolled back whole (memstore/repair.py)
            _merge(store, res)
    if local:  # this clone's own records, moved onto the rewritten history (one commit)
        w = store.write(local, f"Re-apply {len(local)} records not on the rewritten {upstream}", secrets="allow")
        res.notes.append(f"re-applied {len(w.added)} records of this clone on the rewritten {upstream}")
    _reembed_merged(store, res, head, embedder)
    applied = forgetting.apply_tombstones(store)
    if applied.commit:
        lines = sum(1 for r in applied.records if r.get("text") is not None)
        rest = len(applied.records) - lines
        said = [f"{lines} records forgotten on another clone"] if lines else []
        said += (
            [f"{rest} leftovers of forgotten records the merge kept (vectors, markers, topic summaries)"]
            if rest
            else []
        )
        said = said or ["topic tree entries of records forgotten on another clone"]
        res.notes.append(f"removed {'; and '.join(said)} (commit {applied.commit[:10]})")
    if push:
        with store.lock():
            _push(store, res, first=set_upstream is not None)
    plan = store.index(update=False).update()
    res.reindexed = plan.changed
    return res


def _reembed_merged(store, res: SyncResult, head: str | None, embedder: dict) -> None:
    """After the merge, vectors of one size only: when a clone re-embedded (memstore.toml changed)
    while this one wrote, the packs made with the other embedder are made again with the store's
    (one commit). Only the packs the merge added are read, or every pack if the embedder changed."""
    from .reembed import mismatched_days, reembed_days

    if not res.merge_commit or head is None:
        return
    store.reload_config()
    if store.config.embedder == embedder:
        added = store.git.run("diff", "--name-only", "--diff-filter=A", "-z", head, "HEAD", "--", "packs")
        packs = [store.root / p for p in added.split("\0") if p.endswith(".is")]
        days = mismatched_days(store, packs) if packs else []
    else:
        days = mismatched_days(store)
    if days:
        done = reembed_days(store, days, "merged with vectors of another size (a clone re-embedded meanwhile)")
        res.notes.append(
            f"re-embedded {done['records']} records of {len(days)} days that came with vectors of another size "
            f"(commit {done['commit'][:10]})"
        )


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
            raise MemstoreError(
                f"{store.root} has no remote named {set_upstream!r}"
                + (f" (it has: {', '.join(remotes)})." if remotes else "."),
                f'Add it with "git -C {store.root} remote add {set_upstream} URL". Nothing was changed.',
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
        raise GitError(
            f"Cannot reach remote {remote!r} ({_url(store, remote)}): {_git_words(exc)}",
            "Nothing was changed; your commits stay here. Check the address or the network and run ct sync again.",
        ) from None


def _counts(store, upstream: str) -> tuple[int, int] | None:
    """(ahead, behind) of HEAD against `upstream`, or None when the remote branch does not exist yet."""
    try:
        store.git.run("rev-parse", "--verify", "-q", f"refs/remotes/{upstream}")
    except GitError:
        return None
    ahead, behind = store.git.run("rev-list", "--left-right", "--count", f"HEAD...refs/remotes/{upstream}").split()
    return int(ahead), int(behind)


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
        conflicted = git.run("diff", "--name-only", "--diff-filter=U").split()
        try:
            git.run("merge", "--abort")
        except GitError:
            pass
        raise GitError(
            f"Merging {res.upstream} into {res.branch} conflicts in {', '.join(conflicted) or '(see git)'}: "
            f"{_git_words(exc) if not conflicted else 'these are not files memstore merges by itself'}.",
            f"The merge was undone; nothing was changed. Resolve it by hand with "
            f'"git -C {store.root} merge {res.upstream}", then run ct sync again.',
        ) from None
    res.merged += behind
    res.merge_commit = git.head()
    res.fast_forward = ahead == 0 and res.merge_commit != before
    how = "fast-forward" if res.fast_forward else f"merge commit {res.merge_commit[:10]}"
    res.notes.append(f"{res.upstream} had {behind} new commit{'s' if behind != 1 else ''}: merged ({how})")


def _push(store, res: SyncResult, first: bool) -> None:
    """Push HEAD; if the remote moved meanwhile, fetch and merge again (a few times), then give up clearly."""
    for attempt in range(PUSH_TRIES):
        counts = _counts(store, res.upstream)
        ahead = counts[0] if counts is not None else int(store.git.run("rev-list", "--count", "HEAD"))
        if ahead == 0 and not first:
            return
        args = ["push", "--quiet", *(["-u"] if first else []), res.remote, f"HEAD:refs/heads/{_remote_branch(res)}"]
        try:
            store.git.run(*args)
            res.pushed += ahead
            if first:
                res.notes.append(f"{res.branch} now tracks {res.upstream}")
            return
        except GitError as exc:
            words = _git_words(exc)
            if not any(k in words for k in ("fetch first", "non-fast-forward", "failed to update ref", "stale info")):
                raise GitError(
                    f"Cannot push to {res.remote!r} ({_url(store, res.remote)}): {words}",
                    "Your commits (and any merge) are kept here; run ct sync again when the remote is reachable.",
                ) from None
            res.notes.append(f"{res.upstream} moved while syncing (someone pushed); merging again")
            _fetch(store, res.remote)
            from ..repair import journal_merge

            journal_merge(store)
            _merge(store, res)
            first = first and _counts(store, res.upstream) is None
    raise GitError(
        f"{res.upstream} kept moving: {PUSH_TRIES} pushes were rejected because others pushed first.",
        "Everything is merged and kept here; run ct sync again.",
    )


def _remote_branch(res: SyncResult) -> str:
    return res.upstream.split("/", 1)[1] if "/" in res.upstream else res.branch


def _git_words(exc: GitError) -> str:
    """git's own explanation, without our "git X failed in ROOT:" prefix, on one line."""
    text = exc.message.split(": ", 1)[1] if ": " in exc.message else exc.message
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("hint:")]
    return " ".join(lines)[:400]
