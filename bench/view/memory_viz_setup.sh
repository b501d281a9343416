#!/usr/bin/env bash
# Prepares PyTorch's memory viewer (torch/utils/viz/MemoryViz.js, the page behind
# pytorch.org/memory_viz) to run offline beside `fragscope view`: its d3 imports, which it loads
# from a CDN, come from npm instead, and one page loads the snapshot from the same folder.
# MemoryViz.js is PyTorch's (BSD-licensed) file: take it from a PyTorch checkout; it is not kept
# in this repository.
#   bench/view/memory_viz_setup.sh PATH/TO/MemoryViz.js OUT_DIR
set -euo pipefail
source_js=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
esbuild=$here/../../web/node_modules/.bin/esbuild
[[ -x $esbuild ]] || { echo "memory_viz_setup: build fragscope first (web/node_modules holds esbuild)" >&2; exit 2; }
mkdir -p "$out"
cd "$out"
[[ -f package.json ]] || echo '{ "name": "memory-viz-offline", "private": true, "version": "0.0.0" }' >package.json
npm install --no-audit --no-fund --loglevel=error d3@5 d3-axis@1 d3-scale@1 d3-zoom@1 d3-brush@1
# The only change: "https://cdn.skypack.dev/d3-zoom@1" -> "d3-zoom".
sed -E 's#"https://cdn\.skypack\.dev/([a-z0-9-]+)@[0-9]+"#"\1"#' "$source_js" >MemoryViz.offline.js
"$esbuild" MemoryViz.offline.js --bundle --format=esm --outfile=memory_viz.js --log-level=warning
cat >index.html <<'HTML'
<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>memory_viz (offline)</title></head><body>
<script type="module">
// As pytorch.org/memory_viz loads a file, from the snapshot this folder serves.
import { add_remote_files } from './memory_viz.js';
const name = new URLSearchParams(location.search).get('file');
add_remote_files([{ name, url: name }]);
</script>
</body></html>
HTML
echo "memory_viz_setup: $out/index.html?file=NAME serves NAME from $out"
