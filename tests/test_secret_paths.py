"""Secrets on every write path (issue 13): a token, an AWS key pair and a private key are refused by
add, add from stdin, every import, ingest-path, ingest-any, watch, chat, MCP add, HTTP add and
build-wiki — nothing committed, nothing in `git log -p --all` — and stored verbatim with
--allow-secrets; --skip-secrets and --redact-secrets bring in the rest of a file."""

from __future__ import annotations

import base64
import json
import random
import string
import subprocess
import threading

import anyio
import pytest

from conftest import commits, ct, git_clean, make_store, modules_after
from conftest_openai import openai_server  # noqa: F401  (fixture)

# Assembled at run time so this file holds no literal that looks like a key.
_rng = random.Random(13)
_B62 = string.ascii_letters + string.digits
TOKEN = "gh" + "p_" + "".join(_rng.choice(_B62) for _ in range(36))
AWS_ID = (
    "AK" + "IA" + "".join(_rng.choice(string.ascii_uppercase + string.digits) for _ in range(16))
)
AWS_SECRET = "".join(_rng.choice(_B62 + "/+") for _ in range(40))
_KEY_BODY = base64.b64encode(_rng.randbytes(240)).decode()
PRIVATE_KEY = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    + "\n".join(_KEY_BODY[i : i + 64] for i in range(0, len(_KEY_BODY), 64))
    + "\n-----END OPENSSH PRIVATE KEY-----"
)
SECRETS = {
    "token": (f"here is my token {TOKEN} please remember it", [TOKEN]),
    "aws-pair": (
        f"[default]\naws_access_key_id = {AWS_ID}\naws_secret_access_key = {AWS_SECRET}",
        [AWS_ID, AWS_SECRET],
    ),
    "private-key": (f"my deploy key:\n{PRIVATE_KEY}", [_KEY_BODY[:64]]),
}


def history(root) -> str:
    """Everything git holds: every commit's message and patch, on every ref."""
    return subprocess.run(
        ["git", "-C", str(root), "log", "-p", "--all", "--format=%H %B"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def files_text(root) -> str:
    out = []
    for p in sorted(root.rglob("*")):
        if p.is_file() and ".git" not in p.parts and ".memstore" not in p.parts:
            out.append(p.read_bytes().decode("utf-8", "replace"))
    return "\n".join(out)


# ----- the write paths: each writes `text` into the store at `root` with extra CLI flags ---------


def _add(root, tmp, text, flags):
    return ct("-C", root, "add", *flags, text, check=False)


def _add_stdin(root, tmp, text, flags):
    return ct("-C", root, "add", *flags, "-", input=text, check=False)


def _jsonl_file(tmp, text):
    f = tmp / "turns.jsonl"
    rows = [
        {"ts": "2026-03-01T10:00:00Z", "role": "user", "text": "good morning, the plan is ready"},
        {"ts": "2026-03-01T10:01:00Z", "role": "user", "text": text},
    ]
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return f


def _import_jsonl(root, tmp, text, flags):
    return ct("-C", root, "import", "jsonl", *flags, _jsonl_file(tmp, text), check=False)


def _import_claude(root, tmp, text, flags):
    f = tmp / "0b7c9d2e-1111-4222-8333-444455556666.jsonl"
    row = {
        "type": "user",
        "sessionId": f.stem,
        "uuid": "u-1",
        "parentUuid": None,
        "isSidechain": False,
        "timestamp": "2026-03-01T10:00:00.000Z",
        "message": {"role": "user", "content": text},
    }
    f.write_text(json.dumps(row) + "\n")
    return ct("-C", root, "import", "claude-code", *flags, f, check=False)


def _import_chatgpt(root, tmp, text, flags):
    f = tmp / "conversations.json"
    msg = {
        "id": "m1",
        "author": {"role": "user"},
        "create_time": 1772359200.0,
        "content": {"content_type": "text", "parts": [text]},
    }
    conv = {
        "title": "New chat",
        "create_time": 1772359200.0,
        "conversation_id": "c-1",
        "id": "c-1",
        "current_node": "m1",
        "mapping": {
            "r": {"id": "r", "message": None, "parent": None, "children": ["m1"]},
            "m1": {"id": "m1", "message": msg, "parent": "r", "children": []},
        },
    }
    f.write_text(json.dumps([conv]))
    return ct("-C", root, "import", "chatgpt", *flags, f, check=False)


def _ingest_path(root, tmp, text, flags):
    d = tmp / "docs"
    d.mkdir(exist_ok=True)
    (d / "notes.md").write_text("# Notes\n\n" + text + "\n")
    return ct("-C", root, "ingest-path", *flags, d, check=False)


def _ingest_any(root, tmp, text, flags):
    d = tmp / "any"
    d.mkdir(exist_ok=True)
    (d / "notes.txt").write_text(text + "\n")
    return ct("-C", root, "ingest-any", *flags, d, check=False)


def _watch(root, tmp, text, flags):
    return ct(
        "-C",
        root,
        "watch",
        "--once",
        "--kind",
        "jsonl",
        *flags,
        _jsonl_file(tmp, text),
        check=False,
    )


def _mcp(root, tmp, text, flags):
    from memstore.serve.mcp import MemoryServer

    mode = {"--allow-secrets": "allow", "--redact-secrets": "redact"}.get(
        flags[0] if flags else "", "refuse"
    )

    async def main():
        return await MemoryServer(root, allow_secrets_override=mode == "allow").add(
            text, secrets=mode
        )

    try:
        anyio.run(main)
        return subprocess.CompletedProcess([], 0, "", "")
    except Exception as exc:  # the tool's error is what the MCP client is shown
        return subprocess.CompletedProcess([], 9, "", str(exc))


def _http(root, tmp, text, flags):
    from memstore.serve.http import make_server
    import urllib.error
    import urllib.request

    mode = {"--allow-secrets": "allow", "--redact-secrets": "redact"}.get(
        flags[0] if flags else "", "refuse"
    )
    server = make_server(
        root, port=0, log=False, writable=True, allow_secrets_override=mode == "allow"
    )
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        req = urllib.request.Request(
            f"http://127.0.0.1:{server.server_address[1]}/add",
            method="POST",
            data=json.dumps({"text": text, "secrets": mode}).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return subprocess.CompletedProcess([], 0, resp.read().decode(), "")
        except urllib.error.HTTPError as exc:
            return subprocess.CompletedProcess([], exc.code, "", exc.read().decode())
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


PATHS = {
    "add": _add,
    "add-stdin": _add_stdin,
    "import-jsonl": _import_jsonl,
    "import-claude-code": _import_claude,
    "import-chatgpt": _import_chatgpt,
    "ingest-path": _ingest_path,
    "ingest-any": _ingest_any,
    "watch": _watch,
    "mcp-add": _mcp,
    "http-add": _http,
}


@pytest.mark.parametrize("kind", list(SECRETS))
@pytest.mark.parametrize("path", list(PATHS))
def test_secret_refused_on_every_write_path(tmp_path, path, kind):
    st = make_store(tmp_path / "s")
    text, parts = SECRETS[kind]
    before = commits(st.root)
    proc = PATHS[path](st.root, tmp_path, text, [])
    assert proc.returncode != 0, proc.stdout
    assert "credentials" in proc.stderr, proc.stderr
    assert all(p not in proc.stderr for p in parts), "the message masks the secret"
    assert commits(st.root) == before and git_clean(st.root)
    log = history(st.root) + files_text(st.root)
    assert all(p not in log for p in parts)


@pytest.mark.parametrize(
    "path", ["add", "add-stdin", "import-jsonl", "ingest-path", "watch", "mcp-add", "http-add"]
)
def test_allow_secrets_stores_verbatim_but_never_in_subjects_or_topics(tmp_path, path):
    st = make_store(tmp_path / "s")
    text, parts = SECRETS["token"]
    proc = PATHS[path](st.root, tmp_path, text, ["--allow-secrets"])
    assert proc.returncode == 0, proc.stderr
    logs = "".join(p.read_text() for p in (st.root / "log").rglob("*.jsonl"))
    assert TOKEN in logs, "stored verbatim in the day log"
    subjects = "\n".join(commits(st.root))
    assert TOKEN not in subjects and TOKEN[:12] not in subjects
    tree = "".join(p.read_text() for p in (st.root / "tree").rglob("*.jsonl"))
    assert TOKEN[4:20] not in tree
    assert git_clean(st.root)


def test_chat_turn_with_a_secret_is_neither_sent_nor_stored(tmp_path, openai_server):
    st = make_store(tmp_path / "s")
    openai_server.replies = ["noted"]
    before = commits(st.root)
    proc = ct("-C", st.root, "chat", "--once", SECRETS["token"][0], check=False)
    assert proc.returncode == 9 and "credentials" in proc.stderr
    assert openai_server.bodies("/v1/chat/completions") == [], "the question never left the machine"
    assert commits(st.root) == before and TOKEN not in history(st.root)
    ct("-C", st.root, "chat", "--redact-secrets", "--once", SECRETS["token"][0])
    assert TOKEN not in history(st.root) and "[REDACTED github-token]" in files_text(st.root)
    assert TOKEN not in json.dumps(openai_server.bodies("/v1/chat/completions"))


def test_build_wiki_page_with_a_secret_is_refused(tmp_path):
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    page = (
        f'<html><body><div id="mw-content-text"><p>Config leak: aws_secret_access_key = {AWS_SECRET} '
        f"and id {AWS_ID} were pasted here by mistake.</p></div></body></html>".encode()
    )

    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=UTF-8")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), H)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        st = make_store(tmp_path / "s")
        topics = tmp_path / "topics.txt"
        topics.write_text("Leaky_page\n")
        base = f"http://127.0.0.1:{server.server_address[1]}/wiki/"
        before = commits(st.root)
        proc = ct(
            "-C", st.root, "build-wiki", "--topics-file", topics, "--base-url", base, check=False
        )
        assert proc.returncode == 9 and "credentials" in proc.stderr
        assert commits(st.root) == before and AWS_SECRET not in history(st.root)
        ct(
            "-C",
            st.root,
            "build-wiki",
            "--topics-file",
            topics,
            "--base-url",
            base,
            "--redact-secrets",
        )
        assert AWS_SECRET not in history(st.root) and AWS_ID not in history(st.root)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _big_import(tmp_path, n=40, secret_at=(5, 23)):
    rows = []
    for i in range(1, n + 1):
        text = f"turn {i}: we talked about the garden and the roses"
        if i in secret_at:
            text = f"pasted config for turn {i}:\n" + json.dumps(
                {
                    "auths": {
                        "https://index.docker.io/v1/": {
                            "auth": base64.b64encode(b"ann:Zr2LmX4vTn7KpW1s").decode()
                        }
                    }
                }
            )
        rows.append(
            {"ts": f"2026-03-01T10:{i:02d}:00Z", "role": "user", "text": text, "id": f"t{i}"}
        )
    f = tmp_path / "month.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return f


def test_secret_error_names_file_and_line(tmp_path):
    st = make_store(tmp_path / "s")
    f = _big_import(tmp_path, n=8, secret_at=(5,))
    proc = ct("-C", st.root, "import", "jsonl", f, check=False)
    assert proc.returncode == 9
    assert f"{f}:5 (record t5)" in proc.stderr and "docker-auth" in proc.stderr, proc.stderr
    assert "record  line" not in proc.stderr


def test_skip_secrets_imports_the_rest_and_lists_what_was_left_out(tmp_path):
    st = make_store(tmp_path / "s")
    f = _big_import(tmp_path)
    proc = ct("-C", st.root, "import", "jsonl", "--skip-secrets", f)
    assert f"left out {f}:5" in proc.stderr and f"left out {f}:23" in proc.stderr
    assert "added 38 records" in proc.stderr
    assert "Zr2LmX4vTn7KpW1s" not in history(st.root) and base64.b64encode(
        b"ann:Zr2LmX4vTn7KpW1s"
    ).decode() not in history(st.root)
    assert git_clean(st.root)


def test_redact_secrets_replaces_the_secret_and_says_so(tmp_path):
    st = make_store(tmp_path / "s")
    f = _big_import(tmp_path)
    ct("-C", st.root, "import", "jsonl", "--redact-secrets", f)
    recs = [
        json.loads(line)
        for p in (st.root / "log").rglob("*.jsonl")
        for line in p.read_text().splitlines()
    ]
    assert len(recs) == 40
    red = [r for r in recs if r["id"] in ("t5", "t23")]
    assert all(
        "[REDACTED docker-auth]" in r["text"] and r["meta"]["redacted"] == ["docker-auth"]
        for r in red
    )
    assert base64.b64encode(b"ann:Zr2LmX4vTn7KpW1s").decode() not in history(st.root)
    out = ct("-C", st.root, "search", "--json", "pasted config").stdout
    assert "REDACTED" in out


def test_secret_flags_exclude_each_other(tmp_path):
    st = make_store(tmp_path / "s")
    proc = ct("-C", st.root, "add", "--skip-secrets", "--allow-secrets", "hello there", check=False)
    assert proc.returncode == 2 and "exclude each other" in proc.stderr


def test_hunter2_password_is_caught_and_documented_examples_are_allowed(tmp_path):
    st = make_store(tmp_path / "s")
    proc = ct("-C", st.root, "add", "password: hunter2-SuperSecret!", check=False)
    assert proc.returncode == 9
    ct("-C", st.root, "add", "AWS docs use AKIAIOSFODNN7EXAMPLE as the example key id")
    ct("-C", st.root, "add", "password: <your password>")
    assert len(commits(st.root)) == 3


def test_a_group_name_never_holds_an_allowed_secret(tmp_path):
    """Crowded topics are grouped under a name made of their key terms: a token stored verbatim
    under --allow-secrets (and repeated in every member) must not become one of them."""
    st = make_store(tmp_path / "s")
    toml = st.root / "memstore.toml"
    toml.write_text(toml.read_text().replace("[settings]", "[settings]\nmax_children = 2"))
    fillers = [
        "orchard pruning schedule",
        "kayak paddle length",
        "violin rosin brand",
        "quilt batting weight",
    ]
    for i, subject in enumerate(
        fillers
    ):  # so the token is a rare word in the store, not a common one
        ct(
            "-C",
            st.root,
            "add",
            "--session",
            f"f{i}",
            "--ts",
            f"2025-12-0{i + 1}T10:00:00Z",
            f"{subject} {subject}",
        )
    subjects = [
        "sourdough starter feeding",
        "bicycle chain lubrication",
        "tax return deadline",
        "guitar string gauge",
    ]
    for i, subject in enumerate(subjects):
        text = f"{subject} {subject} note {TOKEN} again {TOKEN} and {TOKEN}"
        ct(
            "-C",
            st.root,
            "add",
            "--allow-secrets",
            "--session",
            f"s{i}",
            "--ts",
            f"2026-01-0{i + 1}T10:00:00Z",
            text,
        )
    tree = "".join(p.read_text() for p in (st.root / "tree").rglob("*.jsonl"))
    assert "related topics" in tree, "the topics were grouped"
    assert TOKEN not in tree and TOKEN[4:20] not in tree and TOKEN.lower() not in tree


def test_names_scan_a_clean_text_once_and_an_allowed_secret_every_time(tmp_path):
    """Topic names and summaries are rebuilt from the topic's texts on every write; a text found
    clean is remembered in the index, so a later process does not scan it again (a URL in a topic
    no longer wakes detect-secrets on each `ct add`). A text holding an allowed secret is never
    remembered as clean."""
    from memstore.index import queries
    from memstore.secrets import detect
    from memstore.secrets import policy as secret_policy

    st = make_store(tmp_path / "s")
    for i in range(3):
        ct(
            "-C",
            st.root,
            "add",
            "--session",
            "s1",
            f"release pipeline step {i}: https://example.org/project/pull/{1000 + i}",
        )
    ct(
        "-C",
        st.root,
        "add",
        "--allow-secrets",
        "--session",
        "s1",
        f"release pipeline token {TOKEN}",
    )
    after = modules_after(
        ["-C", st.root, "add", "--session", "s1", "release pipeline step 4"], ("detect_secrets",)
    )
    # the allowed secret is scanned again (detect-secrets is how a vendor token is recognised) ...
    assert after == ["detect_secrets"]
    tree = "".join(p.read_text() for p in (st.root / "tree").rglob("*.jsonl"))
    assert TOKEN[4:20] not in tree
    index = st.index()
    texts = {
        r["text"] for r in (index.record_at(rowid) for _id, rowid, *_ in queries.record_rows(index))
    }
    secret_text = next(t for t in texts if TOKEN in t)
    saved = set(queries.clean_keys(index, [secret_policy.clean_key(t) for t in texts]))
    assert secret_policy.clean_key(secret_text) not in saved
    # every other text was found clean once and remembered, but those the quiet pass tells at once
    loud = [t for t in texts if not detect.quiet(t)]
    assert len(saved) == len(loud) - 1
    assert len(loud) < len(texts) or detect._quiet is None


def test_an_allowed_secret_is_never_sent_to_the_topic_model(tmp_path, openai_server, monkeypatch):
    """With topics named by an LLM (opt-in), what the model is shown to name, summarise or place a
    topic is scrubbed like the names themselves: a secret kept verbatim by --allow-secrets stays home."""
    monkeypatch.setenv("MEMSTORE_LLM_TOPICS", "1")
    openai_server.replies = lambda body: (
        '{"belongs_to_current": true}' if "JSON" in str(body) else "Token talk"
    )
    st = make_store(tmp_path / "s")
    for i in range(3):
        text = f"deploy step {i}: the token is {TOKEN} for the deploy pipeline"
        ct(
            "-C",
            st.root,
            "add",
            "--allow-secrets",
            "--session",
            "s1",
            "--ts",
            f"2026-01-01T10:0{i}:00Z",
            text,
        )
    sent = json.dumps(openai_server.bodies("/v1/chat/completions"))
    assert sent != "[]", "the topic model was asked"
    assert TOKEN not in sent and TOKEN[4:20] not in sent
    assert "[REDACTED github-token]" in sent


def test_the_clean_verdicts_are_keyed_by_the_detector_source_files():
    """A changed rule invalidates every saved verdict only if the key reads the detector's own files
    (a moved module once left the key on the version fallback)."""
    from pathlib import Path

    from memstore.secrets import policy

    here = Path(policy.__file__).parent
    assert all((here / name).is_file() for name in policy.DETECTOR_SOURCES)
