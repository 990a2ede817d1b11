#!/usr/bin/env bash
# Sessions 18-19 (and 25 on): judge every stored decode-loop check run (sessions 15-19, 25) with the product's own
# verdict, `specperf verdict <results> --baseline <file> --strict-baselines`, against a baseline
# file given as $1 (default: the committed baselines/nvidia-h200x1.json). A check run's results
# were never stored in the baseline, so this is the verdict a nightly would have given it.
#   bash docs/data/h200-campaign/s19/rejudge.sh [baseline.json] > docs/data/h200-campaign/s19/rejudge.txt
set -u
ROOT=$(cd "$(dirname "$0")/../../../.." && pwd)
BASE=${1:-$ROOT/baselines/nvidia-h200x1.json}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# the loop item's check runs (lt/lu throttled, uc unchanged): session 15 kept results.tar.gz per run, later sessions camp.sh tars
for tgz in "$ROOT"/docs/data/h200-campaign/s15/t*-results.tar.gz \
    "$ROOT"/docs/data/h200-campaign/s1[6-9]/{lt,lu,uc}*.tar.gz \
    "$ROOT"/docs/data/h200-campaign/s2[0-9]/{lt,lu,uc}*.tar.gz; do
  [ -f "$tgz" ] || continue
  name=$(basename "$tgz" .tar.gz); name=${name%-results}
  sess=$(basename "$(dirname "$tgz")")
  mkdir -p "$TMP/$sess-$name"
  case "$tgz" in
    *-results.tar.gz) mkdir -p "$TMP/$sess-$name/r" && cp "$tgz" "$TMP/$sess-$name/r/results.tar.gz" ;;
    *) tar xzf "$tgz" -C "$TMP/$sess-$name" || continue ;;
  esac
  inner=$(find "$TMP/$sess-$name" -name results.tar.gz | head -1)
  [ -n "$inner" ] || { echo "== $sess/$name: no results.tar.gz"; continue; }
  tar xzf "$inner" -C "$(dirname "$inner")"
  res=$(dirname "$inner")/results-check
  [ -d "$res" ] || { echo "== $sess/$name: no results-check (an update pass?)"; continue; }
  echo "== $sess/$name"
  "$ROOT/.venv/bin/specperf" verdict "$res" --baseline "$BASE" --strict-baselines 2>&1 \
    | grep -E "engine-wide|output_throughput_tok_s|^[0-9]+ (pass|fail)|failed|^VERDICT" | sed 's/^/   /'
  echo "   rc ${PIPESTATUS[0]}"
done
