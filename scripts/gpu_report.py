#!/usr/bin/env python3
"""Side-by-side table of sparkccl's GPU AllReduce and NCCL's (through PyTorch) from one
gpu-test.sh run: reads OUT/bench-auto.log, OUT/bench-staged.log and OUT/nccl-*.json, prints a
markdown table (and writes it to OUT/table.md).
Usage: gpu_report.py OUT"""
import json
import os
import sys


def sparkccl(path):
    rows = {}
    if not os.path.exists(path):
        return rows
    for line in open(path):
        parts = line.split()
        if len(parts) >= 8 and parts[0].isdigit():
            rows[int(parts[0])] = {"us": float(parts[4]), "busbw": float(parts[6]), "proto": parts[3],
                                   "wrong": int(parts[7])}
    return rows


def nccl(path):
    if not os.path.exists(path):
        return {}
    return {r["bytes"]: r for r in json.load(open(path))["rows"]}


def main():
    out = sys.argv[1]
    s = sparkccl(os.path.join(out, "bench-auto.log"))
    st = sparkccl(os.path.join(out, "bench-staged.log"))
    n = nccl(os.path.join(out, "nccl-default.json"))
    ns = nccl(os.path.join(out, "nccl-p2p-disabled.json"))
    lines = ["| size | sparkccl us (proto) | sparkccl busbw | NCCL sync us | NCCL event us | NCCL busbw | "
             "staged sparkccl busbw | NCCL P2P-off busbw |", "|" + " --- |" * 8]
    for size in sorted(set(s) | set(n)):
        a = s.get(size)
        b = n.get(size)
        c = st.get(size)
        d = ns.get(size)
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            size,
            "%.1f (%s)%s" % (a["us"], a["proto"], "" if a["wrong"] == 0 else " WRONG") if a else "",
            "%.1f" % a["busbw"] if a else "",
            "%.1f" % b["sync_us"] if b else "", "%.1f" % b["event_us"] if b else "",
            "%.1f" % b["busbw"] if b else "",
            "%.1f" % c["busbw"] if c else "", "%.1f" % d["busbw"] if d else ""))
    table = "\n".join(lines)
    print(table)
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(table + "\n")


if __name__ == "__main__":
    main()
