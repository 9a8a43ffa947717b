"""The C loop over a big write's words (memstore/tree/_words.c) gives what the Python it stands in
for gives: every phrase of naming._phrases_of and every token of TermSets' counting, in order,
on the texts an import holds and on strings made to sit on the rules' edges. Without it (a machine
without a C compiler) the same functions read the texts in Python."""

from __future__ import annotations

import string

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstore.text import long_name_words
from memstore.tree import naming, termsets

words_c = pytest.importorskip("memstore.tree._words")

# The rules' edges: letters, digits and what a word or a number may hold inside (_ ' - . , : /),
# punctuation that makes a token of its own, Python's ASCII whitespace (\x1c-\x1f among it), and
# words the judgements treat apart: stop words, edge words, -ly adverbs, camelCase, shouting.
_PIECES = st.sampled_from(
    list(string.ascii_letters[:6] + string.digits[:3] + "_'-.,:/!?()\"` \t\n\x0b\x1c\x1f")
    + ["the", "keep", "recommend", "quickly", "Python", "data", "camelCase", "ABCDEFGH", "NASA"]
    + ["bike", "tire", "Sarah's", "x-ray", "3/cup", "v2", "e.g.", "it's", "--", "'quoted'"]
)
# and past ASCII, where the classes are the Unicode database's: letters with marks, a combining
# mark, the right single quote (inside a word, never its start), an en dash, a no-break space and
# a line separator (whitespace), a superscript two (numeric, not a decimal digit: it starts a
# word), an Arabic-Indic three (a decimal digit), a titlecase letter, CJK, a letter past the BMP
_UNICODE_PIECES = st.sampled_from(
    ["é", "Café", "naïve", "\u0301", "’", "Sarah’s", "–", "\xa0", "\u2028", "²", "٣", "ǅ", "中文"]
    + ["𝔘", "ß", "ΩMEGA", "Straße"]
)
_TEXTS = st.lists(_PIECES, max_size=40).map("".join)
_ANY_TEXTS = st.lists(_PIECES | _UNICODE_PIECES, max_size=40).map("".join)

REAL = [
    "Can you recommend a good bike tire for gravel? My old one keeps going flat.",
    "Sarah's birthday cake: chocolate-orange, 3/4 cup sugar, bake at 180C for 35 min.",
    "I'm planning a trip to Kyoto in April -- which temples open early? e.g. Kinkaku-ji",
    "def parse_config(path): return json.load(open(path))  # camelCase someVar here",
    "THE QUICK brown fox; NASA's Artemis program (2024) -- quickly explained!",
    "",
    "   \n\t ",
    "Café au lait and the naïve résumé",  # not ASCII: read in Python
]


def _python_phrases(text: str) -> list:
    return naming._phrases_py(naming._clean(text[: naming.PHRASE_CHARS]))


@pytest.mark.parametrize("text", REAL)
def test_phrases_are_naming_s_own(text):
    cleaned = naming._clean(text[: naming.PHRASE_CHARS])
    got = words_c.phrases(cleaned, naming._PHRASE_WORDS)
    assert got == _python_phrases(text)
    assert naming._phrases_of(text) == got


class _Forgetful(dict):
    """naming._PHRASE_WORDS's judgements, the memo emptied on every miss (as the bounded memo is
    when it fills up): the C loop must hold the judgements of the run it is reading."""

    def __missing__(self, token: str):
        self.clear()
        got = self[token] = naming._phrase_word(token)
        return got


@settings(max_examples=400, deadline=None)
@given(_TEXTS | _ANY_TEXTS)
def test_phrases_agree_on_the_rules_edges(text):
    want = naming._phrases_py(text)
    assert words_c.phrases(text, naming._PHRASE_WORDS) == want
    assert words_c.phrases(text, _Forgetful()) == want


# texts that share phrases (a topic's turns), for the rankings
_TOPIC_TEXTS = REAL + [
    "Bike tire pressure for gravel riding, and which tire for the Bike Club’s gravel race",
    "bike TIRES and Tires: gravel again. Gravel gravel gravel.",
    "Sarah asked about the cake again; Sarah wants chocolate cake with orange.",
    "Kyoto temples: Kinkaku-ji, Ginkaku-ji, Fushimi Inari. Kyoto in April is busy.",
]


def _spelt(ids: int, names: list) -> list[str]:
    return [names[(ids >> (21 * j)) & ((1 << 21) - 1)] for j in range(3) if ids >> (21 * j)]


@settings(max_examples=300, deadline=None)
@given(_TEXTS | _ANY_TEXTS)
def test_phrase_codes_are_the_phrases_as_ids(text):
    """phrase_codes gives each phrase of `phrases`, in order, as the ids of its stems and of its
    words (a memo emptied on every miss included: the loop holds the ids it took)."""
    want = naming._phrases_py(text)

    class ForgetfulCodes(dict):
        def __missing__(self, token: str):
            self.clear()
            got = self[token] = naming._phrase_code_word(token)
            return got

    fresh = bytearray(words_c.CACHE_BYTES)
    for memo, cache in [
        (naming._PHRASE_CODES, None),
        (naming._PHRASE_CODES, naming._PHRASE_CACHE),  # (warm from the examples before)
        (ForgetfulCodes(), fresh),
        (ForgetfulCodes(), fresh),  # (every word from the cache now)
    ]:
        raw = words_c.phrase_codes(text, memo, cache)
        pairs = np.frombuffer(raw, np.int64).reshape(-1, 2).tolist()
        got = [
            (tuple(_spelt(stems, naming._NAMES)), " ".join(_spelt(words, naming._NAMES)))
            for stems, words in pairs
        ]
        assert got == want


def test_the_phrase_cache_tells_words_apart():
    """phrase_codes' cache finds a word by a 32-bit hash of its bytes, as form_ids' does: two words
    of one length with the same hash ("jvqpfqg" and "jaczypz") keep their own judgements, and a
    word that ends a run ("the") is kept as one."""
    cache = bytearray(words_c.CACHE_BYTES)
    text = "jvqpfqg jaczypz the jaczypz jvqpfqg, the bike"
    want = naming._phrases_py(text)
    for _ in range(2):  # (the second time from the cache)
        raw = words_c.phrase_codes(text, naming._PHRASE_CODES, cache)
        pairs = np.frombuffer(raw, np.int64).reshape(-1, 2).tolist()
        got = [
            (tuple(_spelt(stems, naming._NAMES)), " ".join(_spelt(words, naming._NAMES)))
            for stems, words in pairs
        ]
        assert got == want
    with pytest.raises(TypeError):
        words_c.phrase_codes(text, naming._PHRASE_CODES, bytearray(10))


def _python_key_phrases(texts, k, rarity, roles):
    """naming.key_phrases as Python ranks them, with the scores."""
    scores: list = []
    c, naming._key_phrases_c = naming._key_phrases_c, None
    try:
        return naming.key_phrases(texts, k, rarity, roles, scores), scores
    finally:
        naming._key_phrases_c = c


class _Store:
    """A rarity function's owner (naming reads its store size: strict from MIN_STORE records)."""

    def __init__(self, size: int):
        self.size = size

    def store_size(self) -> int:
        return self.size

    def rarity(self, terms: list[str]) -> dict[str, float]:
        # some words weigh under MIN_RARITY, some are left out (1.0), all the same on each call
        return {t: (sum(map(ord, t)) % 7) / 6 for t in terms if len(t) % 4}


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_TEXTS | _ANY_TEXTS | st.sampled_from(_TOPIC_TEXTS), min_size=1, max_size=8),
    st.sampled_from([1, 2, 3, 10]),
    st.sampled_from(["none", "flat", "small", "big"]),
    st.lists(st.sampled_from(["user", "assistant"]), min_size=8, max_size=8) | st.none(),
)
def test_key_phrases_are_the_same_in_c(texts, k, weights, roles):
    """The C ranking of a name's phrases (phrase_codes, then key_phrases) gives what naming's
    Python gives: the phrases, best first, none overlapping another, each in its most common
    surface form, with their scores; with and without rarity weights, user turns or not."""
    rarity = {
        "none": None,
        "flat": lambda terms: {t: 1.0 for t in terms},
        "small": _Store(10).rarity,
        "big": _Store(1000).rarity,
    }[weights]
    roles = roles[: len(texts)] if roles else None
    scores: list = []
    got = naming.key_phrases(texts, k, rarity, roles, scores)
    assert (got, scores) == _python_key_phrases(texts, k, rarity, roles)


def test_key_phrases_in_c_start_the_ids_again_when_they_run_out(monkeypatch):
    """Ids are 21 bits: when fewer than a name's room are left they start again, codes read under
    the old ones forgotten; an id past 21 bits all the same (a name's texts with more new words
    than the room) and that name is ranked in Python. The names stay what Python makes of them."""
    texts = _TOPIC_TEXTS[-4:] + ["entirely novel vocabulary here"]
    want = _python_key_phrases(texts, 3, None, None)[0]
    monkeypatch.setattr(naming, "_ID_ROOM", naming._ID_LIMIT - len(naming._NAMES) + 1)
    assert naming.key_phrases(texts, 3) == want
    assert len(naming._NAMES) < 200  # (started again)
    monkeypatch.undo()
    naming._renumber()
    naming._IDS["vocabulary"] = 1 << 21  # (as if the ids had run past 21 bits)
    assert naming.key_phrases(texts, 3) == want
    assert "vocabulary" not in naming._IDS or naming._IDS["vocabulary"] < 1 << 21


def test_key_phrases_refuse_what_is_not_a_code():
    names = naming._NAMES
    with pytest.raises(ValueError):  # one flag per text
        words_c.key_phrases([b""], b"", False, 3, None, names, False, 0.3)
    with pytest.raises(ValueError):  # not pairs
        words_c.key_phrases([bytes(8)], b"\x01", False, 3, None, names, False, 0.3)
    with pytest.raises(IndexError):  # an id past the names
        far = np.array([len(names) + 5, len(names) + 5], np.int64).tobytes()
        words_c.key_phrases([far], b"\x01", False, 3, None, names, False, 0.3)
    with pytest.raises(TypeError):
        words_c.key_phrases(["text"], b"\x01", False, 3, None, names, False, 0.3)
    with pytest.raises(ValueError):  # a judgement's id out of 21 bits
        words_c.phrase_codes("bike", {"bike": (1 << 21, 1, False)})
    with pytest.raises(TypeError):
        words_c.phrase_codes("bike", {"bike": ("bike", "bike", False)})


class _Ids(dict):
    """token -> a new id per distinct token (so the ids say which tokens were looked up), -1 for
    tokens starting with "z" (not a term); optionally emptied on every miss, as a bounded memo
    is when it fills up (the C loop must hold what it took from it)."""

    def __init__(self, clear_on_miss: bool = False):
        super().__init__()
        self.tokens: list[str] = []
        self.clear_on_miss = clear_on_miss

    def __missing__(self, token: str) -> int:
        if self.clear_on_miss:
            self.clear()
        if token.startswith("z"):
            got = -1
        else:
            got = len(self.tokens)
            self.tokens.append(token)
        self[token] = got
        return got


def _tokens_c(texts: list[str], ids: _Ids) -> tuple[list[list[str]], list[int]]:
    raw, counts = words_c.form_ids(texts, ids, long_name_words)
    flat = np.frombuffer(raw, np.int64).tolist()
    sizes = np.frombuffer(counts, np.int64).tolist()
    assert sum(sizes) == len(flat)
    out, at = [], 0
    for n in sizes:
        out.append(flat[at : at + n])
        at += n
    return out, flat


@settings(max_examples=300, deadline=None)
@given(st.lists(_TEXTS | st.sampled_from(REAL), max_size=6))
def test_form_ids_finds_long_name_words(texts):
    for clear in (False, True):
        ids = _Ids(clear)
        got, _flat = _tokens_c(texts, ids)
        want = [long_name_words(t) for t in texts]
        assert [len(g) for g in got] == [len(w) for w in want]
        # each token's id names it (or is -1 for a "z" word): the same tokens, in order
        for g, w in zip(got, want):
            assert [ids.tokens[i] if i >= 0 else None for i in g] == [
                None if t.startswith("z") else t for t in w
            ]


def test_form_ids_refuses_what_is_not_text():
    with pytest.raises(TypeError):
        words_c.form_ids(["fine", 3], _Ids(), long_name_words)
    with pytest.raises(TypeError):
        words_c.form_ids(["fine"], [], long_name_words)
    with pytest.raises(KeyError):  # a word `forms` cannot give is the caller's error, not -1
        words_c.form_ids(["fine"], {}, long_name_words)


def test_counting_is_the_same_with_and_without_the_c_loop(monkeypatch):
    texts = REAL + ["Bike tire pressure for gravel riding", "bike TIRES and Tires: gravel again"]
    native = termsets.TermSets()
    got = native._chunk(texts)
    monkeypatch.setattr(termsets, "_words", None)
    python = termsets.TermSets()
    want = python._chunk(texts)
    assert got[0] == want[0]
    for a, b in zip(got[1], want[1]):
        assert np.array_equal(a, b)
    assert np.array_equal(got[2], want[2]) and np.array_equal(got[3], want[3])
    assert native.forms.words == python.forms.words and native.terms.words == python.terms.words
    for k in (3, 8):
        assert native.key_terms(texts, k) == python.key_terms(texts, k)


def test_naming_reads_phrases_in_python_without_the_c_loop(monkeypatch):
    with_c = [naming._phrases_of(t) for t in REAL]
    monkeypatch.setattr(naming, "_words", None)
    assert [naming._phrases_of(t) for t in REAL] == with_c


def _counted(texts: list[str]) -> termsets.TermSets:
    ts = termsets.TermSets()
    for i in range(0, len(texts), 7):
        chunk = texts[i : i + 7]
        sizes, block, stem_at, form_at = ts._chunk(chunk)
        ts._keep(chunk, sizes, block, stem_at.tolist(), form_at.tolist())
    return ts


_WINDOW_TEXTS = REAL + [
    "Bike tire pressure for gravel riding, and which tire for the Bike Club's gravel race",
    "bike TIRES and Tires: gravel again. Gravel gravel gravel.",
    "Sarah asked about the cake again; Sarah wants chocolate cake with orange.",
    "Kyoto temples: Kinkaku-ji, Ginkaku-ji, Fushimi Inari. Kyoto in April is busy.",
]


# a window: texts added to _WINDOW_TEXTS, and which of them the window holds (repeats allowed)
_WINDOWS = st.tuples(
    st.lists(_TEXTS, min_size=1, max_size=10), st.lists(st.integers(0, 20), min_size=1, max_size=8)
)


def _window(extra: list[str], picks: list[int]) -> tuple[termsets.TermSets, list[str]]:
    texts = list(dict.fromkeys(_WINDOW_TEXTS + extra))
    return _counted(texts), [texts[i % len(texts)] for i in picks]


@settings(max_examples=300, deadline=None)
@given(_WINDOWS, st.sampled_from([1, 3, 12, 20, 1000]))
def test_a_window_s_top_terms_are_the_same(made, k):
    ts, window = _window(*made)
    parts = ts._parts(window)
    want = ts._top_py(parts, k) if parts else set()
    assert ts.top(window, k) == want
    # naming's own ranking, which TermSets stands in for
    assert naming.term_set(window, k) == want


@settings(max_examples=300, deadline=None)
@given(_WINDOWS, st.sampled_from([1, 3, 6, 8, 50]))
def test_a_window_s_key_terms_are_the_same(made, k):
    """TermSets.key_terms from the C loop's pool and surface forms (`key_pool`, `surfaces`) is
    numpy's: the same pool (terms, scores, first places, in order), the same forms, and naming's
    key terms, with and without rarity weights."""
    ts, window = _window(*made)
    parts = ts._parts(window)
    if parts:
        ids, score, first = ts._scores(parts)
        pool = ts._best(score, first, max(4 * k, 24))
        pool = pool[np.lexsort((first[pool], -score[pool]))]
        want = list(zip(ids[pool].tolist(), score[pool].tolist(), first[pool].tolist()))
        assert words_c.key_pool(parts, max(4 * k, 24)) == want
        ranked = [ts.terms.words[t] for t, _s, _f in want]
        assert ts._surfaces(parts, ranked) == ts._surfaces_py(parts, ranked)
    weight = lambda terms: {t: 1.0 + (len(t) % 3) / 2 for t in terms}  # noqa: E731
    with_c = [ts.key_terms(window, k), ts.key_terms(window, k, weight)]
    assert with_c[0] == naming.key_terms(window, k)
    termsets._words = None  # (numpy's ranking)
    try:
        assert with_c == [ts.key_terms(window, k), ts.key_terms(window, k, weight)]
    finally:
        termsets._words = words_c


def test_key_pool_and_surfaces_refuse_what_is_not_a_count():
    ts = _counted(_WINDOW_TEXTS)
    parts = ts._parts(_WINDOW_TEXTS[:2])
    term_of = ts._form_arrays()[0]
    terms = [t for t, _s, _f in words_c.key_pool(parts, 5)]
    assert len(words_c.surfaces(parts, terms + terms[:1], term_of)) == len(terms) + 1
    with pytest.raises(TypeError):
        words_c.key_pool([("not", "a", "count")], 3)
    with pytest.raises(TypeError):
        words_c.surfaces(parts, terms, term_of.astype(np.int32))
    with pytest.raises(IndexError):
        words_c.surfaces(parts, terms, term_of[:1])
    with pytest.raises(KeyError):  # a term none of the window's forms is
        words_c.surfaces(parts, [len(ts.terms.words) + 5], term_of)
    beyond = [parts[0][:4] + (parts[0][0][1].shape[0] + 1,) + parts[0][5:]]
    with pytest.raises(TypeError):
        words_c.surfaces(beyond, terms, term_of)


def test_top_terms_refuses_what_is_not_a_count():
    ts = _counted(_WINDOW_TEXTS)
    parts = ts._parts(_WINDOW_TEXTS[:2])
    with pytest.raises(TypeError):
        words_c.top_terms([("not", "a", "count")], 3, ts.terms.words)
    bad = [(tuple([parts[0][0][0].astype(np.int64)]) + parts[0][0][1:],) + parts[0][1:]]
    with pytest.raises(TypeError):
        words_c.top_terms(bad, 3, ts.terms.words)
    beyond = [parts[0][:2] + (parts[0][0][0].shape[0] + 1,) + parts[0][3:]]
    with pytest.raises(TypeError):
        words_c.top_terms(beyond, 3, ts.terms.words)


def test_the_word_cache_tells_words_apart():
    """The cache finds a word by a 32-bit hash of its bytes: two words of one length with the same
    hash ("jvqpfqg" and "jaczypz", FNV-1a 355329930) share a slot and must keep their own ids."""
    ids = _Ids()
    cache = bytearray(words_c.CACHE_BYTES)
    texts = ["jvqpfqg jaczypz jvqpfqg", "jaczypz jvqpfqg jaczypz bike bike"]
    for _ in range(2):  # (the second time from the cache)
        raw, _counts = words_c.form_ids(texts, ids, long_name_words, cache)
        got = [ids.tokens[i] for i in np.frombuffer(raw, np.int64).tolist()]
        assert got == [t for text in texts for t in long_name_words(text)]
    with pytest.raises(TypeError):
        words_c.form_ids(texts, ids, long_name_words, bytearray(10))


def test_counting_with_a_warm_cache_is_the_same(monkeypatch):
    texts = _WINDOW_TEXTS * 3 + [t.upper() for t in _WINDOW_TEXTS]
    native = termsets.TermSets()
    first = native._chunk(texts)
    again = native._chunk(texts)  # every word from the cache now
    monkeypatch.setattr(termsets, "_words", None)
    python = termsets.TermSets()
    want = python._chunk(texts)
    for got in (first, again):
        assert got[0] == want[0]
        for a, b in zip(got[1], want[1]):
            assert np.array_equal(a, b)


def test_form_ids_reads_the_texts_as_they_were_given():
    """A lookup that empties the caller's list (a __missing__ may run any Python) changes nothing
    of what is read: the texts as they were when the call began."""
    texts = ["bike tire gravel", "Sarah's cake", "naïve résumé café"]
    given = list(texts)

    class Emptying(_Ids):
        def __missing__(self, token: str) -> int:
            texts.clear()
            return super().__missing__(token)

    ids = Emptying()
    raw, counts = words_c.form_ids(texts, ids, long_name_words)
    got = [ids.tokens[i] for i in np.frombuffer(raw, np.int64).tolist()]
    assert got == [t for text in given for t in long_name_words(text)]
    assert np.frombuffer(counts, np.int64).tolist() == [len(long_name_words(t)) for t in given]


_ARTEFACT_PIECES = st.sampled_from(
    list(" .`[<@_-/:xX\n\té")
    + ["http", "HTTP", "htt", "www.", "WwW.", "ww.", "www", "w", "0123456789ab", "deadBEEFcaf", "F"]
    + ["." + e for e in naming._FILE_EXTS.split()]
    + [".PDF", ".Jpeg", ".docx", ".pdfx", ".py_", ".js2", ".jpegs", "file", "report"]
)


@settings(max_examples=500, deadline=None)
@given(st.lists(_ARTEFACT_PIECES, max_size=16).map("".join))
def test_the_artefact_check_is_naming_s_own(text):
    """The C pass that tells whether a text may hold an export artefact (its @ [ < or backtick, "http" and
    "www." in any case, a file extension as the whole word after a dot, 12 hex digits in a run)
    answers as naming's Python does for an ASCII text, and leaves any other text to it."""
    got = words_c.may_hold_artefact(text)
    if not text.isascii():
        assert got is None
    else:
        assert got == naming._may_hold_artefact_py(text), repr(text)
    assert naming._may_hold_artefact(text) == naming._may_hold_artefact_py(text)


@pytest.mark.parametrize("text", REAL)
def test_the_artefact_check_on_real_texts(text):
    assert naming._may_hold_artefact(text) == naming._may_hold_artefact_py(text)
    assert naming._may_hold_artefact(text + " see https://x.io") is True


def test_the_artefact_check_takes_only_plain_extensions():
    try:
        for bad in [("PDF",), ("",), ("p.f",), ("x" * 16,), ("é",), tuple("e" for _ in range(65))]:
            with pytest.raises(ValueError):
                words_c.configure_artefacts(bad, 12)
            with pytest.raises(RuntimeError):  # (a failed configure leaves it unconfigured)
                words_c.may_hold_artefact("text")
    finally:
        words_c.configure_artefacts(tuple(naming._FILE_EXTS.split()), naming._HEX_RUN)
    assert words_c.may_hold_artefact("a.pdf") and not words_c.may_hold_artefact("a pdf")
