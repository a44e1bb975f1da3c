#!/usr/bin/env python3
"""Joins tune's best GPU records with the vendor timings of gpu_vendor_ref.py into one table.

usage: gpu_vendor_table.py RECORDS.db VENDOR.jsonl
Ours: the best ok record (median seconds) of each task on the cuda target. Ratios are vendor
time / our time (> 1: ours faster); geomeans over the BERT shapes.
"""
import json
import math
import sqlite3
import sys


def main():
    db, vendor_path = sys.argv[1], sys.argv[2]
    c = sqlite3.connect(db)
    ours, convs = {}, {}
    for key, op, shape_json, best in c.execute(
            "SELECT t.workload_key, t.op, t.shape_json, MIN(r.median_s) FROM records r "
            "JOIN tasks t ON t.id = r.task_id JOIN targets g ON g.id = r.target_id "
            "WHERE r.status = 'ok' AND g.key LIKE 'cuda|%' GROUP BY r.task_id"):
        s = json.loads(shape_json)
        if op == "conv2d":
            shape = (s["n"], s["c"], s["h"], s["w"], s["oc"], s["kernel"][0], s["kernel"][1], s["stride"][0], s["pad"][0])
            convs[(shape, key.split("/")[2])] = (best * 1e3, key)
        else:
            ours[(op, (s["m"], s["n"], s["k"]))] = best * 1e3
    vendor = {}
    for line in open(vendor_path):
        line = line.strip()
        if not line.startswith("{"):
            continue
        v = json.loads(line)
        if v["kind"] == "conv2d":
            vendor[("conv2d", tuple(v["shape"]), v["lib"])] = v["ms"]
        else:
            vendor[(v["kind"], tuple(v["shape"][:3]), v["lib"])] = v["ms"]
    print("| op | shape (M,N,K) | tune ms | TFLOP/s | cuBLAS ms | vs cuBLAS | Triton ms | vs Triton |")
    print("|---|---|---|---|---|---|---|---|")
    bert_cublas, bert_triton = [], []
    for (op, shape), ms in sorted(ours.items(), key=lambda x: (x[0][0], x[0][1])):
        cb = vendor.get((op, shape, "cublas"))
        tr = vendor.get((op, shape, "triton"))
        flops = 2.0 * shape[0] * shape[1] * shape[2]
        row = [op, "x".join(map(str, shape)), f"{ms:.4f}", f"{flops / ms / 1e9:.1f}",
               f"{cb:.4f}" if cb else "-", f"{cb / ms:.2f}x" if cb else "-",
               f"{tr:.4f}" if tr else "-", f"{tr / ms:.2f}x" if tr else "-"]
        print("| " + " | ".join(row) + " |")
        if op == "dense" and cb and tr:
            bert_cublas.append(cb / ms)
            bert_triton.append(tr / ms)
    g = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
    if bert_cublas:
        print(f"\nBERT dense shapes, geomean: {g(bert_cublas):.2f}x cuBLAS, {g(bert_triton):.2f}x Triton")
    if convs:
        print("\n| conv2d N,C,H,W,OC,KH,KW,stride,pad | epilogue | tune ms | TFLOP/s | cuDNN ms | vs cuDNN |")
        print("|---|---|---|---|---|---|")
        ratios = []
        for (shape, _), (ms, key) in sorted(convs.items(), key=lambda x: (x[0][0][1:], x[0][1])):
            n, ci, h, w, oc, kh, kw, st, pd = shape
            oh, ow = (h + 2 * pd - kh) // st + 1, (w + 2 * pd - kw) // st + 1
            flops = 2.0 * n * oc * oh * ow * ci * kh * kw
            cd = vendor.get(("conv2d", shape, "cudnn"))
            if cd:
                ratios.append(cd / ms)
            print(f"| {','.join(map(str, shape))} | {key.split('/')[2]} | {ms:.4f} | {flops / ms / 1e9:.2f} | "
                  + (f"{cd:.4f} | {cd / ms:.2f}x |" if cd else "- | - |"))
        if ratios:
            print(f"\nresnet-18 conv2d layers, geomean: {g(ratios):.2f}x cuDNN ({len(ratios)} layers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
