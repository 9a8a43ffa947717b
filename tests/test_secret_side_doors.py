"""Secrets by side doors (issue 26, A5-A10): fields other than the text, markers, key shapes the
detector missed, refusals that quoted a second secret, redaction that left a copy, the page's
other fields, and chat sending what --allow-secrets stored."""

from __future__ import annotations

import base64
import json
import random
import string
import subprocess
import threading
import urllib.error
import urllib.request

import anyio
import pytest

from conftest import commits, ct, git_clean, make_store
from conftest_openai import openai_server  # noqa: F401  (fixture)

# Assembled at run time so this file holds no literal that looks like a key.
_rng = random.Random(26)
_B62 = string.ascii_letters + string.digits
TOKEN = "gh" + "p_" + "".join(_rng.choice(_B62) for _ in range(36))
HF = "h" + "f_" + "".join(_rng.choice(string.ascii_letters) for _ in range(34))
SENDGRID = (
    "S"
    + "G."
    + "".join(_rng.choice(_B62) for _ in range(22))
    + "."
    + "".join(_rng.choice(_B62) for _ in range(43))
)
_KEY_BODY = base64.b64encode(_rng.randbytes(600)).decode()
PEM_LINES = "\n".join(_KEY_BODY[i : i + 64] for i in range(0, len(_KEY_BODY), 64))


def _pem(kind: str = "RSA ") -> str:
    return f"-----BEGIN {kind}PRIVATE KEY-----\n{PEM_LINES}\n-----END {kind}PRIVATE KEY-----\n"


def history(root) -> str:
    """Every commit's message and patch, on every ref."""
    return subprocess.run(
        ["git", "-C", str(root), "log", "-p", "--all", "--format=%H %B"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def day_logs(root) -> str:
    return "".join(p.read_text() for p in (root / "log").rglob("*.jsonl"))


def _refused(st, proc, before, *secrets):
    assert proc.returncode == 9, (proc.stdout, proc.stderr)
    assert "credentials" in proc.stderr
    assert all(s not in proc.stderr and s[4:20] not in proc.stderr for s in secrets), proc.stderr
    assert commits(st.root) == before and git_clean(st.root)
    assert all(s not in history(st.root) for s in secrets)


# ----- A5: fields other than the text --------------------------------------------------------------


@pytest.mark.parametrize("flag", ["--session", "--actor", "--model"])
def test_add_scans_session_actor_and_model(tmp_path, flag):
    st = make_store(tmp_path / "s")
    before = commits(st.root)
    proc = ct("-C", st.root, "add", flag, TOKEN, "a harmless sentence", check=False)
    _refused(st, proc, before, TOKEN)
    assert f"{flag[2:]}: github-token" in proc.stderr


def test_import_scans_id_and_unknown_and_nested_fields(tmp_path):
    st = make_store(tmp_path / "s")
    f = tmp_path / "turns.jsonl"
    rows = [
        {"ts": "2026-03-01T10:00:00Z", "role": "user", "text": "first", "id": TOKEN},
        {
            "ts": "2026-03-01T10:01:00Z",
            "role": "user",
            "text": "second",
            "deploy": {"env": [{"hf": HF}]},
        },
        {
            "ts": "2026-03-01T10:02:00Z",
            "role": "user",
            "text": "third",
            "password": "hunter2-SuperSecret!",
        },
        {"ts": "2026-03-01T10:03:00Z", "role": "user", "text": "fourth", SENDGRID: 1},
    ]
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    before = commits(st.root)
    proc = ct("-C", st.root, "import", "jsonl", f, check=False)
    _refused(st, proc, before, TOKEN, HF, SENDGRID, "hunter2-SuperSecret!")
    for said in (
        f"{f}:1",
        "id: github-token",
        "meta.deploy.env[0].hf: huggingface-token",
        "meta.password: ",
    ):
        assert said in proc.stderr, proc.stderr
    # --redact-secrets brings all four in, none of the secrets with them, the id replaced by a hash
    ct("-C", st.root, "import", "jsonl", "--redact-secrets", f)
    logs = day_logs(st.root)
    assert len(logs.splitlines()) == 4
    assert all(
        s not in logs and s not in history(st.root)
        for s in (TOKEN, HF, SENDGRID, "hunter2-SuperSecret!")
    )
    # a second import of the same file finds the same records (the hashed id is stable)
    assert "nothing new" in ct("-C", st.root, "import", "jsonl", "--redact-secrets", f).stderr


def test_a_file_named_after_a_token_is_refused_and_its_name_masked(tmp_path):
    """Claude Code's session is the file's name: a token there reached the session field."""
    st = make_store(tmp_path / "s")
    f = tmp_path / f"{TOKEN}.jsonl"
    row = {
        "type": "user",
        "sessionId": TOKEN,
        "uuid": "u-1",
        "parentUuid": None,
        "isSidechain": False,
        "timestamp": "2026-03-01T10:00:00.000Z",
        "message": {"role": "user", "content": "nothing secret in the text"},
    }
    f.write_text(json.dumps(row) + "\n")
    before = commits(st.root)
    proc = ct("-C", st.root, "import", "claude-code", f, check=False)
    _refused(st, proc, before, TOKEN)
    assert "session: github-token" in proc.stderr


def test_ingest_path_scans_the_file_name(tmp_path):
    st = make_store(tmp_path / "s")
    d = tmp_path / "docs"
    d.mkdir()
    (d / f"notes-{TOKEN}.md").write_text("# Notes\n\nthe garden needs water\n")
    before = commits(st.root)
    _refused(st, ct("-C", st.root, "ingest-path", d, check=False), before, TOKEN)


def _mcp(root, tool, **kw):
    from memstore.serve.mcp import MemoryServer

    async def main():
        return await getattr(MemoryServer(root), tool)(**kw)

    try:
        anyio.run(main)
        return subprocess.CompletedProcess([], 0, "", "")
    except Exception as exc:  # the tool's error is what the MCP client is shown
        return subprocess.CompletedProcess([], 9, "", str(exc))


def _http_add(root, body):
    from memstore.serve.http import make_server

    server = make_server(root, port=0, log=False, writable=True)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        req = urllib.request.Request(
            f"http://127.0.0.1:{server.server_address[1]}/add",
            method="POST",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_mcp_and_http_add_scan_the_session(tmp_path):
    st = make_store(tmp_path / "s")
    before = commits(st.root)
    _refused(st, _mcp(st.root, "add", text="hello there", session=TOKEN), before, TOKEN)
    status, body = _http_add(st.root, {"text": "hello there", "model": TOKEN})
    assert status == 422 and "credentials" in body and TOKEN not in body and TOKEN[4:20] not in body
    assert commits(st.root) == before and TOKEN not in history(st.root)


# ----- markers -----------------------------------------------------------------------------------


def test_mark_refuses_a_secret_and_never_puts_one_in_its_commit_subject(tmp_path):
    st = make_store(tmp_path / "s")
    before = commits(st.root)
    _refused(st, ct("-C", st.root, "mark", f"deploying with {TOKEN}", check=False), before, TOKEN)
    _refused(st, _mcp(st.root, "mark", text=f"waiting on {HF}"), before, HF)
    ct("-C", st.root, "mark", "--redact-secrets", f"deploying with {TOKEN}")
    assert (
        TOKEN not in history(st.root)
        and "[REDACTED github-token]" in (st.root / "markers.jsonl").read_text()
    )
    ct("-C", st.root, "mark", "--allow-secrets", f"kept: {HF}")
    assert HF in (st.root / "markers.jsonl").read_text(), "kept verbatim where the user asked"
    subjects = "\n".join(commits(st.root))
    assert (
        HF not in subjects
        and HF[4:20] not in subjects
        and "Mark: kept: [REDACTED huggingface-token]" in subjects
    )
    marker = next(m for m in st.markers() if HF in m.text)
    ct("-C", st.root, "mark", "--done", marker.id)
    assert HF not in "\n".join(commits(st.root))


# ----- A6: shapes the detector missed -------------------------------------------------------------


def _service_account() -> str:
    return json.dumps(
        {
            "type": "service_account",
            "project_id": "acme-prod",
            "private_key_id": "%040x" % _rng.getrandbits(160),
            "private_key": _pem(""),
            "client_email": "deploy@acme-prod.iam.gserviceaccount.com",
            "client_id": str(_rng.randrange(10**20, 10**21)),
        },
        indent=2,
    )


@pytest.mark.parametrize(
    "kind,text",
    [
        ("private-key", json.dumps({"key": _pem()})),  # line breaks escaped as \n inside JSON
        ("private-key", "here: " + _pem().replace("\n", " ")),  # pasted on one line
        ("private-key", "KEY='" + _pem("EC ").replace("\n", "\\n") + "'"),  # shell with literal \n
        ("private-key", _service_account()),
        ("huggingface-token", f"export HF_TOKEN={HF}"),
        ("huggingface-token", f"login with {HF} please"),
        ("github-token", f"my token is {TOKEN[:22]}\n{TOKEN[22:]} ok"),  # wrapped by the terminal
        ("github-token", f'"text": "token {TOKEN[:15]}\\n{TOKEN[15:]}"'),  # wrapped, escaped
        ("huggingface-token", f"> {HF[:20]}\n> {HF[20:]}"),  # wrapped in a quote
        ("private-key", json.dumps({"messages": [{"content": "key file:\n" + _service_account()}]})),  # JSON in JSON
    ],
    ids=["json-pem", "one-line-pem", "shell-escaped-pem", "service-account", "hf-env", "hf-prose", "wrapped",
         "wrapped-escaped", "wrapped-quoted", "json-in-json"],
)  # fmt: skip
def test_detector_finds_escaped_and_one_line_keys_service_accounts_hf_and_wrapped_tokens(
    kind, text
):
    from memstore.secrets.detect import redact, scan

    found = scan(text)
    assert kind in {f.kind for f in found}, found
    cleaned, _ = redact(text)
    assert scan(cleaned) == []
    flat = text.replace("\\n", "").replace("\n", "").replace("> ", "").replace(" ", "")
    for secret in (TOKEN, HF, _KEY_BODY[:64], PEM_LINES.rsplit("\n", 1)[-1]):
        if (
            secret in flat
        ):  # no piece of it is left: its start, its end, the part after a line break
            assert all(piece not in cleaned for piece in (secret[4:16], secret[-12:])), cleaned
    assert all(_KEY_BODY[64:80] not in f.excerpt_redacted for f in found)


def test_labelled_set_recall_and_false_positives():
    """The adopted detector on memstore/bench/secret_set.py: every secret found, no look-alike flagged."""
    from memstore.bench.secret_set import labelled_set, rates
    from memstore.secrets.detect import scan

    r = rates(scan, labelled_set())
    assert r["lookalikes"] >= 150 and r["secrets"] >= 130
    assert (r["detected"], r["missed"]) == (r["secrets"], []), r["missed"]
    assert r["false_positives"] == 0, r["false_on"]


def test_service_account_json_is_refused_by_add(tmp_path):
    st = make_store(tmp_path / "s")
    before = commits(st.root)
    sa = _service_account()
    proc = ct("-C", st.root, "add", "-", input=f"here is the key file:\n{sa}", check=False)
    _refused(st, proc, before, _KEY_BODY[:64], json.loads(sa)["private_key_id"])
    assert "gcp-service-account" in proc.stderr and "private-key" in proc.stderr


@pytest.mark.parametrize(
    "text",
    [
        "use hf_hub_download(repo_id, filename) to fetch it",
        "the HF_TOKEN env var, e.g. hf_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        "A PEM file starts with -----BEGIN PRIVATE KEY----- followed by base64",
        "token count\nghp_ is the prefix of a GitHub token",
        "sk-\nlearn is a library",
    ],
)
def test_new_shapes_leave_look_alikes_alone(text):
    from memstore.secrets.detect import scan

    assert scan(text) == []


# ----- A7: a refusal masks every finding, not only its own -----------------------------------------


def test_refusal_masks_every_secret_of_the_line(tmp_path):
    st = make_store(tmp_path / "s")
    line = f"tokens {TOKEN} and {SENDGRID} and {HF}"
    before = commits(st.root)
    proc = ct("-C", st.root, "add", line, check=False)
    _refused(st, proc, before, TOKEN, SENDGRID, HF)
    assert (
        "github-token" in proc.stderr
        and "sendgrid-key" in proc.stderr
        and "huggingface-token" in proc.stderr
    )
    status, body = _http_add(st.root, {"text": line})
    assert status == 422 and all(
        s not in body and s[4:20] not in body for s in (TOKEN, SENDGRID, HF)
    ), body
    mcp = _mcp(st.root, "add", text=line)
    assert mcp.returncode == 9 and all(s not in mcp.stderr for s in (TOKEN, SENDGRID, HF)), (
        mcp.stderr
    )


def test_excerpts_mask_the_other_secrets_of_their_line():
    from memstore.secrets.detect import scan

    found = scan(f"{TOKEN} {SENDGRID} {TOKEN}")
    assert len(found) == 3
    for f in found:
        assert TOKEN not in f.excerpt_redacted and SENDGRID not in f.excerpt_redacted, (
            f.excerpt_redacted
        )


def test_other_errors_quoting_an_input_mask_it(tmp_path):
    st = make_store(tmp_path / "s")
    proc = ct("-C", st.root, "add", "--role", TOKEN, "hello", check=False)
    assert proc.returncode == 2 and "role" in proc.stderr and TOKEN not in proc.stderr, proc.stderr


# ----- A8: redaction re-scans until clean ---------------------------------------------------------


@pytest.mark.parametrize("secret", [SENDGRID, TOKEN, HF], ids=["sendgrid", "github", "huggingface"])
def test_redact_a_token_pasted_twice_leaves_no_copy(tmp_path, secret):
    st = make_store(tmp_path / "s")
    ct("-C", st.root, "add", "--redact-secrets", f"first {secret} then again {secret} and {TOKEN}")
    assert secret not in day_logs(st.root) and secret[4:] not in history(st.root)
    assert day_logs(st.root).count("[REDACTED") == 3


# ----- A9: the page masks every field it shows ----------------------------------------------------


def test_page_masks_model_id_source_session_actor_and_topic_names(tmp_path):
    from memstore.format.record import normalize
    from memstore.serve.web import views

    st = make_store(tmp_path / "s")
    rec = normalize(
        {
            "ts": "2026-03-01T10:00:00Z",
            "role": "assistant",
            "text": f"the garden plan, see {TOKEN}",
            "model": HF,
            "id": f"id-{TOKEN}",
            "session": SENDGRID,
            "actor": f"bot {HF}",
            "source": {"path": f"docs/{TOKEN}.md", "chunk": 0},
        },
        st.tz,
    )
    st.write([rec], "Add one", secrets="allow")
    pages = [views.day(st, {"day": "2026-03-01"}), views.tree(st, {}), views.history(st, {"n": 10})]
    for tid in st.tree().topics:
        pages.append(views.topic(st, {"id": tid, "offset": 0, "limit": 50}))
    shown = json.dumps(pages)
    assert "garden plan" in shown
    for secret in (TOKEN, HF, SENDGRID):
        assert secret not in shown and secret[4:20] not in shown, secret
    assert views.record_view(rec)["source"]["path"].startswith("docs/ghp_…[redacted]")


# ----- A10: chat does not send what --allow-secrets stored ----------------------------------------


def test_chat_masks_allowed_secrets_unless_sent_on_purpose(tmp_path, openai_server):
    st = make_store(tmp_path / "s")
    ct("-C", st.root, "add", "--allow-secrets", f"the deploy token for the garden site is {TOKEN}")
    openai_server.replies = ["noted", "noted"]
    proc = ct("-C", st.root, "chat", "--once", "what is the deploy token for the garden site?")
    sent = json.dumps(openai_server.bodies("/v1/chat/completions"))
    assert "garden site" in sent, "the record was in the context"
    assert TOKEN not in sent and TOKEN[4:20] not in sent and "[REDACTED github-token]" in sent
    assert "masked 1 secret (github-token)" in proc.stderr and "--send-secrets" in proc.stderr
    ct(
        "-C",
        st.root,
        "chat",
        "--send-secrets",
        "--once",
        "and the deploy token for the garden site?",
    )
    assert TOKEN in json.dumps(openai_server.bodies("/v1/chat/completions")), (
        "sent when the user asked"
    )


# ----- answers to agents --------------------------------------------------------------------------


def _http_get(root, path, **flags):
    from memstore.serve.http import make_server

    server = make_server(root, port=0, log=False, **flags)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}{path}"
        with urllib.request.urlopen(url, timeout=30) as resp:
            return resp.read().decode()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_mcp_and_http_answers_mask_allowed_secrets_unless_sent_on_purpose(tmp_path):
    """A record stored with --allow-secrets keeps its token verbatim; an agent reading memory
    (MCP search and context through a real client, the HTTP API) gets it masked, as ct chat masks
    what it sends an LLM, unless the user started the server with --send-secrets."""
    from test_mcp import _data, _session

    st = make_store(tmp_path / "s")
    ct("-C", st.root, "add", "--allow-secrets", f"the deploy token for the garden site is {TOKEN}")

    async def ask(*flags):
        async with _session(st.root, *flags) as s:
            hits = _data(await s.call_tool("search", {"query": "garden site deploy token"}))
            ctx = _data(await s.call_tool("context", {"query": "garden site deploy token"}))
            return json.dumps(hits), json.dumps(ctx)

    hits, ctx = anyio.run(ask)
    for answer in (hits, ctx):
        assert "garden site" in answer and "[redacted]" in answer
        assert TOKEN not in answer and TOKEN[4:20] not in answer
    hits, ctx = anyio.run(ask, "--send-secrets")
    assert TOKEN in hits and TOKEN in ctx
    body = _http_get(st.root, "/search?query=garden+site+deploy+token")
    assert "garden site" in body and TOKEN not in body and TOKEN[4:20] not in body
    assert TOKEN in _http_get(st.root, "/search?query=garden+site+deploy+token", send_secrets=True)
