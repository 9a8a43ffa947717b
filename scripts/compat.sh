#!/usr/bin/env bash
# `make compat`: ContextTape's own ISStore (contexttape from PyPI, in its own virtualenv because it
# also installs a `ct` command) must read every memstore writer folder as the day logs say.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1
bash scripts/ct_venv.sh
PYTHON="${PYTHON:-.venv/bin/python}"
"$PYTHON" scripts/compat_check.py "$@"
