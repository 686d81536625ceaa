#!/usr/bin/env bash
# Checks that the tree repeats itself in at most 6 places, as CI does: `duplicates` lists the pairs
# of places that share runs of 6 or more identical or same-shape lines (boilerplate included). Prints
# its list and exits 1 above the limit, or when `duplicates` is not installed; 0 otherwise. Changes
# nothing. `duplicates --change --base main` shows what a change wrote twice.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=6
command -v duplicates >/dev/null || {
  echo "check_duplicates: the duplicates tool is not on the PATH; CI runs it from there"
  exit 1
}
report=$(duplicates --most 200 --seconds 120)
pairs=$(printf '%s\n' "$report" | head -1 | grep -oE '^[0-9]+ pairs' | grep -oE '[0-9]+' || true)
if printf '%s\n' "$report" | head -1 | grep -q '^no duplicates'; then pairs=0; fi
if [ -z "$pairs" ] || printf '%s\n' "$report" | grep -q '^incomplete:'; then
  printf '%s\n' "$report"
  echo "check_duplicates: FAIL (duplicates did not give a complete count)"
  exit 1
fi
if [ "$pairs" -gt "$limit" ]; then
  printf '%s\n' "$report"
  echo "check_duplicates: FAIL ($pairs pairs of repeated places, at most $limit: call the existing piece instead)"
  exit 1
fi
echo "check_duplicates: $pairs pairs of repeated places (at most $limit)"
