#!/usr/bin/env bash
# Second command of the README: build and run every test (ctest runs C++, Python, promtool,
# Chromium and end-to-end tests alike).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd build
ctest --output-on-failure --parallel "$(nproc)" --timeout 900
