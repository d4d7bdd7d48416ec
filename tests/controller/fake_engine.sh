#!/bin/sh
# A stand-in for nibble-engine in CLI tests (test_cli_controller.cpp): it never serves, it only
# writes numbered lines to its log (stdout), then exits 3, so the controller restarts it and
# `nibble logs -f` / `--previous` have lines to show. FAKE_ENGINE_TICKS lines, 0.2 s apart
# (0: it exits at once, as an engine that cannot start; test_router_controller.cpp).
echo "fake engine pid $$ started"
i=1
while [ "$i" -le "${FAKE_ENGINE_TICKS:-15}" ]; do
  echo "tick $i"
  i=$((i + 1))
  sleep 0.2
done
echo "fake engine exits"
exit 3
