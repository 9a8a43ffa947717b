"""Topic names and summaries: offline by key-phrase extraction, by an LLM when one is configured.

Offline names are the topic's most characteristic phrase (a run of one to three content words a
person wrote, like "bike tire" or "Sarah's birthday cake"), scored by how often and in how many of
the topic's turns it occurs, by how rare its words are in the whole store (so a word every record
holds never names a topic) and by length; export artefacts (bracketed harness text such as
"[Response Cleared]", links, file names, "truncated", "bytes", file types) are removed before any
word is counted. They are deterministic and cost nothing, so the write path never waits for a model. An LLM name or summary is used only when the
reply parses into something name-like; anything else falls back to the offline text, so a failed
call can never become a stored name.
"""

from __future__ import annotations

import re
from collections import Counter
from itertools import chain, compress
from functools import lru_cache
from typing import NamedTuple

from ..text import CONTENT_STOP_WORDS as STOPWORDS  # noqa: F401  (naming's name for them)
from ..text import NAME_WORD, long_name_words
from ..text import storable
from ..text import word_spans  # noqa: F401  (the spans of `words`)

try:  # the C loop over a text's words (memstore/tree/_words.c), where it was built
    from . import _words
except ImportError:  # (a machine without a C compiler: the same results, read in Python)
    _words = None


def _stem(w: str) -> str:
    """A light plural fold so "cakes" and "cake" count as one term."""
    w = w.lower()
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    return w


# Export and harness artefacts: never part of a name or a summary's terms. Bracketed text is the
# harness's ("[Response Cleared]", "[image]", "[truncated 4 KB]"), not what a person wrote.
_ARTEFACT_SPANS = re.compile(
    r"```.*?(?:```|$)|`[^`\n]{0,200}`|\[[^\]\n]{0,120}\]|<[^>\n]{0,120}>|https?://\S+|www\.\S+|\S+@\S+\.\S+"
    r"|\S+\.(?:pdf|png|jpe?g|gif|webp|svg|docx?|xlsx?|pptx?|csv|tsv|txt|json|zip|gz|html?|md|py|js)\b"
    r"|\b[0-9a-f]{12,}\b",
    re.I | re.S,
)
ARTEFACT_WORDS = frozenset(
    """truncated truncate bytes byte kib mib gib pdf png jpg jpeg gif webp svg docx doc xlsx xls pptx
    csv tsv txt json zip html htm http https www com org attachment attachments attached cleared
    redacted omitted null undefined nan untitled""".split()
)
# Words a phrase may hold inside but never start or end with: verbs and fillers people wrap
# around a subject ("keeps going flat", "remember when") that make a name read like a sentence.
_EDGE_WORDS = frozenset(
    """keep keeps kept help helps helped find finds found remember remembered recommend recommended
    recommendation recommendations suggest suggested suggestion suggestions provide provided
    looking trying wondering planning thinking knowing wanted needed asked told give gave given show
    shows showed explain explained describe write wrote written create created start started starts
    work works worked happen happened happens feel feels felt mentioned mention called love loved
    enjoy enjoyed today yesterday tomorrow recently currently lately usually specific different
    important example examples information question questions answer answers tips ideas idea
    options option best better great nice interesting certain particular various several general
    including include includes based related regarding overall whole basically especially question
    monday tuesday wednesday thursday friday saturday sunday january february march april june july
    august september october november december last first next amazing common time times went came bought took saw visited tried
    getting incorporate incorporating month month's week week's year year's day day's""".split()
)


# What every match of _ARTEFACT_SPANS holds: one of these characters or words, a file extension
# after a dot, or a run of 12 hex digits. Most texts hold none, and looking for them (memchr, one
# byte translation) is a fraction of what running the alternation at every position costs.
_FILE_EXT = re.compile(
    r"\.(?:pdf|png|jpe?g|gif|webp|svg|docx?|xlsx?|pptx?|csv|tsv|txt|json|zip|gz|html?|md|py|js)\b",
    re.I,
)
# _FILE_EXT's alternatives spelt out (each ends at \b: the whole run of word characters after the
# dot is one of them), for the C loop
_FILE_EXTS = "pdf png jpg jpeg gif webp svg doc docx xls xlsx ppt pptx csv tsv txt json zip gz"
_FILE_EXTS += " htm html md py js"
_HEX_RUN = 12
_HEX_MARK = bytes(ord("x") if chr(i) in "0123456789abcdefABCDEF" else 32 for i in range(256))
# (a module built from an older _words.c, not rebuilt since: the check is made in Python)
_artefacts_c = getattr(_words, "may_hold_artefact", None)
if _artefacts_c is not None:
    _words.configure_artefacts(tuple(_FILE_EXTS.split()), _HEX_RUN)


def _may_hold_artefact(text: str) -> bool:
    """Whether the text may hold an artefact (see _ARTEFACT_SPANS); an ASCII text is read in one C
    pass where it is built (the check was a third of counting a big write's words)."""
    got = _artefacts_c(text) if _artefacts_c is not None else None
    return got if got is not None else _may_hold_artefact_py(text)


def _may_hold_artefact_py(text: str) -> bool:
    if "`" in text or "[" in text or "<" in text or "@" in text:
        return True
    low = text.lower()
    if "http" in low or "www." in low or _FILE_EXT.search(text) is not None:
        return True
    return b"x" * _HEX_RUN in text.encode("utf-8", "surrogatepass").translate(_HEX_MARK)


def _clean(text: str) -> str:
    """The text without export artefacts (see ARTEFACT_WORDS and _ARTEFACT_SPANS)."""
    return _ARTEFACT_SPANS.sub(" . ", text) if _may_hold_artefact(text) else text


TERM_CHARS = 4_000  # a record's terms come from its first 4,000 characters
PHRASE_CHARS = 1_500  # and its phrases from the first 1,500 (a subject is named early)


class _WordMemo(dict):
    """token -> what a rule makes of it, computed once per distinct token (a write's texts repeat
    a few thousand words hundreds of thousands of times); bounded, since it is only a shortcut."""

    def __init__(self, rule):
        super().__init__()
        self.rule = rule

    def __missing__(self, token: str):
        if len(self) > 200_000:
            self.clear()
        got = self[token] = self.rule(token)
        return got


def _term_word(token: str) -> tuple[str, str, bool] | None:
    """(folded term, surface form, written capitalised) of a NAME_WORD token; None when it is not
    a content word."""
    w = token.strip("'’-")
    low = w.lower()
    if len(w) < 3 or low in STOPWORDS or low in ARTEFACT_WORDS:
        return None
    form = w if not w.isupper() or len(w) <= 4 else low
    return _stem(w), form, form[:1].isupper()


_TERM_WORDS = _WordMemo(_term_word)


def _content_word(token: str) -> str | None:
    w = token.strip("'’-")
    return w if len(w) >= 3 and w.lower() not in STOPWORDS else None


_CONTENT_WORDS = _WordMemo(_content_word)


def words(text: str) -> list[str]:
    """memstore.text.content_words (the same words), each distinct token judged once: a write
    reads every user turn's content words, and a Python step per word was most of that."""
    return list(filter(None, map(_CONTENT_WORDS.__getitem__, long_name_words(text))))


@lru_cache(maxsize=65536)
def _terms_of(text: str) -> tuple[tuple[str, str, bool], ...]:
    """(folded term, surface form, written capitalised) per content word of the text's first
    TERM_CHARS characters. Kept for many texts (each entry is one tuple of shared word tuples): a
    big write's turns look at earlier topics' latest turns long after it first read them."""
    got = filter(None, map(_TERM_WORDS.__getitem__, long_name_words(_clean(text[:TERM_CHARS]))))
    return tuple(got)


@lru_cache(maxsize=8192)
def _term_lists(text: str) -> tuple[tuple, tuple, frozenset, frozenset]:
    """The text's terms as (folded terms, surface forms, folded terms written capitalised,
    distinct folded terms). Cached: a write reads each topic's latest turns once per placed turn.
    Every step here and in counting them is one of Python's C loops (findall, map, filter, zip,
    Counter), not a Python step per word."""
    terms = _terms_of(text)
    if not terms:
        return (), (), frozenset(), frozenset()
    stems, forms, caps = zip(*terms)
    return stems, forms, frozenset(compress(stems, caps)), frozenset(stems)


_STEMS = _WordMemo(_stem)


def _ranked_terms(texts: list[str], n: int) -> tuple[list[str], dict, dict]:
    """The `n` best folded terms of the texts, best first, by (-base score, first position, term),
    with every term's base score and the texts' term lists (see key_terms)."""
    tf: Counter = Counter()
    df: Counter = Counter()
    proper: set[str] = set()
    lists = [_term_lists(t) for t in texts]
    for stems, _forms, caps, distinct in lists:
        tf.update(stems)
        df.update(distinct)
        proper |= caps
    base = {s: df[s] * 2 + c for s, c in tf.items()}
    for s in proper:
        base[s] += 1.5
    if len(base) > n:
        # every term scoring at least the n-th best score, ties included; the rest cannot place
        floor = sorted(base.values(), reverse=True)[n - 1]
        pool = [s for s, b in base.items() if b >= floor]
    else:
        pool = list(base)
    first: dict[str, int] = {}
    pos = 0
    for stems, _forms, _caps, distinct in lists:
        for s in pool:
            if s not in first and s in distinct:
                first[s] = pos + stems.index(s)
        pos += len(stems)
    ranked = sorted(pool, key=lambda s: (-base[s], first[s], s))[:n]
    return ranked, base, {"lists": lists, "first": first}


def key_terms(texts: list[str], k: int = 8, rarity=None, counts=None) -> list[str]:
    """The `k` most characteristic terms: spread over many turns first, then frequency.

    `rarity(folded_terms) -> {term: weight}` (weights in (0, 1], from the store's index) scales
    each score down for words that occur everywhere in the store ("beginner", "advice"), so names
    and the reorganize veto rest on what sets a topic apart. Terms are returned in their most
    common surface form (so "Sarah" keeps its capital). `counts` (a write's tree/termsets.TermSets,
    which has most of its texts counted already) gives the same answer from its counts.
    """
    if counts is not None:
        return counts.key_terms(texts, k, rarity)
    ranked, base, seen = _ranked_terms(texts, max(4 * k, 24))
    if rarity is not None and ranked:
        weight = rarity(ranked)
        first = seen["first"]
        ranked = sorted(ranked, key=lambda s: (-base[s] * weight.get(s, 1.0), first[s], s))
    ranked = ranked[:k]
    # The most common surface form, the first seen on a tie (what Counter.most_common(1) gives):
    # a Counter keeps its keys in the order they were first seen.
    counts: Counter = Counter()
    for _stems, forms, _caps, _distinct in seen["lists"]:
        counts.update(forms)
    wanted = set(ranked)
    best: dict[str, tuple[str, int]] = {}
    for form, c in counts.items():
        s = _STEMS[form]
        if s in wanted:
            got = best.get(s)
            if got is None or c > got[1]:
                best[s] = (form, c)
    return [best[s][0] for s in ranked]


_PHRASE_TOKEN = re.compile(r"[^\W\d_][\w'’-]*|[^\w\s'’-]+|\d[\w.,:/-]*", re.UNICODE)
MIN_RARITY = 0.3  # a word this common in a store of MIN_STORE records or more names nothing
MIN_STORE = 50


def _phrase_word(token: str) -> tuple[str, str, bool] | None:
    """(word, folded word, whether it may not start or end a phrase) of a _PHRASE_TOKEN token; None
    when it breaks runs (punctuation, digits, stop words, artefacts, code-like words)."""
    w = token.strip("'’-")
    low = w.lower()
    if (
        not w[:1].isalpha()
        or len(w) < 3
        or low in STOPWORDS
        or low in ARTEFACT_WORDS
        or len(w) > 24
        or (w.isupper() and len(w) > 5)
        or any(c.isupper() for c in w[1:])
        and not w.isupper()  # camelCase: code, not prose
    ):
        return None
    return w, _stem(w), low in _EDGE_WORDS or low.endswith("ly")


_PHRASE_WORDS = _WordMemo(_phrase_word)


def _runs_phrases(run: list, out: list) -> None:
    """Every one- to three-word part of a run, in order, that neither starts nor ends with an edge
    word (or an adverb in -ly)."""
    n = len(run)
    for i, (a, sa, edge) in enumerate(run):
        if edge:
            continue
        out.append(((sa,), a))
        if i + 1 < n:
            b, sb, edge_b = run[i + 1]
            if not edge_b:
                out.append(((sa, sb), f"{a} {b}"))
            if i + 2 < n:
                c, sc, edge_c = run[i + 2]
                if not edge_c:
                    out.append(((sa, sb, sc), f"{a} {b} {c}"))


def _phrases_of(text: str) -> list[tuple[tuple[str, ...], str]]:
    """(folded words, surface form) of every run of one to three content words in `text` that
    neither starts nor ends with an edge word; punctuation, digits and stop words break runs.
    Read by the C loop where it is built (the same list, half the time), else by `_phrases_py`."""
    cleaned = _clean(text[:PHRASE_CHARS])
    return _words.phrases(cleaned, _PHRASE_WORDS) if _words is not None else _phrases_py(cleaned)


def _phrases_py(cleaned: str) -> list[tuple[tuple[str, ...], str]]:
    """`_phrases_of` of a text already cut and cleaned, in Python."""
    out: list = []
    run: list = []
    for info in map(_PHRASE_WORDS.__getitem__, _PHRASE_TOKEN.findall(cleaned)):
        if info is not None:
            run.append(info)
        elif run:
            _runs_phrases(run, out)
            run = []
    if run:
        _runs_phrases(run, out)
    return out


@lru_cache(maxsize=8192)
def _phrase_lists(text: str) -> tuple[tuple, tuple, frozenset]:
    """The text's phrases (see _phrases_of) as (folded words, surface forms, distinct folded
    words); cached, and counted by Counter's C loop (see _term_lists)."""
    phrases = _phrases_of(text)
    if not phrases:
        return (), (), frozenset()
    keys, forms = zip(*phrases)
    return keys, forms, frozenset(keys)


# key_phrases in C (tree/_words.c): each text's phrases read once into int64 codes of word ids,
# then counted, scored and ranked in one C call per name, not a Python step per phrase (naming a
# 100k-turn import's groups and grown topics reads ~50,000 texts' phrases: most of naming's time).
_key_phrases_c = getattr(_words, "key_phrases", None)  # (None: a module built before it)
_ID_LIMIT = 1 << 21  # an id takes 21 bits: a code packs three
_ID_ROOM = 1 << 20  # ids left for one name's texts; fewer, and the ids start again
_NAMES: list = [None]  # id -> a phrase word or stem (ids from 1)
_IDS: dict[str, int] = {}


def _id(word: str) -> int:
    got = _IDS.get(word)
    if got is None:
        got = _IDS[word] = len(_NAMES)
        _NAMES.append(word)
    return got


def _phrase_code_word(token: str) -> tuple[int, int, bool] | None:
    """_phrase_word's judgement with the word and its stem as ids (what phrase_codes reads)."""
    info = _PHRASE_WORDS[token]
    return None if info is None else (_id(info[0]), _id(info[1]), info[2])


_PHRASE_CODES = _WordMemo(_phrase_code_word)
# phrase_codes' own cache of judgements by a word's bytes (a common word costs no Python object);
# its ids are _IDS', so it is emptied when they start again
_PHRASE_CACHE = bytearray(_words.CACHE_BYTES) if _key_phrases_c is not None else None


@lru_cache(maxsize=8192)
def _phrase_codes(text: str) -> bytes:
    """The text's phrases (see _phrases_of), in order, as native int64 pairs (the stems' ids
    packed, the surface words' ids packed). Cached, as _phrase_lists is."""
    return _words.phrase_codes(_clean(text[:PHRASE_CHARS]), _PHRASE_CODES, _PHRASE_CACHE)


def _renumber() -> None:
    """Start the ids again (every code read under the old ones forgotten)."""
    _IDS.clear()
    del _NAMES[1:]
    _PHRASE_CODES.clear()
    _PHRASE_CACHE[:] = bytes(len(_PHRASE_CACHE))
    _phrase_codes.cache_clear()


def _key_phrases_in_c(texts: list[str], k: int, rarity, roles) -> list | None:
    """key_phrases' [(phrase, score)] from the C loop; None when it cannot say (the texts hold
    more new words than ids are left)."""
    if len(_NAMES) > _ID_LIMIT - _ID_ROOM:
        _renumber()
    try:
        codes = [_phrase_codes(t) for t in texts]
    except ValueError:  # an id past _ID_LIMIT
        _renumber()
        return None
    users = bytes(roles is None or r == "user" for r in roles) if roles else bytes([1]) * len(texts)
    strict = rarity is not None and any(codes) and _store_size(rarity) >= MIN_STORE
    return _key_phrases_c(codes, users, len(texts) > 1, k, rarity, _NAMES, strict, MIN_RARITY)


def key_phrases(
    texts: list[str], k: int = 3, rarity=None, roles=None, scores: list | None = None
) -> list[str]:
    """The `k` most characteristic phrases of the texts, best first (none overlapping another).

    A phrase scores by the turns it occurs in (a user's turn counts double: it is what the person
    brought up) and its count, times the rarity of its rarest word in the store, times a bonus for
    two or three words that recur together. In a store of MIN_STORE records or more, a word with
    rarity under MIN_RARITY (boilerplate most records hold) never names anything.
    """
    got = _key_phrases_in_c(texts, k, rarity, roles) if _key_phrases_c and k <= 64 else None
    if got is not None:
        if scores is not None:
            scores += [score for _phrase, score in got]
        return [phrase for phrase, _score in got]
    lists = [_phrase_lists(t) for t in texts]
    tf: Counter = Counter()  # its keys in the order they first occur (ties go to the first)
    df_user: Counter = Counter()
    df_other: Counter = Counter()
    for n, (keys, _forms, distinct) in enumerate(lists):
        tf.update(keys)
        (df_user if roles is None or roles[n] == "user" else df_other).update(distinct)
    if not tf:
        return []
    many = len(texts) > 1
    df: dict[tuple, float] = {}
    user, other = df_user.get, df_other.get  # (a Counter's own lookup of a missing key is Python)
    for key in tf:
        d = 2.0 * user(key, 0) + other(key, 0)
        if d < 2 and many and len(key) > 1:
            continue  # a multi-word run said once is a sentence fragment, not a subject
        df[key] = d
    singles = sorted(set(chain.from_iterable(df)))
    weight = rarity(singles) if rarity is not None else {}
    strict = rarity is not None and _store_size(rarity) >= MIN_STORE
    bonus = (1.0, 1.6, 1.8)
    scored: dict[tuple, float] = {}
    for key, d in df.items():
        n = len(key)
        r = weight.get(key[0], 1.0) if n == 1 else min(weight.get(w, 1.0) for w in key)
        if strict and r < MIN_RARITY:
            continue
        score = (d * 2 + tf[key]) * r * bonus[n - 1]
        if score > 0:
            scored[key] = score
    # best first; a stable sort keeps equal scores in the order they first occur
    ranked = sorted(scored, key=scored.__getitem__, reverse=True)
    out: list[str] = []
    used: list[set] = []
    for key in ranked:
        words_ = set(key)
        if any(words_ & u for u in used):
            continue
        used.append(words_)
        out.append(_surface(key, lists))
        if scores is not None:
            scores.append(scored[key])
        if len(out) >= k:
            break
    return out


def _surface(key: tuple, lists: list) -> str:
    """A phrase's most common surface form in these texts, the first seen on a tie."""
    forms: Counter = Counter()
    for keys, surface, distinct in lists:
        if key in distinct:
            forms.update(f for kk, f in zip(keys, surface) if kk == key)
    return max(forms.items(), key=lambda kv: kv[1])[0]


def _store_size(rarity) -> int:
    """How many records the rarity function counts over (0 when it does not say)."""
    owner = getattr(rarity, "__self__", None)
    if owner is not None and hasattr(owner, "store_size"):
        return owner.store_size()
    return 0


UNTITLED = "Untitled topic"


def phrase_name(texts: list[str], rarity=None, roles=None, fallback: str = UNTITLED) -> str:
    """A topic name: its best phrase, with the second when the first is a single word."""
    scores: list[float] = []
    phrases = key_phrases(texts, 2, rarity, roles, scores)
    if not phrases:
        return fallback
    name = phrases[0]
    if len(phrases) > 1 and " " not in name and scores[1] >= scores[0] / 2:
        name = f"{name} and {phrases[1]}"
    return name[:1].upper() + name[1:]


def term_set(texts: list[str], k: int = 12, rarity=None) -> set[str]:
    """Folded key terms, for comparing two topics (the offline reorganize veto)."""
    if rarity is not None:
        return {_stem(t) for t in key_terms(texts, k, rarity)}
    # a term's surface forms all fold to it: the folded terms are the ranking's own keys
    return set(_ranked_terms(texts, k)[0])


def has_words(text: str, n: int) -> bool:
    """len(words(text)) >= n, reading only as far as the n-th content word."""
    if n <= 0:
        return True
    for m in NAME_WORD.finditer(text):
        w = m.group().strip("'’-")
        if len(w) >= 3 and w.lower() not in STOPWORDS:
            n -= 1
            if n == 0:
                return True
    return False


# A name or summary needs a text's gist, not all of it: a 50 MB pasted log must not cost minutes.
TEXT_CHARS = 20_000


def scrubbed(texts: list[str]) -> list[str]:
    """Names and summaries are committed derived text: built from texts with their secrets replaced."""
    from ..secrets.policy import scrub

    return [scrub(t[:TEXT_CHARS]) for t in texts]


def offline_name(texts: list[str], rarity=None, roles=None, fallback: str = UNTITLED) -> str:
    return phrase_name(scrubbed(texts), rarity, roles, fallback=fallback)


def first_name(
    first: list[str], texts: list[str], rarity=None, roles=None, clean: list[str] | None = None
) -> str:
    """The name a topic's first turn gives it; from its texts when that turn has nothing to name
    (a file reference, a shouted line): a topic of dozens of turns is never "Untitled topic"
    because of how it began. `clean`: the texts scrubbed already, where the caller has them."""
    name = offline_name(first)
    if name != UNTITLED:
        return name
    return phrase_name(scrubbed(texts) if clean is None else clean, rarity, roles)


class GroupName(NamedTuple):
    """A job of `offline_many` that names a group: offline_name(texts, fallback=fallback)."""

    texts: list[str]
    fallback: str


def offline_many(
    jobs: list, rarity=None, counts=None, at: int | None = None
) -> list[tuple[str | None, str | None]]:
    """(name, summary) per job `(texts, roles, first, rename)`: the name from `first` (the topic's
    first texts) where given, else from the texts where `rename`, else None (kept); the summary
    from the texts. A `GroupName` job gives (its name, None). As `offline_name`/`offline_summary`
    give them one by one, on two cores for a big write (see `_on_two_cores`: the jobs from `at`
    on in the second process, where given); `counts` as for `key_terms`."""

    def one(job):
        if isinstance(job, GroupName):
            return offline_name(job.texts, rarity, fallback=job.fallback), None
        texts, roles, first, rename = job
        # the texts scrubbed once for the name and the summary (the secrets scan's quiet pass and
        # the clean verdicts' keys were made twice per text)
        clean = scrubbed(texts)
        if first is not None:
            name = first_name(first, texts, rarity, roles, clean)
        else:
            name = phrase_name(clean, rarity, roles) if rename else None
        return name, _summary(clean, roles, rarity, counts)

    return _on_two_cores(one, jobs, rarity, at)


def offline_names(texts_each: list[list[str]], rarity=None, fallback=UNTITLED) -> list[str]:
    """`offline_name` of each list of texts, on two cores for a big write."""
    return _on_two_cores(
        lambda texts: offline_name(texts, rarity, fallback=fallback), texts_each, rarity
    )


MANY_JOBS = 256  # fewer names than this are not worth a second process


def _on_two_cores(fn, jobs: list, rarity, at: int | None = None) -> list:
    """[fn(job) for job in jobs], every other job computed by a forked child (memstore/workers.py)
    when there are MANY_JOBS or more. Names and summaries are pure functions of their texts and the
    store's rarity weights; the child reads the weights the parent had looked up before the fork,
    and a job that needs one more (SQL: never in a forked child) is left to the parent."""
    from .. import workers
    from ..secrets import policy

    if rarity is not None:
        rarity([])  # the store's size, read here once, before any fork
    if len(jobs) >= MANY_JOBS:  # (names scrub their texts: the scanner loaded once, not per core)
        from ..secrets import detect

        detect.warm()

    def child_safe(job):
        try:
            return (fn(job),)
        except workers.ParentOnly:
            return None

    out, learnt = workers.split_map(
        child_safe, jobs, min_items=MANY_JOBS, extra=policy.take_fresh, at=at
    )
    policy.add_fresh(learnt)
    return [got[0] if got is not None else fn(job) for got, job in zip(out, jobs)]


def offline_summary(
    texts: list[str], roles: list[str] | None = None, rarity=None, counts=None
) -> str:
    """ "N turns about a, b, c, d, e; opens with: <the first sentence someone asked>" (≤ 220 chars).
    `counts` as for `key_terms`."""
    return _summary(scrubbed(texts), roles, rarity, counts)


def _summary(texts: list[str], roles: list[str] | None, rarity, counts) -> str:
    """`offline_summary` of texts scrubbed already."""
    terms = key_terms(texts, 6, rarity, counts)
    n = len(texts)
    head = f"{n} turn{'s' if n != 1 else ''} about {', '.join(terms)}" if terms else f"{n} turns"
    opener = ""
    for i, text in enumerate(texts):
        if roles and roles[i] != "user":
            continue
        flat = " ".join(_clean(text).split())  # (only the texts read up to the opener)
        if has_words(flat, 2):
            opener = re.split(r"(?<=[.!?])\s", flat, maxsplit=1)[0]
            break
    if opener:
        if len(opener) > 110:
            opener = opener[:109].rstrip() + "…"
        return f"{head}; opens with: {opener}"
    return head


# ----- LLM naming (used only when configured; every failure returns None) ---------------------


def clean_name(reply, max_words: int = 6) -> str | None:
    """A usable topic name from an LLM reply, or None when it does not look like one."""
    if not isinstance(reply, str):
        return None
    reply = storable(reply)
    text = reply.strip().splitlines()[0] if reply.strip() else ""
    text = re.sub(r"^(topic( name)?|name)\s*[:\-]\s*", "", text, flags=re.I).strip(" \"'`*#.")
    if not text or len(text) > 80 or len(text.split()) > max_words:
        return None
    if not re.search(r"\w", text) or text.lower() in {
        "error",
        "none",
        "null",
        "n/a",
        "unknown",
        "topic",
    }:
        return None
    return scrubbed([text])[0]


def clean_summary(reply) -> str | None:
    if not isinstance(reply, str):
        return None
    text = " ".join(storable(reply).split()).strip(" \"'`")
    text = re.sub(r"^summary\s*:\s*", "", text, flags=re.I)
    if len(text) < 8 or text.lower().startswith(("error", "i'm sorry", "i cannot", "as an ai")):
        return None
    return scrubbed([text])[0][:400]


def excerpt(texts: list[str], roles: list[str], limit: int = 1800) -> str:
    """The lines an LLM is shown to name or summarise a topic, scrubbed of secrets like the result."""
    lines, used = [], 0
    for role, text in zip(roles, scrubbed(texts)):
        line = f"- {role}: {' '.join(text.split())[:300]}"
        if used + len(line) > limit:
            break
        lines.append(line)
        used += len(line)
    return "\n".join(lines)


def llm_name(llm, texts: list[str], roles: list[str], parent: str | None = None) -> str | None:
    ctx = f'It is a sub-topic of "{parent}".\n' if parent else ""
    reply = llm.chat(
        [
            {
                "role": "system",
                "content": "You name conversation topics. Reply with the name only.",
            },
            {
                "role": "user",
                "content": f"{ctx}Give a concise topic name (2-5 words) for this conversation "
                f"segment:\n{excerpt(texts, roles)}",
            },
        ],
        temperature=0.3,
        max_tokens=30,
    )
    return clean_name(reply)


def llm_summary(llm, name: str, texts: list[str], roles: list[str]) -> str | None:
    reply = llm.chat(
        [
            {
                "role": "system",
                "content": "You summarise conversation segments in 1-2 plain sentences.",
            },
            {
                "role": "user",
                "content": f'Summarise this conversation segment about "{name}" in 1-2 '
                f"sentences:\n{excerpt(texts, roles)}",
            },
        ],
        temperature=0.3,
        max_tokens=120,
    )
    return clean_summary(reply)
