"""Bounded fan-out: when a topic (or the root) has more than `max_children` child topics, group them.

ChatIndex keeps its tree shallow by splitting crowded nodes; TRACE 1.0.8 dropped that and its trees
grew one level per turn. Here crowded children are clustered by meaning (average-link over topic
centroids, ties broken by age) into at most `max_children` groups of at most `max_children`
members; each group with more than one member becomes a new container topic. Depth then grows
with the logarithm of the number of topics, not with the length of the conversation.
"""

from __future__ import annotations

import numpy as np

from ..format.tree import LazyTree, Topic, Tree, new_topic_id
from ..progress import tick
from . import naming
from .topicdata import NEWEST, RecordData, stacked, topic_vector

GROUP = "Related topics"  # a group's name until its members name it, and where they cannot
GROUP_TEXTS = 24  # a group's name is drawn from at most this many of the records under it


class Kids:
    """The tree's children map, kept up to date as topics are added and moved, so a write's
    regrouping never rescans the whole tree (one pass builds it)."""

    def __init__(self, tree: Tree):
        self.tree = tree
        # A tree read in part (a one-record write's) gets each parent's list when it is first
        # asked for: the children it had when this map was made (by their stored order) that are
        # still there. Every add and move goes through here and reads the list first, so a list
        # read later holds exactly what the whole map made at the start would hold by then.
        self.lazy = isinstance(tree, LazyTree)
        self.map: dict[str | None, list[Topic]] = {} if self.lazy else tree.children_map()
        self._newest: dict[str | None, list[Topic]] = {}  # see `newest`
        self._versions: dict[str | None, int] = {}  # see `version`

    def _list(self, tid: str | None) -> list[Topic]:
        got = self.map.get(tid)
        if got is None:
            got = self.map[tid] = []
            if self.lazy:
                orig = self.tree.topics.orig
                got += sorted(
                    self.tree.stored_children(tid), key=lambda t: (orig[t.id].created, t.id)
                )
        return got

    def of(self, tid: str | None) -> list[Topic]:
        return self._list(tid) if self.lazy else self.map.get(tid, [])

    def newest(self, tid: str | None) -> list[Topic]:
        """The children of `tid`, newest first (by last_active, then id: topicdata.NEWEST), kept
        between calls: a group's vector samples its newest topics, and a big write asks for the
        vectors of the current topic's ancestors at every turn that branches."""
        got = self._newest.get(tid)
        if got is None:
            got = self._newest[tid] = sorted(self.of(tid), key=NEWEST, reverse=True)
        return got

    def version(self, tid: str | None) -> int:
        """A number that changes whenever the children of `tid` change, their newest-first order
        (`newest`), or whether one of them holds records (topicdata.GroupMemo)."""
        return self._versions.get(tid, 0)

    def changed(self, tid: str | None) -> None:
        self._versions[tid] = self._versions.get(tid, 0) + 1

    def touched(self, t: Topic) -> None:
        """`t.last_active` moved later (a record joined it): its place among its siblings."""
        if len(t.records) == 1:
            self.changed(t.parent)  # (its first record: it is sampled by the groups above now)
        order = self._newest.get(t.parent)
        if order is None:  # (no order was read since the list last changed: none to keep)
            return
        at = next((i for i, k in enumerate(order) if k is t), None)
        if at is None:
            del self._newest[t.parent]
            self.changed(t.parent)
            return
        del order[at]
        key, i = NEWEST(t), 0
        while i < len(order) and NEWEST(order[i]) > key:
            i += 1
        order.insert(i, t)
        if i != at:
            self.changed(t.parent)

    def add(self, t: Topic) -> None:
        here = self._list(t.parent)
        self._newest.pop(t.parent, None)
        self.changed(t.parent)
        if not any(k is t for k in here):
            here.append(t)

    def move(self, t: Topic, parent: str | None) -> None:
        old = self._list(t.parent)
        at = next((i for i, k in enumerate(old) if k is t), None)
        if (
            at is not None
        ):  # (by identity: comparing Topics field by field cost a regrouping dearly)
            del old[at]
        self._newest.pop(t.parent, None)
        self.changed(t.parent)
        self._list(parent)
        t.parent = parent
        self.add(t)

    def post_order(self) -> list[str]:
        """Every topic id under the root, each after the topics under it, children in order."""
        out: list[str] = []
        stack: list[tuple[str | None, bool]] = [(None, False)]
        while stack:
            tid, done = stack.pop()
            if done:
                out.append(tid)
                continue
            stack.append((tid, True))
            stack += [(k.id, False) for k in reversed(self.of(tid))]
        return out[:-1]  # (the root last)

    def sample_records(self, tid: str, limit: int) -> list[str]:
        """Up to `limit` record ids under `tid`, breadth-first: a bounded look into a big group."""
        out: list[str] = []
        queue = [tid]
        steps = 0
        while queue and len(out) < limit and steps < 4 * limit:
            here = queue.pop(0)
            steps += 1
            t = self.tree.topics.get(here)
            if t is not None and t.records:
                out += t.records[-max(2, limit // 4) :]
            queue += [k.id for k in self.of(here)]
        return out[:limit]


def group_name(
    tree: Tree, members: list[Topic], data: RecordData, kids: Kids | None = None
) -> tuple[str, str]:
    texts = group_texts(tree, members, data, kids)
    return naming.offline_name(texts, data.rarity, fallback=GROUP), group_summary(members)


def group_texts(
    tree: Tree,
    members: list[Topic],
    data: RecordData,
    kids: Kids | None = None,
    stand_ins: list | None = None,
) -> list[str]:
    """The texts a group is named from: its members' latest records (or their names: the ids of
    the members whose name stood in are added to `stand_ins`)."""
    kids = kids or Kids(tree)
    texts: list[str] = []
    per = max(2, GROUP_TEXTS // max(len(members), 1))
    for m in members:
        recs = m.records[-per:] if m.records else kids.sample_records(m.id, per)
        got = data.texts(recs, limit=per)[0]
        if not got and stand_ins is not None:
            stand_ins.append(m.id)
        texts += got or [m.name]
    return texts


def group_summary(members: list[Topic]) -> str:
    return f"{len(members)} related topics: " + "; ".join(m.name for m in members)


def _sim(a: np.ndarray | None, b: np.ndarray | None) -> float:
    return float(a @ b) if a is not None and b is not None else -1.0


def _cosines(rows: list, cols: list) -> np.ndarray:
    """The matrix of `_sim` between two lists of vectors (None: -1 against everything), in one
    product: a crowded parent's regrouping compares every pair of its children at each step."""
    (a, a_none), (b, b_none) = stacked(rows), stacked(cols)
    if a.shape[1] != b.shape[1]:  # (only where every vector of one side is missing)
        return np.full((len(rows), len(cols)), -1.0)
    out = (a @ b.T).astype(np.float64)
    out[a_none, :] = -1.0
    out[:, b_none] = -1.0
    return out


class _Cosines:
    """`_cosines(rows, cols)` kept while rows are dropped and columns replaced: the same stacked
    matrices `_cosines` would stack from the lists as they are then, so the same product, bit for
    bit (a changed width, a vector where all were missing, is stacked again from the lists)."""

    def __init__(self, rows: list, cols: list):
        self.rows, self.cols = list(rows), list(cols)
        self._stack()

    def _stack(self) -> None:
        (self.a, self.a_none), (self.b, self.b_none) = stacked(self.rows), stacked(self.cols)

    def drop_row(self, i: int) -> None:
        del self.rows[i]
        self.a = np.delete(self.a, i, axis=0)
        self.a_none = np.delete(self.a_none, i)

    def set_col(self, j: int, v) -> None:
        self.cols[j] = v
        if v is None:
            self.b[j], self.b_none[j] = 0.0, True
        elif v.shape == self.b.shape[1:]:
            self.b[j], self.b_none[j] = v, False
        else:
            self._stack()

    def matrix(self) -> np.ndarray:
        a, b = self.a, self.b
        if a.shape[1] != b.shape[1] or self.a_none.all() or self.b_none.all():
            return _cosines(self.rows, self.cols)  # (a side without vectors: stacked apart)
        out = (a @ b.T).astype(np.float64)
        out[self.a_none, :] = -1.0
        out[:, self.b_none] = -1.0
        return out


_NONE = object()  # rebalance: no parent is crowded
SAME_PARENT_STEPS = True  # rebalance's step 1 kept on one parent (off: each step anew, as before)


def _best_pair(vs: list, pick) -> tuple[int, int]:
    """(i, j), i < j: the pair of `vs` whose `_sim` is `pick` (np.max or np.min), the first such
    pair in (i, j) order on a tie."""
    sims = _cosines(vs, vs)
    upper = np.triu(np.ones(sims.shape, bool), 1)
    best = pick(sims[upper])
    i, j = np.argwhere(upper & (sims == best))[0]
    return int(i), int(j)


def _name_group(tree: Tree, data: RecordData, members: list[Topic], llm, kids: Kids):
    """(name, summary, named_by) of a group of these members."""
    name, summary = group_name(tree, members, data, kids)
    named_by = "offline"
    if llm is not None:
        label = naming.llm_name(
            llm, [f"{m.name}: {m.summary}" for m in members], ["topic"] * len(members)
        )
        if label:
            name, named_by = label, "llm"
    return name, summary, named_by


def _make_group(
    tree: Tree,
    data: RecordData,
    parent: str | None,
    members: list[Topic],
    llm,
    kids: Kids,
    unnamed: dict | None = None,
) -> str:
    """A new group of `members` under `parent`; named now, or later when `unnamed` collects it."""
    if unnamed is None:
        name, summary, named_by = _name_group(tree, data, members, llm, kids)
    else:
        name, summary, named_by = GROUP, "", "offline"
    gid = new_topic_id()
    group = Topic(
        id=gid,
        name=name,
        summary=summary,
        parent=parent,
        records=[],
        created=min(m.created for m in members),
        last_active=max(m.last_active for m in members),
        named_by=named_by,
    )
    tree.topics[gid] = group
    kids.add(group)
    for m in members:
        kids.move(m, gid)
    if unnamed is not None:
        unnamed[gid] = True
    return gid


def _halves(kids: list[Topic], vec: dict) -> tuple[list[Topic], list[Topic]]:
    """Split topics into two similar-sized halves around the two least similar of them."""
    i, j = _best_pair([vec[k.id] for k in kids], np.min)
    left, right = [kids[i]], [kids[j]]
    cap = (len(kids) + 1) // 2
    for k in sorted(
        (k for n, k in enumerate(kids) if n not in (i, j)), key=lambda k: (k.created, k.id)
    ):
        prefer_left = _sim(vec[k.id], vec[left[0].id]) >= _sim(vec[k.id], vec[right[0].id])
        if (prefer_left and len(left) < cap) or len(right) >= cap:
            left.append(k)
        else:
            right.append(k)
    return left, right


def rebalance(
    tree: Tree,
    data: RecordData,
    max_children: int,
    llm=None,
    join: float = -1.0,
    progress=None,
    parents=None,
    kids: Kids | None = None,
    cache: dict | None = None,
    unnamed: dict | None = None,
) -> list[str]:
    """Fix every crowded topic (more than `max_children` children) the way a B-tree does.

    `parents` (topic ids, None for the root) limits the fix to the parents a write gave children
    to, and to the parents each step crowds in turn: a write's regrouping then costs what the
    write changed, not what the tree holds (`ct reorganize` passes none and checks every topic).
    Each step lowers the crowded parent's child count by at least one:
    1. a topic moves into the most similar group beside it when it is at least `join` similar
       (or when it is the only loose topic); a group that overflows by it is fixed next, so
       inserts descend;
    2. under the root or a real topic, the most similar loose topics (a seed pair plus the
       closest, up to half the limit) become a new group;
    3. otherwise the parent is split in two: a group gets a sibling (its parent is fixed next if
       that crowds it), the root or a real topic gets its children in two groups (the only step
       that deepens the tree). Depth therefore grows with the logarithm of the topic count.
    Groups are named once the fix is done, from the members they ended with: a big write splits
    a group many times, and naming it at each split was most of its regrouping time. A caller that
    passes `unnamed` (a dict it keeps) names them itself, later (`name_groups`).
    Returns the ids of the groups made.
    """
    if max_children < 2:
        return []
    kids = kids or Kids(tree)
    made: list[str] = []
    cache = {} if cache is None else cache
    todo: set = set(kids.map) if parents is None else set(parents)
    defer = unnamed is not None
    unnamed = {} if unnamed is None else unnamed  # group id -> made (True) or split (False)

    def forget(tid: str | None) -> None:
        for a in tree.ancestry(tid):
            cache.pop(a, None)

    def first_crowded(todo: set):
        # A parent found uncrowded leaves `todo`: every step that gives a parent a child adds it
        # back (a group a topic moved into, the parent a group split beside, the two halves), and
        # one made with fewer children than the limit cannot be crowded. Rescanning them all at
        # each step was a third of a crowded root's regrouping: a root regrouped mid-write moves
        # ~100 topics one by one into groups it adds here.
        crowded = [
            p for p in todo if len(kids.of(p)) > max_children and (p is None or p in tree.topics)
        ]
        if len(crowded) < len(todo):
            todo.intersection_update(crowded)
        return min(crowded, key=lambda p: (p is not None, p or "")) if crowded else _NONE

    for _ in range(100_000):
        tick(progress)  # one step of the fix (memstore/progress.py)
        parent = first_crowded(todo)
        if parent is _NONE:
            break
        here = sorted(kids.of(parent), key=lambda t: (t.created, t.id))
        vec = {k.id: topic_vector(tree, data, k.id, cache, kids.newest) for k in here}
        groups = [k for k in here if not k.records and k.id != tree.current and kids.of(k.id)]
        group_ids = {g.id for g in groups}
        leaves = [k for k in here if k.id not in group_ids]
        moved = False
        pairs = (
            _Cosines([vec[lf.id] for lf in leaves], [vec[g.id] for g in groups])
            if (leaves and groups)
            else None
        )
        # Step 1, a loose topic into its closest group, repeated while the next step would be the
        # same for this parent: only the group it went into has another vector (the others, the
        # loose topics and their order are as they were), so its cosines are what the step would
        # compute again from scratch, the same bits (regrouping a crowded root mid-write moves its
        # ~100 loose topics one by one: the whole comparison made anew each time was a fifth of a
        # 100k-turn import's placement).
        while leaves and groups:
            sims = pairs.matrix()
            s = float(sims.max())
            # the closest pair; on a tie the newest leaf, then the newest group, then the first
            li, gi = max(
                np.argwhere(sims == s).tolist(),
                key=lambda pair: (leaves[pair[0]].created, groups[pair[1]].created),
            )
            leaf, g = leaves[li], groups[gi]
            if not (s >= join or len(leaves) < 2):
                break
            kids.move(leaf, g.id)
            forget(g.id)
            todo.add(g.id)
            moved = True
            if not SAME_PARENT_STEPS or first_crowded(todo) != parent:
                break
            tick(progress)  # (the next step, on the same parent)
            moved = False
            del here[next(n for n, k in enumerate(here) if k is leaf)]  # (by identity)
            del leaves[li]
            pairs.drop_row(li)
            vec[g.id] = topic_vector(tree, data, g.id, cache, kids.newest)
            pairs.set_col(gi, vec[g.id])
        if moved:
            continue
        is_group = parent is not None and not tree.topics[parent].records and parent != tree.current
        if len(leaves) >= 2 and not is_group:
            size = max(2, min(len(leaves), max_children // 2 + 1))
            i, j = _best_pair([vec[k.id] for k in leaves], np.max)
            members = [leaves[i], leaves[j]]
            rest = [k for n, k in enumerate(leaves) if n not in (i, j)]
            while len(members) < size and rest:
                centre = [vec[m.id] for m in members if vec[m.id] is not None]
                c = np.mean(np.stack(centre), axis=0) if centre else None
                nxt = max(rest, key=lambda k: (_sim(vec[k.id], c), k.created))
                members.append(nxt)
                rest.remove(nxt)
            made.append(_make_group(tree, data, parent, members, llm, kids, unnamed))
            forget(parent)
            continue
        left, right = _halves(here, vec)
        if not is_group:  # the root or a real topic: its children go one level down, in two groups
            made.append(_make_group(tree, data, parent, left, llm, kids, unnamed))
            made.append(_make_group(tree, data, parent, right, llm, kids, unnamed))
            todo.update(made[-2:])
        else:  # a group splits sideways, like a B-tree node; its parent is fixed next if crowded
            p = tree.topics[parent]
            sibling = _make_group(tree, data, p.parent, right, llm, kids, unnamed)
            unnamed.setdefault(parent, False)  # renamed for the members it keeps
            made.append(sibling)
            todo.update([p.parent, sibling])
        forget(parent)
    if not defer:
        name_groups(tree, data, unnamed, llm, kids)
    return made


def name_groups(tree: Tree, data: RecordData, unnamed: dict, llm, kids: Kids) -> None:
    """Name the groups `rebalance` made (`unnamed[gid]` True) or split sideways (False) from the
    members they have now; a group made is named like any (the LLM's label where one is used), a
    group split is renamed offline. Offline names are computed on two cores for a big write
    (naming.offline_names)."""
    todo = groups_to_name(tree, unnamed, kids)
    if llm is not None:
        for g, members, made in todo:
            if made:
                g.name, _, g.named_by = _name_group(tree, data, members, llm, kids)
            else:
                g.name = group_name(tree, members, data, kids)[0]
        set_group_names(todo, None)
        return
    names = naming.offline_names(
        [group_texts(tree, members, data, kids) for _g, members, _made in todo],
        data.rarity,
        fallback=GROUP,
    )
    set_group_names(todo, names)


def groups_to_name(tree: Tree, unnamed: dict, kids: Kids) -> list[tuple[Topic, list[Topic], bool]]:
    """(group, its members by age, whether it was made) of each group in `unnamed` that is still
    there with members, by id; `unnamed` is emptied."""
    todo = []
    for gid in sorted(unnamed):
        g = tree.topics.get(gid)
        if g is not None and kids.of(gid):
            todo.append((g, sorted(kids.of(gid), key=lambda t: (t.created, t.id)), unnamed[gid]))
    unnamed.clear()
    return todo


def set_group_names(todo: list[tuple[Topic, list[Topic], bool]], names: list[str] | None) -> None:
    """Give the groups of `groups_to_name` their offline `names` (None: named already), then,
    once every group has its name, their summaries (a group's summary lists its members' names)."""
    if names is not None:
        for (g, _members, made), name in zip(todo, names):
            g.name = name
            if made:
                g.named_by = "offline"
    for g, members, _made in todo:
        g.summary = group_summary(members)


def tidy_groups(tree: Tree, at: str) -> list[str]:
    """Drop groups left empty by merges and dissolve groups with a single child; returns their ids.

    Each removal leaves a tombstone, so a clone that still has the group merges cleanly.
    """
    removed: list[str] = []
    changed = True
    while changed:
        changed = False
        cmap = tree.children_map()
        for tid in sorted(tree.topics):
            t = tree.topics[tid]
            kids = cmap.get(tid, [])
            if t.records or tid == tree.current or len(kids) > 1:
                continue
            into = kids[0].id if kids else t.parent
            for k in kids:
                k.parent = t.parent
            del tree.topics[tid]
            tree.gone[tid] = {"into": into, "why": "regrouped", "at": at}
            removed.append(tid)
            changed = True
            break
    return removed
