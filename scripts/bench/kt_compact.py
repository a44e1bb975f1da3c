#!/usr/bin/env python3
"""Writes a Kernel Tuner cache file with only what a replay reads.

usage: kt_compact.py IN.json[.gz] OUT.json.gz

Keeps device_name, kernel_name, problem_size, tune_params_keys, tune_params and objective, and
for every cache entry the parameter values and `time` (rounded to 6 significant digits; failure
strings kept as they are). Drops the per-run `times`, compile/benchmark overheads and timestamps,
which shrinks a file 5-10x. The result is still a valid Kernel Tuner cache file.
"""
import gzip
import json
import sys


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[2])
    src, dst = sys.argv[1], sys.argv[2]
    d = load(src)
    keys = d["tune_params_keys"]
    out = {k: d[k] for k in ("device_name", "kernel_name", "problem_size", "tune_params_keys",
                             "tune_params", "objective") if k in d}
    cache = {}
    for key, rec in d["cache"].items():
        t = rec["time"]
        if isinstance(t, float):
            t = float(f"{t:.6g}")
        entry = {k: rec[k] for k in keys}
        entry["time"] = t
        cache[key] = entry
    out["cache"] = cache
    with gzip.GzipFile(dst, "wb", compresslevel=9, mtime=0) as f:
        f.write(json.dumps(out, separators=(",", ":")).encode())


if __name__ == "__main__":
    main()
