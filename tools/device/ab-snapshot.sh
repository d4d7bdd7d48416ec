#!/usr/bin/env bash
# Snapshots the kernels of a git revision, or of the working tree when no revision is given, into
# .ab/NAME (git-ignored), for an A/B benchmark in one device call:
#   AB_DIRS=".ab/base .ab/try" tools/gpu-check.sh ...   (device tool with carry [".ab"])
# builds one more nibble-kernel-bench per snapshot and runs them and the working tree's
# alternately, twice each, into $OUT/bench-ab.log.
# Usage: tools/device/ab-snapshot.sh NAME [REV]
set -euo pipefail
cd "$(dirname "$0")/../.."
name="${1:?usage: ab-snapshot.sh NAME [REV]}"
rev="${2:-}"
rm -rf ".ab/$name"
mkdir -p ".ab/$name"
if [ -n "$rev" ]; then
  git archive "$rev" kernels | tar -x -C ".ab/$name"
  echo "kernels of $(git rev-parse --short "$rev") in .ab/$name/"
else
  cp -r kernels ".ab/$name/"
  echo "kernels of the working tree in .ab/$name/"
fi
