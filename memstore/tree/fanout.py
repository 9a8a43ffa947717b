"""Bounded fan-out: when a topic (or the root) has more than `max_children` child topics, group them.

ChatIndex keeps its tree shallow by splitting crowded nodes; TRACE 1.0.8 dropped that and its trees
grew one level per turn. Here crowded children are clustered by meaning (average-link over topic
centroids, ties broken by age) into at most `max_children` groups of at most `max_children`
members; each group with more than one member becomes a new container topic. Depth then grows
with the logarithm of the number of topics, not with the length of the conversation.
"""

from __future__ import annotations

import numpy as np

from ..format.tree import Topic, Tree, new_topic_id
from . import naming
from .topicdata import RecordData, topic_vector


def _cluster(vecs: list[np.ndarray | None], limit: int) -> list[list[int]]:
    """Greedy average-link clustering to ≤ `limit` clusters, each of ≤ `limit` members, where possible."""
    clusters = [[i] for i in range(len(vecs))]
    dim = next((v.shape[0] for v in vecs if v is not None), 1)
    mat = np.stack([v if v is not None else np.zeros(dim, np.float32) for v in vecs])
    sims = mat @ mat.T
    while len(clusters) > limit:
        best = None
        for a in range(len(clusters)):
            for b in range(a + 1, len(clusters)):
                if len(clusters[a]) + len(clusters[b]) > limit:
                    continue
                s = float(np.mean(sims[np.ix_(clusters[a], clusters[b])]))
                # prefer the most similar pair; on ties, neighbours in time (lower indices)
                key = (s, -b, -a)
                if best is None or key > best[0]:
                    best = (key, a, b)
        if best is None:
            break
        _, a, b = best
        clusters[a] = sorted(clusters[a] + clusters[b])
        del clusters[b]
    return clusters


def group_name(tree: Tree, members: list[Topic], data: RecordData) -> tuple[str, str]:
    texts: list[str] = []
    for m in members:
        recs = m.records or [r for d in sorted(tree.descendants(m.id)) for r in tree.topics[d].records]
        texts += data.texts(recs, limit=12)[0] or [m.name]
    terms = naming.key_terms(texts, 3)
    name = (", ".join(terms) or "Related topics")
    name = name[:1].upper() + name[1:]
    return name, f"{len(members)} related topics: " + "; ".join(m.name for m in members)


def rebalance(tree: Tree, data: RecordData, max_children: int, llm=None) -> list[str]:
    """Group crowded children until no topic has more than `max_children`; returns new group ids."""
    if max_children < 2:
        return []
    made: list[str] = []
    cache: dict = {}
    for _ in range(10_000):  # each pass strictly reduces one parent's child count
        cmap = tree.children_map()
        crowded = sorted((p for p, kids in cmap.items() if len(kids) > max_children), key=lambda p: (p is not None, p or ""))
        if not crowded:
            break
        parent = crowded[0]
        kids = cmap[parent]
        vecs = [topic_vector(tree, data, k.id, cache) for k in kids]
        clusters = _cluster(vecs, max_children)
        if all(len(c) == 1 for c in clusters):
            # Nothing could merge under the size cap: group consecutive runs of max_children.
            clusters = [list(range(i, min(i + max_children, len(kids)))) for i in range(0, len(kids), max_children)]
        for members_idx in clusters:
            if len(members_idx) < 2:
                continue
            members = [kids[i] for i in members_idx]
            name, summary = group_name(tree, members, data)
            named_by = "offline"
            if llm is not None:
                llm_label = naming.llm_name(llm, [f"{m.name}: {m.summary}" for m in members],
                                            ["topic"] * len(members))
                if llm_label:
                    name, named_by = llm_label, "llm"
            gid = new_topic_id()
            tree.topics[gid] = Topic(id=gid, name=name, summary=summary, parent=parent, records=[],
                                     created=min(m.created for m in members),
                                     last_active=max(m.last_active for m in members), named_by=named_by)
            for m in members:
                m.parent = gid
            cache.pop(gid, None)
            made.append(gid)
    return made


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
