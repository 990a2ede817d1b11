#!/usr/bin/env bash
# Session 28's H100 check runs re-judged (see ../rejudge_h100.sh) against the H100 file as session
# 28 left it (6 passes, 2 hosts; commit 944d0fb), or against the file given as $1.
#   bash docs/data/h200-campaign/s28/rejudge.sh > docs/data/h200-campaign/s28/rejudge.txt
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
if [ -n "${1:-}" ]; then BASE=$1; else
  BASE=$(mktemp --suffix=.json); trap 'rm -f "$BASE"' EXIT
  git -C "$HERE" show 944d0fb:baselines/nvidia-h100-80gb-hbm3x1.json > "$BASE" || exit 1
fi
BASE=$BASE bash "$HERE/../rejudge_h100.sh" s28
