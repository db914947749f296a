#!/usr/bin/env bash
# Unpack the Debian libraries Nsight Systems' QdstrmImporter needs (libdw1, libelf1, libdebuginfod1)
# into DIR (default .nsys-libs, git-ignored). Run on the CPU machine; carry DIR to the GPU machine and
# put DIR/usr/lib/x86_64-linux-gnu on LD_LIBRARY_PATH there (or set STITCHCUDA_NSYS_LIBS=DIR).
set -eu
dest=${1:-.nsys-libs}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
apt-get update -qq >/dev/null 2>&1 || true
(cd "$work" && apt-get download libdw1 libelf1 libdebuginfod1 >/dev/null)
mkdir -p "$dest"
for deb in "$work"/*.deb; do dpkg -x "$deb" "$dest"; done
ls "$dest/usr/lib/x86_64-linux-gnu"
