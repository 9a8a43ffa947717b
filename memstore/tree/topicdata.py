"""What the tree needs from the index: record vectors, texts and times by record id, and topic centroids.

The tree stores record ids only; vectors and text are looked up here, from the disposable index and
the day logs, so a merged or regrouped topic is always described by the records it holds now.
"""

from __future__ import annotations

import math
from collections import deque
from operator import attrgetter

import numpy as np

from .. import workers
from ..index import queries

# Per embedder: (continue, recall) cosine thresholds. The hashing embedder's cosines run lower
# than a sentence model's for the same relatedness, so one number cannot serve both.
# "recall" and "topic" are the cosines a line or topic needs when it shares no content word with
# the query; a shared word (a name, a thing) counts for more than a cosine can on its own.
# "continue" compares a user turn's content words with the current topic's recent records
# (measured on the scenarios in tests/tree_scenarios.py: it separates follow-ups from new subjects).
# "join" is what a turn that leaves the current topic needs to go back into an earlier topic
# instead of opening a new one (measured on LongMemEval dev haystacks: memstore/bench/topics.py).
# "stay" is what a turn of the same conversation needs to stay in the current topic (people drift
# inside a chat more than they change subject); the hashing embedder, which knows only words,
# gets no slack.
THRESHOLDS = {
    "hash": {"continue": 0.2, "recall": 0.3, "topic": 0.3, "join": 0.3, "stay": 0.2},
    "minilm": {"continue": 0.4, "recall": 0.3, "topic": 0.3, "join": 0.7, "stay": 0.2},
}
DEFAULT_THRESHOLDS = {"continue": 0.3, "recall": 0.3, "topic": 0.3, "join": 0.5, "stay": 0.3}
WORD_WEIGHT = 0.25


def thresholds(store) -> dict:
    base = dict(THRESHOLDS.get(store.config.embedder["name"], DEFAULT_THRESHOLDS))
    for key in list(base):
        value = store.config.settings.get(f"topic_{key}_threshold")
        if isinstance(value, (int, float)):
            base[key] = float(value)
    return base


def normalise(v: np.ndarray) -> np.ndarray:
    # np.linalg.norm's own steps for a vector (the square root of its dot with itself), without
    # its checks: placement normalises a centroid per look, and those checks were half the cost
    n = float(np.sqrt(v.dot(v))) if v.ndim == 1 else float(np.linalg.norm(v))
    return v / n if n > 0 else v


try:  # the C loop of memstore/tree/_words.c, where it was built (and built with mean_into)
    from . import _words

    _mean_into = getattr(_words, "mean_into", None)
except ImportError:
    _mean_into = None

NORMALISE_ROWS = 4_096  # rows normalised at a time by normalised_rows


def normalised_rows(vecs) -> list[np.ndarray]:
    """[normalise(v) for v in vecs], bit for bit, for rows of one width (a matrix or a list of
    vectors): a few rows at a time stacked and divided by their norms at once, each norm from the
    same dot product `normalise` takes (np.vecdot runs a row's dot as v.dot(v) does). An import
    normalised its 100,000 turns and 50,000 content vectors one call each, ~10 us a call."""
    out: list[np.ndarray] = []
    for at in range(0, len(vecs), NORMALISE_ROWS):
        try:
            rows = np.array(
                vecs[at : at + NORMALISE_ROWS], np.float32
            )  # (a copy: divided in place)
        except ValueError:  # rows of unlike widths
            rows = None
        if rows is None or rows.ndim != 2:
            return [normalise(np.asarray(v, np.float32)) for v in vecs]
        norms = np.sqrt(np.vecdot(rows, rows))
        norms[~(norms > 0)] = 1.0  # (normalise leaves such a vector as it is; x / 1 is x)
        rows /= norms[:, None]
        out += list(rows)
    return out


def stacked(vecs: list, dim: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(matrix, missing): the vectors as rows (a zero row for None) and which rows were None.
    `dim` gives the width when no vector does."""
    dim = next((v.shape[0] for v in vecs if v is not None), dim or 1)
    mat = np.zeros((len(vecs), dim), np.float32)
    missing = np.zeros(len(vecs), bool)
    for i, v in enumerate(vecs):
        if v is None:
            missing[i] = True
        else:
            mat[i] = v
    return mat, missing


def mean(vecs: list[np.ndarray]) -> np.ndarray:
    """np.mean(np.stack(vecs), axis=0), step for step (the same sum, divided by the same count),
    without np.mean's own checks, and the rows laid out by one concatenation (np.stack's checks
    of each array were half the time); float32 vectors in a list in one C call where
    memstore/tree/_words.c is built (`mean_into`, the same steps)."""
    if _mean_into is not None and type(vecs) is list and vecs:
        try:
            return _mean_into(np.empty(vecs[0].size, np.float32), vecs)
        except (ValueError, TypeError, BufferError, AttributeError):
            pass  # (not all float32, or not contiguous: numpy's steps)
    total = np.add.reduce(np.concatenate(vecs).reshape(len(vecs), -1), axis=0)
    return np.true_divide(total, np.intp(len(vecs)), out=total, casting="unsafe")


# Work counters for tests and memstore/bench/topics.py: how many record vectors placement read, so
# "a write's cost does not grow with the tree" is checked in operations, not in wall time.
STATS = {"vectors": 0}

TAILS_KEPT = 20_000  # centroids tail_centroid keeps (about 1.6 KB each at 384 dimensions)
DF_SAMPLE = 5_000  # matches counted exactly for a term's document frequency (see RecordData._df)


class RecordData:
    """Lazy lookups over the index for the records the tree mentions (the index must be up to date)."""

    def __init__(self, store):
        self.store = store
        self.index = store.index(update=False)
        self._rows: dict[str, tuple[int, int, float, str, str]] | None = None
        self._vecs = None
        self._exact: dict[str, np.ndarray] = {}  # record id -> its vector, read from its pack
        self.extra_vecs: dict[str, np.ndarray] = {}  # records being written now (not indexed yet)
        self.extra_recs: dict[str, dict] = {}
        self._tails: dict[tuple, np.ndarray | None] = {}  # see tail_centroid

    def rows(self, ids=None) -> dict[str, tuple[int, int, float, str, str]]:
        """record id -> (rowid, vrow, unix ts, role, type); all rows when `ids` is None (first copy wins)."""
        if self._rows is None:
            self._rows = {}
            self._complete = False
        if ids is None:
            if not self._complete:
                self._rows = {}
                for rid, *rest in queries.record_rows(self.index):
                    self._rows[rid] = tuple(rest)
                self._complete = True
            return self._rows
        missing = [i for i in ids if i not in self._rows and i not in self.extra_recs]
        if missing and not self._complete:
            for rid, *rest in queries.record_rows(self.index, missing):
                self._rows[rid] = tuple(rest)
            if any(i not in self._rows for i in missing) and not getattr(self, "_refreshed", False):
                # A write brings only its own days into the index; a record the tree names from a day
                # written since the last read (or pulled) is not there yet: update once, like a read.
                self._refreshed = True
                self.index.update()
                self._vecs = None
                self._exact = {}
                for rid, *rest in queries.record_rows(
                    self.index, [i for i in missing if i not in self._rows]
                ):
                    self._rows[rid] = tuple(rest)
        return self._rows

    def rarity(self, terms: list[str]) -> dict[str, float]:
        """term -> weight in (0, 1]: 1 for a word few records use, near 0 for one nearly all use.

        Document frequencies come from the FTS index (so "cake" also counts "cakes"); cached.
        """
        if not hasattr(self, "_rarity"):
            self._rarity: dict[str, float] = {}
            # The index's vector row count (every record with a vector): COUNT(*) walks a million rows.
            self._n = queries.vector_row_count(self.index)
        n = max(self._n, 1)
        for t in terms:
            if t in self._rarity:
                continue
            self._rarity[t] = (
                math.log(1 + n / (1 + self._df(t))) / math.log(1 + n) if n > 1 else 1.0
            )
        return {t: self._rarity[t] for t in terms}

    def store_size(self) -> int:
        """How many records the rarity weights count over."""
        if not hasattr(self, "_rarity"):
            self.rarity([])
        return self._n

    def _df(self, term: str) -> float:
        """How many records hold `term`. Counted exactly up to DF_SAMPLE matches; past that, scaled up
        from the rowid the sample reached (FTS5 returns matches in rowid order), so a common word
        costs the same at a million records as at a thousand."""
        workers.parent_only()  # SQL: never in a forked child
        try:
            count, last = queries.match_sample(
                self.index, '"' + term.replace('"', "") + '"', DF_SAMPLE
            )
        except Exception:  # an odd token FTS rejects: treat it as rare rather than fail a write
            return 0.0
        if count < DF_SAMPLE or not last:
            return float(count)
        if not hasattr(self, "_top"):
            self._top = queries.max_rowid(self.index)
        return count * max(self._top, last) / last

    def matrix(self) -> np.ndarray:
        if self._vecs is None:
            self._vecs, _ = self.index.matrix()
        return self._vecs

    def vector(self, rid: str) -> np.ndarray | None:
        STATS["vectors"] += 1
        if rid in self.extra_vecs:
            return self.extra_vecs[rid]
        row = self.rows([rid]).get(rid)
        if row is None or row[1] is None or row[1] < 0:
            return None
        if rid not in self._exact:
            self._read_exact([rid])
        return self._exact[rid]

    def _read_exact(self, rids: list[str]) -> None:
        """The records' vectors as the store holds them (the index's int8 codes are only an
        approximation: placement and reorganisation compare topics by small margins)."""
        from ..index import exact

        rows = self.rows(rids)
        want = [(r, v) for r in rids if r in rows and (v := rows[r][1]) is not None and v >= 0]
        if want:
            got, _problems = exact.rows(self.index, [v for _, v in want])
            self._exact.update((r, got[i]) for i, (r, _) in enumerate(want))

    def read_ahead(self, rids: list[str]) -> None:
        """Read the stored vectors of these records in one batch (those not read yet)."""
        self.rows(rids)
        self._read_exact([r for r in rids if r not in self._exact and r not in self.extra_vecs])

    def centroid(self, rids: list[str], last: int | None = None) -> np.ndarray | None:
        """Normalised mean of the records' vectors (only the `last` ones when given)."""
        pick = rids[-last:] if last else rids
        extra = self.extra_vecs
        try:  # the records a write is placing (every one, in an import): no lookup in the index
            vecs = [extra[r] for r in pick]
        except KeyError:
            pass
        else:
            STATS["vectors"] += len(vecs)
            return normalise(mean(vecs)) if vecs else None
        self.rows(pick)
        self._read_exact([r for r in pick if r not in self._exact and r not in self.extra_vecs])
        vecs = [v for v in (self.vector(r) for r in pick) if v is not None]
        if not vecs:
            return None
        return normalise(mean(vecs))

    def tail_centroid(self, rids: list[str], last: int) -> np.ndarray | None:
        """`centroid(rids, last)`, kept by the records it averages: a group's vector averages a few
        topics' latest records, and a record placed anywhere under it asks for the group's vector
        again while all but one of those topics are as they were."""
        key = tuple(rids[-last:])
        if key in self._tails:
            return self._tails[key]
        if len(self._tails) >= TAILS_KEPT:
            self._tails.clear()
        got = self._tails[key] = self.centroid(rids, last=last)
        return got

    def time(self, rid: str) -> float:
        if rid in self.extra_recs:
            from ..format.timeutil import from_iso

            return from_iso(self.extra_recs[rid]["ts"]).timestamp()
        row = self.rows([rid]).get(rid)
        return row[2] if row else 0.0

    def record(self, rid: str) -> dict | None:
        if rid in self.extra_recs:
            return self.extra_recs[rid]
        row = self.rows([rid]).get(rid)
        return self.index.record_at(row[0]) if row else None

    def texts(self, rids: list[str], limit: int = 60) -> tuple[list[str], list[str]]:
        """(texts, roles) of up to `limit` records: the first ones and the most recent ones."""
        pick = rids if len(rids) <= limit else rids[: limit // 2] + rids[-(limit - limit // 2) :]
        texts, roles, stored = [], [], []
        self.rows(pick)
        for rid in pick:
            rec = self.record(rid)
            if rec is not None:
                texts.append(rec.get("text", ""))
                roles.append(rec.get("role", "user"))
                if rid not in self.extra_recs:  # (a record this write brings has no verdict saved)
                    stored.append(texts[-1])
        if stored:
            self._recall_clean(stored)
        return texts, roles

    def _recall_clean(self, texts: list[str]) -> None:
        """Tell the secret scrubber which of these texts an earlier process already found clean, so
        naming (which scrubs what it reads, cut at naming.TEXT_CHARS) does not scan them again."""
        from ..secrets import policy as secret_policy
        from ..secrets.detect import quiet
        from .naming import TEXT_CHARS

        cut = [t[:TEXT_CHARS] for t in texts if t]
        keys = [secret_policy.clean_key(t) for t in cut if not quiet(t)]  # (a quiet one needs none)
        secret_policy.known_clean(queries.clean_keys(self.index, secret_policy.unchecked(keys)))


TOPIC_RECORDS = 16  # a topic's vector: the mean of its latest records (drift-tolerant, bounded)
GROUP_SAMPLE = 8  # a group's vector: the mean of at most this many topics found under it


NEWEST = attrgetter("last_active", "id")  # a group's sample: its newest topics first


def topic_vector(
    tree, data: RecordData, tid: str, cache: dict, newest=None, memo=None
) -> np.ndarray | None:
    """A topic's centroid (its latest TOPIC_RECORDS records); a group (no records of its own)
    averages the vectors of the first GROUP_SAMPLE topics with records found under it,
    breadth-first, newest first. Either way the cost is bounded, whatever the size of the tree.
    `newest(tid)` gives a topic's children newest first (fanout.Kids keeps them; default: the
    tree's, sorted by NEWEST); `memo` (a GroupMemo) keeps what each group's vector was made from."""
    if tid in cache:
        return cache[tid]
    t = tree.topics[tid]
    vec = data.centroid(t.records, last=TOPIC_RECORDS) if t.records else None
    if vec is None:
        children = newest or (lambda x: sorted(tree.children(x), key=NEWEST, reverse=True))
        vec = memo.vector(tid, data, cache) if memo is not None else _MISSING
        if vec is _MISSING:
            vec = _group_vector(tid, data, cache, children, memo)
    cache[tid] = vec
    return vec


_MISSING = object()


def _sample(topic, data: RecordData, cache: dict) -> np.ndarray | None:
    """What a group's vector takes from one topic found under it: the topic's vector when it is
    kept in `cache`, else the centroid of its latest few records."""
    v = cache.get(topic.id) if topic.id in cache else None
    return v if v is not None else data.tail_centroid(topic.records, TOPIC_RECORDS // 4)


def _group_vector(tid: str, data: RecordData, cache: dict, children, memo) -> np.ndarray | None:
    found: list[np.ndarray] = []
    read: list[tuple] = []  # (topic whose children were read, their version)
    took: list[tuple] = []  # (topic sampled, what it gave)
    queue, seen = deque([tid]), {tid}
    visited = 0
    while queue and len(found) < GROUP_SAMPLE and visited < 4 * GROUP_SAMPLE:
        here = queue.popleft()
        visited += 1
        if memo is not None:
            read.append((here, memo.version(here)))
        for k in children(here):
            if k.id in seen:
                continue
            seen.add(k.id)
            if k.records and len(found) < GROUP_SAMPLE:
                v = _sample(k, data, cache)
                took.append((k, v))
                if v is not None:
                    found.append(v)
            queue.append(k.id)
    vec = normalise(mean(found)) if found else None
    if memo is not None:
        memo.keep(tid, read, took, vec)
    return vec


class GroupMemo:
    """What each group's vector was made from: the children lists its walk read (by their version,
    see fanout.Kids.version) and the vector each topic it sampled gave. A record placed under a
    group drops the group's vector (the write cannot tell cheaply whether the record's topic was
    among those sampled), but most of the time the walk would read the same lists and the same
    vectors again (a big write's topic has its newest sibling and sampled neighbours unchanged):
    then the vector is the one made before, the same bits, without the walk and the mean."""

    def __init__(self, version):
        self.version = version  # topic id (None: the root) -> the version of its children list
        self.made: dict[str, tuple] = {}

    def keep(self, tid: str, read: list, took: list, vec) -> None:
        self.made[tid] = (read, took, vec)

    def vector(self, tid: str, data: RecordData, cache: dict):
        """The group's vector as made before, when all it was made from is as it was; else
        _MISSING."""
        got = self.made.get(tid)
        if got is None:
            return _MISSING
        read, took, vec = got
        version = self.version
        for here, n in read:
            if version(here) != n:
                return _MISSING
        for topic, v in took:
            if _sample(topic, data, cache) is not v:
                return _MISSING
        return vec
