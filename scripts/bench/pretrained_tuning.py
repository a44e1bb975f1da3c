#!/usr/bin/env python3
"""Tuning speed with and without a pretrained cost model: trials to reach 95% of a long
reference run's best, per task and method, median over seeds.

usage: pretrained_tuning.py --tune BIN --target cuda|llvm --task OP:SHAPE[:bias,relu] [--task ...]
         --method NAME=STRATEGY[,COST_MODEL][@TRIALS][;MORE TUNE FLAGS] [--method ...] [--seeds 5] [--first-seed 1] [--trials 200]
         [--reference-trials 1000] [--threads N] [--out DIR] [--taskset CORES | --cores 4,5,6,..]
         [--parallel N] [--gpus N] [--fractions 0.8,0.9,0.95]

Every search run starts from an empty database (no transfer from other tasks' records, no
finalists), so the only prior knowledge a method has is its cost model. A method is
NAME=STRATEGY[,COST_MODEL], e.g. random=random, online-xgb=sa,xgb, pretrained-xgb=sa,xgb.tcm.
The reference run is one long `sa` + online XGBoost search per task (--reference-trials). The
100% mark is the best median latency known for the task: the reference run's best, or a faster
one some method run found (both are reported). A method's @TRIALS overrides --trials for it;
what follows a ';' is added to its runs' flags (e.g. ';--cost-model-option weight_half_life=32'). Trials count measured search candidates in order (the untuned default
schedule is not a trial). A run that never reaches 95% within --trials counts as
--trials + 1 (">N" in the table), which makes its median a lower bound.

Random search draws configs independently of what it measured, so its trials to a mark are
also estimated from the pool of all its runs' samples: with k of n samples at or above the mark,
a fresh random run's first hit is geometric with p = k/n, median ceil(ln 0.5 / ln(1 - p)) trials
("random (pool)" rows; with k = 0 only a bound, > 0.69 n).
Prints one Markdown table per fraction and writes results.json under --out.

--gpus N (GPU target): runs go round-robin to cuda:0 .. cuda:N-1, --parallel runs per GPU.

--cores (CPU targets): runs go in parallel, each pinned to one core of the list with
--threads 1 (first the reference runs of every task, then every method x seed run); a GPU
target runs --parallel searches at a time (default 1; the processes take turns on the GPU
through its lock file, so no kernel is timed while another runs; --taskset pins them all to a
set of host cores).
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor


_deadline = 0.0
_next_gpu = 0
_free_cores = []
_cores_lock = threading.Lock()


def run_tune(args, op, shape, flags, db, trials, strategy, cost_model, seed, log, more=()):
    core = None
    if args.cores:
        with _cores_lock:
            core = _free_cores.pop()
    try:
        return _run_tune(args, op, shape, flags + list(more), db, trials, strategy, cost_model, seed, log, core)
    finally:
        if core is not None:
            with _cores_lock:
                _free_cores.append(core)


def _run_tune(args, op, shape, flags, db, trials, strategy, cost_model, seed, log, core):
    target = args.target
    if args.gpus > 1:
        with _cores_lock:
            global _next_gpu
            target = f"cuda:{_next_gpu % args.gpus}"
            _next_gpu += 1
    cmd = [args.tune, "op", op, "--shape", shape, "--target", target, "--db", db,
           "--trials", str(trials), "--strategy", strategy, "--seed", str(seed),
           "--finalists", "0", "--no-transfer", "--batch", str(args.batch)]
    if cost_model:
        cmd += ["--cost-model", cost_model]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    cmd += flags + args.extra.split()
    if core is not None:
        cmd = ["taskset", "-c", str(core)] + cmd
    elif args.taskset:
        cmd = ["taskset", "-c", args.taskset] + cmd
    t0 = time.time()
    run_log = db + ".log"
    with open(run_log, "w") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT)
        try:
            rc = proc.wait(timeout=max(1.0, _deadline - time.time()) if _deadline else None)
        except subprocess.TimeoutExpired:
            # Past --deadline-s: stop after the batch in flight (its records stay committed);
            # the run counts with what it measured.
            proc.send_signal(signal.SIGINT)
            proc.wait()
            rc = 0
    with _cores_lock, open(log, "a") as f, open(run_log) as g:
        f.write(g.read())
    if rc not in (0, 130):
        with open(run_log) as g:
            tail = g.read().splitlines()[-5:]
        print(f"tune failed ({rc}): {' '.join(cmd)}\n  " + "\n  ".join(tail), file=sys.stderr, flush=True)
        return None
    return time.time() - t0


def search_curve(args, db):
    """Median latencies of the search trials in measurement order (+inf for failures)."""
    out = subprocess.run([args.tune, "db", "export", "--db", db], check=True, capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        r = json.loads(line)
        if "strategy" not in r:
            continue
        if r["strategy"] in ("default", "finalist"):
            continue
        samples = r.get("samples_s") or r.get("samples") or []
        ok = r.get("status") == "ok" and samples
        rows.append((r.get("id", 0), r.get("timestamp", 0),
                     statistics.median(samples) if ok else math.inf))
    rows.sort(key=lambda x: (x[1], x[0]))
    return [x[2] for x in rows]


def trials_to(curve, target_s, cap):
    best = math.inf
    for i, t in enumerate(curve):
        best = min(best, t)
        if best <= target_s:
            return i + 1
    return cap + 1


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tune", default="build/bin/tune")
    p.add_argument("--target", default="cuda")
    p.add_argument("--task", action="append", required=True, help="OP:SHAPE[:bias,relu]")
    p.add_argument("--method", action="append", required=True, help="NAME=STRATEGY[,COST_MODEL]")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--first-seed", type=int, default=1,
                   help="seeds of the method runs are FIRST..FIRST+SEEDS-1 (a second call with --first-seed 6 adds "
                        "seeds 6-10 to a first call's 1-5)")
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--reference-trials", type=int, default=1000)
    p.add_argument("--fractions", default="0.8,0.85,0.9,0.95",
                   help="comma-separated fractions of the best known latency; the last is the headline")
    p.add_argument("--gpus", type=int, default=1, help="GPU target: spread the runs over cuda:0..N-1")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--taskset", default="")
    p.add_argument("--cores", default="", help="comma-separated cores: parallel runs, one per core")
    p.add_argument("--parallel", type=int, default=1,
                   help="GPU target: runs at once (they share the GPU through its lock file: one runs kernels "
                        "at a time while the others compile and search)")
    p.add_argument("--reference-dir", default="",
                   help="reuse reference databases found here (ref-OP-SHAPE.db) instead of measuring them again")
    p.add_argument("--extra", default="", help="more tune flags for every run, e.g. '--repeats 3 --min-repeat-ms 10'")
    p.add_argument("--deadline-s", type=float, default=0,
                   help="stop every run still going this many seconds after the start (SIGINT: it keeps its records)")
    p.add_argument("--out", default=os.environ.get("OUT", "/tmp/pretrained_tuning"))
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    log = os.path.join(args.out, "tune.log")
    methods = []  # (name, strategy, cost model, trials)
    more_flags = {}
    for m in args.method:
        name, _, spec = m.partition("=")
        spec, _, more = spec.partition(";")
        spec, _, budget = spec.partition("@")
        strategy, _, cost_model = spec.partition(",")
        methods.append((name, strategy, cost_model, int(budget) if budget else args.trials))
        more_flags[name] = more.split()
    fractions = [float(f) for f in args.fractions.split(",") if f]
    global _deadline
    if args.deadline_s:
        _deadline = time.time() + args.deadline_s
    if args.cores:
        _free_cores.extend(int(c) for c in args.cores.split(",") if c)
        args.threads = 1
    workers = len(_free_cores) if args.cores else max(1, args.parallel) * max(1, args.gpus)
    pool = ThreadPoolExecutor(max_workers=workers)
    results = {"target": args.target, "fractions": fractions, "tasks": []}
    specs = []
    for task in args.task:
        parts = task.split(":")
        op, shape = parts[0], parts[1]
        flags = ["--" + f for f in parts[2].split(",")] if len(parts) > 2 and parts[2] else []
        label = f"{op} {shape}" + (f" ({parts[2]})" if len(parts) > 2 and parts[2] else "")
        specs.append((label, op, shape, flags, shape.replace(",", "x")))

    def fresh(db):
        if os.path.exists(db):
            os.remove(db)
        return db

    def reference(sp):
        db = os.path.join(args.reference_dir or args.out, f"ref-{sp[1]}-{sp[4]}.db")
        if args.reference_dir and os.path.exists(db):
            return 0.0  # measured by an earlier invocation
        return run_tune(args, sp[1], sp[2], sp[3], fresh(db), args.reference_trials, "sa", "xgb", 1000, log)

    refs = [pool.submit(reference, sp) for sp in specs]
    runs = {}
    for sp in specs:
        for name, strategy, cost_model, budget in methods:
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                db = fresh(os.path.join(args.out, f"run-{name}-{sp[1]}-{sp[4]}-{seed}.db"))
                runs[(sp[0], name, seed)] = (db, pool.submit(run_tune, args, sp[1], sp[2], sp[3], db, budget,
                                                              strategy, cost_model, seed, log, more_flags[name]))
    for sp, ref in zip(specs, refs):
        label, op = sp[0], sp[1]
        secs = ref.result()
        ref_curve = search_curve(args, os.path.join(args.reference_dir or args.out, f"ref-{op}-{sp[4]}.db"))
        ref_best = min(ref_curve) if ref_curve else math.inf
        curves = {}
        for name, strategy, cost_model, budget in methods:
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                db, fut = runs[(label, name, seed)]
                run_secs = fut.result()
                if run_secs is None:
                    continue  # the run failed (its log tail was printed)
                curves[(name, seed)] = (search_curve(args, db), run_secs)
        known = min([ref_best] + [min(c) for c, _ in curves.values() if c])
        print(f"{label}: reference {len(ref_curve)} trials in {secs:.0f} s, best {ref_best * 1e6:.2f} us; "
              f"best known {known * 1e6:.2f} us", file=sys.stderr, flush=True)
        entry = {"task": label, "reference_trials": len(ref_curve), "reference_best_s": ref_best,
                 "best_known_s": known, "methods": {}}
        for name, strategy, cost_model, budget in methods:
            seeds = [s for s in range(args.first_seed, args.first_seed + args.seeds) if (name, s) in curves]
            if not seeds:
                continue
            m = {"trials": budget, "seeds": seeds, "seconds": [curves[(name, s)][1] for s in seeds],
                 "measured": [len(curves[(name, s)][0]) for s in seeds],
                 "final_fraction": [known / min(curves[(name, s)][0]) if curves[(name, s)][0] else 0 for s in seeds],
                 "trials_to": {}, "median": {}}
            for f in fractions:
                counts = [trials_to(curves[(name, s)][0], known / f, budget) for s in seeds]
                m["trials_to"][str(f)] = counts
                m["median"][str(f)] = statistics.median(counts)
            entry["methods"][name] = m
            print(f"  {name}: trials to {fractions[-1]:.0%} {m['trials_to'][str(fractions[-1])]}, "
                  f"fraction at {budget}: {statistics.median(m['final_fraction']):.3f}", file=sys.stderr, flush=True)
            if strategy == "random":
                pool_samples = [t for s in seeds for t in curves[(name, s)][0]]
                n = len(pool_samples)
                est = {}
                for f in fractions:
                    k = sum(1 for t in pool_samples if t <= known / f)
                    est[str(f)] = {"hits": k, "samples": n, "median_trials": geometric_median(k, n)}
                entry["methods"][name + " (pool)"] = {"pool": est}
        results["tasks"].append(entry)
        with open(os.path.join(args.out, "results.json"), "w") as f:
            json.dump(results, f, indent=1)

    names = [m[0] for m in methods]
    budgets = {m[0]: m[3] for m in methods}
    print(f"| task | reference best (us) | best known (us) | method | trials | " +
          " | ".join(f"{f:.0%}" for f in fractions) + f" | fraction at the end |")
    print("|---|---|---|---|---|" + "---|" * len(fractions) + "---|")
    for e in results["tasks"]:
        first = True
        for n in names + [n + " (pool)" for n in names]:
            if n not in e["methods"]:
                continue
            m = e["methods"][n]
            head = f"| {e['task']} | {e['reference_best_s'] * 1e6:.2f} | {e['best_known_s'] * 1e6:.2f}" if first \
                else "| | |"
            first = False
            if "pool" in m:
                cells = []
                for f in fractions:
                    p = m["pool"][str(f)]
                    v = p["median_trials"]
                    cells.append(f"~{v:g} ({p['hits']}/{p['samples']})" if p["hits"] else f">{v:g} (0/{p['samples']})")
                print(f"{head} | {n} | - | " + " | ".join(cells) + " | |")
                continue
            b = budgets[n]
            cells = [f">{b}" if m["median"][str(f)] > b else f"{m['median'][str(f)]:g}" for f in fractions]
            print(f"{head} | {n} | {b} | " + " | ".join(cells) + f" | {statistics.median(m['final_fraction']):.3f} |")


def geometric_median(hits, samples):
    """Median trials of a random search whose each draw reaches the mark with p = hits/samples
    (with no hit: the value for p = 1/samples, a lower bound)."""
    if samples == 0:
        return math.inf
    p = max(hits, 1) / samples
    if p >= 1:
        return 1
    return math.ceil(math.log(0.5) / math.log(1 - p))

if __name__ == "__main__":
    main()
