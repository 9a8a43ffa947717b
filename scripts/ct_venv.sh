#!/usr/bin/env bash
# Create (once) the virtualenv that holds ContextTape from PyPI, apart from ours because it also
# installs a command named `ct`. Idempotent: returns at once when the venv already works.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${CT_VENV:-.bench/ctvenv}"
VERSION="${CT_VERSION:-0.5.0}"
PY="${PY:-python3}"
mkdir -p "$(dirname "$VENV")"
# Two test workers may ask at once: the second waits for the first (flock is Linux; elsewhere no wait).
if command -v flock >/dev/null; then
  exec 9>"$VENV.lock"
  flock 9
fi
# Importing contexttape pulls in openai and tiktoken (seconds), so look for its dist-info instead.
if [ -x "$VENV/bin/python" ] && compgen -G "$VENV/lib/python*/site-packages/contexttape-$VERSION.dist-info" >/dev/null; then
  exit 0
fi
echo "Creating $VENV with contexttape==$VERSION from PyPI…" >&2
rm -rf "$VENV"
mkdir -p "$(dirname "$VENV")"
"$PY" -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check "contexttape==$VERSION" 2>&1 | grep -v "is ignored: it is neither" >&2 || true
"$VENV/bin/python" -c "import contexttape; print('contexttape', contexttape.__version__, 'in $VENV')" >&2
