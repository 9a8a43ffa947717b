"""Forgetting in history: `--purge-history` rewrites every commit so none holds the forgotten text
(git-filter-repo, run through memstore/gitrepo.py), and what keeps a purge purged: the purged
commits recorded in the store, refused by `ct sync` and named by fsck.
"""

from __future__ import annotations

import json
import os
import tempfile

from ..errors import MemstoreError, UsageError
from ..format import attributes, layout
from ..format import log as logfmt
from ..format import safejson
from ..format.tombstones import ids_in as tombstones_in
from ..format.timeutil import now_utc, to_iso
from .remove import REPLACEMENT, TOMBSTONES, forgotten_ids, scrub_this_machine, text_variants


# ----- history ------------------------------------------------------------------------------------

PURGE_NOTICE = """\
History rewritten: no commit of this clone holds the forgotten text any more.
What this means:
  - Every commit id from the first one that held the text onwards has changed.
  - The remote still has the old history. Publish the new one with a force push:
        git -C {root} push {lease} {remote} {branch}
    (ct sync refuses to merge the old history back; it says so). The lease makes the push fail,
    instead of replacing them, if another clone pushed since this one last fetched: then run
    "ct sync" here first (nothing pushed meanwhile is lost) and rewrite again.
  - Every other clone still holds the old commits, and the text in them. On each one, either
    re-clone, or run "ct sync": it sees the rewritten remote, keeps that clone's unpushed records,
    moves it onto the new history, and expires its reflogs and prunes, so no object there keeps
    the text. A clone that ran a plain "git pull" instead merged the old history back: its
    "ct sync" refuses to push it (purged-history.jsonl, committed, names the purged commits), and
    "ct sync --drop-purged" there does the same move. By hand (losing that clone's unpushed
    records): "git reset --hard {remote}/{branch} && git reflog expire --expire=now --all &&
    git gc --prune=now".
  - Hosting services may keep old commits reachable by id (pull requests, caches) until they
    expire them; ask the host to purge them if the text was sensitive."""


def _tracking_config(store) -> list[tuple[str, str]]:
    """branch.*.remote / branch.*.merge, which filter-repo's removal of the remotes takes with it."""
    try:
        out = store.git.run("config", "--get-regexp", r"^branch\..*\.(remote|merge)$")
    except MemstoreError:
        return []
    return [tuple(line.split(" ", 1)) for line in out.splitlines() if " " in line]


def texts_in_history(store, ids) -> list[str]:
    """The texts that tombstoned records had in git history (to purge them after forgetting)."""
    return sorted(
        {r["text"] for r in lines_in_history(store, ids) if isinstance(r.get("text"), str)}
    )


def keys_in_history(store, ids) -> list[str]:
    """The keys (vkey) their lines had in git history: each opens a sealed vector in older packs."""
    return sorted(
        {r["vkey"] for r in lines_in_history(store, ids) if isinstance(r.get("vkey"), str)}
    )


def lines_in_history(store, ids) -> list[dict]:
    """Every day-log line that tombstoned records had in git history."""
    git = store.git
    if getattr(store, "sealer", None) is not None:
        return _sealed_lines_in_history(store, ids)
    out = []
    for rid in ids:
        needle = json.dumps({"id": rid}, separators=(",", ":"))[1:-1]  # "id":"..."
        log = git.run("log", "--all", "--format=%x1e%H", "--name-only", "-S", needle, "--", "log")
        for chunk in log.split("\x1e")[1:]:
            sha, *names = [x for x in chunk.split("\n") if x.strip()]
            for rev in (sha, f"{sha}^"):
                for name in names:
                    try:
                        blob = git.run("show", f"{rev}:{name}")
                    except MemstoreError:
                        continue
                    out += _json_objects(line for line in blob.splitlines() if needle in line)
    return out


def _json_objects(lines) -> list[dict]:
    """The lines that parse as JSON objects, parsed (the others skipped)."""
    out = []
    for line in lines:
        try:
            rec = safejson.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


def _sealed_lines_in_history(store, ids) -> list[dict]:
    """lines_in_history for an encrypted store: git cannot search ciphertext, so every day log's
    every version reachable from a ref is opened (each distinct blob once)."""
    from ..format import sealed_lines

    wanted, out, seen = set(ids), [], set()
    listing = store.git.run("rev-list", "--all", "--objects", "--", "log")
    for line in listing.splitlines():
        sha, _, name = line.partition(" ")
        if not name.endswith(".jsonl") or sha in seen:
            continue
        seen.add(sha)
        data = store.git.run("cat-file", "blob", sha, stdout_as_string=False)
        for raw in sealed_lines.open_bytes(store.root / name, data).splitlines():
            try:
                rec = safejson.loads(raw)
            except ValueError:
                continue
            if isinstance(rec, dict) and type(rec.get("id")) is str and rec["id"] in wanted:
                out.append(rec)
    return out


_CLEAN_CODE = r"""
import json, re, sys
spec = json.load(open(sys.argv[1]))
pairs = [(bytes.fromhex(a), bytes.fromhex(b)) for a, b in spec["pairs"]]
prefixes = [bytes.fromhex(p) for p in spec["prefixes"]]
new = spec["replacement"].encode()
def clean(data):
    for old, rep in pairs:
        if old in data:
            data = data.replace(old, rep)
    return data
def clean_message(message):
    message = clean(message)
    for flat in prefixes:  # a subject quotes a text's start, cut anywhere ("Mark: The surprise par…")
        n = len(flat)
        while n >= 24 and flat[:n] not in message:
            n -= 1
        if n >= 24:
            message = message.replace(flat[:n], new)
    return message
words = spec.get("words") or []
named = re.compile(r"(?i)(?<!\w)(" + "|".join(re.escape(w) for w in words) + r")(?!\w)") if words else None
def scrub_names(data):
    # topic names and summaries are made from key words: a word only the forgotten records held goes
    if named is None or b'"op"' not in data:
        return data
    out, changed = [], False
    for line in data.split(b"\n"):
        try:
            d = json.loads(line)
        except ValueError:
            d = None
        if isinstance(d, dict) and d.get("op") in ("topic", "set"):
            hit = False
            for k in ("name", "summary"):
                v = d.get(k)
                if isinstance(v, str) and named.search(v):
                    d[k], hit = named.sub(spec["replacement"], v), True
            if hit:
                line, changed = json.dumps(d, ensure_ascii=False, separators=(",", ":")).encode("utf-8"), True
        out.append(line)
    return b"\n".join(out) if changed else data
"""

_FILTER_SCRIPT = (
    _CLEAN_CODE
    + r"""
import git_filter_repo as fr
def blob_callback(blob, _metadata):
    blob.data = scrub_names(clean(blob.data))
def message_callback(message):
    return clean_message(message)
args = fr.FilteringOptions.parse_args(["--force", "--quiet"])
fr.RepoFilter(args, blob_callback=blob_callback, message_callback=message_callback).run()
"""
)

# An encrypted store's history (and `ct encrypt --rewrite-history`, `ct keys rotate --rewrite`):
# every line of a day log, tree shard, markers, tombstone or purge file in every commit is opened
# (a plain line is taken as it is), cleaned as above, and sealed again under its own epoch or the
# spec's `target` epoch, with its file's path as associated data (so the callback needs the path:
# filter-repo's file-info callback). `keys_files` (the keys/ folder as it is now) go into every
# root commit, and `drop` (keys/ files of epochs no line uses any more) out of every commit; every
# commit message becomes the kind of write it was, as an encrypted store's writes name them.
_SEALED_SCRIPT = (
    _CLEAN_CODE
    + r"""
sys.path.insert(0, spec["package"])
import git_filter_repo as fr
from memstore.format.sealed_lines import open_one, open_private, parse, parse_private, seal_one, seal_private
from memstore.transaction import sealed_subject
keys = {int(e): bytes.fromhex(k) for e, k in spec["keys"].items()}
privates = {k: bytes.fromhex(v) for k, v in spec.get("private", {}).items()}
target = spec.get("target")
line_file = re.compile(spec["line_files"])
drop = re.compile(spec["drop"]) if spec.get("drop") else None
keys_files = {p.encode(): bytes.fromhex(h) for p, h in spec.get("keys_files", {}).items()}
done, inserted = {}, {}
def reseal(name, data):
    out, lines = [], data.split(b"\n")
    for n, raw in enumerate(lines, 1):
        if not raw:
            out.append(raw)
            continue
        mine = parse_private(raw)
        if mine is not None:
            # a private line (scope private): opened, cleaned and sealed again under its writer's own
            # key when that is this identity; another writer's is kept byte for byte
            kid, body = mine
            plain = open_private(privates[kid], kid, name, body) if kid in privates else None
            out.append(raw if plain is None else seal_private(privates[kid], kid, name, clean(plain)))
            continue
        got, epoch = parse(raw), None
        if got is not None:
            epoch, body = got
            plain = open_one(keys[epoch], epoch, name, body) if epoch in keys else None
            if plain is None:
                if n == len(lines):  # an unfinished last line, committed as it was
                    out.append(raw)
                    continue
                sys.exit(f"{name}:{n}: a sealed line that no key given opens (epoch {epoch}), in a commit's copy")
        else:
            plain = raw
        plain = scrub_names(clean(plain))
        epoch = target if target is not None else epoch
        out.append(plain if epoch is None else seal_one(keys[epoch], epoch, name, plain))
    return b"\n".join(out)
def file_info_callback(filename, mode, blob_id, value):
    if drop is not None and drop.match(filename.decode("utf-8", "surrogateescape")):
        return (None, mode, blob_id)
    if filename in keys_files:
        if filename not in inserted:
            inserted[filename] = value.insert_file_with_contents(keys_files[filename])
        return (filename, mode, inserted[filename])
    name = filename.decode("utf-8", "surrogateescape")
    if not line_file.match(name):
        return (filename, mode, blob_id)
    if (filename, blob_id) not in done:
        data = value.get_contents_by_identifier(blob_id)
        new_data = reseal(name, data)
        done[(filename, blob_id)] = blob_id if new_data == data else value.insert_file_with_contents(new_data)
    return (filename, mode, done[(filename, blob_id)])
def commit_callback(commit, _metadata):
    if drop is not None:
        commit.file_changes = [c for c in commit.file_changes
                               if not drop.match(c.filename.decode("utf-8", "surrogateescape"))]
    if not commit.parents:
        have = {c.filename for c in commit.file_changes}
        for path, data in keys_files.items():
            if path not in have:
                if path not in inserted:
                    blob = fr.Blob(data)
                    repo_filter.insert(blob)
                    inserted[path] = blob.id
                commit.file_changes.append(fr.FileChange(b"M", path, inserted[path], b"100644"))
    message = clean_message(commit.message).decode("utf-8", "replace")
    commit.message = (sealed_subject(message.split("\n", 1)[0]) + "\n").encode("utf-8")
args = fr.FilteringOptions.parse_args(["--force", "--quiet"])
repo_filter = fr.RepoFilter(args, file_info_callback=file_info_callback, commit_callback=commit_callback)
repo_filter.run()
"""
)

# The committed files whose every line an encrypted store seals (docs/format.md, "Encrypted stores").
LINE_FILES = layout.SEALED_LINE_FILES


def refuse_shallow_purge(store) -> None:
    """A shallow clone holds only the newest commits: rewriting them would make its cut-off point a
    root commit, and the force push the rewrite asks for would replace the remote's whole history."""
    from ..gitrepo import _common_dir, git_dir

    sealer = getattr(store, "sealer", None)
    if sealer is not None:  # every line of every commit is opened and sealed again
        from ..keyring import epoch_files

        missing = [e for e in epoch_files(store.root) if e not in sealer.keys]
        if missing:
            raise UsageError(
                f"{store.root}: your identity does not open key epoch(s) "
                f"{', '.join(map(str, missing))}, so the lines sealed under them cannot be rewritten.",
                "Ask a recipient who holds every epoch to run it. Nothing was changed.",
            )
    gdir = git_dir(store.root)
    if gdir is not None and (_common_dir(gdir) / "shallow").exists():
        raise UsageError(
            f"{store.root} is a shallow clone: its history stops at a cut-off commit, so --purge-history cannot "
            "reach the older commits that hold the text, and the force push it needs would replace the remote's "
            "whole history with this clone's few commits.",
            f'Fetch the whole history first ("git -C {store.root} fetch --unshallow"), or run the command in a full '
            "clone. Nothing was changed.",
        )


def _own_words(store, texts: list[str]) -> list[str]:
    """The content words of the forgotten texts that no remaining record holds: older topic names and
    summaries made while a forgotten record was in the topic may hold them, and the purge takes them
    out there (a word a remaining record also says tells nothing, and stays)."""
    from ..text import content_words as words

    mine = {w.casefold() for t in texts for w in words(t)}
    for path in logfmt.list_days(store.root).values():
        if not mine:
            break
        for raw in logfmt.read_plain(path).splitlines():
            try:
                text = safejson.loads(raw).get("text")
            except (ValueError, AttributeError):
                continue
            if isinstance(text, str):
                mine -= {w.casefold() for w in words(text)}
    return sorted(mine)


def purge(store, texts: list[str], ids=(), vkeys=()) -> str:
    """Rewrite this clone's history (every branch) so no commit holds the texts (of records `ids`);
    returns the notice. In an encrypted store every sealed line of every commit is opened, cleaned
    and sealed again under its epoch (`rewrite_history`), so no commit holds the forgotten record's
    sealed line either."""
    pairs = [(v.hex(), REPLACEMENT.encode().hex()) for t in texts for v in text_variants(t)]
    # Each record's key (vkey) in older lines opens its sealed vector in older packs: it goes too.
    pairs += [
        (k.encode().hex(), REPLACEMENT.encode().hex()) for k in vkeys if isinstance(k, str) and k
    ]
    prefixes = [" ".join(t.split()).encode("utf-8", "surrogatepass").hex() for t in texts]
    spec = {
        "pairs": pairs,
        "prefixes": prefixes,
        "replacement": REPLACEMENT,
        "words": _own_words(store, texts),
    }
    sealer = getattr(store, "sealer", None)
    if sealer is None:
        return rewrite_history(
            store, _FILTER_SCRIPT, spec, ids, "The record is forgotten in the current files"
        )
    return rewrite_sealed(
        store, sealer.keys, None, ids, "The record is forgotten in the current files", spec
    )


def rewrite_sealed(
    store, keys: dict, target, ids=(), done="", clean=None, keys_files=None, drop=None
) -> str:
    """Rewrite every commit of this clone so that each line of its line files is sealed (under its
    own epoch, or `target`), cleaned by `clean` (purge's pairs, prefixes, words); `keys_files`
    ({path: bytes}: the key files the sealed lines need) replace those paths in every commit and
    go into every root commit, `drop` (a regex of paths) goes out of every commit; other files of
    keys/ keep their history (fsck names who changed the recipients). Needs every epoch's key.
    Returns the force-push notice."""
    from pathlib import Path

    import memstore

    spec = {
        "pairs": [],
        "prefixes": [],
        "replacement": REPLACEMENT,
        "words": [],
        **(clean or {}),
        "package": str(Path(memstore.__file__).resolve().parent.parent),
        "keys": {str(e): k.hex() for e, k in keys.items()},
        # this identity's own private keys (scope private lines): the rest stay as they are
        "private": {kid: k.hex() for kid, k in getattr(store.sealer, "private", {}).items()},
        "target": target,
        "line_files": LINE_FILES,
        "drop": drop,
        "keys_files": {p: d.hex() for p, d in (keys_files or {}).items()},
    }
    return rewrite_history(store, _SEALED_SCRIPT, spec, ids, done)


def rewrite_history(store, script: str, spec: dict, ids=(), done: str = "") -> str:
    """The machinery every history rewrite shares: run `script` (a git-filter-repo program reading
    `spec`) over every branch, put back the remotes and tracking filter-repo drops, delete the
    remote-tracking refs (the old history), expire the reflogs and prune, record the first rewritten
    commits in purged-history.jsonl (so ct sync never merges the old history back) and return the
    force-push notice. The spec file (it may hold an encrypted store's keys) is written mode 0600
    in the store's private folder and removed after."""
    git = store.git
    remotes = {name: git.run("remote", "get-url", name) for name in git.run("remote").split()}
    tracking = _tracking_config(store)
    # The remote's old history, as last fetched: sync must never bring it back (see refuse_unpublished_purge).
    old = [
        line.split()[1]
        for line in git.run(
            "for-each-ref", "--format=%(refname) %(objectname)", "refs/remotes"
        ).splitlines()
    ]
    branch = git.run("symbolic-ref", "--short", "-q", "HEAD")
    remote = next(iter(remotes), "origin")
    try:  # what the remote's branch was when this clone last fetched: the force push's lease
        was = git.run("rev-parse", "-q", "--verify", f"refs/remotes/{remote}/{branch}")
    except MemstoreError:
        was = ""
    lease = f"--force-with-lease={branch}:{was}" if was else "--force"
    parents = _parents(store)
    store.meta_dir.mkdir(parents=True, exist_ok=True)
    fd, path = tempfile.mkstemp(suffix=".json", prefix="rewrite-", dir=store.meta_dir)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(spec, fh)
        with store.lock():
            proc = git.filter_repo(script, path)
            if proc.returncode != 0:
                raise MemstoreError(
                    f"git-filter-repo failed in {store.root}: {proc.stderr.strip()[-800:]}",
                    f"{done or 'The current files are as the command left them'}; history was not "
                    "rewritten.",
                )
            for (
                name,
                url,
            ) in remotes.items():  # filter-repo removes remotes so nothing is pushed by accident
                if name not in git.run("remote").split():
                    git.run("remote", "add", name, url)
            for key, value in tracking:
                git.run("config", key, value)
            for ref in git.run("for-each-ref", "--format=%(refname)", "refs/remotes").split():
                git.run(
                    "update-ref", "-d", ref
                )  # the old history, as last fetched: it holds the text
            purged = _first_rewritten(store, parents)
            git.run("reflog", "expire", "--expire=now", "--all")
            git.run("gc", "--quiet", "--prune=now")
    finally:
        os.unlink(path)
    _record_purge(store, purged, old, ids)
    return PURGE_NOTICE.format(root=store.root, remote=remote, branch=branch, lease=lease)


# ----- sync after a history rewrite -----------------------------------------------------------------

PURGED_MARK = (
    "purged-history.json"  # in .memstore/ of an older memstore: the old remote tips of its purge
)
PURGED = (
    "purged-history.jsonl"  # committed: the commits every --purge-history removed (ids, never text)
)
PURGED_ATTRIBUTE = f"{PURGED} merge=union"


def _parents(store) -> dict[str, list[str]]:
    """{commit: its parents} for every commit reachable from a ref (before a rewrite)."""
    out = {}
    for line in store.git.run("rev-list", "--all", "--parents").splitlines():
        sha, *parents = line.split()
        out[sha] = parents
    return out


def _first_rewritten(store, parents: dict[str, list[str]]) -> list[str]:
    """The commits filter-repo rewrote whose parents it did not: the first commits of the old
    history that held the text. Every other rewritten commit descends from one of them, so a
    branch holds a purged commit exactly when it holds one of these."""
    from ..gitrepo import _common_dir, git_dir

    try:
        lines = (
            (_common_dir(git_dir(store.root)) / "filter-repo" / "commit-map")
            .read_text()
            .splitlines()[1:]
        )
    except (OSError, TypeError):
        return []
    rewritten = {a for a, b in (ln.split() for ln in lines if len(ln.split()) == 2) if a != b}
    return sorted(c for c in rewritten if not any(p in rewritten for p in parents.get(c, [])))


def _record_purge(store, commits: list[str], tips: list[str], ids) -> None:
    """One line in purged-history.jsonl, committed: every clone learns on its next pull which
    commits hold forgotten text, so ct sync refuses to push them and fsck names them."""
    if not commits and not tips:
        return
    line = {
        "at": to_iso(now_utc()),
        "commits": commits,
        "tips": sorted(set(tips)),
        "ids": sorted(ids),
    }
    with store.transaction(
        f"Record the {len(commits)} first commits --purge-history rewrote"
    ) as tx:
        logfmt.append_lines(
            store.root / PURGED,
            (json.dumps(line, separators=(",", ":")) + "\n").encode(),
            fsync=False,
        )
        attributes.ensure(store.root, PURGED_ATTRIBUTE)
        tx.stage([PURGED, ".gitattributes"])


def purges(store) -> list[dict]:
    """Every purge the store records (purged-history.jsonl, and an older memstore's local mark)."""
    out = []
    try:
        data = logfmt.read_plain(store.root / PURGED).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        data = ""
    for raw in data.splitlines():
        if raw.strip() and _purge_problem(raw) is None:  # fsck names a damaged line
            out.append(json.loads(raw))
    try:
        old = json.loads((store.meta_dir / PURGED_MARK).read_text(encoding="utf-8"))
        out.append({"commits": [], "tips": old.get("old") or [], "ids": old.get("ids") or []})
    except (OSError, ValueError, AttributeError):
        pass
    return out


def _purge_problem(raw: str | bytes) -> str | None:
    """What is wrong with one line of purged-history.jsonl (lists of strings), or None."""
    from ..format import safejson

    try:
        obj = safejson.loads(raw)
    except ValueError as exc:  # not JSON, nested too deep, a giant number, NaN
        return str(exc)
    if type(obj) is not dict:
        return "a purge must be a JSON object"
    for key in ("commits", "tips", "ids"):
        value = obj.get(key, [])
        if type(value) is not list or any(type(v) is not str for v in value):
            return f"{key!r} must be a list of strings"
    return None


def purge_problems(store) -> list[str]:
    """`purged-history.jsonl:LINE: why` for every damaged line (reads skip them; fsck names them)."""
    try:
        data = logfmt.read_plain(store.root / PURGED)
    except OSError:  # missing; a link or special file is named by fsck's check of links
        return []
    return safejson.line_problems(PURGED, data, _purge_problem)


def purged_in(store, rev: str = "HEAD") -> list[str]:
    """The purged commits (purged-history.jsonl) that `rev` holds; [] on a clean clone (one git
    command: the old commits are not even present)."""
    wanted = sorted(
        {c for p in purges(store) for c in [*(p.get("commits") or []), *(p.get("tips") or [])]}
    )
    if not wanted:
        return []
    present = store.git.present_commits(wanted)
    return [c for c in present if _is_ancestor(store, c, rev)]


def purged_ids(store, commits) -> list[str]:
    """The forgotten record ids of the purges that removed these commits."""
    commits = set(commits)
    return sorted(
        {
            i
            for p in purges(store)
            if commits & set((p.get("commits") or []) + (p.get("tips") or []))
            for i in p.get("ids") or []
        }
    )


def refuse_purged(store, res, rev: str = "HEAD", what: str = "push") -> None:
    """ct sync never pushes (nor merges) a commit that --purge-history removed: it holds forgotten text."""
    back = purged_in(store, rev)
    if not back:
        return
    ids = " ".join(purged_ids(store, back)) or "ID"
    if rev == "HEAD":
        raise MemstoreError(
            f"{store.root}: {res.branch} holds commit {back[0][:10]}, which ct forget --purge-history removed "
            f'(purged-history.jsonl): it holds forgotten text (a plain "git pull" merged the old history back). '
            f"ct sync does not {what} it.",
            f'Drop it: "ct -C {store.root} sync --drop-purged" moves {res.branch} onto {res.upstream}, writes again '
            "this clone's records that are not there, and expires the reflog and prunes so no object keeps the "
            "text. Nothing was pushed.",
        )
    raise MemstoreError(
        f"{store.root}: {rev} holds commit {back[0][:10]}, which ct forget --purge-history removed "
        "(purged-history.jsonl): someone pushed the old history back. ct sync does not merge it.",
        f'On a clone whose history is clean: "ct forget --purge-history {ids}" rewrites it away, then '
        f'"git push --force {res.remote} {res.branch}". Nothing was merged.',
    )


def expire_old_history(store) -> list[str]:
    """Drop every object only the reflog or a pruned ref keeps (so no object holds purged text):
    the reflogs of every ref but the stash are expired, then git gc --prune=now. Returns what still
    holds a purged commit (a branch, a tag, the stash) for the user to delete."""
    git = store.git
    refs = [r for r in git.run("for-each-ref", "--format=%(refname)").split() if r != "refs/stash"]
    git.run("reflog", "expire", "--expire=now", "--expire-unreachable=now", "HEAD", *refs)
    git.run("gc", "--quiet", "--prune=now")
    held = []
    for c in purged_in_any(store):
        held += git.run("for-each-ref", "--format=%(refname:short)", "--contains", c).split()
    return sorted(set(held))


def purged_in_any(store) -> list[str]:
    """The purged commits any ref (or the stash) holds."""
    out = []
    for ref in store.git.run("for-each-ref", "--format=%(refname)").split():
        out += [c for c in purged_in(store, ref) if c not in out]
    return out


def refuse_unpublished_purge(store, res) -> None:
    """After --purge-history (here or on a clone this one pulled from), sync must not fetch or
    merge the remote's old history back in: checked with ls-remote, before any fetch."""
    tips = {t for p in purges(store) for t in p.get("tips") or []}
    if not tips:
        return
    git = store.git
    branch = res.upstream.split("/", 1)[-1]
    try:
        line = git.run("ls-remote", res.remote, f"refs/heads/{branch}")
    except MemstoreError:
        return  # unreachable: the fetch that follows says so
    remote = line.split()[0] if line.strip() else None
    if remote not in tips:
        (store.meta_dir / PURGED_MARK).unlink(
            missing_ok=True
        )  # an older memstore's mark: the remote moved on
        return
    raise MemstoreError(
        f"{store.root}: this clone's history was rewritten by ct forget --purge-history, and "
        f"{res.upstream} still has the old history (with the forgotten text). ct sync does not merge it back.",
        f'Publish the rewritten history first: "git -C {store.root} push --force {res.remote} '
        f'HEAD:{res.upstream.split("/", 1)[-1]}", then run ct sync again. Nothing was changed.',
    )


def old_history_back(store) -> str | None:
    """A warning when this branch holds a commit that --purge-history removed (a plain `git pull`
    from a remote or clone that still had the old history), naming the commands that drop it; else None."""
    back = purged_in(store, "HEAD")
    if not back:
        return None
    ids = " ".join(purged_ids(store, back)) or "ID…"
    said = (
        f"commit {back[0][:10]} of the old history that ct forget --purge-history rewrote (purged-history.jsonl; "
        'it holds the forgotten text) is in this branch again: a plain "git pull" merged it back, and a push '
        "would publish it (ct sync refuses)."
    )
    upstream = _upstream_ref(store)
    if upstream and not purged_in(store, upstream):
        return (
            f'{said} "ct sync --drop-purged" moves this branch onto {upstream.removeprefix("refs/remotes/")} '
            "(keeping this clone's own records) and expires the reflog and prunes, so no object keeps the text; "
            f'or "ct forget --purge-history {ids}" rewrites it again'
        )
    return f'{said} "ct forget --purge-history {ids}" rewrites it again; then "git push --force" publishes the rewritten history'


def _upstream_ref(store) -> str | None:
    git = store.git
    try:
        branch = git.run("symbolic-ref", "--short", "-q", "HEAD")
        remote = git.run("config", "--get", f"branch.{branch}.remote")
        merge = git.run("config", "--get", f"branch.{branch}.merge").removeprefix("refs/heads/")
        return git.run(
            "rev-parse", "-q", "--verify", "--symbolic-full-name", f"refs/remotes/{remote}/{merge}"
        )
    except MemstoreError:
        return None


def _is_ancestor(store, a: str, b: str) -> bool:
    return store.git.is_ancestor(a, b)


def follow_rewritten_remote(
    store, res, before: str | None, drop_purged: bool = False, record=None, change=((), ())
) -> bool:
    """When the remote's history was rewritten (a force push after --purge-history elsewhere), or
    with `drop_purged` when this branch holds purged commits the remote does not (a plain `git pull`
    merged them back): move this clone onto the remote, drop every object only the old history
    kept (reflogs expired, gc --prune=now, once the caller has done the rest), leaving in
    memstore/reapply.py's file its own records the remote lacks, to write again, and `change` (this
    clone's unpushed change of readers: (added, removed)) to make again; True when it moved.
    `record`: the trusted epochs to check the remote's keys against, kept once this clone follows
    (this clone's own, less the epochs it made and has not pushed)."""
    git = store.git
    try:
        after = git.run("rev-parse", "-q", "--verify", f"refs/remotes/{res.upstream}")
    except MemstoreError:
        return False
    rewritten = True
    if drop_purged:
        if not purged_in(store, "HEAD"):
            res.notes.append("this branch holds no commit --purge-history removed: nothing to drop")
            return False
        refuse_purged(store, res, f"refs/remotes/{res.upstream}")
    elif not before or before == after or _is_ancestor(store, before, after):
        if not _encrypted_under_unpushed(store, after):
            return False
        rewritten = False  # encrypted elsewhere, not rewritten: this clone's plain commits stay out
    from .. import keyring
    from ..format import sealed_lines

    upstream = f"refs/remotes/{res.upstream}"
    gone = forgotten_ids(store.root)
    gone_here = set(gone)  # this clone's forgets, read before its keys change
    mine = records_here(store)  # this clone's records, read before anything changes
    # `ct encrypt --rewrite-history` on another clone: the remote is encrypted, this clone is not.
    became = store.sealer is None and git.blob(upstream, keyring.RECIPIENTS) is not None
    if became:
        sealer = _remote_sealer(store, upstream)  # NoKeyError, nothing changed, when none opens it
        sealed_lines.register(store.root, sealer)
        store.sealer = sealer
    remote = None
    if store.sealer is not None:  # the rewritten history's keys, checked against this clone's
        try:
            remote = store.sealer if became else _remote_sealer(store, upstream, record)
        except MemstoreError:
            remote = None
    if rewritten and not drop_purged and not _rewrite_recorded(store, upstream, before, remote):
        if became:
            sealed_lines.register(store.root, None)
            store.sealer = None
        res.notes.append(
            f"{res.upstream} was force-pushed to a history without this clone's last fetched "
            f"{before[:10]}, and it records no purge of it (purged-history.jsonl): not followed as a "
            "purge (a push of an older state would undo forgets and key changes that way); it is "
            "merged and pushed back instead"
        )
        return False
    if remote is not None and not drop_purged:
        from ..incoming import forged_lines

        bad = forged_lines(store, upstream, sealer=remote, whole=True)
        if bad:
            if became:
                sealed_lines.register(store.root, None)
                store.sealer = None
            more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
            raise UsageError(
                f"Not following the rewritten {res.upstream}: {bad[0]}{more}",
                "Nothing was changed. No reader of this store sealed that line: someone who can "
                "push wrote it into the rewritten history.",
            )
    try:
        if remote is not None:  # the rewritten history's lines, under its keys
            sealed_lines.register(store.root, remote)
        try:
            remote_ids = _ids_at(store, upstream)
            gone_there = tombstones_at(store, upstream)
            gone |= gone_there
        finally:
            sealed_lines.register(store.root, store.sealer)
        local = [r for r in mine if r.get("id") not in remote_ids and r.get("id") not in gone]
        stale = [r for r in mine if r.get("id") in gone and isinstance(r.get("text"), str)]
        if became and local:
            store.sealer.write_key()  # this clone's records must be sealed to be written again
    except BaseException:
        if became:
            sealed_lines.register(store.root, None)
            store.sealer = None
        raise
    from .. import reapply

    forget = gone_here - gone_there
    reapply.save(store, [store.normalize(r) for r in local], *change, forget=forget, expire=stale)
    if record is not None and not became:
        from ..gitrepo import git_dir

        record.save(git_dir(store.root))  # the epochs this clone made and never pushed lost
    git.run("reset", "--hard", "-q", upstream)
    if store.sealer is not None and not became:
        store.refresh_keys()  # the rewritten history's keys/, from here on
    res.notes.append(
        f"{res.upstream} was rewritten (history purged on another clone): this clone now follows it"
        if rewritten
        else f"{res.upstream} was encrypted on another clone: this clone moved onto it, leaving its "
        "unpushed commits (plain text) out"
    )
    if became:
        store.meta_dir.chmod(0o700)
        res.notes.append(
            f"{res.upstream} is an encrypted store now (ct encrypt on another clone): this clone's "
            "files are sealed from here on"
        )
    return True  # the old history is dropped once the records are written again (until then
    # git's reflog still holds the commits they came from)


def tombstones_at(store, rev: str) -> set[str]:
    """The record ids forgotten.jsonl names at `rev` (read with the keys registered now)."""
    try:
        return tombstones_in(_opened(store, TOMBSTONES, store.git.blob(rev, TOMBSTONES) or b""))
    except (MemstoreError, ValueError):
        return set()


def records_here(store) -> list[dict]:
    """Every record of this clone's day logs (their plain view), in day order."""
    out = []
    for _day, path in sorted(logfmt.list_days(store.root).items()):
        out += _json_objects(logfmt.read_plain(path).splitlines())
    return out


def _encrypted_under_unpushed(store, after: str) -> bool:
    """Whether the remote became an encrypted store (ct encrypt on another clone, history kept)
    while this plain clone holds commits it has not pushed: a merge would put their plain lines
    into files of sealed lines (every command then stops) and push plain text. Such a clone moves
    onto the remote and writes its own records again, sealed, as after a rewrite."""
    from .. import keyring

    if store.sealer is not None or store.git.blob(after, keyring.RECIPIENTS) is None:
        return False
    return bool(store.git.run("rev-list", "-n", "1", after + "..HEAD").strip())


def _rewrite_recorded(store, upstream: str, before: str, remote=None) -> bool:
    """Whether the remote's rewritten history records (purged-history.jsonl, whose lines only a
    reader can seal in an encrypted store) a rewrite of `before`, the remote tip this clone last
    fetched: its tip, or a first rewritten commit that `before` holds. Every rewrite memstore makes
    records one; a force push of an older state does not."""
    try:
        raw = store.git.blob(upstream, PURGED)
        if raw is not None and store.sealer is not None:  # sealed under the remote's newest keys
            if remote is None:
                return False
            raw = remote.open_data(store.root / PURGED, raw)
    except (MemstoreError, ValueError):
        return False
    marks: set[str] = set()
    for line in (raw or b"").splitlines():
        if line.strip() and _purge_problem(line) is None:
            entry = json.loads(line)
            marks |= set(entry.get("commits") or []) | set(entry.get("tips") or [])
    if before in marks:
        return True
    present = store.git.present_commits(sorted(marks)) if marks else []
    return any(_is_ancestor(store, c, before) for c in present)


def _remote_sealer(store, rev: str, record=None):
    """The Sealer for this store made from the key files at `rev` (a remote that was encrypted
    elsewhere), before this clone's files change; NoKeyError when no identity opens them.
    `record`: the trusted epochs to check them against (default: this clone's record)."""
    import shutil
    from pathlib import Path

    from .. import keyring
    from ..format.sealed_lines import Sealer

    store.meta_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="remote-keys-", dir=store.meta_dir))
    try:
        (tmp / keyring.KEYS_DIR).mkdir()
        for name in store.git.run("ls-tree", "--name-only", rev, f"{keyring.KEYS_DIR}/").split():
            data = store.git.blob(rev, name)
            if data is not None and name.endswith(".age"):
                (tmp / name).write_bytes(data)
        from ..gitrepo import git_dir
        from ..keytrust import Record

        # checked against this clone's trusted epochs (memstore/keytrust.py); the record is not kept
        if record is None:
            record = Record.load(git_dir(store.root))
        opened = keyring.open_store(tmp, record=record)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    sealer = Sealer(store.root, opened.keys, opened.newest, opened.identity_note)
    sealer.private, sealer.own = opened.private, opened.own
    sealer.doubtful, sealer.doubtful_keys = opened.doubtful, opened.doubtful_keys
    sealer.readers, sealer.trust = opened.readers, opened.trust
    return sealer


def drop_old_objects(store, res, stale: list[dict]) -> None:
    """After moving onto the rewritten history: no object, reflog entry or index page of this
    clone keeps the old history's forgotten text."""
    held = expire_old_history(store)
    res.notes.append(
        "expired the reflogs and pruned: no object of the old history is left in this clone"
    )
    if held:
        res.notes.append(
            f"{', '.join(held)} still hold{'s' if len(held) == 1 else ''} commits --purge-history removed (forgotten "
            f'text): delete {"them" if len(held) > 1 else "it"} ("git branch -D" / "git tag -d" / "git stash drop"), '
            'then "git gc --prune=now"'
        )
    if stale:
        res.notes += scrub_this_machine(store, stale)


def _ids_at(store, rev: str) -> set[str]:
    git = store.git
    out: set[str] = set()
    try:
        names = git.run("ls-tree", "-r", "--name-only", rev, "--", "log").splitlines()
    except MemstoreError:
        return out
    for name in names:
        out |= _ids_in(_opened(store, name, git.blob(rev, name)))
    return out


def _opened(store, rel: str, data: bytes | None) -> bytes | None:
    """A committed version of a line file as plain lines (opened in an encrypted store)."""
    if data is None or getattr(store, "sealer", None) is None:
        return data
    from ..format import sealed_lines

    return sealed_lines.open_bytes(store.root / rel, data)


def _ids_in(data: bytes | None) -> set[str]:
    """The record ids of a day log's lines (lines that do not parse are skipped)."""
    out: set[str] = set()
    for line in (data or b"").splitlines():
        try:
            rid = safejson.loads(line).get("id")
        except (ValueError, AttributeError):
            continue
        if isinstance(rid, str):
            out.add(rid)
    return out


def added_by(store, rev: str) -> set[str]:
    """Ids of the records commit `rev` added to the day logs, over its first parent (a merge: what
    it brought in). What `ct forget --commit` forgets: an import, a chat, a write to undo."""
    git = store.git
    try:
        sha = git.run("rev-parse", "-q", "--verify", f"{rev}^{{commit}}")
    except MemstoreError:
        raise UsageError(
            f"--commit {rev!r} is not a commit of {store.root}", "See `ct log` for the commits."
        ) from None
    try:
        parent = git.run("rev-parse", "-q", "--verify", f"{sha}^1")
    except MemstoreError:  # the first commit
        parent = None
    changed = git.run(
        "diff-tree",
        "-r",
        "--name-only",
        "-z",
        "--no-commit-id",
        *([parent, sha] if parent else ["--root", sha]),
        "--",
        "log",
    )
    out: set[str] = set()
    for path in filter(None, changed.split("\0")):
        out |= _ids_in(_opened(store, path, git.blob(sha, path))) - (
            _ids_in(_opened(store, path, git.blob(parent, path))) if parent else set()
        )
    if not out:
        raise UsageError(
            f"commit {sha[:10]} added no records (ct log shows what each commit added)",
            "Nothing was forgotten.",
        )
    return out
