#!/usr/bin/env python3
"""The PyTorch cross-check of GpuFloorsBench's floor (i): a null kernel launched from Python and
synchronized (torch.cuda._sleep(0): a kernel that spins for 0 cycles), the launch alone queued back to
back, and the same kernel replayed from CUDA graphs (one kernel, and per kernel in a graph of 50).
Prints lines in GpuFloorsBench's format (FLOOR name median mean p10 p90, microseconds)."""
import sys
import time

import torch


def report(name, us):
    s = sorted(us)
    mean = sum(s) / len(s)
    print("FLOOR %-100s median %8.2f  mean %8.2f  p10 %8.2f  p90 %8.2f"
          % (name, s[len(s) // 2], mean, s[len(s) // 10], s[len(s) * 9 // 10]))


def timed(fn, iters, warmup):
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(iters):
        t0 = time.perf_counter_ns()
        fn()
        out.append((time.perf_counter_ns() - t0) / 1e3)
    return out


def main():
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    warmup = 500
    torch.cuda.init()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        def launch_sync():
            torch.cuda._sleep(0)
            s.synchronize()
        report("(ii) PyTorch null kernel (torch.cuda._sleep(0)) + stream.synchronize()", timed(launch_sync, iters, warmup))

        def queued():
            t0 = time.perf_counter_ns()
            for _ in range(50):
                torch.cuda._sleep(0)
            t1 = time.perf_counter_ns()
            s.synchronize()
            return (t1 - t0) / 1e3 / 50
        for _ in range(10):
            queued()
        report("(ii) PyTorch null kernel launch alone, queued back to back", [queued() for _ in range(max(1, iters // 50))])

        g1 = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g1, stream=s):
            torch.cuda._sleep(0)
        g50 = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g50, stream=s):
            for _ in range(50):
                torch.cuda._sleep(0)

        def replay1():
            g1.replay()
            s.synchronize()
        report("(ii) PyTorch graph of 1 null kernel, replay + synchronize", timed(replay1, iters, warmup))

        def replay50():
            g50.replay()
            s.synchronize()
        report("(ii) PyTorch graph of 50 null kernels, per kernel", [u / 50 for u in timed(replay50, max(1, iters // 4), 50)])


if __name__ == "__main__":
    main()
