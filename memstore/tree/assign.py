"""Topic assignment: place newly written conversation records in the tree, as they arrive.

TRACE's temporal rule decides where a turn may go: it continues the current topic, or opens a new
topic under the current topic or one of its ancestors (or at the root). Offline, the decision is
made with the embeddings the write just computed; with an LLM opted in by the user (`[llm] topics =
true` in ~/.config/memstore/config.toml or MEMSTORE_LLM_TOPICS=1, never by the store)
the LLM classifies and names, and any failure falls back to the offline rule. Only the user's turn
decides; the replies and tool calls that follow it join the same topic.
"""

from __future__ import annotations

import gc
import heapq
from itertools import islice

import numpy as np

from .. import workers
from ..format import tree as treefmt
from ..format.record import is_conversation, is_private
from ..format.tree import Topic, Tree
from ..progress import stage, tick
from . import fanout, naming
from .fanout import (
    GROUP,
    Kids,
    groups_to_name,
    name_groups,
    rebalance,
    set_group_names,
)
from .termsets import TermSets
from .topicdata import (
    GROUP_SAMPLE,
    GroupMemo,
    TOPIC_RECORDS,
    RecordData,
    normalised_rows,
    stacked,
    thresholds,
    topic_vector,
)

SHORT_TURN_WORDS = (
    2  # "ok", "yes please", "why?" (under 2 content words) continue whatever is going on
)
RECENT_WINDOW = 8  # the current topic is judged by its latest records (drift-tolerant)
MAX_DEPTH = 6  # sub-topics are not opened below this depth
NEAR_TIE = 0.05
BEAM = 2  # topics followed down at each level when looking for a turn's place
RECENT_TOPICS = 8
SCORED = 6
RENAME_UNTIL = 8  # offline names are refined until a topic has this many records
ONE_BLAS_THREAD_FROM = 1_000  # records a write places with numpy's BLAS held to one thread
REGROUP_AT = 20  # a write regroups a parent's children once they are this many times max_children
LAZY_RECORDS = 64  # a write of up to this many records reads the tree in part (see _assign)
COUNT_BESIDE = 2_000  # a write placing this many records has their words counted ahead (termsets)
AHEAD = 32  # user turns whose cosines with the write's topics one product gives (TopicMatrix)
AHEAD_FROM = 2_000  # records a write places with those products ahead
FLAT_FROM = 2_000  # records a first write places by one ranking of its topics (Placer.flatten)
UNNAMED = "Untitled topic"  # what a topic made by a write is called until the write names it


def max_children(store) -> int:
    value = store.config.settings.get("max_children", 5)
    return int(value) if isinstance(value, int) and value >= 2 else 5


def topics_enabled(store) -> bool:
    value = store.config.settings.get("topics", True)
    return value is not False and str(value).lower() not in {"false", "0", "no", "off"}


class Placer:
    """Holds the tree while one batch of records is placed; `finish` names, summarises and rebalances."""

    def __init__(self, store, tree: Tree, data: RecordData, llm=None):
        self.store, self.tree, self.data, self.llm = store, tree, data, llm
        self.th = thresholds(store)
        self.touched: set[str] = set()
        self.created: set[str] = set()
        self.live_before = tree.live_path()
        self.last_session: str | None = None
        self.content_vecs: dict[str, np.ndarray] = {}
        self.kids = Kids(tree)  # the children map, kept as topics are added and moved
        self.group_memo = GroupMemo(self.kids.version)  # what each group's vector was made from
        self.vcache = (
            VectorCache()
        )  # topic vectors this write computed (dropped where records join)
        self.levels = ChildMatrices(self._vector)  # each parent's children's vectors, stacked
        self.recent: dict[str, None] = {}  # topics this write made or joined, latest last
        self.seen = TopicMatrix()  # their vectors, for one look at all of them per branching turn
        self.dirty: set = set()  # parents this write gave a child to (regrouped in `finish`)
        self.visited = 0  # topics the last placement looked at (tests count them)
        self.terms: dict[tuple, set[str]] = {}  # (record ids, k) -> their key terms (see _terms)
        self.term_sets = TermSets()  # naming.term_set of windows, each text counted once
        self.unnamed: dict[str, bool] = {}  # groups regrouping made mid-batch: named in `finish`
        self.first_texts: dict[str, list[str]] = {}  # topics made here, named in `finish`
        self.few = False  # a small write: its topics' stored vectors are read in batches
        self.flat = False  # a first big write: its topics ranked by one product (see `flatten`)
        self.upcoming: list[tuple[str, np.ndarray]] = []  # see `ahead`
        self.upcoming_at: dict[str, int] = {}
        if tree.current and tree.topics[tree.current].records:
            last = data.record(tree.topics[tree.current].records[-1])
            self.last_session = (last or {}).get("session")

    # ----- one record ------------------------------------------------------------------------

    def place(self, rec: dict, vec: np.ndarray) -> str:
        rid = rec["id"]
        self._llm_verdict = None
        self._session_stay = False
        self._words: set[str] | None = None  # the turn's key terms, once read (see _turn_words)
        self.data.extra_vecs[rid] = vec
        self.data.extra_recs[rid] = rec
        tree = self.tree
        cur = tree.current if tree.current in tree.topics else None
        if cur is None:
            tid = self._new_topic(None, [rec])
        elif rec.get("role") != "user" or self._continues(
            cur, rec, self.content_vecs.get(rid, vec)
        ):
            tid = cur
        else:
            tid = self._branch(cur, rec, self.content_vecs.get(rid, vec))
        t = tree.topics[tid]
        t.records.append(rid)
        for a in tree.ancestry(tid):
            self.vcache.pop(a, None)
        self.seen.stale(tid)
        if tid != cur:
            self.recent.pop(tid, None)
            self.recent[tid] = None
        t.last_active = max(t.last_active, rec["ts"])
        self.kids.touched(t)
        t.created = min(t.created, rec["ts"]) if t.created else rec["ts"]
        tree.current = tid
        self.touched.add(tid)
        self.last_session = rec.get("session")
        if tid != cur and tid in self.created:
            self._regroup(t.parent)
        return tid

    def release(self) -> None:
        """Let go of everything the write held (the tree, the turns' vectors and words, the topics'
        matrices) at once. Its parts refer back to their owners (a matrix keeps the Placer's
        `_vector`, a vocabulary its TermSets' `_new_form`), so what they hold was cyclic garbage:
        left to Python's collector, whose first pass after placement (gc is off while placing)
        walked all of it — 289,000 objects, 0.45-0.63 s of a 100k-turn import's last seconds."""
        self.term_sets.release()
        self.__dict__.clear()

    def _regroup(self, parent: str | None) -> None:
        """Group a parent's children as soon as a new topic crowds it (REGROUP_AT times the limit),
        as a run of one-record writes would: a big write's topics then never pile up under one
        parent, where every later turn's look for its place and the final regrouping would each
        compare all of them (a write's cost growing with the square of its size). Groups made are
        named once, in `finish`."""
        if len(self.kids.of(parent)) <= REGROUP_AT * max_children(self.store):
            return
        rebalance(
            self.tree,
            self.data,
            max_children(self.store),
            self.llm,
            join=-1.0,  # a loose topic goes down into its closest group (a B-tree insert)
            parents={parent},
            kids=self.kids,
            cache=self.vcache,
            unnamed=self.unnamed,
        )

    def _continues(self, cur: str, rec: dict, vec: np.ndarray) -> bool:
        if rec.get("session") != self.last_session:
            return False  # a new conversation is a natural topic boundary
        if not naming.has_words(rec["text"], SHORT_TURN_WORDS):
            return True
        if self.llm is not None:
            verdict = self._llm_classify(cur, rec)
            if verdict is not None:
                self._llm_verdict = verdict
                return verdict["continue"]
        t = self.tree.topics[cur]
        centroid = self.data.centroid(t.records, last=RECENT_WINDOW)
        if centroid is None:
            return True
        sim = float(centroid @ vec)
        # Shared words only add, at most 0.16: outside that band they cannot change the answer,
        # and their key terms (the turn's and the topic's recent records') are most of this time.
        if sim >= self.th["continue"]:
            return True
        if sim + 0.08 * 2 < min(self.th["continue"], self.th["stay"]):
            return False
        shared = self._turn_words(rec) & self._terms(t.records[-RECENT_WINDOW:], 20)
        score = sim + 0.08 * min(len(shared), 2)
        if score >= self.th["continue"]:
            return True
        # Within one conversation a turn that is only somewhat less close stays, unless an earlier
        # topic is as close as a join: people drift inside a chat more than they change subject.
        self._session_stay = score >= self.th["stay"]
        return False

    def _branch(self, cur: str, rec: dict, vec: np.ndarray) -> str:
        """Where a turn that does not continue the current topic goes: back into an earlier topic
        it is as close to as a continuation would be (a return to a subject joins its topic), else
        a new topic under the closest topic or group, else a new top-level topic.

        The candidates are bounded, whatever the size of the tree: the current topic's ancestry
        (TRACE's temporal rule), the topics this write made, and a beam descent from the root
        (the BEAM closest at each level, over at most max_children children each)."""
        candidates = self.tree.ancestry(cur)  # top-level first, current last
        verdict = getattr(self, "_llm_verdict", None)
        if verdict is not None and verdict.get("parent_index") is not None:
            idx = verdict["parent_index"]
            parent = None if idx == 0 else candidates[min(idx, len(candidates)) - 1]
            return self._new_topic(parent, [rec], verdict.get("name"))
        sims = self._candidates(candidates, vec, rec["id"])
        self.visited = len(sims)
        words: set[str] | None = None
        scored = []
        # Shared words are read for the closest few only: they add at most 0.16.
        scored_words = 0
        topics, cont, join = self.tree.topics, self.th["continue"], self.th["join"]
        join_sim = min(join, 1.0)
        for sim, tid in heapq.nsmallest(4 * SCORED, ((-v, k) for k, v in sims.items())):
            sim = -sim
            if sim + 0.08 * 2 < cont:
                break  # not even two shared words would lift it (or any after it) to the threshold
            t = topics[tid]
            bonus = 0.0
            if t.records and sim < join_sim and scored_words < SCORED:
                scored_words += 1
                if words is None:
                    words = self._turn_words(rec)
                shared = words & self._terms(t.records[-RECENT_WINDOW // 2 :], 20)
                bonus = 0.08 * min(len(shared), 2)
            score = sim + bonus
            if t.records and score >= join and join < 1:
                scored.append((score, "join", 0, tid))  # (a join's depth is not used)
            elif (
                # under a group as close as a continuation; under a real topic only as close as a
                # join (by meaning alone), so unrelated subjects never nest under each other
                sim >= join_sim if t.records else score >= cont
            ) and (depth := len(self.tree.ancestry(tid))) < MAX_DEPTH:
                scored.append((score, "nest", depth, tid))
        joins = [x for x in scored if x[1] == "join"]
        if joins:
            best = max(joins, key=lambda x: (x[0], self.tree.topics[x[3]].last_active, x[3]))
            return best[3]
        if self._session_stay:
            return cur
        parent = None
        if scored:
            best = max(s for s, _, _, _ in scored)
            # On a near tie the shallower wins: chains of sub-sub-topics are TRACE's failure.
            parent = min((d, tid) for s, _, d, tid in scored if s >= best - NEAR_TIE)[1]
        return self._new_topic(parent, [rec], verdict.get("name") if verdict else None)

    def _turn_words(self, rec: dict) -> set[str]:
        """The key terms of the turn being placed: read once, for the continue-or-branch decision
        and again for the topics it may go back to."""
        if self._words is None:
            self._words = self.term_sets.top([rec["text"]], 12)
        return self._words

    def _terms(self, rids: list[str], k: int) -> set[str]:
        """The key terms of these records (a topic's latest), kept for the write: a batch scores the
        same unchanged topics against many turns, and the terms depend only on the records."""
        key = (tuple(rids), k)
        got = self.terms.get(key)
        if got is None:
            if len(self.terms) > 50_000:
                self.terms.clear()
            got = self.terms[key] = self.term_sets.top(
                self.data.texts(rids, limit=RECENT_WINDOW)[0], k
            )
        return got

    def ahead(self, recs: list[dict], vecs: list[np.ndarray]) -> None:
        """The user turns of this write that will branch (`_branch`), in order, with the vectors
        a branching turn is compared by (its content vector, else its own), for TopicMatrix's
        products ahead: those that open another conversation than the record before them (a turn
        of the same conversation continues its topic but for one in seven in the 100k-turn
        import; one that branches is compared by a product of its own). Products ahead of every
        user turn computed twice the columns used."""
        users = []
        last = self.last_session
        for r, v in zip(recs, vecs):
            if r.get("role") == "user" and r.get("session") != last:
                users.append((r["id"], v))
            last = r.get("session")
        self.upcoming = [(rid, self.content_vecs.get(rid, v)) for rid, v in users]
        self.upcoming_at = {rid: i for i, (rid, _v) in enumerate(self.upcoming)}

    def _upcoming(self, key: str) -> list[tuple[str, np.ndarray]]:
        """The next AHEAD user turns from `key` on (none when the write did not name them)."""
        at = self.upcoming_at.get(key)
        return [] if at is None else self.upcoming[at : at + AHEAD]

    def _vector(self, tid: str) -> np.ndarray | None:
        return topic_vector(
            self.tree, self.data, tid, self.vcache, self.kids.newest, self.group_memo
        )

    def _candidates(self, ancestry: list[str], vec: np.ndarray, key=None) -> dict[str, float]:
        """topic id -> cosine with `vec` (the turn `key`'s), for a bounded set of topics (see
        `_branch`)."""
        sims: dict[str, float] = {}
        if self.few:
            self._read_ahead(ancestry)
        # the topics this write made or joined: the closest few of all of them, in one product
        close, every = self.seen.closest(
            vec, 4 * SCORED, self._vector, self.tree.topics, key, self._upcoming
        )
        rows = self.seen.rows
        if self.flat:  # (the cosines read from the product at once, not one numpy scalar each)
            topics = self.tree.topics
            got = every[[rows[tid] for tid in close]].tolist()
            return {tid: v for tid, v in zip(close, got) if tid in topics}
        for tid in ancestry + list(islice(reversed(self.recent), RECENT_TOPICS)) + close:
            if tid in self.tree.topics and tid not in sims:
                row = rows.get(tid)
                if row is not None:  # (the product has it already)
                    sims[tid] = float(every[row])
                else:
                    v = self._vector(tid)
                    sims[tid] = float(v @ vec) if v is not None else -1.0
        # the beam: each level's children ranked in one product per parent (ChildMatrices)
        self.levels.take(self.vcache, self.tree.topics)
        parents: list[str | None] = [None]
        for _ in range(MAX_DEPTH):
            level: list[tuple[float, str]] = []
            for p in parents:
                kids = self.kids.of(p)
                if kids:
                    got = self.levels.sims(p, kids, vec)
                    for k, sim in zip(kids, got):
                        level.append((-sims.setdefault(k.id, sim), k.id))
            if not level:
                break
            parents = [tid for _, tid in heapq.nsmallest(BEAM, level)]
        return sims

    def flatten(self) -> None:
        """Rank the topics by the one product `closest` makes, instead of that product plus the
        beam descent, the ancestry and the recent topics: a big write (FLAT_FROM records and
        more) into a tree that holds no record yet, whose topics are then all the write's own and
        all rows of that product. In an import of 30,000 dev turns every turn that went back to a
        topic found it among the product's closest; what the beam and the ancestry added (42 of
        5,030 branching turns nested under a group they found) cost a fifth of the branching
        turns' time. Groups are left to the regrouping, which takes a loose topic down into its
        closest group. Into a tree with earlier topics a write keeps the beam: ranking every
        earlier topic too made a 2,000-turn write into a 10,000-turn store join earlier topics
        13 times as often (1,307 records against 99) and its topics less pure (0.511 against
        0.548): another tree than a run of small writes grows, and a slower write."""
        self.flat = True

    def _read_ahead(self, ancestry: list[str]) -> None:
        """A few turns' write (`few`) reads the stored vectors of the topics it will look at in
        one batch: the ancestry, the top level and the few records under each (a group's vector
        averages topics under it), instead of one exact read per topic (45 of them in a `ct add`)."""
        want: list[str] = []
        for t in [*(self.tree.topics[a] for a in ancestry), *self.kids.of(None)]:
            if t.id not in self.vcache:
                want += t.records[-TOPIC_RECORDS:] or self.kids.sample_records(
                    t.id, 2 * GROUP_SAMPLE
                )
        self.data.read_ahead(want)

    def _new_topic(self, parent: str | None, recs: list[dict], name: str | None = None) -> str:
        tid = treefmt.new_topic_id()
        texts = [r["text"] for r in recs]
        named_by = "llm" if name else "offline"
        if name is None and self.llm is not None:
            pname = self.tree.topics[parent].name if parent else None
            name = naming.llm_name(self.llm, texts, [r.get("role", "user") for r in recs], pname)
            named_by = "llm" if name else "offline"
        if name is None and self.llm is None:
            # named in `finish`, which renames nearly every topic a write makes from all its
            # records: naming each from its first record here too was a tenth of a big write
            self.first_texts[tid] = texts
        topic = self.tree.topics[tid] = Topic(
            id=tid,
            name=name or (UNNAMED if tid in self.first_texts else naming.offline_name(texts)),
            parent=parent,
            records=[],
            created=recs[0]["ts"],
            last_active=recs[0]["ts"],
            named_by=named_by,
        )
        self.kids.add(topic)
        self.dirty.add(parent)
        self.created.add(tid)
        return tid

    def _llm_classify(self, cur: str, rec: dict) -> dict | None:
        """TRACE's continue-or-branch question; None when the call fails or the reply is unusable."""
        from ..adapters.llm import as_bool

        t = self.tree.topics[cur]
        candidates = self.tree.ancestry(cur)
        texts, roles = self.data.texts(t.records[-6:], limit=6)
        # what is sent to the model is scrubbed like a name: a secret kept by --allow-secrets stays home
        texts = naming.scrubbed(texts)
        message = naming.scrubbed([rec["text"]])[0]
        recent = "\n".join(f"- {r}: {' '.join(x.split())[:150]}" for x, r in zip(texts, roles))
        options = "\n".join(
            ["0. ROOT - start a new top-level topic"]
            + [
                f"{i}. {self.tree.topics[c].name} - {self.tree.topics[c].summary[:100]}"
                for i, c in enumerate(candidates, 1)
            ]
        )
        prompt = (
            f"Current topic: {t.name}\nSummary: {t.summary}\nRecent exchanges:\n{recent}\n\n"
            f"New message:\n- {rec.get('role')}: {' '.join(message.split())[:400]}\n\n"
            f"Available parent topics:\n{options}\n\n"
            "Does the new message continue the current topic? If not, name the new topic (2-5 words) "
            "and pick its parent: 0 unless it is genuinely a sub-topic of one listed. Reply with JSON: "
            '{"belongs_to_current": true|false, "new_topic_name": "...", "new_topic_parent_index": <int>}'
        )
        data = self.llm.json(
            [
                {"role": "system", "content": "You organise a conversation into a topic tree."},
                {"role": "user", "content": prompt},
            ]
        )
        if data is None:
            return None
        belongs = as_bool(data.get("belongs_to_current"))
        if belongs is None:
            return None
        idx = data.get("new_topic_parent_index")
        try:
            idx = max(0, min(int(idx), len(candidates))) if idx is not None else None
        except (TypeError, ValueError):
            idx = None
        return {
            "continue": belongs,
            "parent_index": idx,
            "name": naming.clean_name(data.get("new_topic_name")),
        }

    # ----- after the batch -------------------------------------------------------------------

    def finish(self, progress=None) -> None:
        tree = self.tree
        frozen_now = self.live_before - tree.live_path()
        named = sorted(tid for tid in self.touched | frozen_now if tid in tree.topics)
        # Grouping first: it reads vectors, not names (the groups it makes are named below), so a
        # write names its topics and its groups in one pass, each group beside its members.
        stage(progress, "Grouping topics")
        rebalance(
            tree,
            self.data,
            max_children(self.store),
            self.llm,
            join=self.th["continue"],
            progress=progress,
            parents=self.dirty,
            kids=self.kids,
            cache=self.vcache,
            unnamed=self.unnamed,
        )
        stage(progress, "Naming topics", len(named))
        jobs = []  # (topic id, its texts, their roles, how it is named, whether it is final)
        for tid in named:
            t = tree.topics[tid]
            if not t.records:
                tick(progress)
                continue
            texts, roles = self.data.texts(t.records)
            final = tid in frozen_now
            if t.named_by == "offline" and (len(t.records) <= RENAME_UNTIL or final):
                how = "texts"
            elif tid in self.first_texts:  # the name it would have had since its first record
                how = "first"
            else:
                how = ""
            jobs.append((tid, texts, roles, how, final))
        if self.llm is not None:
            for tid, texts, roles, how, final in jobs:
                tick(progress)
                t = tree.topics[tid]
                if how == "texts":
                    t.name = naming.offline_name(texts, self.data.rarity, roles)
                elif how == "first":
                    t.name = naming.first_name(
                        self.first_texts[tid], texts, self.data.rarity, roles
                    )
                summary = naming.llm_summary(self.llm, t.name, texts, roles) if final else None
                t.summary = summary or naming.offline_summary(texts, roles, self.data.rarity)
            name_groups(tree, self.data, self.unnamed, self.llm, self.kids)
            return
        self._name_offline(jobs, progress)

    def _name_offline(self, jobs: list[tuple], progress) -> None:
        """Offline names and summaries of the topics (`jobs`, see `finish`) and names of the groups
        this write made: pure functions of their texts, computed on two cores for a big write
        (memstore/workers.py). The work is laid out in the tree's order, members before their
        group, and cut in two halves: a group is named from its members' latest texts, which the
        same process has then just read (their phrases and secrets-scan verdicts cached)."""
        tree, data = self.tree, self.data
        renamed = {tid for tid, _texts, _roles, how, _final in jobs if how}
        work: list = []  # (topic id or group id, the job naming.offline_many computes)
        for tid, texts, roles, how, _final in jobs:
            first = self.first_texts.get(tid) if how == "first" else None
            work.append((tid, (texts, roles, first, how != "")))
        groups = groups_to_name(tree, self.unnamed, self.kids)
        late = set()  # groups named after their members: a member's name stands in for its texts
        for n, (g, members, _made) in enumerate(groups):
            stand_ins: list[str] = []
            texts = fanout.group_texts(tree, members, data, self.kids, stand_ins)
            if renamed.intersection(stand_ins):
                late.add(n)
            else:
                work.append((g.id, naming.GroupName(texts, GROUP)))
        at = None
        if len(work) >= naming.MANY_JOBS:  # (a small write's are named here, in any order: a
            # one-turn write into a big store must not walk its whole tree for the order)
            rank = {tid: n for n, tid in enumerate(self.kids.post_order())}
            work.sort(key=lambda w: rank.get(w[0], len(rank)))
            weights = [len(job[0]) for _id, job in work]
            half, at = sum(weights) / 2, 0
            while at < len(work) and half > 0:
                half -= weights[at]
                at += 1
        made = naming.offline_many(
            [job for _id, job in work],
            data.rarity,
            self.term_sets,  # (the texts placement counted: not counted again)
            at=at,
        )
        got = {wid: res for (wid, _job), res in zip(work, made)}
        for tid, *_rest in jobs:
            tick(progress)
            t = tree.topics[tid]
            name, t.summary = got[tid]
            if name is not None:
                t.name = name
        names = []
        for n, (g, members, _made) in enumerate(groups):
            if n in late:
                texts = fanout.group_texts(tree, members, data, self.kids)
                names.append(naming.offline_name(texts, data.rarity, fallback=GROUP))
            else:
                names.append(got[g.id][0])
        set_group_names(groups, names)


class VectorCache(dict):
    """topic id -> vector (or None), as topic_vector and rebalance keep it; the ids dropped (a
    record joined the topic or one under it, a child moved) are noted for ChildMatrices."""

    def __init__(self):
        super().__init__()
        self.dropped: set[str] = set()

    def pop(self, key, *default):
        self.dropped.add(key)
        return super().pop(key, *default)


class ChildMatrices:
    """Per parent, the vectors of its children stacked in their order, so the beam ranks a level
    in one matrix product instead of a Python step per child (the root holds up to REGROUP_AT x
    max_children topics mid-write: ranking them one by one was a quarter of a big write's
    placement). A parent's matrix is rebuilt when its children change, and a row is re-read when
    its topic's vector was dropped from the VectorCache."""

    def __init__(self, vector):
        self.vector = vector  # topic id -> its vector, or None
        self.of: dict[str | None, list] = {}  # parent -> [ids, matrix, {id: row}, no vector, stale]

    def take(self, cache: VectorCache, topics) -> None:
        """Mark the rows of the topics whose vectors `cache` dropped since the last call."""
        for tid in cache.dropped:
            t = topics.get(tid)
            entry = self.of.get(t.parent) if t is not None else None
            if entry is not None and tid in entry[2]:
                entry[4].add(tid)
        cache.dropped.clear()

    def sims(self, parent: str | None, kids: list, vec: np.ndarray) -> list[float]:
        """The cosine of each child's vector with `vec`, in the children's order (-1 without one)."""
        ids = [k.id for k in kids]
        entry = self.of.get(parent)
        if entry is None or entry[0] != ids:
            mat, none = stacked([self.vector(t) for t in ids], vec.shape[0])
            entry = self.of[parent] = [ids, mat, {t: i for i, t in enumerate(ids)}, none, set()]
        elif entry[4]:
            mat, rows, none = entry[1], entry[2], entry[3]
            for tid in entry[4]:
                v = self.vector(tid)
                none[rows[tid]] = v is None
                mat[rows[tid]] = 0.0 if v is None else v
            entry[4].clear()
        got = entry[1] @ vec
        if entry[3].any():
            got[entry[3]] = -1.0
        return got.tolist()


class TopicMatrix:
    """The vectors of the topics a write made or joined, one row each, so a branching turn finds
    the closest of all of them in one matrix product (an import makes thousands: ranking them one
    by one was most of a big write's placement). A row is refreshed when its topic is next looked
    at after a record joined it."""

    def __init__(self):
        self.rows: dict[str, int] = {}
        self.ids: list[str] = []
        self.mat: np.ndarray | None = None
        self.none: np.ndarray | None = None  # rows of topics without a vector
        self.dirty: set[str] = set()
        # products ahead (see `_sims`): the turns' columns, their cosines with the first `upto`
        # rows as the rows were then (a row per topic, a column per turn), the rows refreshed since
        self.cols: dict[str, int] = {}
        self.block = np.zeros((0, 0), np.float32)
        self.upto = 0
        self.moved: set[int] = set()

    def stale(self, tid: str) -> None:
        if tid not in self.rows:
            self.rows[tid] = len(self.ids)
            self.ids.append(tid)
        self.dirty.add(tid)

    def closest(
        self, vec: np.ndarray, k: int, vector, topics, key=None, upcoming=None
    ) -> tuple[list[str], np.ndarray]:
        """Up to `k` topic ids, the closest to `vec` first (`vector(tid)` gives a topic's vector),
        and every row's cosine with `vec` (-1 for a topic without a vector), by `rows`. `key`
        names the turn `vec` is, `upcoming(key)` the turns from it on with their vectors: see
        `_sims`."""
        n = len(self.ids)
        if n == 0:
            return [], np.zeros(0, np.float32)
        if self.mat is None or self.mat.shape[0] < n or self.mat.shape[1] != vec.shape[0]:
            grown = np.zeros((max(64, 2 * n), vec.shape[0]), np.float32)
            none = np.zeros(grown.shape[0], bool)
            if self.mat is not None and self.mat.shape[1] == vec.shape[0]:
                grown[: self.mat.shape[0]] = self.mat
                none[: self.mat.shape[0]] = self.none
            else:
                self.dirty.update(self.ids)
            self.mat, self.none = grown, none
        for tid in self.dirty:
            v = vector(tid) if tid in topics else None
            row = self.rows[tid]
            self.mat[row] = v if v is not None else 0.0
            self.none[row] = v is None
            self.moved.add(row)
        self.dirty.clear()
        sims = self._sims(vec, n, key, upcoming)
        if self.none[:n].any():
            sims[self.none[:n]] = -1.0
        return [self.ids[i] for i in top_rows(sims, k)], sims

    def _sims(self, vec: np.ndarray, n: int, key, upcoming) -> np.ndarray:
        """Every row's cosine with `vec`. A big write's branching turn reads them from one
        product of the rows with the next AHEAD turns' vectors, made when the first of them
        asked, and computes again only the rows refreshed or added since: the matrix is a few
        megabytes, read from memory once per product, so AHEAD turns against it in one product
        cost little more than one (a turn that continues its topic never asks: its column is
        spare). The products' sums are added in another order than one turn's product adds them,
        so a cosine can differ from it in its last bits."""
        col = self.cols.get(key) if key is not None else None
        if col is None:
            ahead = upcoming(key) if upcoming is not None and key is not None else []
            if not ahead:
                return self.mat[:n] @ vec
            self.cols = {rid: i for i, (rid, _v) in enumerate(ahead)}
            self.block = self.mat[:n] @ np.stack([v for _rid, v in ahead]).T  # (n, turns)
            self.upto, self.moved = n, set()
            col = 0
        sims = np.empty(n, np.float32)
        upto = self.upto
        sims[:upto] = self.block[:, col]
        fix = [r for r in self.moved if r < upto]
        fix += range(upto, n)
        if fix:
            at = np.asarray(fix, np.intp)
            sims[at] = self.mat[at] @ vec
        return sims


SAMPLE_EVERY = 8  # top_rows: the threshold comes from every 8th row


def top_rows(sims: np.ndarray, k: int) -> list[int]:
    """The rows of the `k` largest of `sims`, largest first, the lower row first on a tie: one C
    pass where memstore/tree/_words.c is built (a branching turn of a 100k-turn import asks 22,011
    times; the numpy steps below took 0.70 s of them), else `_top_rows_np`."""
    if k <= 0:
        return []
    if (
        _top_rows_c is not None
        and sims.dtype == np.float32
        and sims.ndim == 1
        and sims.flags.c_contiguous
    ):
        return _top_rows_c(sims, k)
    return _top_rows_np(sims, k).tolist()


_top_rows_c = getattr(naming._words, "top_rows", None)  # (None: not built, or built before it)


def _top_rows_np(sims: np.ndarray, k: int) -> np.ndarray:
    """`top_rows` in numpy. Ranking thousands of topics for two dozen, the rows are first cut at a
    threshold no higher than the k-th largest: the k-th largest of every SAMPLE_EVERY-th row (a
    subset's k-th largest is never above the whole's), which leaves about SAMPLE_EVERY * k rows to
    sort; a selection over all of them cost as much as the product that made them."""
    n = len(sims)
    if n > 4 * SAMPLE_EVERY * k:
        sample = sims[::SAMPLE_EVERY]
        floor = np.partition(sample, len(sample) - k)[len(sample) - k]
        rows = np.flatnonzero(sims >= floor)
    else:
        rows = np.arange(n)
    return rows[np.lexsort((rows, -sims[rows]))[:k]]


def content_vectors(store, records: list[dict]) -> dict[str, np.ndarray]:
    """Vectors of the user turns' content words only, for the continue-or-branch decision.

    Filler shared by unrelated questions ("how do I …", "should I …") otherwise counts as
    similarity; judging the content words against the topic's stored vectors removes it. An
    embedder that can pool its own forward pass over the content words' tokens (MiniLM's
    `content_vectors`) gives them from the pass that embedded the records, without a second pass;
    any other embeds the content words as one batch per write.
    """
    users = [r for r in records if r.get("role") == "user"]
    pooled = getattr(store.embedder, "content_vectors", None)
    if pooled is not None:
        from ..core import (
            EMBED_CHARS,
        )  # the record's own embedding input, as Store._embed_records cuts it

        from ..adapters.cache import content_cached

        # kept in the embedding cache: vectors from the cache must not cost a forward pass here
        vecs = content_cached(store.embedder, [r["text"][:EMBED_CHARS] for r in users])
        got = [(r, v) for r, v in zip(users, vecs) if v is not None]
        return dict(zip((r["id"] for r, _ in got), normalised_rows([v for _, v in got])))
    texts = [" ".join(naming.words(r["text"][: naming.TEXT_CHARS])) for r in users]
    pick = [(r, t) for r, t in zip(users, texts) if t]
    if not pick:
        return {}
    vecs = store.embedder.embed_batch([t for _, t in pick], kind="query")
    return dict(zip((r["id"] for r, _ in pick), normalised_rows(vecs)))


def assign_records(store, records: list[dict], vectors, progress=None) -> list[str]:
    """Place the conversation records of one write in the topic tree; returns the changed paths.

    Called inside the store's write lock, before the commit, so the tree change is part of the same
    commit as the records. Document chunks and meta rows are not placed.
    """
    # The tree is tens of thousands of small objects read, copied and compared at once, and none of
    # them forms a cycle: Python's cyclic collector, triggered by those allocations, would walk the
    # whole heap again and again (at 100k records most of a one-turn write's placement time).
    collecting = gc.isenabled()
    gc.disable()
    try:
        pairs = [
            (r, np.asarray(v, np.float32)) for r, v in zip(records, vectors) if is_conversation(r)
        ]
        gone = superseded_ids(records)
        if not pairs and not gone:
            return []
        # Placement's products are small (a turn against the topics a write made), and each waited
        # for a second BLAS thread on a busy machine: a 60k-turn write's ranking of its topics took
        # 28.7 s with numpy's default threads, 2.7 s with one (memstore/workers.py). Not for a
        # small write: finding the BLAS libraries costs a fresh process ~45 ms, a third of `ct add`.
        if len(pairs) < ONE_BLAS_THREAD_FROM:
            return _assign(store, pairs, gone, progress)
        with workers.one_blas_thread():
            return _assign(store, pairs, gone, progress)
    finally:
        if collecting:
            gc.enable()


def _assign(store, pairs, gone, progress) -> list[str]:
    # A small write reads the tree in part (the topics it looks at, from the cache's rows), so its
    # cost does not grow with the tree; a big one, or one that takes records out (which walks every
    # topic), reads it whole. A damaged cache row found on the way: start again from the whole tree.
    if not gone and len(pairs) <= LAZY_RECORDS:
        try:
            return _assign_in(store, pairs, gone, progress, lazy=True)
        except treefmt.Damaged:
            pass
    return _assign_in(store, pairs, gone, progress, lazy=False)


def _assign_in(store, pairs, gone, progress, lazy: bool) -> list[str]:
    from ..adapters.llm import get_llm

    # the stage starts here: reading the tree and the turns' content vectors are placement's too
    stage(progress, "Placing in topics", len(pairs))
    tree, base = treefmt.read_for_write(store.root, lazy=lazy)
    dropped = remove_records(tree, RecordData(store), gone) if gone else False
    ids = {r["id"] for r, _ in pairs}
    known = tree.holding(ids)  # records the tree holds already (a clone placed them)
    pairs = [(r, v) for r, v in pairs if r["id"] not in known]
    if not pairs:
        return treefmt.write(store.root, tree, base=base) if dropped else []
    llm = get_llm(store.root)
    llm = llm if llm is not None and llm.config.topics else None
    placer = Placer(store, tree, RecordData(store), llm)
    placer.few = lazy
    pairs = sorted(pairs, key=lambda p: p[0]["ts"])
    counting = store.take_ahead()  # (see count_ahead)
    if counting is not None:
        placer.term_sets.release()
        placer.term_sets = counting
    elif len(pairs) >= COUNT_BESIDE:  # the turns' words counted ahead on the second core
        placer.term_sets.beside([r["text"] for r, _ in pairs])
    try:
        try:
            placer.content_vecs = content_vectors(store, [r for r, _ in pairs])
            pairs = list(zip([r for r, _ in pairs], normalised_rows([v for _, v in pairs])))
            if len(pairs) >= AHEAD_FROM:
                placer.ahead([r for r, _ in pairs], [v for _, v in pairs])
            if len(pairs) >= FLAT_FROM and not any(t.records for t in tree.topics.values()):
                placer.flatten()
            for rec, vec in pairs:
                placer.place(rec, vec)
                tick(progress)
        finally:
            placer.term_sets.close()
        placer.finish(progress)
        store.index_read()  # (names were the last to read it: words' rarity)
        return treefmt.write(store.root, tree, base=base)
    finally:
        placer.release()


def count_ahead(store, records: list[dict]) -> TermSets | None:
    """A TermSets counting the words of the turns a big write will place (COUNT_BESIDE or more),
    in the order placement asks for them, on the second core (TermSets.beside), started as soon
    as the write knows its records: while the write prepares, embeds and writes its files, one
    core is busy and the other idle (about 1.9 s of a 100k-turn import). Placement takes it
    (Core.take_ahead); counts are kept by text, so a turn the write then drops (known already, say)
    only cost the other core its count. None for a smaller write, or with topics off."""
    if not topics_enabled(store):
        return None
    turns = [r for r in records if is_conversation(r) and not is_private(r)]
    if len(turns) < COUNT_BESIDE:
        return None
    counting = TermSets()
    counting.beside([r["text"] for r in sorted(turns, key=lambda r: r["ts"])])
    return counting


def superseded_ids(records: list[dict]) -> set[str]:
    """The ids the records supersede (`supersedes` is an id or a list of ids)."""
    out: set[str] = set()
    for r in records:
        sup = r.get("supersedes")
        out.update([sup] if isinstance(sup, str) else [s for s in sup or [] if isinstance(s, str)])
    return out


def remove_records(tree: Tree, data: RecordData, ids: set[str], at: str = "") -> bool:
    """Take records out of the tree (superseded or forgotten): their topics are renamed and
    re-summarised from what remains, so no name or summary keeps their text; a topic left empty
    without children leaves the tree (a `gone` tombstone). True if anything changed.
    """
    changed = False
    if any(r in ids for r in tree.archived):
        tree.archived = [r for r in tree.archived if r not in ids]
        changed = True
    for tid in sorted(tree.topics):
        t = tree.topics[tid]
        if not any(r in ids for r in t.records):
            continue
        t.records = [r for r in t.records if r not in ids]
        changed = True
        texts, roles = data.texts(t.records) if t.records else ([], [])
        texts_roles = [(x, ro) for x, ro in zip(texts, roles)]
        if t.records and texts_roles:
            t.name = naming.offline_name(texts, data.rarity)
            t.named_by = "offline"
            t.summary = naming.offline_summary(texts, roles, data.rarity)
        else:
            t.name, t.summary = "Untitled topic", ""
    for tid in sorted(tree.topics):
        t = tree.topics.get(tid)
        if t is None or t.records or tree.children(tid):
            continue
        del tree.topics[tid]
        tree.gone[tid] = {
            "into": None,
            "why": "its records were superseded or forgotten",
            "at": at or t.last_active,
        }
        if tree.current == tid:
            tree.current = t.parent
    return changed


def place_existing(store) -> tuple[list[str], int]:
    """Place every indexed conversation record the tree does not hold yet (for stores that predate it)."""
    index = store.index()
    tree = treefmt.read(store.root)
    known = set(tree.topic_of()) | set(tree.archived)
    vecs, _ = index.matrix()
    from ..index.queries import conversation_rows

    rows = conversation_rows(index)
    records, vectors = [], []
    for rowid, rid, vrow in rows:
        if rid in known or vrow is None or vrow < 0:
            continue
        records.append(index.record_at(rowid))
        vectors.append(np.asarray(vecs[vrow], np.float32))
    if not records:
        return [], 0
    return assign_records(store, records, vectors), len(records)
