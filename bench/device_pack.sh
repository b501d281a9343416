#!/bin/bash
# Packs what bench/device_bench.sh needs into .device/ (git-ignored; carry it): the stripped
# binaries, their shared libraries but libc's, the stand-in NVML, and the fixtures the
# benchmarks read.   bench/device_pack.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
fixtures=../shared/fixtures
rm -rf .device && mkdir -p .device/bin .device/lib .device/fixtures
for binary in src/cli/fragscope bench/replay/replay_bench; do
  strip -o ".device/bin/$(basename $binary)" "$build/$binary"
  ldd "$build/$binary" | awk '/=>/ {print $3}' | grep -v -E 'libc\.so|libm\.so|ld-linux' |
    xargs -I{} cp -L {} .device/lib/
done
cp "$build/tests/agent/fake_nvml.so" .device/lib/
for name in big fid_default fid_expandable fid_msplit128 fsdp_default frag_oom_104 ring_default; do
  mkdir -p ".device/fixtures/$name" && cp "$fixtures/$name/snapshot.pickle.zst" ".device/fixtures/$name/"
done
zstd -qdc "$fixtures/big/snapshot.pickle.zst" | gzip -1 >.device/big.pickle.gz
du -sh .device
