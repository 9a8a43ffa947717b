""".gitattributes that would make git change the bytes of a store's files between the repository
and the work tree (docs/format.md, "Damage").

A committed `.gitattributes` arrives with a `git pull` like any other file. Git applies
`working-tree-encoding`, `filter`, `eol`, `text` (and the old `crlf`) and `ident` when it checks a
file out and again when it adds one, so such an attribute on a day log re-encodes every record
(readers see none) and the next write commits its lines as something else. `problems` names each
line that gives a store file (a day log, pack, tree shard, tree.json, markers.jsonl,
forgotten.jsonl, purged-history.jsonl) such an attribute: fsck reports it and writes refuse.
Attributes that leave the bytes alone (`merge=union`, `binary`, `-text`, `diff`, ...) stay
allowed, which is all a store's own .gitattributes sets.

Read from the work tree: the top-level `.gitattributes` and any under `log/`, `tree/`, `packs/`.
A line is looked for only when a file holds one of those attributes at all, so a store without
them costs one read of its .gitattributes per check.
"""

from __future__ import annotations

import os
import re
import stat
import time
from pathlib import Path

FILENAME = ".gitattributes"
# Attributes whose set or valued state makes git rewrite a file's bytes on checkout or add.
CHANGING = ("working-tree-encoding", "filter", "eol", "text", "crlf", "ident")
# Git's one built-in macro, and what it sets.
_BUILTIN = {"binary": ["-diff", "-merge", "-text"]}
_TOP_FILES = ("markers.jsonl", "forgotten.jsonl", "purged-history.jsonl", "tree.json")
_DIRS = ("log", "tree", "packs")
HINT = (
    "Nothing was changed. A store's files must reach the work tree byte for byte: remove that "
    "attribute from .gitattributes (merge=union and binary are fine), commit, then run: ct fsck"
)


def _files(root: Path) -> list[tuple[str, Path]]:
    """(folder relative to the root, path) of every .gitattributes that can apply to store files,
    shallowest first (a deeper file overrides a shallower one, as in git)."""
    top = root / FILENAME
    out = [("", top)] if top.is_file() and not top.is_symlink() else []
    for top in _DIRS:
        stack = [(top, root / top)]
        while stack:
            rel, folder = stack.pop()
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for e in entries:
                if e.name == FILENAME and e.is_file(follow_symlinks=False):
                    out.append((rel, Path(e.path)))
                elif not e.is_dir(follow_symlinks=False):
                    continue
                elif rel.count("/") < 1:  # log/YYYY, tree/YYYY, packs/YYYY: listed
                    stack.append((f"{rel}/{e.name}", Path(e.path)))
                else:  # a pack day folder: one lstat, not a listing of its packs
                    try:
                        if stat.S_ISREG(os.lstat(f"{e.path}/{FILENAME}").st_mode):
                            out.append((f"{rel}/{e.name}", Path(e.path) / FILENAME))
                    except OSError:
                        pass
    return sorted(out, key=lambda f: (f[0].count("/"), f[0]))


def _pattern(pat: str, base: str) -> re.Pattern | None:
    """A regex over paths relative to the store root for a gitattributes pattern of the file in
    folder `base` (gitignore rules: no slash matches a name at any depth; `**` any folders)."""
    if pat.startswith("!") or pat.endswith("/"):
        return None  # git ignores negative patterns and never matches a folder's files by one
    anchored = "/" in pat
    pat = pat.lstrip("/")
    out, i = [], 0
    while i < len(pat):
        c = pat[i]
        if pat.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pat.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            end = pat.find("]", i + 2)
            if end < 0:
                out.append(re.escape(c))
                i += 1
                continue
            body = pat[i + 1 : end]
            if body[:1] in "!^":
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        elif c == "\\" and i + 1 < len(pat):
            out.append(re.escape(pat[i + 1]))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    body = "".join(out)
    prefix = re.escape(base + "/") if base else ""
    try:
        if anchored:
            return re.compile(prefix + body + r"\Z")
        return re.compile(prefix + r"(?:.*/)?" + body + r"\Z")
    except re.error:
        return None


def _unquote(pat: str) -> str:
    if len(pat) >= 2 and pat[0] == pat[-1] == '"':
        try:
            return pat[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
        except UnicodeDecodeError:
            return pat[1:-1]
    return pat


def _split(line: str) -> tuple[str, list[str]] | None:
    line = line.strip()
    if not line or line.startswith("#"):
        return None
    if line.startswith('"'):
        end = line.find('"', 1)
        while end > 0 and line[end - 1] == "\\":
            end = line.find('"', end + 1)
        if end < 0:
            return None
        return _unquote(line[: end + 1]), line[end + 1 :].split()
    pat, *attrs = line.split()
    return pat, attrs


def _state(attr: str) -> tuple[str, bool | None]:
    """(name, changes bytes?) for one attribute token; None for "unspecified" (`!name`)."""
    if attr.startswith("!"):
        return attr[1:], None
    if attr.startswith("-"):
        return attr[1:], False
    name, _, _value = attr.partition("=")
    return name, True


def _store_paths(root: Path) -> list[str]:
    """Paths of the store's files to test the patterns on: what is there, and the names writes
    would create this year."""
    year = time.strftime("%Y")
    out = [p for p in _TOP_FILES if (root / p).is_file()]
    for top in _DIRS:
        for dirpath, dirs, files in os.walk(root / top):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            rel = Path(dirpath).relative_to(root).as_posix()
            out += [f"{rel}/{f}" for f in sorted(files) if f != FILENAME and f[:1] != "."]
    out += [p for p in _TOP_FILES if p not in out]
    out += [f"log/{year}/{year}-01-01.jsonl", f"tree/{year}/{year}-01-01.jsonl"]
    return out + [f"packs/{year}/{year}-01-01/{'0' * 64}.is"]


def problems(root: Path) -> list[str]:
    """`.gitattributes:LINE: ...` for each line that gives a store file an attribute git rewrites
    its bytes by (the line that decides it, as git reads them: later lines and deeper files win)."""
    return [f"{name}:{n}: {why}" for name, n, why in found(root)]


def refuse(root: Path) -> None:
    """FormatError (exit 4, before a write changes anything) naming the first such line."""
    got = found(root)
    if got:
        from ..errors import FormatError

        name, n, why = got[0]
        more = f" (and {len(got) - 1} more lines)" if len(got) > 1 else ""
        raise FormatError(Path(root) / name, why + more, n, HINT)


def found(root: Path) -> list[tuple[str, int, str]]:
    """(file relative to the root, line, why) for each line `problems` names."""
    root = Path(root)
    lines: list[tuple[str, str, int, str, list[str]]] = []  # (base, file, line, pattern, attrs)
    macros = dict(_BUILTIN)
    for base, path in _files(root):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        name = path.relative_to(root).as_posix()
        for n, line in enumerate(text.splitlines(), 1):
            got = _split(line)
            if got is None:
                continue
            pat, attrs = got
            if pat.startswith("[attr]"):
                if not base:  # macros are defined at the top level only
                    macros[pat[6:]] = attrs
                continue
            lines.append((base, name, n, pat, attrs))
    # (base, file, line, pattern, [(attribute, changes bytes?, token as written)])
    rules = []
    for base, name, n, pat, attrs in lines:
        states = []
        for given in attrs:
            for token in [*macros.get(given, []), given]:
                attr, changes = _state(token)
                if attr in CHANGING:
                    states.append((attr, changes, given))
        if states:
            rules.append((base, name, n, pat, states))
    if not any(changes for *_, states in rules for _a, changes, _g in states):
        return []  # the usual case: nothing here sets such an attribute
    final: dict[str, dict[str, tuple[bool | None, str, int, str]]] = {}
    paths = _store_paths(root)
    for base, name, n, pat, states in rules:
        rx = _pattern(pat, base)
        if rx is None:
            continue
        for p in [p for p in paths if rx.match(p)]:
            for attr, changes, given in states:
                final.setdefault(p, {})[attr] = (changes, name, n, given)
    out: dict[tuple[str, int], tuple[str, str]] = {}
    for p in [p for p in paths if p in final]:  # files that are there first, then the names
        for changes, name, n, token in final[p].values():
            if changes:
                out.setdefault((name, n), (token, p))
    return [
        (
            name,
            n,
            f"attribute {token!r} makes git change the bytes of the store's files between the "
            f"repository and the work tree (e.g. {p}); a store's files must stay as committed",
        )
        for (name, n), (token, p) in sorted(out.items())
    ]


def ensure(root: Path, line: str) -> None:
    """Add `line` to the store's top-level .gitattributes unless it holds it already (a forget's
    merge rule for its own files); never read or written through a link (storefile)."""
    from .. import storefile

    attrs = Path(root) / FILENAME
    storefile.check(attrs, root)
    current = attrs.read_text(encoding="utf-8") if attrs.exists() else ""
    if line not in current:
        sep = "\n" if current and not current.endswith("\n") else ""
        attrs.write_text(current + sep + line + "\n", encoding="utf-8")
