"""Search: exact (FTS5 BM25), vector (cosine over the time-ordered matrix) and their fusion.

Candidates are index rows; the verbatim text is read from the day logs only for the hits returned.
The vector scan bounds every row's cosine from its int8 codes and re-scores the best exactly from
the packs, until no other row can enter (see `_VectorScan`): its hits and cosines are those of a
float32 scan of every record's vector.
"""

from __future__ import annotations

import bisect
import re
from concurrent.futures import Future

import numpy as np

from ..index import queries
from ..index.tokenize import match_expression
from ..results import Filters, Hit  # noqa: F401  (re-exported)
from .answers import answers_first

RRF_K = 60
MODES = ("hybrid", "exact", "vector")
# Hybrid fusion (tuned on the LongMemEval_S and SciFact dev splits; docs/quality.md has the numbers):
# a weighted blend of cosine and the query's BM25 scaled by its best match (fuse_scores). Rank
# fusion (RRF) ignores how far ahead a leader is, and lost to its own better half on conversations.
FUSION = "scores"
# On cosine. With user turns embedded as the mean of their sentences (memstore/turn_embedding.py)
# LongMemEval_S dev is best at 0.8 (session recall_all@5 0.952 vs 0.931 at 0.7); SciFact train
# nDCG@10 0.737 at 0.8 vs 0.741 at 0.7. docs/quality.md has the sweep.
FUSION_WEIGHT = 0.8
FUSIONS = ("scores", "rrf")
# A question in the first person ("which shoes did I buy", "my sister's birthday") asks about the
# user's own life, which the user's turns state and the assistant's replies only echo at length:
# in hybrid fusion the assistant's turns then count ROLE_PRIOR of their score. A question about
# what the assistant said ("you recommended", "our last chat") weighs both sides alike.
# LongMemEval_S dev, 231 questions: turn recall_any@10 0.918 -> 0.944, session measures unchanged.
ROLE_PRIOR = 0.8
_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|my|me|mine|myself)\b", re.IGNORECASE)
_ABOUT_ASSISTANT = re.compile(  # past speech only: "can you recommend …" is a request, not a memory of one
    r"\byou\s+(?:\w+\s+)?(?:said|told|mentioned|recommended|suggested|provided|gave|listed|shared|explained|"
    r"described|wrote|answered|replied|advised|proposed)\b|\bdid\s+you\s+(?:\w+\s+)?(?:say|tell|mention|"
    r"recommend|suggest|provide|give|list|share|explain|describe|write|answer|reply|advise|propose)\b|"
    r"\bour\s+(?:\w+\s+)?(?:conversation|chat|discussion)s?\b|\bwe\s+(?:discussed|talked|chatted)\b|"
    r"\b(?:assistant|bot)\b",
    re.IGNORECASE,
)
# A release history (a document named CHANGELOG, CHANGES, HISTORY, NEWS, release notes...:
# memstore/format/record.py doc_kind) says what changed, not how to do it, and is long: in hybrid
# fusion its chunks count CHANGELOG_PRIOR of their score, unless the question asks about changes,
# releases or versions. sqlite-utils' Sphinx docs (docs/quality.md, "Documents"), 10 how-to
# questions: changelog chunks in their top 10, 7 at 1.0, 3 at 0.9, 1 at 0.8, 0 at 0.7; the
# answers' mean reciprocal rank 0.800 at 1.0, 0.833 at 0.9 to 0.7. 0.8 is ROLE_PRIOR's value.
CHANGELOG_PRIOR = 0.8
_ABOUT_CHANGES = re.compile(
    r"\b(?:change[sd]?|changelog|release[sd]?|release\s+notes|versions?|new\s+in|added\s+in|"
    r"removed\s+in|deprecat\w*|upgrad\w*|history|what'?s\s+new|v?\d+\.\d+(?:\.\d+)?)\b",
    re.IGNORECASE,
)
# From this many rows a hybrid search scans vectors in a second thread; below, a thread costs more than it saves.
THREAD_MIN_ROWS = 20_000
# Rows per task of the numpy scan: small, so that the thread done with the FTS query can take a
# share of what is left.
TASK_ROWS = 16_384


def exact_candidates(index, query: str, filters: Filters, limit: int) -> list[tuple[int, float]]:
    """(rowid, bm25 score — higher is better) for the best FTS matches."""
    expr = match_expression(query)
    if not expr:
        return []
    return queries.bm25_rows(index, expr, filters, limit)


class _VectorScan:
    """One vector query in steps, so the scan can run beside the FTS query.

    `prepare` (the constructor), `collect` and `finish` run in the caller's thread (they use the
    SQLite connection it owns); the tasks of `work` are numpy or faiss, release the GIL, and may
    run in any thread.

    The matrix holds int8 codes (memstore/index/vectors.py). The scan gives every row an upper
    bound of its cosine, u = codes . (q / scales) + ||q|| r (r: the row's quantisation error),
    re-scores the best M rows by u exactly from the store's packs (memstore/index/exact.py), and
    stops once the next row's bound is below the k-th exact score (else M doubles): the result
    and its scores are those of a float32 scan over every row. Large unfiltered or time-sliced
    scans let a faiss float16 or int8 (or, opted in, IVF) stage propose the candidates
    (memstore/index/ann.py); the first two bound what they leave out, IVF does not (approximate
    by design: its hits are the exact top of its candidates, `ann.settle`). Row filters gather
    their rows and scan them in numpy.
    """

    def __init__(self, index, qvec, filters: Filters, limit: int, method: str | None = None):
        self.index, self.limit = index, limit
        self.q = np.asarray(qvec, np.float32)
        self.view = None  # the rows the scan covers: a range [lo, hi) or `rows_idx`
        self.rows_idx = None
        self.scanner = None
        self.hidden: set[int] = set()
        self.result: tuple[np.ndarray, np.ndarray] | None = None  # (vrows, scores), best first
        self.problems: list[str] = []
        self.rowid_of: dict[int, int] = {}  # vrow -> record rowid of the rows read exactly
        self.tail = np.zeros(0, np.int64)  # rows of the unsorted tail inside a time window
        vecs, times = index.matrix()
        self.vecs = vecs
        n = vecs.shape[0]
        if n == 0:
            return
        ordered = (
            index.sorted_rows()
        )  # rows [0, ordered) are in time order; the tail after them is not
        timed = filters.since is not None or filters.until is not None
        if timed:
            head = times[:ordered]
            lo = bisect.bisect_left(head, filters.since) if filters.since is not None else 0
            hi = bisect.bisect_left(head, filters.until) if filters.until is not None else ordered
            if ordered < n:
                t = np.asarray(times[ordered:n])
                keep = np.ones(t.shape[0], bool)
                if filters.since is not None:
                    keep &= t >= filters.since
                if filters.until is not None:
                    keep &= t < filters.until
                self.tail = ordered + np.nonzero(keep)[0].astype(np.int64)
        else:
            lo, hi = 0, n
        if hi <= lo and self.tail.size == 0:
            return
        self.lo, self.hi = lo, max(hi, lo)
        if filters.narrows_rows:
            ranges = [(lo, hi)] + ([(ordered, n)] if timed and ordered < n else [])
            rows = queries.vrows_where(index, filters, ranges)
            allowed = np.fromiter(rows, dtype=np.int64, count=len(rows))
            self.tail = np.zeros(0, np.int64)  # the SQL above already picked the tail's rows
            if allowed.size == 0:
                return
            self.rows_idx = np.sort(allowed)
            self.view = self.rows_idx
        elif hi > lo:
            self.view = (lo, hi)
            self.scanner = _scanner(index, hi - lo, method, vecs)
        if not filters.include_hidden:
            ranges = [(lo, hi)] + ([(ordered, n)] if timed and ordered < n else [])
            self.hidden = queries.hidden_vrows(index, ranges)
        self.y = vecs.query(self.q)
        self.qn = np.float32(np.linalg.norm(self.q.astype(np.float64)))
        self.slack = vecs.slack(self.q, self.y)

    @property
    def rows(self) -> int:
        """How many rows the scan covers (before the unsorted tail)."""
        if self.view is None:
            return 0
        if self.rows_idx is not None:
            return int(self.rows_idx.size)
        return self.hi - self.lo

    def work(self):
        """The scan as independent tasks (index/ann.py's `Work`): any thread may run them, and
        `collect` turns their results into `result`. Uses no SQLite connection."""
        from ..index.ann import Work

        if self.view is None:
            return Work([])
        self.want = min(self.limit + len(self.hidden), self.rows)
        if self.scanner is None:
            if self.rows_idx is not None:
                return Work([lambda: self._bounds(self.vecs.take_codes(self.rows_idx), None)])
            return Work(
                [
                    lambda a=a: self._bounds(None, (a, min(a + TASK_ROWS, self.hi)))
                    for a in range(self.lo, self.hi, TASK_ROWS)
                ]
            )
        tasks = getattr(self.scanner, "tasks", None)
        if tasks is None:  # IVF: one search, its candidates with a bound of each one's cosine
            return Work(
                [lambda: _IVF + self.scanner.search(self.vecs, self.q, self.want, self.lo, self.hi)]
            )
        return Work(tasks(self.q, self.want, self.lo, self.hi))

    def _bounds(self, codes, span) -> np.ndarray:
        """u = codes . y + ||q|| r for the given codes, or for rows [a, b) read in 8,192-row
        pieces (an int8 piece cast to float32 stays in cache while it is multiplied)."""
        # the whole scan's size, not the piece's: a last small piece run on two BLAS threads wakes
        # OpenBLAS's team, which then spins (100k rows: CPU 31 ms a query for a 16 ms wall)
        with _one_blas_thread(self.rows):
            return self._bounds_now(codes, span)

    def _bounds_now(self, codes, span) -> np.ndarray:
        if codes is not None:
            errs = self.vecs.errors[self.rows_idx] if self.rows_idx is not None else None
            return codes.astype(np.float32) @ self.y + self.qn * np.asarray(errs, np.float32)
        a, b = span
        out = np.empty(b - a, np.float32)
        for s in range(a, b, 8192):
            e = min(s + 8192, b)
            out[s - a : e - a] = self.vecs.codes[s:e].astype(np.float32) @ self.y
        out += self.qn * np.asarray(self.vecs.errors[a:b], np.float32)
        return out

    def _bounds_of(self, rows: np.ndarray) -> np.ndarray:
        codes = self.vecs.take_codes(rows)
        return codes.astype(np.float32) @ self.y + self.qn * np.asarray(
            self.vecs.errors[rows], np.float32
        )

    def collect(self, work) -> None:
        parts = work.results()
        if self.view is None and not self.tail.size:
            return
        if (
            self.view is not None
            and self.scanner is not None
            and parts
            and isinstance(parts[0][0], str)
        ):
            self.result = self._settled(parts[0][1], parts[0][2])
            return
        rest = -np.inf  # a bound on the cosine of every row the candidates leave out
        if self.view is None:
            rows, u = np.zeros(0, np.int64), np.zeros(0, np.float32)
        elif self.scanner is None:
            u = np.concatenate(parts) if parts else np.zeros(0, np.float32)
            rows = self.rows_idx if self.rows_idx is not None else np.arange(self.lo, self.hi)
        else:
            rows, rest = self._proposed(parts)
            u = self._bounds_of(rows)
        if self.tail.size:
            rows = np.concatenate([rows, self.tail])
            u = np.concatenate([u, self._bounds_of(self.tail)])
        if self.hidden:
            drop = np.isin(rows, np.fromiter(self.hidden, np.int64, len(self.hidden)))
            rows, u = rows[~drop], u[~drop]
        found = self._proved(rows, u, rest)
        if found is None:  # the faiss stage left out rows that may belong: scan them all
            self.scanner = None
            work = self.work()
            work.run()
            self.collect(work)
            return
        self.result = found

    def _settled(self, rows: np.ndarray, bounds: np.ndarray):
        """The IVF candidates (and the unsorted tail of a time window) settled by exact scores,
        reading only the vectors their bounds cannot rule out (index/ann.py `settle`)."""
        from ..index import ann

        if self.tail.size:
            rows = np.concatenate([rows, self.tail])
            bounds = np.concatenate([bounds, self._bounds_of(self.tail)])
        if self.hidden:
            keep = ~np.isin(rows, np.fromiter(self.hidden, np.int64, len(self.hidden)))
            rows, bounds = rows[keep], bounds[keep]

        def read(vrows):
            vecs, problems = exact_rows(self.index, vrows, self.rowid_of, self.vecs)
            self.problems += problems
            return vecs

        return ann.settle(self.q, rows, bounds, self.limit, self.slack, self._bounds_of, read)

    def _proposed(self, parts) -> tuple[np.ndarray, float]:
        """The faiss stage's candidate rows and a bound on the cosine of every other row."""
        from ..index.ann import RESCORE

        k = RESCORE * self.want
        parts = [p for p in parts if p is not None and p[1].size]
        if not parts:
            return np.zeros(0, np.int64), -np.inf
        scores = np.concatenate([p[0] for p in parts])
        rows = np.concatenate([p[1] for p in parts]).astype(np.int64)
        cut = max((float(p[0].min()) for p in parts if len(p) > 2 and p[2]), default=-np.inf)
        if rows.size > k:
            top = np.argpartition(-scores, k - 1)
            cut = max(cut, float(scores[top[k:]].max()))
            rows = rows[top[:k]]
        if cut == -np.inf:
            return rows, -np.inf
        return rows, self.scanner.bound(self.vecs, self.q, cut) + self.qn * self.vecs.err_max()

    def _proved(self, rows: np.ndarray, u: np.ndarray, rest: float):
        """(vrows, exact scores) of the best `limit` rows, best first (ties: lower row first),
        once the bounds show no other row can beat them; None when rows outside `rows` might."""
        k = min(self.limit, rows.size)
        if k == 0:
            return None if rest > -np.inf else (rows[:0], u[:0])
        exact: dict[int, float] = {}
        # 2k rows first: on the 100k bench store the bounds of 78 rows reach the 50th exact score
        # (median of 60 queries, at most 97), so one round settles a query of 50.
        m = min(rows.size, max(2 * k, 32))
        while True:
            if m < rows.size:
                part = np.argpartition(-u, m)  # position m: the best bound of the rows left out
                top, left = part[:m], float(u[part[m]])
            else:
                top, left = np.arange(rows.size), -np.inf
            new = [int(r) for r in rows[top] if int(r) not in exact]
            if new:
                vecs, problems = exact_rows(self.index, new, self.rowid_of, self.vecs)
                self.problems += problems
                got = (vecs.astype(np.float64) @ self.q.astype(np.float64)).astype(np.float32)
                exact.update(zip(new, got.tolist()))
            taken = np.array([int(r) for r in rows[top]], np.int64)
            sc = np.array([exact[int(r)] for r in taken], np.float32)
            order = np.lexsort((taken, -sc))[:k]
            tau = float(sc[order[-1]]) if order.size == k else -np.inf
            if max(left, rest) + self.slack < tau or (m >= rows.size and rest == -np.inf):
                return taken[order], sc[order]
            if m >= rows.size:
                return None
            m = min(rows.size, 2 * m)

    def scan(self, threads: int = 1) -> None:
        work = self.work()
        if threads > 1 and len(work.tasks) > 1:
            work.run_beside(lambda: None)
        else:
            work.run()
        self.collect(work)

    def finish(self) -> list[tuple[int, float]]:
        if self.problems:
            self.index.__dict__.setdefault("vector_problems", set()).update(self.problems)
        if self.result is None:
            return []
        pairs = [(int(v), float(sc)) for v, sc in zip(*self.result) if int(v) not in self.hidden][
            : self.limit
        ]
        if not pairs:
            return []
        # the rows were read exactly, and that read gave their rowids; SQL only for any it did not
        lookup = {v: self.rowid_of[v] for v, _ in pairs if v in self.rowid_of}
        if len(lookup) < len(pairs):
            lookup.update(
                queries.rowids_of_vrows(self.index, [v for v, _ in pairs if v not in lookup])
            )
        return [(lookup[v], sc) for v, sc in pairs if v in lookup]


_IVF = ("ivf",)  # marks the IVF task's result: ("ivf", rows, bounds)

# From this many rows a scan task keeps BLAS to one thread: its pieces are small products, and
# OpenBLAS's thread team waking for each one costs more than it saves (100k rows on a busy
# 2-core machine: 70-98 ms with two BLAS threads, 26-29 ms with one).
ONE_THREAD_ROWS = 16_384


def _one_blas_thread(rows: int):
    """A context in which numpy's BLAS uses one thread, from ONE_THREAD_ROWS rows on."""
    import contextlib

    from .. import workers

    return workers.one_blas_thread() if rows >= ONE_THREAD_ROWS else contextlib.nullcontext()


def exact_rows(index, vrows, rowids: dict | None = None, matrix=None):
    """float32 vectors of these matrix rows as the store holds them (memstore/index/exact.py);
    `rowids` gets {vrow: record rowid} of the rows read; `matrix`: the query's matrix."""
    from ..index import exact

    return exact.rows(index, vrows, rowids, matrix)


def _scanner(index, rows: int, method: str | None, vecs=None):
    """faiss candidate stage for a scan of `rows` rows, or None for the plain numpy scan.

    `method` (else `[settings] vector_index`): "exact" never uses faiss; "auto" (the default) uses
    the float16 scan from FP16_MIN_ROWS rows when faiss is installed and the int8 scan from
    INT8_MIN_ROWS; "fp16" and "int8" pick one of them from FP16_MIN_ROWS on; "ivf" (asked for by
    name: approximate) uses the IVF index from IVF_MIN_ROWS on.
    """
    from ..index import ann

    if method is None:
        settings = getattr(getattr(index.store, "config", None), "settings", None) or {}
        method = str(settings.get("vector_index", "auto"))
    if method == "exact" or rows < (ann.IVF_MIN_ROWS if method == "ivf" else ann.FP16_MIN_ROWS):
        return None
    if method == "auto":
        method = "int8" if rows >= ann.INT8_MIN_ROWS else "fp16"
    scanner = ann.scanner_for(index, method if method in ("ivf", "int8") else "fp16", vecs)
    if method == "ivf" and scanner is not None:
        settings = getattr(getattr(index.store, "config", None), "settings", None) or {}
        scanner.nprobe = int(settings.get("ivf_nprobe", ann.IVF_NPROBE))
    return scanner


def vector_candidates(
    index, qvec: np.ndarray, filters: Filters, limit: int, method: str | None = None
):
    """(rowid, cosine) for the nearest rows; time filters slice the time-ordered matrix."""
    from ..index.ann import SPLIT_ROWS

    job = _VectorScan(index, qvec, filters, limit, method)
    # One thread below SPLIT_ROWS, numpy's pieces too: on the shared 2-core machine (load ~3.5)
    # two threads took 15.6 ms a query at 100k rows, one 12.3 ms.
    job.scan(threads=2 if job.rows >= SPLIT_ROWS else 1)
    return job.finish()


def hybrid_candidates(
    index, query: str, qvec, filters: Filters, limit: int, method: str | None = None
):
    """Exact and vector candidates: a worker thread scans while FTS5 ranks, then this thread helps.

    The faiss scans are split into chunks that both threads take from one list, so once the FTS
    query is done its core joins the scan instead of waiting for it.
    """
    job = _VectorScan(index, qvec, filters, limit, method)
    work = job.work()
    if job.rows >= THREAD_MIN_ROWS:
        exact = work.run_beside(lambda: exact_candidates(index, query, filters, limit))
    else:
        work.run()
        exact = exact_candidates(index, query, filters, limit)
    job.collect(work)
    return exact, job.finish()


def fuse_rrf(
    lists: dict[str, list[tuple[int, float]]], k: int = RRF_K
) -> list[tuple[int, float, dict]]:
    """Reciprocal-rank fusion: score = Σ 1/(k + rank); robust to the two scales."""
    scores: dict[int, float] = {}
    parts: dict[int, dict] = {}
    for name, ranked in lists.items():
        for rank, (rowid, raw) in enumerate(ranked, start=1):
            scores[rowid] = scores.get(rowid, 0.0) + 1.0 / (k + rank)
            parts.setdefault(rowid, {})[name] = {"rank": rank, "score": round(raw, 6)}
    order = sorted(scores, key=lambda r: (-scores[r], r))
    return [(r, scores[r], parts[r]) for r in order]


def _cosines(index, qvec, rowids: list[int]) -> dict[int, float]:
    """Exact cosines for rows that the vector pool did not reach (their vectors read from the store)."""
    if not rowids:
        return {}
    vecs, _ = index.matrix()
    rows = queries.vrows_of_rowids(index, rowids)
    found = [(r, v) for r in rowids if (v := rows.get(r)) is not None and 0 <= v < vecs.shape[0]]
    out = dict.fromkeys(rowids, 0.0)
    if found:
        got, problems = exact_rows(index, [v for _, v in found])
        if problems:
            index.__dict__.setdefault("vector_problems", set()).update(problems)
        q = np.asarray(qvec, np.float32).astype(np.float64)
        scores = (got.astype(np.float64) @ q).astype(np.float32)
        out.update((r, float(c)) for (r, _), c in zip(found, scores))
    return out


def fuse_scores(
    index,
    qvec,
    exact: list[tuple[int, float]],
    vector: list[tuple[int, float]],
    weight: float = FUSION_WEIGHT,
) -> list[tuple[int, float, dict]]:
    """weight·cosine + (1−weight)·BM25 / best BM25 of the query: a blend of scores, not of ranks.

    BM25 has no fixed scale, so it is divided by the query's best keyword score; cosine already
    lies in [−1, 1] and is used as is (min-max scaling it over the candidate pool measured worse:
    it stretches a flat vector pool into a full 0–1 spread). A row that only the keyword pool holds
    gets its real cosine from the matrix; a row only the vector pool holds scored below the
    keyword pool's last row or matched no word, and gets 0 for words.
    """
    cos = dict(vector)
    if qvec is not None:
        cos.update(_cosines(index, qvec, [r for r, _ in exact if r not in cos]))
    top = max((s for _, s in exact), default=0.0) or 1.0
    vrank = {r: i for i, (r, _) in enumerate(vector, 1)}
    out = []
    for r in set(cos) | {r for r, _ in exact}:
        c = cos.get(r, 0.0)
        parts = {"vector": {"rank": vrank.get(r), "score": round(c, 6)}}
        out.append([r, weight * c, parts])
    where = {row[0]: row for row in out}
    for rank, (r, s) in enumerate(exact, 1):
        row = where[r]
        row[1] += (1 - weight) * s / top
        row[2]["exact"] = {"rank": rank, "score": round(s, 6), "norm": round(s / top, 6)}
    out.sort(key=lambda t: (-t[1], t[0]))
    return [tuple(t) for t in out]


def fuse_alpha(
    index, qvec, exact: list[tuple[int, float]], vector: list[tuple[int, float]], alpha: float
):
    """ContextTape's blend: alpha·cosine + (1−alpha)·lexical, lexical = BM25 scaled to [0, 1]."""
    cos = dict(vector)
    lex_max = max((s for _, s in exact), default=0.0) or 1.0
    lex = {r: s / lex_max for r, s in exact}
    missing = [r for r in lex if r not in cos]
    cos.update(_cosines(index, qvec, missing))
    out = []
    for r in set(cos) | set(lex):
        c, lx = cos.get(r, 0.0), lex.get(r, 0.0)
        out.append(
            (
                r,
                alpha * c + (1 - alpha) * lx,
                {"vector": {"cos": round(c, 6)}, "exact": {"lex": round(lx, 6)}},
            )
        )
    out.sort(key=lambda t: (-t[1], t[0]))
    return out


_OPERATOR_WORDS = frozenset({"AND", "OR", "NOT", "NEAR"})
NO_WORDS_NOTE = (
    "the query has no searchable words (only punctuation or AND/OR/NOT, which are not query "
    "syntax here); nothing was searched"
)


def searchable(query: str) -> bool:
    """Whether the query holds a word to look for: not only punctuation, quotes or FTS operators.

    Such a query would otherwise match nothing exactly and everything by meaning (its vector is
    noise), so every mode returns no hits for it rather than arbitrary records.
    """
    from ..text import WORD as _WORD

    return any(w not in _OPERATOR_WORDS for w in _WORD.findall(query or ""))


def search(
    store,
    query: str,
    k: int = 10,
    mode: str = "hybrid",
    filters: Filters | None = None,
    alpha: float | None = None,
    qvec=None,
    pool: int | None = None,
    fusion: str | None = None,
    about_user: bool | None = None,
    answers: bool = True,
) -> list[Hit]:
    """Ranked hits for `query` in one store (the index must be up to date); none without a searchable word.

    `fusion` picks how hybrid mode combines its two rankings: "scores" (the default, FUSION) or
    "rrf" (reciprocal-rank fusion, kept for comparison); `alpha` overrides both with ContextTape's blend.
    `qvec` is the query's vector, or a Future of it (embedded in another thread).
    `about_user` says whether the question is about the user's own life (the role prior, ROLE_PRIOR);
    None decides from `query` (a caller that searches for a question's bare content words passes it).
    `answers` puts the reply that answered a bare question before it (memstore/retrieve/answers.py);
    the quality harness turns it off to show the ranking without it.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}")
    if fusion is not None and fusion not in FUSIONS:
        raise ValueError(f"fusion must be one of {', '.join(FUSIONS)}")
    if not searchable(query):
        return []
    filters = filters or Filters()
    index = store.index(update=False)
    pool = pool or max(50, 3 * k)
    exact, vector = [], []
    if isinstance(qvec, Future) and not qvec.done() and mode == "hybrid":
        # The query is still being embedded (a fresh process loading the model): rank the words
        # meanwhile, then scan the vectors. A query embedded already scans beside the words instead.
        exact = exact_candidates(index, query, filters, pool)
        qvec = qvec.result()
        vector = vector_candidates(index, qvec, filters, pool) if qvec is not None else []
    else:
        if isinstance(qvec, Future):
            qvec = qvec.result()
        if mode in ("hybrid", "vector") and query.strip() and qvec is None:
            qvec = store.embedder.embed_query(query)
        if mode == "exact" or (mode == "hybrid" and qvec is None):
            exact = exact_candidates(index, query, filters, pool)
        elif mode == "vector":
            vector = vector_candidates(index, qvec, filters, pool)
        else:
            exact, vector = hybrid_candidates(index, query, qvec, filters, pool)
    if mode == "exact":
        ranked = [
            (r, s, {"exact": {"rank": i, "score": round(s, 6)}})
            for i, (r, s) in enumerate(exact, 1)
        ]
    elif mode == "vector":
        ranked = [
            (r, s, {"vector": {"rank": i, "score": round(s, 6)}})
            for i, (r, s) in enumerate(vector, 1)
        ]
    elif alpha is not None:
        ranked = fuse_alpha(index, qvec, exact, vector, alpha)
    elif (fusion or FUSION) == "rrf" or qvec is None:
        ranked = fuse_rrf({"exact": exact, "vector": vector})
    else:
        ranked = fuse_scores(index, qvec, exact, vector)
        if about_the_user(query) if about_user is None else about_user:
            ranked = weigh_roles(index, ranked)
        if not _ABOUT_CHANGES.search(query):
            ranked = weigh_changelogs(index, ranked)
    if answers:
        ranked = answers_first(index, ranked, k, filters)
    return [hydrate(store, index, r, s, p) for r, s, p in ranked[:k]]


def about_the_user(query: str) -> bool:
    """Whether a question asks about the user's own life: first person, and not about what the assistant said."""
    return bool(_FIRST_PERSON.search(query)) and not _ABOUT_ASSISTANT.search(query)


def weigh_roles(
    index, ranked: list[tuple[int, float, dict]], prior: float = ROLE_PRIOR
) -> list[tuple[int, float, dict]]:
    """The assistant's turns at `prior` of their fused score (see ROLE_PRIOR), re-sorted."""
    theirs = queries.assistant_rowids(index, [r for r, _, _ in ranked])
    return _scaled(ranked, theirs, prior, "role_prior")


def weigh_changelogs(
    index, ranked: list[tuple[int, float, dict]], prior: float | None = None
) -> list[tuple[int, float, dict]]:
    """Release-history chunks at `prior` (default CHANGELOG_PRIOR) of their fused score, re-sorted."""
    from ..format.record import doc_kind

    prior = CHANGELOG_PRIOR if prior is None else prior
    docs = queries.doc_sources(index, [r for r, _, _ in ranked])
    theirs = {r for r, path in docs.items() if doc_kind(path) == "changelog"}
    return ranked if prior == 1 else _scaled(ranked, theirs, prior, "changelog_prior")


def _scaled(ranked, theirs: set, prior: float, part: str) -> list[tuple[int, float, dict]]:
    """`ranked` with the scores of the rows in `theirs` times `prior` (named in their parts as
    `part`), sorted again by score."""
    if not theirs:
        return ranked
    out = [(r, s * prior, {**p, part: prior}) if r in theirs else (r, s, p) for r, s, p in ranked]
    out.sort(key=lambda t: (-t[1], t[0]))
    return out


def hydrate(store, index, rowid: int, score: float, parts: dict) -> Hit:
    """Read the record behind one hit from its day log."""
    rec = index.record_at(rowid)
    day = queries.day_of(index, rowid)
    source = rec.get("source")
    if isinstance(source, dict) and source.get("file_sha256"):
        from ..ingest.location import current_location

        moved = current_location(index, source)  # a later ingest found the document elsewhere
        if moved:
            source = {**source, "path": moved, "ingested_as": source["path"]}
    return Hit(
        id=str(rec["id"]),
        ts=rec["ts"],
        actor=rec.get("actor"),
        role=rec.get("role"),
        type=rec.get("type"),
        text=rec["text"],
        score=score,
        session=rec.get("session"),
        source=source,
        day=day,
        rowid=rowid,
        parts=parts,
        record=rec,
    )


def search_many(
    stores: list,
    query: str,
    k: int = 10,
    mode: str = "hybrid",
    filters: Filters | None = None,
    alpha: float | None = None,
) -> list[Hit]:
    """Several stores at once: each ranks its own, then reciprocal-rank fusion across stores."""
    if len(stores) == 1:
        return search(stores[0], query, k, mode, filters, alpha)
    qvecs: dict[str, np.ndarray] = {}
    per_store: list[list[Hit]] = []
    for st in stores:
        key = st.config.embedder["model"]
        if mode != "exact" and key not in qvecs:
            qvecs[key] = st.embedder.embed_query(query)
        hits = search(st, query, k, mode, filters, alpha, qvec=qvecs.get(key))
        for h in hits:
            h.store = str(st.root)
        per_store.append(hits)
    fused: list[tuple[float, int, Hit]] = []
    for hits in per_store:
        for rank, h in enumerate(hits, start=1):
            h.parts = {**h.parts, "store_rank": rank}
            fused.append((1.0 / (RRF_K + rank), -h.score, h))
    fused.sort(key=lambda t: (-t[0], t[1], t[2].ts))
    out = []
    for rrf, _, h in fused[:k]:
        h.parts["store_score"] = h.score
        h.score = rrf
        out.append(h)
    return out
