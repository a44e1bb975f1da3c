"""Compares `tune run --save DIR` with onnxruntime: runs MODEL.onnx on onnxruntime's CPU provider
(graph optimizations on, intra-op threads as given) with the inputs tune saved, compares every
output with tune's (numpy.allclose), and with --bench N times N runs after warm-up.

usage: python ort_check.py MODEL.onnx DIR [--threads T] [--rtol R] [--atol A] [--bench N]
The check is numpy.allclose(tune, onnxruntime, rtol, atol x min(1, max |onnxruntime output|)):
defaults rtol 1e-3, atol 1e-4 (fp32 kernels sum in other orders than onnxruntime's).
DIR holds <name>.npy for every graph input and output (names with characters other than
letters, digits, '_', '.', '-' replaced by '_'). Prints one line per output
("output NAME: shape [..] max abs err E, max rel err R: ok|MISMATCH"), with --bench the line
"ort_median_ms=M ort_min_ms=m runs=N threads=T", and exits 1 when an output differs, 2 on bad
input. Needs numpy and onnxruntime (the test-only environment; never a dependency of tune).
"""
import argparse
import os
import re
import sys
import time


def sanitize(name):
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "_"


def main():
    p = argparse.ArgumentParser(prog="ort_check.py")
    p.add_argument("model")
    p.add_argument("dir")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rtol", type=float, default=1e-3)
    p.add_argument("--atol", type=float, default=1e-4)
    p.add_argument("--bench", type=int, default=0)
    a = p.parse_args()
    import numpy as np
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = max(1, a.threads)
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    try:
        sess = ort.InferenceSession(a.model, opts, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001 - onnxruntime raises its own types
        print(f"ort_check: {a.model}: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
        return 2
    feeds = {}
    for i in sess.get_inputs():
        path = os.path.join(a.dir, sanitize(i.name) + ".npy")
        if not os.path.exists(path):
            print(f"ort_check: {path} is missing (input {i.name})", file=sys.stderr)
            return 2
        feeds[i.name] = np.load(path)
    names = [o.name for o in sess.get_outputs()]
    results = sess.run(names, feeds)
    ok = True
    for name, got in zip(names, results):
        path = os.path.join(a.dir, sanitize(name) + ".npy")
        if not os.path.exists(path):
            print(f"ort_check: {path} is missing (output {name})", file=sys.stderr)
            return 2
        mine = np.load(path)
        if mine.shape != got.shape:
            print(f"output {name}: shape {list(mine.shape)} but onnxruntime gives {list(got.shape)}: MISMATCH")
            ok = False
            continue
        ref = got.astype(np.float64)
        diff = np.abs(mine.astype(np.float64) - ref)
        max_abs = float(diff.max()) if diff.size else 0.0
        max_rel = float((diff / np.maximum(np.abs(ref), 1e-12)).max()) if diff.size else 0.0
        # atol scales down with outputs smaller than 1, so a model whose outputs are all tiny
        # (random weights) is still compared digit by digit.
        scale = min(1.0, float(np.abs(ref).max())) if ref.size else 1.0
        atol = a.atol * scale
        close = bool(np.allclose(mine, got, rtol=a.rtol, atol=atol)) and bool(np.isfinite(mine).all())
        ok &= close
        print(f"output {name}: shape {list(mine.shape)} max abs err {max_abs:.3g}, max rel err {max_rel:.3g} "
              f"(rtol {a.rtol:g}, atol {atol:.3g}): {'ok' if close else 'MISMATCH'}")
    if a.bench > 0:
        for _ in range(3):
            sess.run(names, feeds)
        times = []
        for _ in range(a.bench):
            t0 = time.perf_counter()
            sess.run(names, feeds)
            times.append((time.perf_counter() - t0) * 1e3)
        times.sort()
        median = times[len(times) // 2] if len(times) % 2 else 0.5 * (times[len(times) // 2 - 1] + times[len(times) // 2])
        print(f"ort_median_ms={median:.4f} ort_min_ms={times[0]:.4f} runs={a.bench} threads={a.threads}")
    sys.stdout.flush()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
