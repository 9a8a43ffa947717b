"""Tests for the secret scanner (memstore.secrets.detect): what it must catch and what it must not."""

from __future__ import annotations

import pytest

from memstore.secrets.detect import is_credentials_file, scan, shannon_entropy

# Fake tokens are assembled at run time, so this file never holds a literal that looks like a key
# (which would trip push protection on any host this repository is pushed to).
RANDOM62 = "q8Zr2LmX4vTn7KpW1sYd9FhB3cJg6NtA5eUo0iRk"  # 40 characters of made-up base62
AWS_ID = "AKIA" + "Q7ZR2LMX4VTN7KPW"
AWS_SECRET = "wJ8rXUtnFZMI/K7MDQNG/bPxRfiCY9q2LmX4vTn7"
OPENAI = "sk-" + RANDOM62 + "Ab12"
OPENAI_PROJ = "sk-proj-" + RANDOM62 + "_x-Y9"
GITHUB = "ghp_" + RANDOM62[:36]
GITHUB_PAT = "github_pat_" + "11ABCDEFG0" + RANDOM62[:30]
SLACK = "xoxb-" + "123456789012-1234567890123-" + RANDOM62[:24]
GOOGLE = "AIza" + "Sy" + RANDOM62[:33]
STRIPE = "sk_" + "live_" + RANDOM62[:24]
PRIVATE_KEY = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    + "MIIEowIBAAKCAQEA"
    + RANDOM62
    + "\n"
    + RANDOM62 * 2
    + "\n"
    + "-----END RSA PRIVATE KEY-----\n"
)


@pytest.mark.parametrize(
    "text, kind",
    [
        (PRIVATE_KEY, "private-key"),
        (PRIVATE_KEY.replace("RSA ", "OPENSSH "), "private-key"),
        (PRIVATE_KEY.replace("RSA ", ""), "private-key"),
        (f"aws_access_key_id = {AWS_ID}", "aws-access-key-id"),
        (f"aws_secret_access_key = {AWS_SECRET}", "aws-secret-access-key"),
        (f'OPENAI_API_KEY="{OPENAI}"', "openai-api-key"),
        (f"client = OpenAI(api_key='{OPENAI_PROJ}')", "openai-api-key"),
        (f"token: {GITHUB}", "github-token"),
        (f"git clone https://{GITHUB_PAT}@github.com/o/r", "github-token"),
        (f"SLACK_BOT={SLACK}", "slack-token"),
        (f'const key = "{GOOGLE}";', "google-api-key"),
        (f"stripe.api_key = '{STRIPE}'", "stripe-secret-key"),
        (f"DB_PASSWORD={RANDOM62[:24]}", "generic-secret"),
        (f'"client_secret": "{RANDOM62[:32]}"', "generic-secret"),
        (f"export JWT_TOKEN='{RANDOM62[5:30]}'", "generic-secret"),
        (f"authToken: {RANDOM62[:28]}", "generic-secret"),
        (f'SECRET_KEY: str = "{RANDOM62[:30]}"', "generic-secret"),
        (
            "SESSION_KEY=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
            "generic-secret",
        ),
    ],
)
def test_secrets_are_found(text, kind):
    findings = scan("some prose before\n" + text)
    assert [f.kind for f in findings] == [kind]
    assert findings[0].line == 2


@pytest.mark.parametrize(
    "text",
    [
        "The quick brown fox jumps over the lazy dog. Tokens are counted with the tokenizer.",
        "Our API key rotation policy: keys expire after 90 days and the secret is stored in Vault.",
        "A PEM file starts with -----BEGIN PRIVATE KEY----- and ends with the matching END line.",
        "-----BEGIN PRIVATE KEY-----\n...\n-----END PRIVATE KEY-----",
        'API_KEY = os.environ["OPENAI_API_KEY"]',
        "SECRET_KEY = settings.DJANGO_SECRET_KEY_FROM_ENV",
        "api_key = get_api_key_from_keyring(service_name)",
        'OPENAI_API_KEY="your-api-key-here"',
        "OPENAI_API_KEY=sk-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        "GITHUB_TOKEN=${GITHUB_TOKEN_FROM_CI_SECRETS}",
        'PASSWORD = "<PASSWORD_GOES_HERE_PLEASE>"',
        "AWS example id: AKIAIOSFODNN7EXAMPLE",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "primary_key = models.AutoField(primary_key=True)",
        "monkey = 'a_very_long_banana_related_string_value'",
        "sort_key = lambda item: (item.priority, item.created_at)",
        "cache_key = f'{user_id}:{session_id}:{request_path}'",
        "Use the sk-learn-style-estimator-interface for this model.",
        "See xoxb-your-bot-token in the Slack docs.",
        "ssh-keygen -t ed25519 -C 'you@example.com'",
        'password_hint = "the name of your first pet"',
        "TOKEN_LIMIT = 8192",
        "hash = 'e3b0c44298fc1c149afbf4c8996fb924'",
        'import { useState } from "react"; const [token, setToken] = useState(null);',
        "def check_password(password: str) -> bool:\n    return len(password) >= 12",
    ],
)
def test_ordinary_text_and_code_are_not_flagged(text):
    assert scan(text) == []


def test_excerpt_is_redacted_and_lines_are_counted():
    text = "line one\nline two\n" + f"export OPENAI_API_KEY={OPENAI}\n" + f"gh = '{GITHUB}'\n"
    findings = scan(text)
    assert [(f.line, f.kind) for f in findings] == [(3, "openai-api-key"), (4, "github-token")]
    for f in findings:
        assert OPENAI not in f.excerpt_redacted and GITHUB not in f.excerpt_redacted
        assert "[redacted]" in f.excerpt_redacted
    assert findings[0].excerpt_redacted == "export OPENAI_API_KEY=sk-q…[redacted]"
    # a key block shows its header, never its body
    (key,) = scan(PRIVATE_KEY)
    assert key.excerpt_redacted == "-----BEGIN RSA PRIVATE KEY-----"


def test_entropy():
    assert shannon_entropy("") == 0.0
    assert shannon_entropy("aaaa") == 0.0
    assert shannon_entropy("abcd") == 2.0


@pytest.mark.parametrize(
    "name, expected",
    [
        (".env", True),
        (".env.local", True),
        (".env.production", True),
        (".env.example", False),
        ("server.pem", True),
        ("tls.KEY", True),
        ("id_rsa", True),
        ("id_ed25519", True),
        ("id_rsa.pub", False),
        ("credentials", True),
        ("credentials.json", True),
        (".netrc", True),
        (".npmrc", True),
        (".pypirc", True),
        (".git-credentials", True),
        ("README.md", False),
        ("environment.md", False),
        ("keys.py", False),
        ("monkey.txt", False),
    ],
)
def test_is_credentials_file(name, expected):
    assert is_credentials_file(f"some/dir/{name}") is expected


@pytest.mark.parametrize(
    "text",
    [
        "def load(private_key: PKCS7PrivateKeyTypes, key: PKCS12PrivateKeyTypes | None) -> None:",
        "param_key = optim_state_key_to_param_key[r0_optim_state_key]",
        'dispatch_key = "c10::computeDispatchKey(dtype, layout, device)"',
        "client = Client(api_key=settings_value_2024_backup, timeout=3)",
    ],
)
def test_code_that_names_a_secret_is_not_one(text):
    assert scan(text) == []


def test_detect_secrets_is_handed_only_lines_a_vendor_pattern_matches_with_the_same_findings(
    monkeypatch,
):
    """`scan` asks detect-secrets' vendor-specific plugins only about lines one of their own
    patterns matches (every other line costs ~2 ms of plugin Python for nothing): the findings are
    those of handing it every line with a long token, and prose with a long URL hands it nothing."""
    from detect_secrets.core import scan as ds_scan

    from memstore.secrets import detect

    hexes = "0123456789abcdef" * 4
    shapes = [
        f"aws_access_key_id = {AWS_ID}",
        f"token: {GITHUB}",
        f"SLACK_BOT={SLACK}",
        f"stripe.api_key = '{STRIPE}'",
        f"OPENAI_API_KEY={OPENAI}",
        "jwt = eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0." + RANDOM62[:43],
        "//registry.npmjs.org/:_authToken=npm_" + RANDOM62[:36],
        "twilio = SK" + hexes[:32],
        "mailchimp = " + hexes[:32] + "-us12",
        "DefaultEndpointsProtocol=https;AccountKey=" + (RANDOM62 * 3)[:86] + "==",
        "square = sq0csp-" + RANDOM62[:43],
        "url = https://admin:" + RANDOM62[:12] + "@db.example.org/x",
        "see https://en.wikipedia.org/wiki/Internationalization_and_localization for more",
    ]
    text = "\n".join(["Some prose first."] + shapes + ["And prose after."])
    with_filter = detect.scan_detect_secrets(text, specific_only=True)
    monkeypatch.setattr(detect, "_DS_PATTERNS", [None])  # no vendor pre-filter
    every_line = detect.scan_detect_secrets(text, specific_only=True)
    assert len(every_line) >= 8
    key = lambda fs: sorted((f.start, f.end, f.kind) for f in fs)  # noqa: E731
    assert key(with_filter) == key(every_line)

    monkeypatch.setattr(detect, "_DS_PATTERNS", [])  # the real pre-filter again
    handed = []
    real = ds_scan._process_line_based_plugins
    monkeypatch.setattr(
        ds_scan,
        "_process_line_based_plugins",
        lambda lines, **kw: handed.append(list(lines)) or real(lines, **kw),
    )
    prose = "Read https://en.wikipedia.org/wiki/Internationalization_and_localization first."
    assert detect.scan_detect_secrets(prose, specific_only=True) == []
    assert handed == []


def test_a_text_without_an_anchor_word_skips_the_wrapped_token_pass():
    """scan_rules looks for tokens cut by line breaks only where a rule's anchor word occurs: every
    wrapped-token prefix holds one, so a text with none (most prose) cannot hold a wrapped token."""
    from memstore.secrets import detect

    for prefix in detect._WRAP_PREFIXES:
        assert any(a in prefix for a in detect._ANCHORS), prefix
    wrapped = "my token is ghp_" + "A1b2C3d4E5f6G7h8I9j0" + "\n" + "K1l2M3n4O5p6Q7r8S9t0UV"
    assert [f.kind for f in detect.scan_rules(wrapped)] != []
