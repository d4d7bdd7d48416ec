#!/usr/bin/env bash
# Installs the pinned npm oracles (package-lock.json) into tests/oracle/npm/node_modules.
# Idempotent; prints one line. Exit 3 if npm or the registry is unreachable (tests then skip
# with that message, or fail under CI=true).
set -uo pipefail
cd "$(dirname "$0")"
# Tests that need the oracles run in parallel under ctest: one npm ci at a time, the others
# wait for it and then find the stamp.
exec 9>.install.lock
flock 9
stamp=node_modules/.nibble-lock-stamp
if [ -f "$stamp" ] && cmp -s package-lock.json "$stamp"; then
  echo "npm oracles: up to date"
  exit 0
fi
command -v npm >/dev/null || { echo "npm oracles: npm is not installed"; exit 3; }
if ! npm ci --no-audit --no-fund --loglevel=error >npm-install.log 2>&1; then
  echo "npm oracles: npm ci failed (registry unreachable?), see tests/oracle/npm/npm-install.log"
  exit 3
fi
cp package-lock.json "$stamp"
echo "npm oracles: installed"
