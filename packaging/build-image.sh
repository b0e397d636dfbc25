#!/usr/bin/env bash
# Builds the container image (packaging/Containerfile) from a linerate binary: stages the
# binary, exactly the shared libraries `ldd` names for it, /etc/nsswitch.conf and /etc/host.conf into
# packaging/generated/image/rootfs/, then builds FROM scratch with podman. Prints the image
# name last.
#
#   bash packaging/build-image.sh [--binary PATH] [--tag NAME]
#
# Without --binary it builds target/release/linerate (cargo build --release --locked).
# PODMAN may name the command with global options (packaging/check-image.sh passes its own
# storage and runtime); default `podman`.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=packaging/lib.sh
source packaging/lib.sh

bin=""
tag=""
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) bin=$2; shift 2 ;;
    --tag) tag=$2; shift 2 ;;
    *) fail "unknown argument $1 (use --binary PATH, --tag NAME)" ;;
  esac
done
read -r -a podman <<<"${PODMAN:-podman}"
command -v "${podman[0]}" >/dev/null 2>&1 || fail "${podman[0]} is not installed (apt-get install podman runc)"

if [ -z "$bin" ]; then
  cargo build --release --locked -p linerate >&2
  bin=target/release/linerate
fi
[ -x "$bin" ] || fail "$bin is not an executable"
version=$("$bin" --version | awk '{print $2; exit}')
[ -n "$tag" ] || tag="localhost/linerate:$version"

context=packaging/generated/image
rm -rf "$context"
root="$context/rootfs"
mkdir -p "$root/usr/bin" "$root/etc" "$context/data"
cp "$bin" "$root/usr/bin/linerate"
# Each library at the path the loader looks for it (the interpreter at its absolute path,
# the rest in the loader's default directories), copied through its symlinks. A static
# binary has none: ldd says "not a dynamic executable" and exits 1.
if libs=$(ldd "$bin" 2>/dev/null); then
  while read -r path; do
    [ -n "$path" ] || continue
    mkdir -p "$root$(dirname "$path")"
    cp -L "$path" "$root$path"
  done < <(printf '%s\n' "$libs" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}')
fi
# Names are looked up in /etc/hosts (the runtime's, with Kubernetes' pod entries) before DNS;
# glibc's own default without this file asks DNS first. Both are built into libc (2.34+).
printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
# Every address /etc/hosts gives a name, not the first only (Debian's default too), so that
# `fleet --each-address NAME` finds them all there as it does in DNS.
printf 'multi on\n' >"$root/etc/host.conf"
cp packaging/Containerfile "$context/Containerfile"

"${podman[@]}" build --quiet --tag "$tag" --file "$context/Containerfile" \
  --label "org.opencontainers.image.version=$version" \
  --label "org.opencontainers.image.title=linerate" "$context" >&2
echo "$tag"
