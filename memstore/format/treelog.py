"""`tree/YYYY/YYYY-MM-DD.jsonl`: the topic tree as an append-only, day-sharded log of set-style operations.

Each line is one operation with `at` (UTC time it was made, microseconds) and `op`. Replay takes
every line of every shard, drops repeated lines, sorts by (at, line text) and applies them in that
order. Every op sets a state ("record r is in topic t", "topic t is gone into u") rather than
changing it relative to the state before, so a line applied twice changes nothing: a union merge of
two clones' shards (which may repeat lines, in any order) replays to one well-defined tree.

    topic    {"topic", "name", "summary", "parent", "created", "last_active", "named_by"}  a topic and its fields
    set      {"topic", <some of those fields>}   fields changed (parent = moved; name/summary = renamed)
    place    {"topic", "records": [...]}         these records are in this topic now (moved from any other)
    archive  {"records": [...]}                   these records are archived as trivial (in no topic)
    drop     {"records": [...]}                   these records are in no topic and not archived
    gone     {"topic", "into", "why"}             the topic left the tree; its records and sub-topics
                                                  follow `into` (archived when null); so does any later
                                                  `place` into it
    current  {"topic"}                            the topic the conversation is in now

`created` only ever moves earlier and `last_active` only later (min/max), so they are right whatever
order two clones' writes are merged in. A writer gives its ops times after every op it has seen, so
its own changes apply after what it read.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from .. import storefile
from ..errors import FormatError
from . import safejson

DIR = "tree"
FIELDS = ("name", "summary", "parent", "created", "last_active", "named_by")
OPS = ("topic", "set", "place", "archive", "drop", "gone", "current")
_SHARD = re.compile(r"^(\d{4})-(\d{2})-(\d{2})(?:\.([2-9]|[1-9]\d+))?\.jsonl$")
# A writer appends to a day's newest part while it is under this size, else it opens the next part:
# git stores a changed file whole, so appending to one ever-growing shard (a big import's day) would
# make every later write that day hash and compress all of it again.
PART_BYTES = 256 * 1024
_AT = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")


# ----- files ------------------------------------------------------------------------------------


def shard_path(root: Path, day: str, part: int = 1) -> Path:
    """The day's shard: `YYYY-MM-DD.jsonl`, its later parts `YYYY-MM-DD.N.jsonl` (N = 2, 3, ...)."""
    name = f"{day}.jsonl" if part <= 1 else f"{day}.{part}.jsonl"
    return Path(root) / DIR / day[:4] / name


def write_shard(root: Path, day: str) -> Path:
    """The shard a write on `day` appends to: the day's newest part while it holds under PART_BYTES,
    else a new part after it (a write's ops stay in one file, however many they are)."""
    ydir = Path(root) / DIR / day[:4]
    newest = 1
    try:
        names = os.listdir(ydir)
    except (FileNotFoundError, NotADirectoryError):
        names = []
    for n in names:
        m = _SHARD.match(n)
        if m and f"{m.group(1)}-{m.group(2)}-{m.group(3)}" == day:
            newest = max(newest, int(m.group(4) or 1))
    path = shard_path(root, day, newest)
    try:
        full = path.stat().st_size >= PART_BYTES
    except FileNotFoundError:
        full = False
    return shard_path(root, day, newest + 1) if full else path


def shards(root: Path) -> list[Path]:
    """Every op shard of the store, oldest day first."""
    base = Path(root) / DIR
    out: list[Path] = []
    try:
        years = sorted(os.listdir(base))
    except (FileNotFoundError, NotADirectoryError):
        return out
    for year in years:
        ydir = base / year
        if not ydir.is_dir():
            continue
        out += [
            ydir / n
            for n in sorted(os.listdir(ydir))
            if (m := _SHARD.match(n)) and m.group(1) == year
        ]
    return out


def exists(root: Path) -> bool:
    return bool(shards(root))


# ----- lines ------------------------------------------------------------------------------------


@dataclass(slots=True)
class Op:
    at: str
    text: str  # the line as stored (stripped), which breaks ties in replay order
    data: dict


class OpError(ValueError):
    """One line that is not a valid operation (the caller adds file and line)."""


def _tid(value, key: str = "topic", null_ok: bool = False) -> str | None:
    if (type(value) is str and value) or (value is None and null_ok):
        return value
    raise OpError(f'"{key}" must be a topic id' + (" or null" if null_ok else ""))


def parse_line(text: str) -> Op:
    """One op line → Op; OpError says what is wrong with it."""
    try:
        data = safejson.DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise OpError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    except (ValueError, RecursionError) as exc:  # nested too deep, a giant number, NaN
        raise OpError(safejson.problem(exc)) from None
    return Op(data.get("at") if isinstance(data, dict) else None, text, check(data))


def check(data) -> dict:
    """The decoded op if it is a valid operation; OpError says what is wrong.

    Written for speed (replay checks every line): one branch per op, no per-field helpers.
    """
    if type(data) is not dict:
        raise OpError("an operation must be a JSON object")
    at, op = data.get("at"), data.get("op")
    if type(at) is not str or not _AT.match(at):
        raise OpError(f'"at" must be a UTC time like 2026-01-02T03:04:05.000006Z, not {at!r}')
    if op == "place" or op == "archive" or op == "drop":
        recs = data.get("records")
        if type(recs) is not list or not recs or not all(type(r) is str and r for r in recs):
            raise OpError('"records" must be a list of record ids')
        if op == "place":
            _tid(data.get("topic"))
    elif op == "set" or op == "topic":
        _tid(data.get("topic"))
        for key, value in data.items():
            if key == "parent":
                _tid(value, "parent", null_ok=True)
            elif key in FIELDS and type(value) is not str:
                raise OpError(f"{key!r} must be a string")
        if op == "topic" and not ("name" in data and "parent" in data and "created" in data):
            raise OpError(
                f"topic op lacks {', '.join(k for k in ('name', 'parent', 'created') if k not in data)}"
            )
    elif op == "gone":
        _tid(data.get("topic"))
        _tid(data.get("into"), "into", null_ok=True)
    elif op == "current":
        _tid(data.get("topic"), null_ok=True)
    else:
        raise OpError(f"unknown op {op!r} (known: {', '.join(OPS)})")
    return data


def dumps(op: dict) -> str:
    """One op as its line: at, op and topic first so a diff reads left to right."""
    head = {k: op[k] for k in ("at", "op", "topic") if k in op}
    rest = {k: op[k] for k in sorted(op) if k not in head}
    return json.dumps({**head, **rest}, ensure_ascii=False, separators=(",", ":"))


def read_ops(
    root: Path, strict: bool = False, files: dict[str, bytes] | None = None
) -> tuple[list[Op], list[str]]:
    """Every distinct op of the store in replay order, and the problems found ("file:line: why").

    `strict` raises FormatError at the first damaged line (for fsck-like callers); otherwise a
    damaged line is skipped and named in the problems. `files` (relative path → bytes) replays
    another version instead of the working files (a git revision).
    """
    problems: list[str] = []
    if files is None:
        files = {}
        for p in shards(root):
            try:
                files[p.relative_to(root).as_posix()] = storefile.read_bytes(p, root)
            except storefile.StoreLink as exc:
                if strict:
                    raise
                problems.append(str(exc).split("\n")[0])  # damage, skipped like a damaged line
            except OSError as exc:
                raise FormatError(p, f"cannot read ({exc})") from None
    ops: dict[str, Op] = {}
    from .sealed_lines import open_bytes

    for rel in sorted(files):
        for n, text, obj, why in _lines(open_bytes(Path(root) / rel, files[rel])):
            if why is None and text in ops:
                continue  # a repeated line (a union merge keeps both sides' copies)
            if why is None:
                try:
                    if obj is None:
                        ops[text] = parse_line(text)
                    else:
                        obj = check(obj)
                        ops[text] = Op(obj["at"], text, obj)
                    continue
                except OpError as exc:
                    why = str(exc)
            if strict:
                raise FormatError(
                    Path(root) / rel,
                    why,
                    line=n,
                    hint=f'Restore it with "git checkout -- {rel}" or remove that line.',
                )
            problems.append(f"{Path(root) / rel}:{n}: {why}")
    return sorted(ops.values(), key=lambda o: (o.at, o.text)), problems


def _lines(data: bytes):
    """(line number, stripped text, decoded JSON or None, problem or None) for each non-blank line.

    The whole file is decoded as one JSON array when it can be (one C-level parse instead of one
    per line); any line that spoils that is parsed on its own, which also names it.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None:  # some line is not UTF-8: go line by line to name it
        raws = data.split(b"\n")
        for n, raw in enumerate(raws, 1):
            if not raw.strip():
                continue
            try:
                t = raw.decode("utf-8").strip()
            except UnicodeDecodeError as exc:
                yield n, "", None, f"invalid UTF-8 ({exc.reason})"
                continue
            yield (
                n,
                t,
                None,
                "last line has no newline (an unfinished write)" if n == len(raws) else None,
            )
        return
    lines = text.split("\n")
    last = lines.pop()  # "" when the file ends with a newline
    rows = [(n, ln.strip()) for n, ln in enumerate(lines, 1) if ln.strip()]
    objs = None
    try:
        objs = safejson.loads("[" + ",".join(t for _, t in rows) + "]")
    except ValueError:  # some line is damaged: each is parsed alone, which names it
        pass
    if objs is not None and len(objs) == len(rows):
        for (n, t), obj in zip(rows, objs):
            yield n, t, obj, None
    else:
        for n, t in rows:
            yield n, t, None, None
    if last.strip():
        yield len(lines) + 1, last.strip(), None, "last line has no newline (an unfinished write)"


def warn(problems: list[str]) -> None:
    """Readers skip damaged lines; say so on stderr (fsck names them as damage)."""
    for p in problems[:5]:
        print(f"memstore: warning: {p} (line skipped; see ct fsck)", file=sys.stderr)
    if len(problems) > 5:
        print(
            f"memstore: warning: {len(problems) - 5} more damaged tree lines skipped",
            file=sys.stderr,
        )


# ----- replay -----------------------------------------------------------------------------------


class Replay:
    """The tree being built by applying ops in order; records kept in insertion-ordered dicts."""

    def __init__(self):
        from .topics import Tree

        self.tree = Tree()
        self.members: dict[str, dict[str, None]] = {}  # topic id -> its records, in placement order
        self.owner: dict[str, str] = {}  # record id -> topic id
        self.archived: dict[str, None] = {}

    @classmethod
    def of(cls, tree) -> "Replay":
        """A replay state that continues from `tree` (already replayed), which it takes over."""
        r = cls()
        r.tree = tree
        for tid, t in tree.topics.items():
            r.members[tid] = dict.fromkeys(t.records)
            r.owner.update(dict.fromkeys(t.records, tid))
        r.archived = dict.fromkeys(tree.archived)
        return r

    def apply_all(self, ops: list[Op]) -> "Replay":
        apply = self.apply
        for op in ops:
            apply(op)
        return self

    def apply(self, op: Op) -> None:
        d = op.data
        # (the class's functions: a table of this object's bound methods, kept on it, made every
        # replay a reference cycle, left with the tree it built to Python's cyclic collector)
        _APPLY[d["op"]](self, d, op.at)

    # -- topics --

    def _ensure(self, tid: str):
        """The topic `tid`, created empty if no op declared it yet; None when it is gone."""
        from .topics import Topic

        if tid in self.tree.gone:
            return None
        t = self.tree.topics.get(tid)
        if t is None:
            t = self.tree.topics[tid] = Topic(id=tid, name="")
            self.members[tid] = {}
        return t

    def _topic(self, d: dict, at: str) -> None:
        self._set(d, at)

    def _set(self, d: dict, at: str) -> None:
        t = self._ensure(d["topic"])
        if t is None:
            return  # fields of a topic that has since left the tree change nothing
        for key in ("name", "summary", "named_by"):
            if key in d:
                setattr(t, key, d[key])
        if d.get("created"):
            t.created = min(t.created, d["created"]) if t.created else d["created"]
        if "last_active" in d:
            t.last_active = max(t.last_active, d["last_active"])
        if "parent" in d:
            self._reparent(t.id, d["parent"])

    def _reparent(self, tid: str, parent: str | None) -> None:
        if parent is not None and parent not in self.tree.topics:
            parent = self.tree.resolve(parent)  # a gone parent: its successor (or the root)
        cur = parent
        while (
            cur is not None
        ):  # a move that would make a cycle (two clones' moves crossing) is skipped
            if cur == tid:
                return
            cur = self.tree.topics[cur].parent
        self.tree.topics[tid].parent = parent

    # -- records --

    def _unplace(self, rid: str) -> None:
        tid = self.owner.pop(rid, None)
        if tid is not None:
            self.members[tid].pop(rid, None)
        self.archived.pop(rid, None)

    def _place(self, d: dict, at: str) -> None:
        target = d["topic"] if d["topic"] not in self.tree.gone else self.tree.resolve(d["topic"])
        if target is None and d["topic"] in self.tree.gone:
            self._archive(d, at)  # placed into a topic that was archived meanwhile
            return
        self._ensure(target)
        for rid in d["records"]:
            if self.owner.get(rid) == target:
                continue  # already there: keep its place in the order
            self._unplace(rid)
            self.owner[rid] = target
            self.members[target][rid] = None

    def _archive(self, d: dict, at: str) -> None:
        for rid in d["records"]:
            self._unplace(rid)
            self.archived[rid] = None

    def _drop(self, d: dict, at: str) -> None:
        for rid in d["records"]:
            self._unplace(rid)

    def _gone(self, d: dict, at: str) -> None:
        tid = d["topic"]
        if tid in self.tree.gone:
            return
        self.tree.gone[tid] = {"into": d.get("into"), "why": d.get("why", "merged"), "at": at}
        t = self.tree.topics.pop(tid, None)
        if t is None:
            return
        self.tree.gone[tid]["name"] = (
            t.name
        )  # what it was called when it left (for ct diff and the web page)
        recs = list(self.members.pop(tid))
        for rid in recs:
            self.owner.pop(rid, None)
        target = self.tree.resolve(tid)
        heir = target if target is not None else self.tree.resolve(t.parent) if t.parent else None
        for kid in self.tree.topics.values():
            if kid.parent == tid:
                kid.parent = heir
        if recs:
            sub = {"records": recs, "topic": tid}
            self._place(sub, at) if target is not None else self._archive(sub, at)

    def _current(self, d: dict, at: str) -> None:
        self.tree.current = d.get("topic")

    def result(self):
        """The replayed Tree (records as lists, `current` following tombstones)."""
        tree = self.tree
        for tid, t in tree.topics.items():
            t.records = list(self.members[tid])
        tree.archived = list(self.archived)
        if tree.current is not None and tree.current not in tree.topics:
            tree.current = tree.resolve(tree.current)
        return tree


_APPLY = {name: getattr(Replay, "_" + name) for name in OPS}  # op name -> Replay's function


def replay(ops: list[Op]):
    return Replay().apply_all(ops).result()


# ----- diffing two trees into ops ---------------------------------------------------------------


def changed_topics(old, new) -> list[str]:
    """The topics of both trees that differ (one C-level comparison of each whole topic)."""
    olds = old.topics
    return [tid for tid, n in new.topics.items() if tid in olds and olds[tid] != n]


def diff(
    old, new, touched: list[str] | None = None, fresh=None, removed=None, archive=None
) -> list[dict]:
    """The ops (without `at`) that turn tree `old` into tree `new`, in the order they must apply.

    Costs time in proportion to the topics that changed, not to the records in the tree: a topic
    whose record list is unchanged (compared as whole lists) is not looked into. A write on a tree
    read in part (format/topics.py LazyTree) gives the topics it made (`fresh`), changed
    (`touched`) and removed, and the archive before and after (`archive`), so neither tree is
    walked; `old` then holds the touched and removed topics as they were.
    """
    out: list[dict] = []
    if fresh is None:
        fresh = [tid for tid in new.topics if tid not in old.topics]
    if removed is None:
        removed = [tid for tid in old.topics if tid not in new.topics]
    for tid in sorted(
        fresh, key=lambda x: (len(new.ancestry(x)), new.topics[x].created, x)
    ):  # parents first
        t = new.topics[tid]
        out.append({"op": "topic", "topic": tid, **{k: getattr(t, k) for k in FIELDS}})
    # One comparison of whole topics (C-level, fields and record list) finds the few a write
    # changed; only those are looked into field by field.
    olds = old.topics
    touched = changed_topics(old, new) if touched is None else touched
    for tid in sorted(touched):
        o, n = old.topics[tid], new.topics[tid]
        changed = {k: getattr(n, k) for k in FIELDS if getattr(n, k) != getattr(o, k)}
        if changed:
            out.append({"op": "set", "topic": tid, **changed})
    new_ids = set(fresh)
    changed_lists = [
        tid
        for tid in fresh + touched
        if tid in new_ids or olds[tid].records != new.topics[tid].records
    ]
    placed: set[str] = set()
    for tid in sorted(changed_lists, key=lambda x: (new.topics[x].created, x)):
        before = set(old.topics[tid].records) if tid in old.topics else set()
        moved = [r for r in new.topics[tid].records if r not in before]
        placed.update(new.topics[tid].records)
        if moved:
            out.append({"op": "place", "topic": tid, "records": moved})
    before, after = archive if archive is not None else (old.archived, new.archived)
    old_arch, new_arch = (set(before), set(after)) if before != after else (set(), set())
    if new_arch - old_arch:
        out.append({"op": "archive", "records": sorted(new_arch - old_arch)})
    # Records that may have left the tree: those of topics whose list changed or that went, and un-archived ones.
    maybe_out = set(old_arch - new_arch)
    for tid in touched + removed:
        t = olds[tid]
        if tid not in new.topics or t.records != new.topics[tid].records:
            maybe_out.update(t.records)
    dropped = sorted(
        maybe_out - placed - new_arch
    )  # (an unchanged archive cannot hold a record that moved)
    if dropped:
        out.append({"op": "drop", "records": dropped})
    for tid in sorted(removed):
        tomb = new.gone.get(tid) or {"into": None, "why": "removed"}
        into = tomb.get("into")
        if (
            into is not None
            and into not in new.topics
            and into not in old.topics
            and into not in old.gone
        ):
            into = new.resolve(
                into
            )  # a topic made and removed within this change never reached the log
        out.append({"op": "gone", "topic": tid, "into": into, "why": tomb.get("why", "merged")})
    if new.current != old.current:
        out.append({"op": "current", "topic": new.current})
    return out


def stamp(ops: list[dict], after: str, now: dt.datetime) -> list[dict]:
    """Give each op its own `at`: now, but always after `after` (the newest op this writer has seen)."""
    from .timeutil import to_iso

    t = now
    if (
        after
    ):  # fromisoformat, not strptime: strptime compiles its locale regexes (~4 ms) in every process
        floor = dt.datetime.fromisoformat(after.replace("Z", "+00:00"))
        t = max(t, floor + dt.timedelta(microseconds=1))
    out = []
    for i, op in enumerate(ops):
        out.append({"at": to_iso(t + dt.timedelta(microseconds=i)), **op})
    return out
