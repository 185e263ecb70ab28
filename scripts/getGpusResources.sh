#!/usr/bin/env bash
# GPU discovery script for Spark (spark.executor.resource.gpu.discoveryScript and
# spark.worker.resource.gpu.discoveryScript), as Spark's examples/src/main/scripts/getGpusResources.sh:
# prints the GPUs this executor may use as Spark's ResourceInformation JSON, e.g.
#   {"name": "gpu", "addresses": ["0", "1"]}
# Addresses are nvidia-smi indices, which sparkccl uses as CUDA device ordinals. Where the container or
# YARN sets CUDA_VISIBLE_DEVICES, nvidia-smi still numbers every GPU of the host, so the script reports
# the visible ones renumbered 0..n-1, as CUDA does.
set -euo pipefail

if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "getGpusResources.sh: nvidia-smi not found; install the NVIDIA driver or do not ask Spark for GPUs" >&2
  exit 1
fi

count=$(nvidia-smi --query-gpu=index --format=csv,noheader | grep -c '[0-9]' || true)
if [[ -n "${CUDA_VISIBLE_DEVICES:-}" ]]; then
  IFS=',' read -r -a visible <<< "${CUDA_VISIBLE_DEVICES}"
  count=${#visible[@]}
fi

addresses=""
for ((i = 0; i < count; i++)); do
  addresses+="${addresses:+, }\"$i\""
done
echo "{\"name\": \"gpu\", \"addresses\": [${addresses}]}"
