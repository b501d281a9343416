#!/usr/bin/env bash
# First command of the README: install dependencies, build, analyze the bundled real snapshot.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
echo
echo "== fragscope analyze examples/frag_oom_104/snapshot.pickle.zst"
./build/src/cli/fragscope analyze examples/frag_oom_104/snapshot.pickle.zst
