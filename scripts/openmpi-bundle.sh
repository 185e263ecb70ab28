#!/usr/bin/env bash
# openmpi-bundle.sh - packs this machine's Debian OpenMPI (4.1.x, apt's openmpi-bin) with the
# libraries it loads and bench/mpi_allreduce into one relocatable folder, so that the socket
# benchmark can compare against OpenMPI's TCP path on the GPU machine too (which has no OpenMPI and
# no network): its 16 cores run every rank and I/O thread on a core of its own, where this 2-core
# VM oversubscribes 4 ranks. `source DEST/env.sh` points OpenMPI's and PMIx's install directories
# (OPAL_*, PMIX_INSTALL_PREFIX) and the loader at the folder; glibc is left to the target machine.
# Usage: scripts/openmpi-bundle.sh DEST      (DEST/openmpi.tgz is written; about 12 MB)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:?usage: openmpi-bundle.sh DEST}
if ! command -v mpicc >/dev/null || ! command -v orterun >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq openmpi-bin libopenmpi-dev >/dev/null
fi
multiarch=/usr/lib/x86_64-linux-gnu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
b=$tmp/openmpi
mkdir -p "$b"/{bin,lib,pkglib,share,etc}
# No -march=native: the bundle runs on another machine's CPU.
mpicc -O3 -Wall -o "$b/bin/mpi_allreduce" "$root/bench/mpi_allreduce.c" -lm
cp -L /usr/bin/orterun /usr/bin/orted "$b/bin/"
cp -L "$multiarch"/openmpi/lib/openmpi3/*.so "$b/pkglib/"
cp -r /usr/share/openmpi/. "$b/share/"
cp /etc/openmpi/* "$b/etc/"
cp -rL "$multiarch/pmix2" "$b/pmix2"
# Every library the programs and plugins load, except glibc's own (the target's must match its loader).
for f in "$b"/bin/* "$b"/pkglib/*.so "$b"/pmix2/lib/pmix/*.so; do
    ldd "$f" 2>/dev/null | awk '/=>/ {print $3}'
done | sort -u | grep -v -E '/(libc|libm|libdl|libpthread|librt|libresolv)\.so|ld-linux' | xargs -I{} cp -L {} "$b/lib/"
cat > "$b/env.sh" <<'ENV'
# source this: OpenMPI from this folder (made by scripts/openmpi-bundle.sh)
b=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export OPAL_PREFIX=$b OPAL_EXEC_PREFIX=$b OPAL_BINDIR=$b/bin OPAL_LIBDIR=$b/lib OPAL_PKGLIBDIR=$b/pkglib \
    OPAL_DATADIR=$b/share OPAL_PKGDATADIR=$b/share OPAL_SYSCONFDIR=$b/etc PMIX_INSTALL_PREFIX=$b/pmix2 \
    LD_LIBRARY_PATH=$b/lib:$b/pmix2/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} PATH=$b/bin:$PATH \
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ENV
mkdir -p "$dest"
tar czf "$dest/openmpi.tgz" -C "$tmp" openmpi
du -sh "$dest/openmpi.tgz"
