"""Masks secrets in text before it is shown: the ingest secret detector finds them, this hides them.

The detector reports each suspected secret with its line and an excerpt of that line in which the
secret is already cut to its first four characters. Where that excerpt lets us place the secret in
the line, only the secret is masked; where it does not (a detector that words its excerpts
differently), the whole line is. The result is scanned again until the detector finds nothing,
so whatever the detector would call a secret is never sent to a browser in full.
"""

from __future__ import annotations

from ...ingest.secrets import scan

MARK = "…[redacted]"
_KEEP = 4  # leading characters of a secret kept, as the detector's own excerpts do
_MAX_PASSES = 8
_SHORT = 120  # the detector's excerpts hold up to 160 characters of a line


def mask(text):
    """`text` with every detected secret masked; anything that is not a non-empty string is returned as is."""
    if not isinstance(text, str) or not text:
        return text
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
    lines = text.split("\n")
    for f in findings:
        if f.kind == "private-key" and 0 < f.line <= len(lines):
            _mask_key_block(lines, f.line - 1)
    for i in sorted({f.line - 1 for f in findings if f.kind != "private-key" and 0 < f.line <= len(lines)}):
        lines[i] = _mask_line(lines[i])
    return "\n".join(lines)


def _mask_line(line: str) -> str:
    """The line with its secrets masked; a long line is halved first, so each excerpt covers its secret."""
    found = scan(line)
    if not found:
        return line  # found only together with the lines around it; a later pass masks the whole line
    if len(line) > _SHORT:
        cut = line.rfind(" ", 0, len(line) // 2)
        cut = cut if cut > 0 else line.find(" ", len(line) // 2)
        if cut > 0:
            joined = _mask_line(line[:cut]) + _mask_line(line[cut:])
            if not scan(joined):
                return joined
    for start, end in sorted({_span(line, f.excerpt_redacted) for f in found}, reverse=True):
        line = line[:start] + line[start : start + _KEEP] + MARK + line[end:]  # right to left: offsets stay valid
    return line


def _span(line: str, excerpt: str) -> tuple[int, int]:
    """(start, end) of the secret in `line`, read from the detector's excerpt; the whole line if unsure."""
    body = line.rstrip("\r")
    lead = len(body) - len(body.lstrip())
    whole = (lead, len(body))
    j = excerpt.find(MARK)
    if j < _KEEP:
        return whole
    start = lead + j - _KEEP
    if body[lead : start + _KEEP] != excerpt[:j]:
        return whole
    tail = excerpt[j + len(MARK) :]
    if len(excerpt) >= 160 and excerpt.endswith("…"):  # the excerpt was cut short: mask to the line's end
        return start, len(body)
    stripped = body.rstrip()
    if not stripped.endswith(tail):
        return whole
    end = len(stripped) - len(tail)
    return (start, end) if end >= start + _KEEP else whole


def _mask_key_block(lines: list[str], i: int) -> None:
    """Replace the key material after a BEGIN ... PRIVATE KEY line, up to its END line, by one mark."""
    j = i + 1
    while j < len(lines) and "-----END" not in lines[j]:
        j += 1
    if j > i + 1:
        lines[i + 1 : j] = [MARK]
    elif j == len(lines):
        lines.append(MARK)
    # A key with no END line has been masked to the end of the text; the header alone says what it was.


def mask_fields(
    obj: dict,
    fields=(
        "text",
        "name",
        "summary",
        "subject",
        "body",
        "session",
        "from",
        "to",
        "into_name",
        "from_name",
        "to_name",
        "parent_name",
        "actor",
    ),
) -> dict:
    """A copy of `obj` with the named string fields masked."""
    out = dict(obj)
    for k in fields:
        if isinstance(out.get(k), str):
            out[k] = mask(out[k])
    return out
