#!/usr/bin/env bash
# Installs fragscope's build, test and runtime dependencies from Debian 12 packages.
# Idempotent and quiet when everything is already there (CI calls it on every run).
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config clang libclang-rt-14-dev
  libcli11-dev nlohmann-json3-dev libfmt-dev libzstd-dev zlib1g-dev libtomlplusplus-dev
  prometheus-cpp-dev libgtest-dev libgmock-dev libbenchmark-dev libabsl-dev
  python3 python3-yaml python3-kubernetes python3-venv python3-setuptools python3-wheel zstd prometheus chromium
  zsh groff-base
  nodejs npm
  mmdebstrap buildah podman runc
)
missing=()
for p in "${packages[@]}"; do
  # npm also comes inside another build of nodejs (e.g. NodeSource's, which conflicts with Debian's npm).
  [ "$p" = npm ] && command -v npm >/dev/null && continue
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}" >&2
  sudo_cmd=(); [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi
