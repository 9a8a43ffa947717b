"""Key terms of many small windows of the same texts, as one big write asks for them.

Placement compares a turn's key terms with those of a topic's latest records (naming.term_set),
for every turn that does not plainly continue or leave its topic; naming then summarises each
topic by its key terms (naming.key_terms). A window moves by a record each time its topic gains
one, so the same texts are ranked again and again: counting their words anew each time (Counter
over a few thousand words) was a quarter of a 100,000-turn import, and naming counted them all once
more.

Here each text is counted once, into arrays over two vocabularies — its terms (folded words) and
their surface forms: which occur, where each first occurs, how often — and a window's ranking is a
few array operations over the concatenation. Texts are counted a chunk at a time (one sort over
the chunk's words, not numpy's per-call cost per text), ahead of placement by a forked child for a
big write (`beside`). The ranking is naming's own: a term scores 2 per text holding it plus 1 per
occurrence (1.5 more when any occurrence is written capitalised); the best `k` by score, then by
where the term first occurs in the window (positions are distinct, so no further tie-break is
needed). A term's surface form is its most common one in the window, the first met on a tie.
"""

from __future__ import annotations

from itertools import chain, repeat

import numpy as np

from ..text import long_name_words
from . import naming
from .naming import _words

KEEP_TEXTS = 150_000  # texts whose counts are kept (a window's records are its topic's latest)
_MISSING = object()  # (a text counted with no terms is kept as None)
STREAM_CHUNK = 500  # texts a child counting ahead sends at a time
_NO_TERMS = -1  # (a text's term count in a chunk when it has none)
# a block's rows of terms, one per text and term: the term's id, where it first occurs in the text
# (counting the text's terms), 2 + how often it occurs, whether an occurrence is capitalised
STEM_COLUMNS = ("term", "first", "score", "capital")


class _Vocab(dict):
    """word -> id, a new word getting the next id (looked up by `map` in C, so only a word not met
    before costs a Python step)."""

    def __init__(self, on_new=None):
        super().__init__()
        self.words: list[str] = []
        self.on_new = on_new

    def __missing__(self, word: str) -> int:
        got = self[word] = len(self.words)
        self.words.append(word)
        if self.on_new is not None:
            self.on_new(word)
        return got


class _TokenForms(dict):
    """token -> the id of its surface form (naming._terms_of's judgement of it), -1 when it is not
    a term; bounded, since it is only a shortcut."""

    def __init__(self, forms: _Vocab):
        super().__init__()
        self.forms = forms

    def __missing__(self, token: str) -> int:
        if len(self) > 200_000:
            self.clear()
        info = naming._TERM_WORDS[token]
        got = self[token] = -1 if info is None else self.forms[info[1]]
        return got


class TermSets:
    def __init__(self):
        self.terms = _Vocab()  # folded term -> id
        self.forms = _Vocab(self._new_form)  # surface form -> id
        self.token_form = _TokenForms(self.forms)  # a token as written -> its form's id, or -1
        self.term_of: list[int] = []  # form id -> its term's id
        self.capital: list[bool] = []  # form id -> written capitalised
        self._arrays = (np.zeros(0, np.int64), np.zeros(0, bool))  # the two, as arrays
        # text -> (block, stem rows a:b, form rows fa:fb, number of terms), None without terms;
        # a block holds a chunk's arrays: its terms' rows (STEM_COLUMNS), one per text and term
        # in it, and its forms' ids, first positions and counts
        self.counted: dict[str, tuple | None] = {}
        self.stream = None  # a forked child counting the texts ahead (see `beside`)
        self.waiting: set[str] = set()  # texts the stream will still send
        self.base = (0, 0)  # the vocabularies' sizes when the child was forked (its ids from there)
        # the child's new term and form ids (from base on) -> ours
        self.theirs = (np.zeros(0, np.int32), np.zeros(0, np.int32))
        self.sent = (0, 0)  # (in the child) the words and forms it has sent
        self.jobs: list[list[str]] = []  # the texts the stream counts, a chunk at a time
        self.at = 0  # how many chunks were taken
        self.here = 0  # texts this process counted itself (tests)
        self.word_cache: bytearray | None = None  # the C loop's words looked up (see _form_ids)

    def release(self) -> None:
        """Stop the child and drop what was counted (its forms' vocabulary refers back to this
        object: a cycle, see Placer.release)."""
        self.close()
        self.__dict__.clear()

    def _new_form(self, form: str) -> None:
        self.term_of.append(self.terms[naming._STEMS[form]])
        self.capital.append(form[:1].isupper())

    def _form_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """term_of and capital as arrays, grown by the forms met since the last call."""
        term_of, capital = self._arrays
        have = len(term_of)
        if have != len(self.term_of):
            self._arrays = (
                np.concatenate([term_of, np.asarray(self.term_of[have:], np.int64)]),
                np.concatenate([capital, np.asarray(self.capital[have:], bool)]),
            )
        return self._arrays

    # ----- counting ---------------------------------------------------------------------------

    def beside(self, texts: list[str]) -> None:
        """Count `texts` (in the order they will be asked for) ahead, in a forked child
        (workers.Stream), while this process places the turns; `close` stops it."""
        from .. import workers

        todo = [t for t in dict.fromkeys(texts) if t not in self.counted]
        self.base = self.sent = (len(self.terms.words), len(self.forms.words))
        self.theirs = (np.zeros(0, np.int32), np.zeros(0, np.int32))
        self.jobs = [todo[i : i + STREAM_CHUNK] for i in range(0, len(todo), STREAM_CHUNK)]
        self.at = 0
        # (the child is forked inside Stream, before `stream` and `waiting` are set: its copy of
        # this object counts every text itself and never waits for a stream)
        stream = workers.Stream(self._counted_chunk, self.jobs)
        self.stream = stream
        self.waiting = set(todo) if stream.pid is not None else set()

    def close(self) -> None:
        if self.stream is not None:
            self.stream.close()
        self.stream, self.waiting, self.jobs = None, set(), []

    def _chunk(self, texts: list[str]) -> tuple[list[int], tuple, np.ndarray, np.ndarray]:
        """Count these texts: (their number of terms, -1 for none; the block; where each text's
        term rows and form rows start in it, one more at the end)."""
        # every token of every text, as the id of the form it is (-1: not a term), one C loop
        found, n_tokens = self._form_ids([naming._clean(t[: naming.TERM_CHARS]) for t in texts])
        kept = found >= 0
        fids = found[kept]
        owner = np.repeat(np.arange(len(texts), dtype=np.int64), n_tokens)
        lens = np.bincount(owner[kept], minlength=len(texts))
        sizes = [n if n else _NO_TERMS for n in lens.tolist()]
        term_of, capital = self._form_arrays()
        text = np.repeat(np.arange(len(texts), dtype=np.int64), lens)
        pos = np.arange(len(fids), dtype=np.int64) - np.repeat(np.cumsum(lens) - lens, lens)
        sids = term_of[fids]
        n_terms = max(len(self.terms.words), 1)
        keys, where, inverse, counts = np.unique(
            text * n_terms + sids, return_index=True, return_inverse=True, return_counts=True
        )
        caps = np.bincount(inverse, weights=capital[fids], minlength=len(keys)) > 0
        n_forms = max(len(self.forms.words), 1)
        fkeys, fwhere, fcounts = np.unique(
            text * n_forms + fids, return_index=True, return_counts=True
        )
        stems = np.empty((len(keys), 4), np.int32)  # a row per (text, term): see STEM_COLUMNS
        stems[:, 0] = keys % n_terms
        stems[:, 1] = pos[where]
        stems[:, 2] = 2 + counts
        stems[:, 3] = caps
        block = (
            stems,
            (fkeys % n_forms).astype(np.int32),
            pos[fwhere].astype(np.int32),
            fcounts.astype(np.int32),
        )
        bounds = np.arange(len(texts) + 1, dtype=np.int64)  # where each text's rows start
        stem_at = np.searchsorted(keys // n_terms, bounds)
        form_at = np.searchsorted(fkeys // n_forms, bounds)
        return sizes, block, stem_at, form_at

    def _form_ids(self, cleaned: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(the form id of every token of these texts, in order; how many tokens each has). The
        C loop where it is built (memstore/tree/_words.c: a text of ASCII characters read there,
        a word met before looked up without a Python step; counting the 100k dev turns of the
        import benchmark took 9.5 s of CPU without it, 5.7 s with it), else `long_name_words` and
        one lookup per token in Python."""
        if _words is not None:
            if self.word_cache is None:  # (its words' ids: this vocabulary's, never changed)
                self.word_cache = bytearray(_words.CACHE_BYTES)
            ids, counts = _words.form_ids(
                cleaned, self.token_form, long_name_words, self.word_cache
            )
            return np.frombuffer(ids, np.int64), np.frombuffer(counts, np.int64)
        tokens = [long_name_words(c) for c in cleaned]
        found = np.fromiter(
            map(self.token_form.__getitem__, chain.from_iterable(tokens)),
            np.int64,
            sum(map(len, tokens)),
        )
        return found, np.fromiter(map(len, tokens), np.int64, len(tokens))

    def _keep(self, texts, sizes, block, stem_at, form_at) -> None:
        if len(self.counted) >= KEEP_TEXTS:
            self.counted.clear()
        s, f = stem_at, form_at  # (lists)
        for i, (text, n) in enumerate(zip(texts, sizes)):
            self.counted[text] = (block, s[i], s[i + 1], f[i], f[i + 1], n) if n > 0 else None

    def _counted_chunk(self, texts: list[str]) -> list:
        """(In the child) the counts of these texts, as bytes, and the terms and forms first met in
        them."""
        sizes, block, stem_at, form_at = self._chunk(texts)
        stem_at, form_at = stem_at.tolist(), form_at.tolist()
        terms, forms = self.terms.words[self.sent[0] :], self.forms.words[self.sent[1] :]
        form_terms = self.term_of[self.sent[1] :]  # (so the parent need not fold them again)
        self.sent = (len(self.terms.words), len(self.forms.words))
        return [terms, forms, form_terms, sizes, stem_at, form_at] + [a.tobytes() for a in block]

    def _receive(self) -> bool:
        """Take in the stream's next answer; False when nothing more comes (what is left is
        counted here)."""
        got = self.stream.next() if self.stream is not None else None
        if got is None or self.at >= len(self.jobs):
            if self.stream is not None:
                self.stream.close()
            self.stream, self.waiting = None, set()
            return False
        chunk = self.jobs[self.at]
        self.at += 1
        terms, forms, form_terms, sizes, stem_at, form_at, *raw = got
        their_terms = _grown(self.theirs[0], map(self.terms.__getitem__, terms), len(terms))
        self.theirs = (
            their_terms,
            _grown(self.theirs[1], self._take_forms(forms, form_terms, their_terms), len(forms)),
        )
        block = [
            np.frombuffer(b, t).copy() if n in (0, 1) else np.frombuffer(b, t)
            for n, (b, t) in enumerate(zip(raw, _BLOCK_TYPES))
        ]
        block[0] = block[0].reshape(-1, len(STEM_COLUMNS))
        for ids, base, theirs in (
            (block[0][:, 0], self.base[0], self.theirs[0]),  # (a view: mapped in place)
            (block[1], self.base[1], self.theirs[1]),
        ):
            new = ids >= base
            if new.any():
                ids[new] = theirs[ids[new] - base]
        self.waiting.difference_update(chunk)
        self._keep(chunk, sizes, tuple(block), stem_at, form_at)
        return True

    def _take_forms(self, forms: list[str], their_terms: list[int], theirs: np.ndarray):
        """Our ids of the surface forms the child met first, each with the id of its term there
        (`their_terms`, mapped to ours by `theirs`): a form new here too is added as `_new_form`
        adds it, its term taken from the child rather than folded again."""
        vocab, base = self.forms, self.base[0]
        for form, term in zip(forms, their_terms):
            got = vocab.get(form)
            if got is None:
                got = vocab[form] = len(vocab.words)
                vocab.words.append(form)
                self.term_of.append(int(theirs[term - base]) if term >= base else term)
                self.capital.append(form[:1].isupper())
            yield got

    def _count(self, text: str):
        got = self.counted.get(text, _MISSING)
        if got is not _MISSING:
            return got
        # the child's counts when they are there; when they are not (the child is behind, its
        # core busy), this process counts the text itself rather than wait
        while text in self.waiting and self.stream.ready() and self._receive():
            if text in self.counted:
                return self.counted[text]
        self.here += 1
        sizes, block, stem_at, form_at = self._chunk([text])
        self._keep([text], sizes, block, stem_at.tolist(), form_at.tolist())
        return self.counted[text]

    # ----- rankings ---------------------------------------------------------------------------

    def _parts(self, texts: list[str]) -> list:
        """The counts of those of `texts` that hold terms, in order (see `counted`)."""
        got = list(map(self.counted.get, texts, repeat(_MISSING)))
        if _MISSING in got:
            got = [self._count(t) if c is _MISSING else c for t, c in zip(texts, got)]
        return list(filter(None, got))  # (a count is a non-empty tuple; None: no terms)

    def _scores(self, parts: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(term ids, scores, first positions) over the texts of `parts`, in any order.

        A window's rows, one per (text, term), are sorted by term (stably: a term's first row is
        its row in the earliest text holding it, where it first occurs, the texts' positions
        being offset by the terms of the texts before) and summed per term; the sums and counts
        are integers, exact in any order."""
        if len(parts) == 1:
            block, a, b, _fa, _fb, _n = parts[0]
            rows = block[0][a:b]
            return rows[:, 0], rows[:, 2] + 1.5 * rows[:, 3], rows[:, 1]
        rows = np.concatenate([p[0][0][p[1] : p[2]] for p in parts])
        order = np.argsort(rows[:, 0], kind="stable")
        rows = rows[order]
        ids = rows[:, 0]
        starts = np.flatnonzero(np.concatenate(([True], ids[1:] != ids[:-1])))
        offsets = np.cumsum([0] + [p[5] for p in parts[:-1]])
        first = rows[starts, 1] + np.repeat(offsets, [p[2] - p[1] for p in parts])[order[starts]]
        score = np.add.reduceat(rows[:, 2], starts) + 1.5 * np.maximum.reduceat(rows[:, 3], starts)
        return ids[starts], score, first

    @staticmethod
    def _best(score: np.ndarray, first: np.ndarray, k: int) -> np.ndarray:
        """Rows of the `k` best by score, then by first position (unordered)."""
        if len(score) <= k:
            return np.arange(len(score))
        floor = np.partition(score, len(score) - k)[len(score) - k]
        pool = np.flatnonzero(score >= floor)
        if len(pool) > k:  # ties at the floor: the earlier first occurrence wins
            pool = pool[np.lexsort((first[pool], -score[pool]))[:k]]
        return pool

    def top(self, texts: list[str], k: int) -> set[str]:
        """naming.term_set(texts, k). Placement asks it for every window it scores (55,000 times
        in a 100k-turn import): the C loop ranks a window where it is built (`_words.top_terms`,
        the same set), else `_top_py`."""
        parts = self._parts(texts)
        if not parts:
            return set()
        if _words is not None:
            return _words.top_terms(parts, k, self.terms.words)
        return self._top_py(parts, k)

    def _top_py(self, parts: list, k: int) -> set[str]:
        ids, score, first = self._scores(parts)
        words = self.terms.words
        return set(map(words.__getitem__, ids[self._best(score, first, k)].tolist()))

    def key_terms(self, texts: list[str], k: int = 8, rarity=None) -> list[str]:
        """naming.key_terms(texts, k, rarity). Naming asks it for every topic a big write names:
        the C loop gives the pool of best terms (`_words.key_pool`, the same terms, scores and
        places) and each term's surface form (`_words.surfaces`) where it is built."""
        parts = self._parts(texts)
        if not parts:
            return []
        words = self.terms.words
        if _ranks_in_c():
            pool = _words.key_pool(parts, max(4 * k, 24))
            ranked = [words[t] for t, _score, _at in pool]
            base = {w: score for w, (_t, score, _at) in zip(ranked, pool)}
            at = {w: place for w, (_t, _score, place) in zip(ranked, pool)}
        else:
            ids, score, first = self._scores(parts)
            pool = self._best(score, first, max(4 * k, 24))
            pool = pool[np.lexsort((first[pool], -score[pool]))]
            ranked = [words[i] for i in ids[pool].tolist()]
            base = dict(zip(ranked, score[pool].tolist()))
            at = dict(zip(ranked, first[pool].tolist()))
        if rarity is not None:
            weight = rarity(ranked)
            ranked = sorted(ranked, key=lambda s: (-base[s] * weight.get(s, 1.0), at[s], s))
        ranked = ranked[:k]
        return self._surfaces(parts, ranked)

    def _surfaces(self, parts: list, ranked: list[str]) -> list[str]:
        """Each term's most common surface form in the texts, the first met on a tie."""
        if _ranks_in_c():
            got = _words.surfaces(parts, [self.terms[s] for s in ranked], self._form_arrays()[0])
            return [self.forms.words[f] for f in got]
        return self._surfaces_py(parts, ranked)

    def _surfaces_py(self, parts: list, ranked: list[str]) -> list[str]:
        fids = np.concatenate([p[0][1][p[3] : p[4]] for p in parts])
        counts = np.concatenate([p[0][3][p[3] : p[4]] for p in parts])
        offsets = np.cumsum([0] + [p[5] for p in parts[:-1]])
        first = np.concatenate([p[0][2][p[3] : p[4]] + off for p, off in zip(parts, offsets)])
        term_of, _capital = self._form_arrays()
        wanted = np.asarray([self.terms[s] for s in ranked], np.int64)
        mine = np.isin(term_of[fids], wanted)
        fids, counts, first = fids[mine], counts[mine], first[mine]
        uniq, where, inverse = np.unique(fids, return_index=True, return_inverse=True)
        total = np.bincount(inverse, weights=counts)
        best: dict[int, tuple] = {}
        for fid, c, at in zip(uniq.tolist(), total.tolist(), first[where].tolist()):
            term = self.term_of[fid]
            got = best.get(term)
            if got is None or c > got[0] or (c == got[0] and at < got[1]):
                best[term] = (c, at, fid)
        forms = self.forms.words
        return [forms[best[self.terms[s]][2]] for s in ranked]


def _ranks_in_c() -> bool:
    """Whether the C loop ranks key terms (a module built from an older _words.c, not rebuilt
    since, has no key_pool: numpy does)."""
    return _words is not None and hasattr(_words, "key_pool")


def _grown(ids: np.ndarray, more, n: int) -> np.ndarray:
    return np.concatenate([ids, np.fromiter(more, np.int32, n)]) if n else ids


# the dtypes of a block's arrays, in order (see TermSets.counted)
_BLOCK_TYPES = (np.int32, np.int32, np.int32, np.int32)
