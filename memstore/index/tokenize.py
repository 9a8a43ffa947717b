"""Text → FTS5 terms: English words (stemmed by FTS5's porter tokenizer) and CJK character bigrams."""

from __future__ import annotations

import re

# Han, Hiragana, Katakana, Hangul and CJK punctuation-free ranges. Runs of these have no spaces,
# so we index overlapping character bigrams (lossless-memory's approach) to make substrings match.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\u31f0-\u31ff\uff66-\uff9f"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_WORD = re.compile(rf"[^\W_]+|[{_CJK}]+", re.UNICODE)

STOP_WORDS = frozenset(
    """a an and are as at be been but by can could did do does for from had has have how i if in
    into is it its me my of on or our so than that the their them then there these they this to
    us was we were what when where which who whom why will with would you your about just any
    some did didn't don't also tell said say says""".split()
)


def _bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def index_text(text: str) -> str:
    """What goes into the FTS5 column: the text with each CJK run replaced by its bigrams."""
    if not _CJK_RUN.search(text):
        return text
    return _CJK_RUN.sub(lambda m: " " + " ".join(_bigrams(m.group(0))) + " ", text)


def query_terms(query: str, drop_stop_words: bool = True) -> list[str]:
    """FTS5 MATCH terms for free user text; every term is quoted, so no user text is FTS syntax.

    A CJK word becomes a phrase of its bigrams (its characters in order) plus each bigram; a
    single CJK character becomes a prefix query over bigrams.
    """
    words = _WORD.findall(query)
    terms: list[str] = []
    for w in words:
        if _CJK_RUN.fullmatch(w):
            if len(w) == 1:
                terms.append(f'"{w}"*')
            else:
                # The whole word as a phrase ranks first; its bigrams alone still match
                # inflected forms (楽しい finds 楽しかった through 楽し).
                grams = _bigrams(w)
                terms.append('"' + " ".join(grams) + '"')
                if len(grams) > 1:
                    terms += [f'"{g}"' for g in grams]
        else:
            terms.append('"' + w.lower() + '"')
    if drop_stop_words:
        content = [t for t in terms if t.strip('"*') not in STOP_WORDS]
        if content:
            terms = content
    seen: set[str] = set()
    return [t for t in terms if not (t in seen or seen.add(t))]


def match_expression(query: str) -> str | None:
    """An OR of the quoted terms (BM25 ranks documents with more and rarer terms first)."""
    terms = query_terms(query)
    return " OR ".join(terms) if terms else None
