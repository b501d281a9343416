#!/usr/bin/env bash
# Builds the agent's OCI image from this repository with Debian 12 packages only (mmdebstrap,
# buildah; deploy/image/Containerfile says what goes in). Needs root (or the same rights
# buildah needs) and the host's Debian mirror; no container registry is contacted.
#
#   scripts/build-image.sh [--binary PATH] [--tag NAME:TAG] [--oci-archive FILE]
#                          [--root DIR --runroot DIR]
#
#   --binary       the fragscope binary (default: build/src/cli/fragscope, built if missing)
#   --tag          image name (default: localhost/fragscope-agent:<version>)
#   --oci-archive  also write the image as an OCI archive (for `ctr images import`, skopeo, ...)
#   --root/--runroot  a private containers storage (vfs driver), e.g. for tests
# Prints the image name on the last line of stdout.
set -euo pipefail
cd "$(dirname "$0")/.."

binary=build/src/cli/fragscope tag= archive= storage=()
while (($#)); do
  case "$1" in
    --binary) binary=$2; shift 2 ;;
    --tag) tag=$2; shift 2 ;;
    --oci-archive) archive=$2; shift 2 ;;
    --root) storage+=(--root "$2" --storage-driver vfs); shift 2 ;;
    --runroot) storage+=(--runroot "$2"); shift 2 ;;
    *) echo "build-image.sh: unknown argument '$1' (see the comment at the top)" >&2; exit 2 ;;
  esac
done
for tool in mmdebstrap buildah strip ldd dpkg-query; do
  command -v "$tool" >/dev/null ||
    { echo "build-image.sh: $tool is missing (scripts/install-deps.sh installs it)" >&2; exit 2; }
done
if [ ! -x "$binary" ]; then
  [ -f build/build.ninja ] || cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build build --target fragscope >&2
fi
version=$("$binary" --version | awk '{print $2}')
revision=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
tag=${tag:-localhost/fragscope-agent:$version}

context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
strip --strip-unneeded -o "$context/fragscope" "$binary"
cp deploy/kubernetes/agent.toml "$context/agent.toml"

# The Debian packages that own the binary's shared libraries (the host is Debian 12 too, so the
# versions match the ones it was linked against), kubectl for the drain, busybox for chgrp and chmod.
packages=$(ldd "$binary" | awk '/=> \//{print $3}' | while read -r lib; do
  dpkg-query -S "$(readlink -f "$lib")" 2>/dev/null || dpkg-query -S "$lib"
done | cut -d: -f1 | sort -u | tr '\n' ',')
packages+=kubernetes-client,busybox-static
sources=/etc/apt/sources.list.d/debian.sources
[ -f "$sources" ] || sources=/etc/apt/sources.list
echo "build-image.sh: rootfs from $sources: ${packages//,/ }" >&2
# The extract variant runs extract hooks only (customize hooks are for variants that install packages).
mmdebstrap --quiet --variant=extract --include="$packages" \
  --extract-hook='rm -rf "$1"/usr/share/doc "$1"/usr/share/man "$1"/usr/share/info "$1"/usr/share/lintian \
                  "$1"/usr/share/locale' \
  --extract-hook='printf "root:x:0:0:root:/root:/sbin/nologin\n" >"$1"/etc/passwd' \
  --extract-hook='printf "fragscope:x:65532:65532:fragscope:/nonexistent:/sbin/nologin\n" >>"$1"/etc/passwd' \
  --extract-hook='printf "root:x:0:\nfragscope:x:65532:\n" >"$1"/etc/group' \
  --extract-hook='mkdir -p -m 1777 "$1"/tmp && mkdir -p "$1"/etc/fragscope' \
  bookworm "$context/rootfs.tar" "$sources" >&2
# mmdebstrap needs apt's files until its own cleanup at the end, and copies the build host's resolv.conf and
# hostname in: they leave the tarball after it.
members=$(tar -tf "$context/rootfs.tar")
for member in ./etc/apt ./var/lib/apt ./var/cache/apt ./etc/resolv.conf ./etc/hostname; do
  if grep -qxF -e "$member" -e "$member/" <<<"$members"; then tar --delete -f "$context/rootfs.tar" "$member"; fi
done

buildah "${storage[@]}" build --quiet --isolation chroot --layers=false \
  --build-arg VERSION="$version" --build-arg REVISION="$revision" \
  -f deploy/image/Containerfile -t "$tag" "$context" >&2
if [ -n "$archive" ]; then
  buildah "${storage[@]}" push --quiet "$tag" "oci-archive:$archive:$tag" >&2
fi
size=$(buildah "${storage[@]}" images --format '{{.Size}}' "$tag")
echo "build-image.sh: built $tag ($size; version $version, revision $revision)" >&2
echo "$tag"
