"""Words in text: the tokenizers every part that counts or matches words shares (the index's FTS5
terms, the hash embedder, topic names, recall's keywords, forget's `--match`), and the stop words.

A leaf: it imports nothing of memstore. Each pattern is kept exactly as the part using it has
always split text, because stored data depends on some of them (the hash embedder's vectors).
"""

from __future__ import annotations

import re

# Han, Hiragana, Katakana, Hangul and CJK punctuation-free ranges. Runs of these have no spaces,
# so the index keeps overlapping character bigrams (lossless-memory's approach) to match substrings.
CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\u31f0-\u31ff\uff66-\uff9f"
CJK_RUN = re.compile(f"[{CJK}]+")
WORD = re.compile(
    rf"[^\W_]+|[{CJK}]+", re.UNICODE
)  # a search word: letters and digits, or a CJK run
ALNUM = re.compile(r"[^\W_]+", re.UNICODE)  # letters and digits, no underscore (recall's keywords)
NAME_WORD = re.compile(
    r"[^\W\d_][\w'’-]*", re.UNICODE
)  # a word a topic name may hold: starts with a letter
# NAME_WORD's matches in a text of ASCII characters only (most texts), found a third faster: a
# letter is [A-Za-z] there, and \w [A-Za-z0-9_] (tests/test_tree_speed.py holds the two together)
_ASCII_NAME_WORD = re.compile(r"[A-Za-z][\w'-]*", re.ASCII)


def name_words(text: str) -> list[str]:
    """NAME_WORD.findall(text)."""
    return (_ASCII_NAME_WORD if text.isascii() else NAME_WORD).findall(text)


# NAME_WORD's matches of three characters or more: a shorter one is never a content word, even
# before its apostrophes and hyphens are stripped (and a token that is too short fails as a whole:
# what is left of it from its next character on is shorter still). A third of the words of a text
# are shorter, and a big write looks each word up.
_LONG_NAME_WORD = re.compile(r"[^\W\d_][\w'’-]{2,}", re.UNICODE)
_ASCII_LONG_NAME_WORD = re.compile(r"[A-Za-z][\w'-]{2,}", re.ASCII)


def long_name_words(text: str) -> list[str]:
    """[w for w in NAME_WORD.findall(text) if len(w) >= 3]."""
    return (_ASCII_LONG_NAME_WORD if text.isascii() else _LONG_NAME_WORD).findall(text)


TOKEN = re.compile(
    r"\w+", re.UNICODE
)  # the hash embedder's tokens: never change (stored vectors use it)
_ASCII_TOKEN = re.compile(r"[A-Za-z0-9_]+", re.ASCII)  # TOKEN in an ASCII text, found faster


def tokens(text: str) -> list[str]:
    """TOKEN.findall(text)."""
    return (_ASCII_TOKEN if text.isascii() else TOKEN).findall(text)


STOP_WORDS = frozenset(
    """a an and are as at be been but by can could did do does for from had has have how i if in
    into is it its me my of on or our so than that the their them then there these they this to
    us was we were what when where which who whom why will with would you your about just any
    some did didn't don't also tell said say says""".split()
)


def bigrams(run: str) -> list[str]:
    """Overlapping character pairs of a CJK run (the run itself when it is one character)."""
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


# Words no topic is named after and no content-word pooling reads (tree naming, the sentence model).
CONTENT_STOP_WORDS = frozenset(
    """
a about above actually after again against all almost also although always am an and another any anyone
anything are aren't around as ask asked at be because been before being below between both but by can
can't cannot could couldn't did didn't do does doesn't doing don't done down during each either else
enough even ever every few for from further get gets getting give go goes going gone got had hadn't has
hasn't have haven't having he he'd he'll he's her here here's hers herself him himself his how how's
however i i'd i'll i'm i've if in into is isn't it it's its itself just know let let's like likely
look made make many may maybe me might mine more most much must my myself need needs never new next no
nor not now of off oh ok okay on once one only or other others our ours ourselves out over own please
pretty quite rather really right said same say says see seem seems shall shan't she she'd she'll she's
should shouldn't since so some something still such sure take tell than thank thanks that that's the
their theirs them themselves then there there's these they they'd they'll they're they've thing things
think this those though through thus to too try under until up upon us use used using very want wants
was wasn't way we we'd we'll we're we've well were weren't what what's when when's where where's
whether which while who who's whom why why's will with within without won't would wouldn't yeah yes
yet you you'd you'll you're you've your yours yourself yourselves also lot lots good great sounds
hello hi hey sorry going gonna wanna kind sort mean means means bit able via per etc let's here's
continue proceed
""".split()
)
# ("continue" and "proceed" are how people steer an assistant: "continue" alone was a third of the
# user turns of one real export, and named 49 of its topics and groups)


def content_words(text: str) -> list[str]:
    """Content words of `text` in their original case (stopwords and one- or two-letter words dropped)."""
    out = []
    for w in long_name_words(text):
        w = w.strip("'’-")
        if len(w) >= 3 and w.lower() not in CONTENT_STOP_WORDS:
            out.append(w)
    return out


def word_spans(text: str) -> list[tuple[int, int]]:
    """Where the content words of `text` are: (start, end) character offsets, in order.

    The same words as `content_words(text)`: `[text[s:e] for s, e in word_spans(text)] == content_words(text)`;
    the sentence model pools its token vectors over these spans (memstore/adapters/minilm.py).
    """
    out = []
    for m in NAME_WORD.finditer(text):
        w = m.group().strip("'’-")  # the pattern starts with a letter: only the end can shrink
        if len(w) >= 3 and w.lower() not in CONTENT_STOP_WORDS:
            out.append((m.start(), m.start() + len(w)))
    return out


def storable(text: str) -> str:
    """Someone else's words (a model's reply) as the store can keep them: a lone UTF-16 surrogate
    (half an emoji, which a JSON reply can carry as an escape) becomes U+FFFD, since UTF-8 files
    cannot hold it. The user's own input is refused instead (format/record.py says where)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
