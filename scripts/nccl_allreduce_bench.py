#!/usr/bin/env python3
"""NCCL's AllReduce through PyTorch on this machine's GPUs, one process per GPU, for a side-by-side
table with sparkccl's GPU benchmark run in the same call.

Two timings per size, float32 sum:
  event  - CUDA events around `iters` back-to-back all_reduce calls (how NCCL is usually quoted)
  sync   - wall time of all_reduce + torch.cuda.synchronize() per call (a synchronous call, as
           sparkccl's GpuCommunicator.allReduce is)
busbw = bytes / time * 2 (n - 1) / n, from the event time.

Usage: nccl_allreduce_bench.py [--min 8] [--max 268435456] [--iters 20] [--label default] [--json out.json]
Set NCCL_* in the environment (e.g. NCCL_P2P_DISABLE=1 for the host-staged comparison).
"""
import argparse
import json
import os
import socket
import time

for k, v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(k, v)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402


def worker(rank, world, args, port, queue):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    rows = []
    size = args.min
    while size <= args.max:
        n = max(1, size // 4)
        x = torch.rand(n, dtype=torch.float32, device="cuda")
        iters = args.iters if size < (64 << 20) else max(5, args.iters // 2)
        for _ in range(args.warmup):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        dist.barrier()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            dist.all_reduce(x)
        end.record()
        torch.cuda.synchronize()
        event_us = start.elapsed_time(end) * 1000.0 / iters
        dist.barrier()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(x)
            torch.cuda.synchronize()
        sync_us = (time.perf_counter() - t0) * 1e6 / iters
        nbytes = n * 4
        busbw = nbytes / event_us / 1e3 * 2.0 * (world - 1) / world
        rows.append({"bytes": nbytes, "event_us": event_us, "sync_us": sync_us, "busbw": busbw})
        size *= 2
    if rank == 0:
        queue.put(rows)
    dist.barrier()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--min", type=int, default=8)
    p.add_argument("--max", type=int, default=256 << 20)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--label", default="default")
    p.add_argument("--json")
    args = p.parse_args()
    world = torch.cuda.device_count()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, world, args, port, queue)) for r in range(world)]
    for pr in procs:
        pr.start()
    rows = queue.get(timeout=600)
    for pr in procs:
        pr.join()
    print(f"# NCCL {'.'.join(map(str, torch.cuda.nccl.version()))} via PyTorch {torch.__version__}, {world} GPUs, "
          f"label {args.label}, NCCL_* = " + " ".join(f"{k}={v}" for k, v in os.environ.items() if k.startswith("NCCL_")))
    print(f"{'size(B)':>12} {'event(us)':>10} {'sync(us)':>10} {'busbw':>9}")
    for r in rows:
        print(f"{r['bytes']:>12} {r['event_us']:>10.2f} {r['sync_us']:>10.2f} {r['busbw']:>9.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"label": args.label, "world": world, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
