#!/usr/bin/env bash
# A short tour on a temporary store: init → ingest → import → search → recall → where → tree →
# context → reorganize → diff → fsck → git log.
set -euo pipefail
cd "$(dirname "$0")/.."
CT="$PWD/.venv/bin/ct"
export HF_HUB_OFFLINE=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

step "$CT" init "$tmp/memory" --timezone Europe/Berlin
step "$CT" -C "$tmp/memory" ingest-path examples/docs
step "$CT" -C "$tmp/memory" import jsonl examples/conversations.jsonl
step "$CT" -C "$tmp/memory" ingest-path examples/docs
step "$CT" -C "$tmp/memory" search "what did we decide about the grocery budget" -k 3
step "$CT" -C "$tmp/memory" search "Sarah allergy" -k 3 --explain
step "$CT" -C "$tmp/memory" search "東京" --mode exact -k 2
step "$CT" -C "$tmp/memory" recall --now 2026-11-30T09:00 "what did we decide about the budget last month"
step "$CT" -C "$tmp/memory" recall --now 2026-11-26T09:00 "what happened yesterday"
step "$CT" -C "$tmp/memory" mark "trip: waiting for museum opening hours"
step "$CT" -C "$tmp/memory" where -n 3
step "$CT" -C "$tmp/memory" tree --depth 2
step "$CT" -C "$tmp/memory" context "Sarah's party cake" --budget 300
step "$CT" -C "$tmp/memory" reorganize
step "$CT" -C "$tmp/memory" diff HEAD~1
step "$CT" -C "$tmp/memory" stat
step "$CT" -C "$tmp/memory" fsck
step "$CT" -C "$tmp/memory" log
step git -C "$tmp/memory" log --oneline
