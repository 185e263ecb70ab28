#!/usr/bin/env bash
# Compiles one .cu file of sparkccl's CUDA kernels into a fatbin (SASS for sm_90, PTX for compute_75 that the
# driver compiles at load for other GPUs). Run by the Maven build (ipc/pom.xml); without nvcc it
# says so and succeeds: the jar then works on CPUs only, and GPU use fails naming the missing kernels.
# CUDA 13's nvcc targets compute_75 and up: V100-class GPUs (sm_70) need a build with CUDA 12
# (set SPARKCCL_CUDA_ARCHS="-gencode arch=compute_70,code=compute_70" there).
# Usage: build-kernels.sh <source dir> <output fatbin> [source file in that dir, default ring_kernels.cu]
set -euo pipefail
src=$1
out=$2
source=${3:-ring_kernels.cu}
nvcc=${NVCC:-}
if [ -z "$nvcc" ]; then
  if command -v nvcc >/dev/null 2>&1; then
    nvcc=$(command -v nvcc)
  elif [ -x /usr/local/cuda/bin/nvcc ]; then
    nvcc=/usr/local/cuda/bin/nvcc
  fi
fi
if [ -z "$nvcc" ]; then
  echo "[sparkccl] nvcc not found (PATH, /usr/local/cuda/bin): the CUDA kernels are NOT built; this jar cannot use GPUs"
  exit 0
fi
if [ -f "$out" ]; then
  stale=no
  for f in "$src/$source" "$src"/*.cuh "$0"; do
    if [ -e "$f" ] && [ "$f" -nt "$out" ]; then stale=yes; fi
  done
  if [ $stale = no ]; then
    echo "[sparkccl] CUDA kernels up to date: $out"
    exit 0
  fi
fi
archs=${SPARKCCL_CUDA_ARCHS:-"-gencode arch=compute_90,code=sm_90 -gencode arch=compute_75,code=compute_75"}
mkdir -p "$(dirname "$out")"
echo "[sparkccl] compiling CUDA kernels $source with $nvcc ($archs)"
# shellcheck disable=SC2086
"$nvcc" -fatbin -O3 -std=c++17 -Xfatbin -compress-all $archs -o "$out.tmp" "$src/$source"
mv "$out.tmp" "$out"
