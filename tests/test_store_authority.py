"""A store's files are data, never authority (issue 26, A1): what arrives with `git pull` cannot
choose where conversations are sent or which credential goes with them, and a bad value in
memstore.toml stops a command with exit 4 naming the key, changing nothing."""

from __future__ import annotations

import subprocess

import pytest

from conftest import commits, ct, git_clean, make_store
from conftest_openai import openai_server  # noqa: F401  (fixture)
from loopback_openai import LoopbackOpenAI
from memstore.format import tree as treefmt
from tree_scenarios import SARAH_ALLERGY, WEATHER, converse

CHAT = "/v1/chat/completions"


def _git(cwd, *args, who="Mallory"):
    cmd = [
        "git",
        "-c",
        f"user.name={who}",
        "-c",
        f"user.email={who.lower()}@example.invalid",
        *args,
    ]
    return subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _pushed_by_a_collaborator(tmp_path, st, edit) -> str:
    """The user's store gets a bare origin; a collaborator clones it, changes memstore.toml with
    `edit(text) -> text`, commits and pushes; the user runs a plain `git pull`. Returns the commit."""
    origin = tmp_path / "origin.git"
    _git(tmp_path, "init", "-q", "--bare", str(origin))
    _git(st.root, "remote", "add", "origin", str(origin))
    _git(st.root, "push", "-q", "origin", "HEAD:main")
    _git(st.root, "branch", "-q", "--set-upstream-to=origin/main")
    other = tmp_path / "collaborator"
    _git(tmp_path, "clone", "-q", "-b", "main", str(origin), str(other))
    toml = other / "memstore.toml"
    toml.write_text(edit(toml.read_text()))
    _git(other, "commit", "-q", "-am", "Tune the store")
    _git(other, "push", "-q", "origin", "HEAD:main")
    _git(st.root, "pull", "-q", "--no-rebase", who="User")
    return _git(st.root, "rev-parse", "HEAD")


def _no_endpoint_of_the_user(monkeypatch):
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "MEMSTORE_LLM_TOPICS", "MEMSTORE_LLM_MODEL"):
        monkeypatch.delenv(var, raising=False)


def test_a_pulled_llm_section_sends_nothing_and_names_its_commit(tmp_path, monkeypatch):
    _no_endpoint_of_the_user(monkeypatch)
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_the_users_own_token")
    st = make_store(tmp_path / "s")
    with LoopbackOpenAI(replies=lambda body: "Spy Topic") as spy:
        section = f'\n[llm]\nbase_url = "{spy.base_url}"\napi_key_env = "GITHUB_TOKEN"\ntopics = true\nmodel = "spy"\n'
        sha = _pushed_by_a_collaborator(tmp_path, st, lambda text: text + section)
        out = ct("-C", st.root, "add", "Sarah is allergic to peanuts, so no nuts in the cake")
        ct("-C", st.root, "add", "What is the weather in Boston tomorrow? I need an umbrella")
        ct("-C", st.root, "context", "peanuts")
        ct("-C", st.root, "reorganize", "-n")
        chat = ct("-C", st.root, "chat", "--once", "Which cake?", check=False)
        assert spy.requests == [], "nothing is sent to an endpoint the store named"
    warned = [line for line in out.stderr.splitlines() if "ignoring [llm] base_url" in line]
    assert (
        len(warned) == 1
        and sha[:10] in warned[0]
        and "Mallory" in warned[0]
        and "memstore.toml" in warned[0]
    )
    assert "ignoring [llm] api_key_env" in out.stderr and "ignoring [llm] topics" in out.stderr
    assert chat.returncode == 1 and "no LLM endpoint is configured" in chat.stderr
    assert all(t.named_by == "offline" for t in treefmt.read(st.root).topics.values())


def test_a_committed_dotenv_chooses_no_endpoint(tmp_path, monkeypatch):
    """A `.env` inside the store came with its files: its OPENAI_BASE_URL would receive the
    conversation together with the user's own OPENAI_API_KEY."""
    _no_endpoint_of_the_user(monkeypatch)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-the-users-own-key")
    st = make_store(tmp_path / "s")
    with LoopbackOpenAI(replies=lambda body: "Spy Topic") as spy:
        (st.root / ".env").write_text(f"OPENAI_BASE_URL={spy.base_url}\nMEMSTORE_LLM_TOPICS=1\n")
        _git(st.root, "add", ".env")
        _git(st.root, "commit", "-qm", "Add settings")
        inside = ct("add", "Sarah is allergic to peanuts", cwd=st.root)
        ct("-C", st.root, "add", "What is the weather in Boston tomorrow?", cwd=tmp_path)
        ct("context", "peanuts", cwd=st.root / "log")
        assert spy.requests == []
    assert "not reading" in inside.stderr and ".env" in inside.stderr


def test_a_pulled_embedder_endpoint_is_ignored(tmp_path, openai_server, monkeypatch):  # noqa: F811
    """The openai embedder's endpoint and key are the user's (OPENAI_BASE_URL here), never the store's."""
    st = make_store(
        tmp_path / "s", embedder="openai"
    )  # the fixture's OPENAI_* point at the user's own
    with LoopbackOpenAI() as spy:

        def edit(text):
            extra = (
                f'base_url = "{spy.base_url}"\napi_key = "sk-spy"\napi_key_env = "GITHUB_TOKEN"\n'
            )
            return text.replace("[embedder]\n", "[embedder]\n" + extra)

        _pushed_by_a_collaborator(tmp_path, st, edit)
        before = len(openai_server.bodies("/v1/embeddings"))
        out = ct("-C", st.root, "add", "The lake cabin trip is in June")
        ct("-C", st.root, "search", "cabin")
        assert spy.requests == []
    assert len(openai_server.bodies("/v1/embeddings")) > before, (
        "the user's own endpoint made the vectors"
    )
    assert (
        "ignoring [embedder] base_url" in out.stderr
        and "ignoring [embedder] api_key " in out.stderr
    )


def test_the_users_own_config_file_opts_in(tmp_path, openai_server, monkeypatch):  # noqa: F811
    """~/.config/memstore/config.toml names the endpoint, the variable holding its key and the topic switch."""
    base = openai_server.base_url
    _no_endpoint_of_the_user(monkeypatch)
    monkeypatch.setenv("MY_LLM_KEY", "sk-mine")
    conf = tmp_path / "xdg"
    (conf / "memstore").mkdir(parents=True)
    (conf / "memstore" / "config.toml").write_text(
        f'[llm]\nbase_url = "{base}"\napi_key_env = "MY_LLM_KEY"\ntopics = true\nmodel = "my-model"\n'
    )
    monkeypatch.setenv("XDG_CONFIG_HOME", str(conf))
    openai_server.replies = lambda body: "Topic: Peanut Allergy Care"
    st = make_store(tmp_path / "s")
    ids = converse(st, [SARAH_ALLERGY, *WEATHER[:1]], batch=1)
    tree = treefmt.read(st.root)
    assert tree.topics[tree.topic_of()[ids[0][0]]].named_by == "llm"
    req = next(r for r in openai_server.requests if r[1] == CHAT)
    assert req[2]["authorization"] == "Bearer sk-mine" and req[3]["model"] == "my-model"


def test_a_bad_user_config_file_is_named_and_changes_nothing(tmp_path, monkeypatch):
    conf = tmp_path / "own.toml"
    conf.write_text('[llm]\ntopics = "maybe"\n')
    monkeypatch.setenv("MEMSTORE_CONFIG", str(conf))
    st = make_store(tmp_path / "s")
    n = len(commits(st.root))
    proc = ct("-C", st.root, "add", "hello there, a turn to place", check=False)
    assert proc.returncode == 4 and str(conf) in proc.stderr and "topics" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(commits(st.root)) == n and git_clean(st.root)


BAD = [
    ("chunk_tokens = 0", "[settings] chunk_tokens"),
    ("chunk_tokens = 1.5", "[settings] chunk_tokens"),
    ("chunk_overlap = 200", "[settings] chunk_overlap"),
    ("consolidate_packs = -1", "[settings] consolidate_packs"),
    ('vector_dtype = "float16"', "[settings] vector_dtype"),
    ('vector_index = "fast"', "[settings] vector_index"),
    ("ivf_nprobe = 0", "[settings] ivf_nprobe"),
    ("ivf_nprobe = 100000", "[settings] ivf_nprobe"),
    ('topics = "no"', "[settings] topics"),
    ("max_children = 1", "[settings] max_children"),
    ("topic_continue_threshold = 7", "[settings] topic_continue_threshold"),
    ('topic_join_threshold = "high"', "[settings] topic_join_threshold"),
]


def _set(text: str, line: str) -> str:
    key = line.split(" =")[0]
    kept = [row for row in text.splitlines() if not row.startswith(f"{key} =")]
    return "\n".join(kept).replace("[settings]", f"[settings]\n{line}") + "\n"


@pytest.mark.parametrize("line,key", BAD, ids=[b[0] for b in BAD])
def test_a_bad_tracked_setting_stops_with_exit_4_naming_the_key(tmp_path, line, key):
    st = make_store(tmp_path / "s")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.md").write_text(
        "# Notes\n\nThe budget is forty thousand for the lake cabin.\n" * 20
    )
    _pushed_by_a_collaborator(tmp_path, st, lambda text: _set(text, line))
    n = len(commits(st.root))
    for args in (["ingest-path", docs], ["add", "a turn that must not be written"]):
        proc = ct("-C", st.root, *args, check=False)
        first = proc.stderr.splitlines()[0] if proc.stderr else ""
        assert proc.returncode == 4 and "memstore.toml" in first and key in first, proc.stderr
        assert "Traceback" not in proc.stderr
    assert len(commits(st.root)) == n and git_clean(st.root)


@pytest.mark.parametrize(
    "old,new,key",
    [
        ('timezone = "UTC"', 'timezone = "Mars/Olympus_Mons"', "timezone"),
        ('timezone = "UTC"', "timezone = 3", "timezone"),
        ("dim = 384", "dim = 0", "[embedder] dim"),
        ('name = "hash"', 'name = "evil"', "[embedder] name"),
        ('dtype = "float32"', 'dtype = "pickle"', "[embedder] dtype"),
    ],
)
def test_a_bad_tracked_top_level_value_stops_with_exit_4(tmp_path, old, new, key):
    st = make_store(tmp_path / "s")
    _pushed_by_a_collaborator(tmp_path, st, lambda text: text.replace(old, new, 1))
    n = len(commits(st.root))
    for args in (["add", "a turn that must not be written"], ["search", "turn"], ["tree"]):
        proc = ct("-C", st.root, *args, check=False)
        first = proc.stderr.splitlines()[0] if proc.stderr else ""
        assert proc.returncode == 4 and "memstore.toml" in first and key in first, proc.stderr
        assert "Traceback" not in proc.stderr
    assert len(commits(st.root)) == n and git_clean(st.root)
