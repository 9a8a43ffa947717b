"""Masks secrets in text before it is shown: the ingest secret detector finds them, this hides them.

The detector reports where each suspected secret lies in the text; that span is cut to its first
four characters (a private key to its header). The result is scanned again until the detector
finds nothing, so whatever the detector would call a secret is never sent to a browser in full.
"""

from __future__ import annotations

import re
from functools import lru_cache

from ...secrets.detect import scan

MARK = "…[redacted]"
_KEEP = 4  # leading characters of a secret kept, as the detector's own excerpts do
_MAX_PASSES = 8


def mask(text):
    """`text` with every detected secret masked; anything that is not a non-empty string is returned as is."""
    if not isinstance(text, str) or not text:
        return text
    return _mask(text) if len(text) <= 256 else _mask_text(text)


@lru_cache(maxsize=8192)
def _mask(text: str) -> str:
    return _mask_text(text)


def _mask_text(text: str) -> str:
    for _ in range(_MAX_PASSES):
        findings = scan(text)
        if not findings:
            return text
        text = _mask_findings(text, findings)
    # The detector still finds something after several passes: hide every line it points at.
    lines = text.split("\n")
    for f in scan(text):
        if 0 < f.line <= len(lines):
            lines[f.line - 1] = MARK
    return "\n".join(lines)


def _mask_findings(text: str, findings) -> str:
    """Each finding's span masked: its first four characters kept, a private key's header and END
    line kept around one mark; a finding without a span hides its whole line."""
    spans = sorted((f.start, f.end, f.kind) for f in findings if 0 <= f.start < f.end <= len(text))
    lines_only = [f.line for f in findings if not 0 <= f.start < f.end <= len(text)]
    out, pos = [], 0
    for start, end, kind in spans:
        if end <= pos:
            continue
        if start < pos:  # overlaps the one before: its rest goes too
            start = pos
            out.append(MARK)
        else:
            out += [text[pos:start], _shown(text[start:end], kind)]
        pos = end
    out.append(text[pos:])
    text = "".join(out)
    if lines_only:
        lines = text.split("\n")
        for n in lines_only:
            if 0 < n <= len(lines):
                lines[n - 1] = MARK
        text = "\n".join(lines)
    return text


def _shown(secret: str, kind: str) -> str:
    if kind == "private-key" and secret.startswith("-----BEGIN"):
        head, _, rest = secret.partition("\n")
        if not rest:  # on one line, or its line breaks escaped: the header stays
            m = re.match(r"-----BEGIN [A-Z0-9 ]*-----", secret)
            return (m.group(0) if m else secret[:_KEEP]) + MARK
        end = rest.rsplit("\n", 1)[-1] if "-----END" in rest.rsplit("\n", 1)[-1] else None
        return "\n".join([head, MARK] + ([end] if end else []))
    return secret[:_KEEP] + MARK


# Fields whose values memstore writes itself in a fixed form (times, days, counts, checked roles):
# shown as they are. Every other string, at any depth, is masked.
_AS_IS = frozenset(
    (
        "ts",
        "day",
        "closed_day",
        "role",
        "type",
        "created",
        "last_active",
        "at",
        "date",
        "why",
        "mode",
        "gone",
    )
)


def mask_fields(obj: dict, fields=None) -> dict:
    """A copy of `obj` with its string values masked: the named fields, or (by default) every
    string at any depth but the fixed-form ones (model, id, source.path, session, actor, topic
    names and summaries, commit subjects and anything a record carries)."""
    if fields is not None:
        out = dict(obj)
        for k in fields:
            if isinstance(out.get(k), str):
                out[k] = mask(out[k])
        return out
    return {k: (v if k in _AS_IS else _mask_all(v)) for k, v in obj.items()}


def _mask_all(value):
    if isinstance(value, str):
        return mask(value)
    if isinstance(value, dict):
        return mask_fields(value)
    if isinstance(value, list):
        return [_mask_all(v) for v in value]
    return value
