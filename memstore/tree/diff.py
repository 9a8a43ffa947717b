"""Semantic diff of two versions of the topic tree: which topics were added, merged, moved, renamed, archived.

`git diff tree/` shows the ops appended; this explains their effect. A version is the op log at a
git revision replayed (tree.json at a format-1 revision), or the working files, so `ct diff HEAD~1`
explains what the last reorganize did.
"""

from __future__ import annotations


from ..errors import UsageError
from ..format import tree as treefmt
from ..format.tree import Tree
from ..results import TreeDiff

WORKING = None  # the tree in the working folder


def load_version(store, rev: str | None) -> Tree:
    """The tree at `rev` (a commit-ish) or in the working folder; an empty tree where there was none."""
    if rev is WORKING:
        return treefmt.read(store.root)
    from ..errors import GitError

    try:
        store.git.run("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    except GitError:
        raise UsageError(
            f"{rev!r} is not a revision of {store.root}", 'See "ct log" for revisions.'
        ) from None
    shards = store.git.files_at(rev, treefmt.DIR)
    if shards:
        return treefmt.from_files(store.root, shards)
    text = store.git.show(rev, treefmt.FILENAME)
    if text is None or not text.strip():
        return Tree()
    return treefmt.parse(text, f"{rev}:{treefmt.FILENAME}")


def _name(tree: Tree, tid: str | None) -> str:
    if tid is None:
        return "(root)"
    t = tree.topics.get(tid)
    return t.name if t else tid


def diff_trees(old: Tree, new: Tree, old_label: str = "old", new_label: str = "new") -> TreeDiff:
    d = TreeDiff(old_label, new_label)
    new_owner = new.topic_of()
    for tid, t in sorted(old.topics.items(), key=lambda p: (p[1].created, p[0])):
        if tid in new.topics:
            n = new.topics[tid]
            if n.name != t.name:
                d.renamed.append({"id": tid, "from": t.name, "to": n.name})
            if n.parent != t.parent:
                d.moved.append(
                    {
                        "id": tid,
                        "name": n.name,
                        "from": t.parent,
                        "to": n.parent,
                        "from_name": _name(old, t.parent),
                        "to_name": _name(new, n.parent),
                    }
                )
            added = len(set(n.records) - set(t.records))
            if added:
                d.grew.append({"id": tid, "name": n.name, "added": added})
            continue
        tomb = new.gone.get(tid, {})
        if tomb.get("why") == "merged" or not tomb:
            # (a dissolved group is reported below, not as a merge)
            into = tomb.get("into")
            if into is None:
                # No tombstone: infer where most of its records went.
                owners = [new_owner[r] for r in t.records if r in new_owner]
                into = max(set(owners), key=owners.count) if owners else None
            if into is not None:
                final = new.resolve(into)
                entry = {
                    "id": tid,
                    "name": t.name,
                    "records": len(t.records),
                    "into": into,
                    "into_name": _name(new, into) if into in new.topics else _name(old, into),
                }
                if final != into:
                    entry["now_in"] = final  # the target was itself merged or archived afterwards
                d.merged.append(entry)
                continue
        if tomb.get("why") == "regrouped":
            d.removed.append(
                {"id": tid, "name": t.name, "records": len(t.records), "why": "group dissolved"}
            )
            continue
        if tomb.get("why") == "archived":
            d.archived_topics.append({"id": tid, "name": t.name, "records": len(t.records)})
        else:
            d.removed.append({"id": tid, "name": t.name, "records": len(t.records)})
    for tid, n in sorted(new.topics.items(), key=lambda p: (p[1].created, p[0])):
        if tid not in old.topics:
            d.added.append(
                {
                    "id": tid,
                    "name": n.name,
                    "records": len(n.records),
                    "parent": n.parent,
                    "parent_name": _name(new, n.parent),
                }
            )
    archived_in_gone = sum(a["records"] for a in d.archived_topics)
    d.archived_records = max(0, len(set(new.archived) - set(old.archived)) - archived_in_gone)
    if (
        old.current != new.current
        and old.current is not None
        and new.resolve(old.current) != new.current
    ):
        d.current = (old.current, new.current)
    return d


def tree_diff(store, rev_a: str | None = None, rev_b: str | None = None) -> TreeDiff:
    """`ct diff`: no revision = HEAD vs the working file; one = REV vs the working file; two = A vs B."""
    if rev_a is None:
        old_rev, new_rev = ("HEAD" if store.git.head() else None), WORKING
    else:
        old_rev, new_rev = rev_a, rev_b
    if old_rev is not None and old_rev.endswith("^") and _is_root_commit(store, old_rev[:-1]):
        old_rev = None  # the parent of the first commit: everything was added
    old = load_version(store, old_rev) if old_rev is not None else Tree()
    new = load_version(store, new_rev)
    d = diff_trees(old, new, old_rev or "(empty)", new_rev or "working tree")
    d.old_tree, d.new_tree = old, new
    return d


def _is_root_commit(store, rev: str) -> bool:
    from ..errors import GitError

    try:
        line = store.git.run("rev-list", "--parents", "-n", "1", f"{rev}^{{commit}}").strip()
    except GitError:
        return False
    return len(line.split()) == 1
