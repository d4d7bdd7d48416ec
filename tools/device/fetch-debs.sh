#!/usr/bin/env bash
# Downloads (here, where apt reaches Debian) the Debian 12 packages that Nibble's build needs and
# the device image lacks, into .device-debs/ (git-ignored, ~9 MB), so that the device machine can
# build Nibble itself with its 16 cores (tools/device/build-here.sh) instead of carrying binaries
# built on a 2-core machine. Name .device-debs in the device tool's `carry`.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .device-debs
cd .device-debs
apt-get download libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 libyaml-cpp-dev libyaml-cpp0.7 \
  libcpp-httplib-dev libcpp-httplib0.11 nlohmann-json3-dev libpcre2-dev libpcre2-8-0 \
  libpcre2-16-0 libpcre2-32-0 libpcre2-posix3 prometheus-cpp-dev libprometheus-cpp-core1.0 \
  libssl-dev libssl3 zlib1g-dev libbrotli-dev libbrotli1 libgtest-dev libgmock-dev pkgconf \
  pkgconf-bin libpkgconf3 libcivetweb-dev libcivetweb1 civetweb libcurl4-openssl-dev libcurl4 \
  libprometheus-cpp-pull1.0 libprometheus-cpp-push1.0 2>&1 | tail -1
du -sh .
