"""A labelled set of realistic secrets and look-alikes, and the detection / false-positive rates of a detector on it.

Every value is assembled at run time from a seeded generator, so this file holds no literal that
looks like a key (which would trip push protection on a host this repository is pushed to). Each
kind of secret appears in several settings (prose, a config file, a shell line, a JSON blob), the way
users paste them into a conversation; the look-alikes are what a memory of developer conversations
is full of: hashes, UUIDs, git SHAs, base64 images, AWS's documented example keys, placeholders.

    python -m memstore.bench.secret_set          # prints the table (recall, false-positive rate)
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import time
import uuid
from dataclasses import dataclass

B62 = string.ascii_letters + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits


@dataclass(frozen=True)
class Case:
    label: str  # what the text holds: a secret kind, or "none" for a look-alike
    text: str

    @property
    def secret(self) -> bool:
        return self.label != "none"


def _r(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _b64(rng: random.Random, n: int) -> str:
    return base64.b64encode(rng.randbytes(n)).decode()


def _jwt(rng: random.Random) -> str:
    def part(obj):
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    head = part({"alg": "HS256", "typ": "JWT"})
    body = part(
        {
            "sub": str(rng.randrange(10**9)),
            "name": "Ann Lee",
            "iat": 1700000000 + rng.randrange(10**6),
        }
    )
    sig = base64.urlsafe_b64encode(rng.randbytes(32)).decode().rstrip("=")
    return f"{head}.{body}.{sig}"


def _private_key(rng: random.Random, kind: str) -> str:
    body = base64.b64encode(rng.randbytes(300)).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    head = f"{kind} PRIVATE KEY" if kind else "PRIVATE KEY"
    return "\n".join([f"-----BEGIN {head}-----", *lines, f"-----END {head}-----"])


def secrets(rng: random.Random) -> list[Case]:
    """One of each realistic secret, each in the setting users paste it in."""
    gh = "gh" + "p_" + _r(rng, B62, 36)
    gho = "gh" + "o_" + _r(rng, B62, 36)
    ghpat = "github" + "_pat_" + _r(rng, B62, 22) + "_" + _r(rng, B62, 59)
    akid = "AK" + "IA" + _r(rng, UPPER_DIGITS, 16)
    asecret = _r(rng, B62 + "/+", 40)
    slack_bot = (
        "xo"
        + "xb-"
        + f"{rng.randrange(10**11, 10**12)}-{rng.randrange(10**12, 10**13)}-"
        + _r(rng, B62, 24)
    )
    slack_user = (
        "xo"
        + "xp-"
        + "-".join(str(rng.randrange(10**11, 10**12)) for _ in range(3))
        + "-"
        + _r(rng, "0123456789abcdef", 32)
    )
    slack_hook = (
        "https://hooks.slack.com/services/T"
        + _r(rng, UPPER_DIGITS, 8)
        + "/B"
        + _r(rng, UPPER_DIGITS, 10)
        + "/"
        + _r(rng, B62, 24)
    )
    stripe = "sk" + "_live_" + _r(rng, B62, 24)
    stripe_r = "rk" + "_live_" + _r(rng, B62, 24)
    google = "AI" + "za" + _r(rng, B62 + "-_", 35)
    jwt = _jwt(rng)
    docker_auth = base64.b64encode(f"ann:{_r(rng, B62, 20)}".encode()).decode()
    docker_pat = "dckr" + "_pat_" + _r(rng, B62 + "-_", 27)
    openai = "sk-" + "proj-" + _r(rng, B62, 48)
    npm = "npm" + "_" + _r(rng, B62, 36)
    pw = "hunter2-SuperSecret!"
    sendgrid = "SG." + _r(rng, B62 + "-_", 22) + "." + _r(rng, B62 + "-_", 43)
    twilio = "SK" + _r(rng, "0123456789abcdef", 32)
    pypi = "pypi-" + "AgEIcHlwaS5vcmc" + _r(rng, B62 + "-_", 70)
    telegram = f"{rng.randrange(10**8, 10**9)}:AA" + _r(rng, B62 + "-_", 33)
    hf = "h" + "f_" + _r(rng, string.ascii_letters, 34)
    glpat = "gl" + "pat-" + _r(rng, B62 + "-_", 20)
    gocspx = "GOC" + "SPX-" + _r(rng, B62 + "-_", 28)
    anthropic = "sk-" + "ant-api03-" + _r(rng, B62 + "-_", 93) + "AA"
    rsa = _private_key(rng, "RSA")
    return [
        *side_door_secrets(rng, gh, hf, rsa),
        Case("huggingface-token", f"export HF_TOKEN={hf}"),
        Case("huggingface-token", f"huggingface-cli login --token {hf}"),
        Case(
            "gitlab-token",
            f"git remote set-url origin https://oauth2:{glpat}@gitlab.com/acme/app.git",
        ),
        Case(
            "google-oauth-client-secret",
            f'{{"installed": {{"client_id": "1234.apps.googleusercontent.com", "client_secret": "{gocspx}"}}}}',
        ),
        Case("anthropic-api-key", f"ANTHROPIC_API_KEY={anthropic}"),
        Case("github-token", f"here is my token {gh} please remember it"),
        Case("github-token", f"export GITHUB_TOKEN={gho}"),
        Case("github-token", f"git clone https://{ghpat}@github.com/acme/app.git"),
        Case(
            "aws-access-key-id",
            f"[default]\naws_access_key_id = {akid}\naws_secret_access_key = {asecret}\n",
        ),
        Case("aws-access-key-id", f"my AWS keys are {akid} and {asecret}"),
        Case("aws-secret-access-key", f'AWS_SECRET_ACCESS_KEY="{asecret}"'),
        Case("private-key", _private_key(rng, "OPENSSH")),
        Case("private-key", "my deploy key:\n" + _private_key(rng, "RSA")),
        Case("private-key", _private_key(rng, "EC")),
        Case("private-key", _private_key(rng, "")),
        Case("slack-token", f"SLACK_BOT_TOKEN={slack_bot}"),
        Case("slack-token", f"use {slack_user} for the workspace"),
        Case("slack-webhook", f"post alerts to {slack_hook}"),
        Case("stripe-secret-key", f"stripe.api_key = '{stripe}'"),
        Case("stripe-secret-key", f"restricted key {stripe_r}"),
        Case(
            "google-api-key",
            f'<script src="https://maps.googleapis.com/maps/api/js?key={google}"></script>',
        ),
        Case("jwt", f"Authorization: Bearer {jwt}"),
        Case("jwt", f"the session cookie was {jwt}"),
        Case("generic-secret", f"password: {pw}"),
        Case("generic-secret", "db password is hunter2-SuperSecret! don't share"),
        Case(
            "generic-secret", f"DATABASE_URL=postgres://app:{_r(rng, B62, 16)}@db.internal:5432/app"
        ),
        Case("generic-secret", f'{{"username": "ann", "password": "{_r(rng, B62, 12)}!"}}'),
        Case("generic-secret", f"PGPASSWORD='Tr0ub4dor&3{_r(rng, B62, 4)}' psql -h db"),
        Case(
            "docker-auth",
            json.dumps({"auths": {"https://index.docker.io/v1/": {"auth": docker_auth}}}, indent=2),
        ),
        Case("docker-auth", f"docker login -u ann -p {docker_pat}"),
        Case("openai-api-key", f"OPENAI_API_KEY={openai}"),
        Case("npm-token", f"//registry.npmjs.org/:_authToken={npm}"),
        # vendors the hand-written rules have no shape for
        Case("other-vendor", f"sendgrid: {sendgrid}"),
        Case("other-vendor", f"twilio api key sid {twilio}"),
        Case("other-vendor", f"[pypi]\nusername = __token__\npassword = {pypi}"),
        Case("other-vendor", f"bot = telegram.Bot('{telegram}')"),
    ]


def side_door_secrets(rng: random.Random, gh: str, hf: str, rsa: str) -> list[Case]:
    """Secrets in the shapes issue 26 found missed: keys with escaped or no line breaks, a Google
    service-account file, tokens wrapped over lines."""
    sa = json.dumps(
        {
            "type": "service_account",
            "project_id": "acme-prod",
            "private_key_id": "%040x" % rng.getrandbits(160),
            "private_key": _private_key(rng, "") + "\n",
            "client_email": "deploy@acme-prod.iam.gserviceaccount.com",
            "client_id": str(rng.randrange(10**20, 10**21)),
        },
        indent=2,
    )
    return [
        Case("private-key", json.dumps({"ssh_key": rsa})),  # inside JSON: line breaks escaped as \n
        Case("private-key", "the key: " + rsa.replace("\n", " ")),  # pasted on one line
        Case("private-key", "DEPLOY_KEY='" + _private_key(rng, "EC").replace("\n", "\\n") + "'"),
        Case("private-key", sa),
        Case(
            "private-key",
            json.dumps({"messages": [{"role": "user", "content": "key file:\n" + sa}]}),
        ),
        Case("github-token", f"my token is {gh[:22]}\n{gh[22:]} (it wrapped)"),
        Case("github-token", f'{{"text": "use {gh[:15]}\\n{gh[15:]}"}}'),
        Case("huggingface-token", f"> {hf[:20]}\n> {hf[20:]}"),
    ]


def hard_lookalikes(rng: random.Random) -> list[Case]:
    """Look-alikes a developer's memory is full of: ids, hashes in logs, images, docs with placeholder keys."""
    sha1 = hashlib.sha1(rng.randbytes(16)).hexdigest()
    sha256 = hashlib.sha256(rng.randbytes(16)).hexdigest()
    uids = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(3)]
    jpeg = base64.b64encode(b"\xff\xd8\xff\xe0" + rng.randbytes(600)).decode()
    wheel = base64.urlsafe_b64encode(rng.randbytes(32)).decode().rstrip("=")
    log = "\n".join(
        f"2026-03-01T10:0{i}:00Z INFO build {hashlib.sha1(rng.randbytes(8)).hexdigest()[:12]} "
        f"layer sha256:{hashlib.sha256(rng.randbytes(8)).hexdigest()} pulled"
        for i in range(4)
    )
    return [
        Case("none", f"session {uids[0]} resumed; parent {uids[1]}, request {uids[2]}"),
        Case(
            "none", f'{{"uuid": "{uids[0]}", "parentUuid": "{uids[1]}", "sessionId": "{uids[2]}"}}'
        ),
        Case("none", f"git checkout {sha1} && git cherry-pick {sha1[:10]}"),
        Case(
            "none",
            f"Merge: {sha1[:7]} {hashlib.sha1(rng.randbytes(4)).hexdigest()[:7]}\ncommit {sha1}",
        ),
        Case("none", log),
        Case("none", f"docker pull python@sha256:{sha256}"),
        Case("none", f"![diagram](data:image/jpeg;base64,{jpeg})"),
        Case("none", f'background: url("data:image/png;base64,{_b64(rng, 400)}");'),
        Case("none", f"{sha256}  memstore-0.9.0-py3-none-any.whl\nRECORD sha256={wheel}"),
        Case(
            "none", "curl -H 'Authorization: Bearer YOUR_API_KEY' https://api.example.com/v1/items"
        ),
        Case("none", 'client = OpenAI(api_key="sk-...")  # put your key here'),
        Case("none", "export HF_TOKEN=hf_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"),
        Case(
            "none",
            "from huggingface_hub import hf_hub_download\npath = hf_hub_download(repo_id, filename)",
        ),
        Case("none", "Set `GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}` in the workflow."),
        Case("none", "aws configure set aws_secret_access_key <SECRET_ACCESS_KEY>"),
        Case(
            "none",
            '{"type": "service_account", "project_id": "my-project", "private_key": "<paste the key>"}',
        ),
        Case("none", "The header line is -----BEGIN RSA PRIVATE KEY----- and the body is base64."),
        Case("none", "Stripe test keys start with sk_test_ and live keys with sk_live_."),
        Case("none", f"ghp_ tokens are 40 characters, e.g. the one revoked in {sha1[:8]}"),
        Case("none", f"model: {rng.choice(['gpt-4o-2024-08-06', 'claude-3-5-sonnet-20241022'])}"),
        Case(
            "none",
            f'ETag: W/"{hashlib.md5(rng.randbytes(8)).hexdigest()}"; x-request-id: {uids[0]}',
        ),
        Case("none", f"ssh-rsa {_b64(rng, 270)} ann@laptop"),
    ]


def lookalikes(rng: random.Random) -> list[Case]:
    """Text that resembles a secret but is not one."""
    sha256 = hashlib.sha256(rng.randbytes(16)).hexdigest()
    sha1 = hashlib.sha1(rng.randbytes(16)).hexdigest()
    md5 = hashlib.md5(rng.randbytes(16)).hexdigest()
    uid = str(uuid.UUID(int=rng.getrandbits(128)))
    png = (
        "data:image/png;base64,"
        + base64.b64encode(b"\x89PNG\r\n\x1a\n" + rng.randbytes(300)).decode()
    )
    integrity = "sha512-" + base64.b64encode(rng.randbytes(64)).decode()
    return [
        Case("none", f"commit {sha1}\nAuthor: Ann <ann@example.org>"),
        Case("none", f"merged in {sha1[:7]}, see {sha1}"),
        Case("none", f"sha256sum: {sha256}  dist/app.tar.gz"),
        Case("none", f"checksum md5 {md5}"),
        Case("none", f"request id {uid} failed with 502"),
        Case("none", f'{{"id": "{uid}", "session": "{uuid.UUID(int=rng.getrandbits(128))}"}}'),
        Case("none", f'<img src="{png}">'),
        Case("none", f'"integrity": "{integrity}"'),
        Case("none", "AWS docs example: aws_access_key_id = AKIAIOSFODNN7EXAMPLE"),
        Case("none", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
        Case("none", "password: <your password>"),
        Case("none", "password: ********"),
        Case("none", 'PASSWORD="${DB_PASSWORD}"'),
        Case("none", "password = os.environ['DB_PASSWORD']"),
        Case("none", "Enter your password: and press return."),
        Case("none", "I reset my password yesterday and the token expired."),
        Case("none", "OPENAI_API_KEY=sk-...your key here..."),
        Case("none", "GITHUB_TOKEN=ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"),
        Case("none", "-----BEGIN PUBLIC KEY-----\n" + _b64(rng, 90) + "\n-----END PUBLIC KEY-----"),
        Case(
            "none", "A PEM file starts with -----BEGIN PRIVATE KEY----- and ends with an END line."
        ),
        Case("none", f"ssh-ed25519 {_b64(rng, 51)} ann@laptop"),
        Case("none", "def check_password(password: str) -> bool:\n    return len(password) >= 12"),
        Case("none", "token_count = len(tokenizer.encode(text))"),
        Case(
            "none",
            f"build {rng.randrange(10**6)}: pipeline https://ci.example.org/jobs/{sha1[:12]}",
        ),
        Case(
            "none",
            "Kubernetes secret: kubectl create secret generic db-pass --from-literal=password=$PASS",
        ),
        Case("none", "the API key rotation policy: keys expire after 90 days"),
        Case("none", f"font-family: Inter; color: #{sha1[:6]}; margin: 0 auto;"),
        Case(
            "none",
            f"pip install torch==2.4.0 --index-url https://download.pytorch.org/whl/cu121 # {md5[:10]}",
        ),
    ]


def labelled_set(seed: int = 7, copies: int = 3) -> list[Case]:
    """`copies` draws of every case (different random values each), secrets first."""
    out: list[Case] = []
    for i in range(copies):
        rng = random.Random(seed * 1000 + i)
        out += secrets(rng)
        out += lookalikes(rng)
        out += hard_lookalikes(rng)
    return out


def rates(detector, cases: list[Case]) -> dict:
    """Detection rate on secrets, false-positive rate on look-alikes, the misses, and the time taken."""
    t0 = time.perf_counter()
    flagged = [bool(detector(c.text)) for c in cases]
    elapsed = time.perf_counter() - t0
    pos = [(c, f) for c, f in zip(cases, flagged) if c.secret]
    neg = [(c, f) for c, f in zip(cases, flagged) if not c.secret]
    return {
        "detected": sum(f for _, f in pos),
        "secrets": len(pos),
        "false_positives": sum(f for _, f in neg),
        "lookalikes": len(neg),
        "missed": sorted({c.label for c, f in pos if not f}),
        "false_on": [c.text[:60] for c, f in neg if f],
        "ms_per_text": 1000 * elapsed / max(1, len(cases)),
    }


def main() -> None:
    from memstore.secrets import detect as sec

    cases = labelled_set()
    detectors = {
        "hand-written rules (memstore.ingest.secrets.scan_rules)": sec.scan_rules,
        "detect-secrets 1.5.0, all default plugins": sec.scan_detect_secrets,
        "detect-secrets 1.5.0, specific plugins (no entropy / keyword)": lambda t: (
            sec.scan_detect_secrets(t, specific_only=True, token_lines_only=False)
        ),
        "adopted: rules + detect-secrets specific plugins (memstore.ingest.secrets.scan)": sec.scan,
    }
    print(
        f"{sum(c.secret for c in cases)} secrets, {sum(not c.secret for c in cases)} look-alikes (seed 7, 3 draws)\n"
    )
    print(
        "| detector | secrets found (recall) | false positives (rate) | ms per text | missed kinds |"
    )
    print("|---|---|---|---|---|")
    for name, fn in detectors.items():
        r = rates(fn, cases)
        print(
            f"| {name} | {r['detected']}/{r['secrets']} ({100 * r['detected'] / r['secrets']:.0f}%) | "
            f"{r['false_positives']}/{r['lookalikes']} ({100 * r['false_positives'] / r['lookalikes']:.0f}%) | "
            f"{r['ms_per_text']:.2f} | {', '.join(r['missed']) or '—'} |"
        )
        for t in r["false_on"][:8]:
            print(f"|   false positive on | `{t!r}` | | | |")


if __name__ == "__main__":
    main()
