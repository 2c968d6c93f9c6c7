#!/usr/bin/env bash
# Report timings for a 10,000-trial sweep: the C++ side (load from the store,
# render, write; Google Benchmark) and the page in headless Chromium (time to
# tables ready and charts drawn since navigation start, and sorting and
# filtering the 10,000-row table). Prints figures; asserts nothing.
#   scripts/report-timings.sh [build-dir]
set -euo pipefail
build="${1:-build}"
bench="$build/bench/bench_report"
if [[ ! -x "$bench" ]]; then
  echo "report-timings: $bench not built (cmake --build $build --target bench_report)" >&2
  exit 2
fi
"$bench" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
page="$(cd "$(dirname "$bench")" && pwd)/report-10k.html"
echo "page: $page ($(du -h "$page" | cut -f1))"
chromium="${TUNE_CHROMIUM:-/usr/bin/chromium}"
if [[ ! -x "$chromium" ]]; then
  echo "report-timings: no Chromium at $chromium; page timings skipped" >&2
  exit 0
fi
profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
body="$("$chromium" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
  --disable-component-update --disable-sync --user-data-dir="$profile" --virtual-time-budget=30000 \
  --dump-dom "file://$page#measure" 2>/dev/null | grep -o '<body[^>]*>')"
attr() { sed -n "s/.* $1=\"\([^\"]*\)\".*/\1/p" <<<"$body"; }
echo "in Chromium: tables ready $(attr data-tables-ms) ms, $(attr data-charts-drawn)/$(attr data-charts) charts drawn $(attr data-charts-ms) ms after navigation start"
echo "             sort $(attr data-table-rows) rows by tokens/s $(attr data-sort-ms) ms, filter them $(attr data-filter-ms) ms, errors: $(attr data-errors)"
