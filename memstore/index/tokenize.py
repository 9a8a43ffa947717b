"""Text → FTS5 terms: English words (stemmed by FTS5's porter tokenizer) and CJK character bigrams."""

from __future__ import annotations

from ..text import CJK_RUN as _CJK_RUN
from ..text import STOP_WORDS
from ..text import WORD as _WORD
from ..text import bigrams as _bigrams


def index_text(text: str) -> str:
    """What goes into the FTS5 column: the text with each CJK run replaced by its bigrams."""
    if text.isascii() or not _CJK_RUN.search(text):  # isascii reads a flag: no scan of the text
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
