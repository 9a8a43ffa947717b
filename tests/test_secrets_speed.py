"""The secrets scan's shortcuts skip only what cannot hold a finding: each is held against the plain
way it replaces (every line lowered and searched, every rule tried, the long-token expression)."""

from __future__ import annotations

import random
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstore.bench.secret_set import labelled_set
from memstore.secrets import detect

B62 = string.ascii_letters + string.digits
UPPER = string.ascii_uppercase + string.digits
# Characters that change length when lowered (İ), that case-insensitive matching takes for an ASCII
# letter while lower() keeps them (ſ for s, ı for i, the Kelvin sign for k), and other non-ASCII.
ODD = ["İ", "ſ", "ı", "\u212a", "ß", "é", "😀", "—", "\ud800"]


def _texts(n: int = 400, seed: int = 3) -> list[str]:
    """Anchors in any case and cut by line breaks, secrets, 19/20/21-character runs, odd
    characters, CRLF: pieces joined at random."""
    rng = random.Random(seed)
    secrets = [line for c in labelled_set(copies=1) for line in c.text.splitlines() if line]
    words = list(detect._ANCHORS) + ["passphrase", "private_key_id", "paſſword", "ſecret"]

    def run(alphabet: str, k: int) -> str:
        return "".join(rng.choice(alphabet) for _ in range(k))

    def piece() -> str:
        k = rng.randrange(8)
        if k == 0:
            return rng.choice(secrets)
        if k == 1:
            word = rng.choice(words)
            return "".join(c.upper() if rng.random() < 0.5 else c for c in word)
        if k == 2:
            word = rng.choice(words)
            cut = rng.randrange(1, len(word))
            return word[:cut] + rng.choice(["\n", "\r\n"]) + word[cut:]
        if k == 3:
            return run(detect._LONG_TOKEN_CHARS, rng.choice([19, 20, 21]))
        if k == 4:
            name = rng.choice(["password", "paſſword", "ſecret", "API_KEY", "pwd", "passphrase"])
            return name + rng.choice([": ", "=", " is "]) + run(B62 + "!-_", rng.choice([8, 24]))
        if k == 5:
            return rng.choice(ODD)
        if k == 6:
            if rng.random() < 0.3:  # an AWS key id, whole or wrapped
                return rng.choice(["AKIA", "ASIA"]) + run(UPPER, 16) + rng.choice(["", "\n"])
            token = rng.choice(["ghp_", "sk-", "hf_", "xoxb-", "glpat-"]) + run(B62, 40)
            cut = rng.randrange(3, len(token) - 2)
            return token[:cut] + rng.choice(["\n", "\\n", "\n> "]) + token[cut:]
        return run(string.ascii_lowercase + " ", rng.randrange(1, 40))

    seps = ["", " ", "\n", "\r\n", "\t", "é"]
    return [
        "".join(piece() + rng.choice(seps) for _ in range(rng.randrange(1, 8))) for _ in range(n)
    ]


def test_the_long_token_test_agrees_with_the_expression():
    """`_has_long_token` finds a run of 20 token characters exactly where `_LONG_TOKEN` does: at
    the text's start and end, beside non-ASCII characters and lone surrogates, one short of it."""
    cases = []
    for n in (19, 20, 21):
        for c in detect._LONG_TOKEN_CHARS:
            cases.append(c * n)
        for left, right in [("", ""), ("é", " "), (" ", "😀"), ("\ud800", "\n"), ("İ", "ſ")]:
            cases.append(left + "aB3_+/=.:-" * 2 + "x" * (n - 20) + right)
            cases.append("x" * (n - 1) + left + "y" + right + "z" * 19)
    cases += _texts()
    for text in cases:
        assert detect._has_long_token(text) == bool(detect._LONG_TOKEN.search(text)), repr(text)
    assert detect._has_long_token("é" + "a" * 20) and not detect._has_long_token("a" * 19 + "é")


def _every_line_holding_an_anchor(text: str) -> list[tuple[int, int]]:
    lowered = text.lower()
    if len(lowered) != len(text):
        return [(0, len(text))]
    spans, start = [], 0
    for line in text.split("\n"):
        if any(a in lowered[start : start + len(line)] for a in detect._ANCHORS):
            spans.append((start, start + len(line)))
        start += len(line) + 1
    return spans


def test_the_anchor_search_finds_every_line_that_holds_an_anchor():
    """One search from each anchor's rare character finds the same lines as looking for every
    anchor in every line: an anchor first or last on its line, on a later line, upper-case."""
    cases = []
    for anchor in detect._ANCHORS:
        for a in (anchor, anchor.upper()):
            cases += [a, f"{a}\nx", f"x\n{a}", f"one\ntwo\r\nthree {a}", f"x{a}x\n\n{a}"]
            cases += [f"İ\n{a}", f"{a[:-1]}\n{a[-1]}", f"{a}ſ"]
    cases += _texts()
    for text in cases:
        assert detect._candidate_lines(text, text.lower()) == _every_line_holding_an_anchor(text), (
            repr(text)
        )


def test_rules_tried_only_on_lines_holding_their_words_find_the_same():
    """A line's findings are the same whether each rule is tried on every line or only on lines
    holding one of its words, for every rule: secrets of each kind, in odd case and beside
    characters that lower() keeps but case-insensitive matching folds (paſſword)."""

    def found(text: str, gated: bool) -> list:
        out = []
        report = lambda *a: out.append(a)  # noqa: E731
        lowered = text.lower()
        aligned = lowered if gated and len(lowered) == len(text) else None
        for start, end in detect._candidate_lines(text, lowered):
            detect._scan_line(text, start, end, report, aligned)
        return out

    cases = [c.text for c in labelled_set(copies=1)] + _texts()
    cases += ["key paſſword: Hunter2-Secret!", "the key\nmy paſſword is Tr0ub4dor&3"]
    hits = 0
    for text in cases:
        plain = found(text, gated=False)
        assert found(text, gated=True) == plain, repr(text)
        hits += len(plain)
    assert hits > 200  # the cases do hold findings
    assert [f.kind for f in detect.scan("key paſſword: Hunter2-Secret!")] == ["generic-secret"]


def test_each_rule_word_is_in_every_match_of_its_rule():
    """Every token rule's match, lowered, holds one of that rule's words."""
    texts = [c.text for c in labelled_set(copies=2)] + _texts()
    for kind, pattern, _group, words, _caseless in detect._GATED_RULES:
        matches = [m.group(0).lower() for t in texts for m in pattern.finditer(t)]
        assert matches, kind  # the labelled set has one of each
        for m in matches:
            assert any(w in m for w in words), (kind, m)


def test_the_wrapped_token_pass_skips_only_prefixes_the_text_cannot_hold():
    """Skipping the prefixes with a "_" or "-" when the text has none finds what trying every
    prefix's every place finds."""

    def every_place(text: str) -> list:
        out, lowered = [], text.lower()
        for prefix in detect._WRAP_PREFIXES:
            pos = lowered.find(prefix)
            while pos != -1:
                detect._try_wrapped(text, pos, lambda *a: out.append(a))
                pos = lowered.find(prefix, pos + len(prefix))
        return out

    cases = [c.text for c in labelled_set(copies=1)] + _texts()
    cases += ["token xoxb\n-1234567890-abcdefghij", "AKIA\nIOSFODNN7ABCDEFG", "Sk\n-" + B62 * 2]
    hits = 0
    for text in cases:
        if len(text.lower()) != len(text):
            continue
        out = []
        detect._scan_wrapped(text, lambda *a: out.append(a), text.lower())
        assert out == every_place(text), repr(text)
        hits += len(out)
    assert hits > 20


def _quiet_by_python(text: str) -> bool:
    """What secrets/_quiet.c tells, the Python way: a text with no line the rules would read (no
    anchor word in text.lower(), which must be as long as the text), no private-key header and no
    long token."""
    return (
        not detect._candidate_lines(text, text.lower())
        and "-----BEGIN " not in text
        and not detect._has_long_token(text)
    )


_EDGE_PIECES = st.sampled_from(
    list(detect._ANCHORS)
    + [a.upper() for a in detect._ANCHORS]
    + [a[:-1] for a in detect._ANCHORS if len(a) > 1]
    + [a[1:] for a in detect._ANCHORS if len(a) > 1]
    + ["-----BEGIN ", "-----begin ", "----BEGIN ", "-----BEGIN", "a" * 19, "b" * 20, "=+/.:-_"]
    + list(' \n\r\t\x00\x7fé_-:/"kwKWxzjJ')
    + ["ſecret", "\u212aey", "İ", "\u212a", "K", "ß", "Straße", "中文", "–", "’", "𝔘", "\xa0", "É"]
)


@settings(max_examples=500, deadline=None)
@given(st.lists(_EDGE_PIECES, max_size=12).map("".join))
def test_a_quiet_text_is_told_in_c_as_in_python(text):
    """The C pass (secrets/_quiet.c) says a text is quiet exactly when the Python says so, on
    strings made of the anchors (whole, cut, in any case), the header and runs one short of a long
    token, at the text's edges and beside non-ASCII look-alikes; a quiet text has no finding."""
    quiet = pytest.importorskip("memstore.secrets._quiet")
    assert quiet.quiet(text) == _quiet_by_python(text), repr(text)
    if quiet.quiet(text):  # the rules and plugins, asked all the same, find nothing
        assert not detect.scan_rules(text) and not detect.scan_detect_secrets(text, True)


def test_the_scan_finds_the_same_with_and_without_the_c_pass(monkeypatch):
    """detect.scan with the C pass skips only texts the rules and plugins cannot flag: the same
    findings as without it on the labelled set (every kind of secret, every look-alike) and on
    random joins of anchors, secrets and runs; most of the set's look-alikes are not quiet, and
    plain prose is."""
    quiet = pytest.importorskip("memstore.secrets._quiet")
    cases = [c.text for c in labelled_set(copies=1)] + _texts()
    cases += ["Can you recommend a good bike tire for gravel?", "", "x" * 19, "-----BEGIN "]
    told = [quiet.quiet(t) for t in cases]
    assert told == [_quiet_by_python(t) for t in cases]
    with_c = [detect.scan(t) for t in cases]
    monkeypatch.setattr(detect, "_quiet", None)
    assert with_c == [detect.scan(t) for t in cases]
    assert not any(f for f, q in zip(with_c, told) if q)  # (a quiet text: nothing found)
    assert told[-4] and sum(told) < len(cases) / 2


def test_the_c_pass_takes_only_lower_case_ascii_anchors():
    quiet = pytest.importorskip("memstore.secrets._quiet")
    try:
        for bad in [("Key",), ("",), ("é",), ("x" * 64,), tuple(f"_{n}" for n in range(17))]:
            with pytest.raises(ValueError):
                quiet.configure(bad, detect._LONG_TOKEN_CHARS, 20)
            with pytest.raises(RuntimeError):  # (a failed configure leaves it unconfigured)
                quiet.quiet("text")
    finally:
        quiet.configure(tuple(detect._ANCHORS), detect._LONG_TOKEN_CHARS, 20)
    assert quiet.quiet("plain words") and not quiet.quiet("my key")
    # past ASCII: told as text.lower() reads, which makes the Kelvin sign a 'k' and the dotted
    # capital I two characters (the detector then reads the whole text: never quiet)
    assert quiet.quiet("naïve café – “plain” 中文") and not quiet.quiet("my \u212aey")
    assert not quiet.quiet("plain \u0130stanbul") and quiet.quiet("plain \u0131stanbul")
