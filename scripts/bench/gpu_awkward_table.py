#!/usr/bin/env python3
"""Joins tune's best GPU records with the vendor timings of gpu_vendor_ref.py, for
scripts/bench/gpu_awkward: one row per tuned shape, ratio = vendor time / ours (> 1: ours
faster), how many trials each search measured, and the geomean over the first database's
rows that have both (the set; SGEMM 4096 comes in a database of its own).

usage: gpu_awkward_table.py VENDOR.jsonl RECORDS.db [RECORDS.db ...]
"""
import json
import math
import sqlite3
import sys


def task_key(op, s):
    """The key gpu_vendor_ref.py's lines carry: (kind, shape tuple)."""
    if op == "conv2d":
        shape = [s["n"], s["c"], s["h"], s["w"], s["oc"], s["kernel"][0], s["kernel"][1], s["stride"][0], s["pad"][0]]
        if s.get("groups", 1) != 1:
            shape.append(s["groups"])
        return ("conv2d", tuple(shape))
    if op == "batch_matmul":
        return ("batch_matmul", (s["batch"], s["m"], s["n"], s["k"]))
    return (op, (s["m"], s["n"], s["k"]))


def main():
    vendor = {}
    for line in open(sys.argv[1]):
        line = line.strip()
        if line.startswith("{"):
            v = json.loads(line)
            vendor[(v["kind"], tuple(v["shape"]))] = (v["lib"], v["ms"])
    rows = []
    for i, db in enumerate(sys.argv[2:]):
        c = sqlite3.connect(db)
        for op, shape_json, best, flops, n in c.execute(
                "SELECT t.op, t.shape_json, MIN(CASE WHEN r.status = 'ok' THEN r.median_s END), t.flops, COUNT(*) "
                "FROM records r JOIN tasks t ON t.id = r.task_id GROUP BY r.task_id"):
            rows.append((task_key(op, json.loads(shape_json)), best, flops, n, i == 0))
    print("| op | shape | records | tune us | TFLOP/s | vendor | vendor us | vendor / tune |")
    print("|---|---|---|---|---|---|---|---|")
    ratios = []
    for (kind, shape), best, flops, n, in_set in rows:
        lib, vms = vendor.get((kind, shape), ("-", None))
        ours = f"{best * 1e6:.1f}" if best else "no valid config"
        tf = f"{flops / best / 1e12:.2f}" if best else "-"
        ratio = "-"
        if best and vms:
            ratio = f"{vms * 1e-3 / best:.2f}x"
            if in_set:
                ratios.append(vms * 1e-3 / best)
        vus = f"{vms * 1e3:.1f}" if vms else "-"
        print(f"| {kind} | {','.join(map(str, shape))} | {n} | {ours} | {tf} | {lib} | {vus} | {ratio} |")
    if ratios:
        g = math.exp(sum(map(math.log, ratios)) / len(ratios))
        print(f"\ngeomean over {len(ratios)} shapes: {g:.2f}x the vendors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
