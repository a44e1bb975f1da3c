"""Peer autotuner comparison: tune against Apache TVM MetaSchedule on the CPU benchmark workloads.

For each workload (SGEMM 1024^3 and resnet-18 convolutions), TVM MetaSchedule tunes a TE
definition on the llvm target of this CPU with the same trial budget and thread count as tune,
its best kernel is checked against numpy on random inputs and timed with TVM's time_evaluator;
tune runs `tune op` on the same shape into a fresh database and its best time is read from its
closing table. With --rounds R the two best kernels are then timed again in turn, R rounds of one
process each (tune's config through `tune op --config`, TVM's exported library through
time_evaluator, both at --repeats samples of at least 200 ms, the order swapped every round), so
that a host whose speed drifts between the two searches does not decide the ratio: the table's
alternated columns are the medians of those rounds. One table is printed and written as TSV.

Run it through scripts/bench/tvm_peer, which makes the virtual environment with TVM.
"""

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# id -> (kind, tune shape, label). The 3x3 layers are cpu_vendor_bench's; the 1x1 layers are
# resnet-18's stride-2 downsampling convolutions.
WORKLOADS = {
    "sgemm1024": ("matmul", "1024,1024,1024", "sgemm 1024x1024x1024"),
    "conv1": ("conv2d", "1,64,56,56,64,3,3,1,1", "conv 64x56x56->64 k3 s1 p1"),
    "conv2": ("conv2d", "1,128,28,28,128,3,3,1,1", "conv 128x28x28->128 k3 s1 p1"),
    "conv3": ("conv2d", "1,512,7,7,512,3,3,1,1", "conv 512x7x7->512 k3 s1 p1"),
    "ds1": ("conv2d", "1,64,56,56,128,1,1,2,0", "conv 64x56x56->128 k1 s2 p0"),
    "ds2": ("conv2d", "1,128,28,28,256,1,1,2,0", "conv 128x28x28->256 k1 s2 p0"),
    "ds3": ("conv2d", "1,256,14,14,512,1,1,2,0", "conv 256x14x14->512 k1 s2 p0"),
}
ALIASES = {"sgemm": "sgemm1024"}
DEFAULT_WORKLOADS = "sgemm1024,conv1,conv2,conv3"


def parse_shape(kind, shape):
    """Integer fields of a tune shape string, conv2d padded to stride and pad."""
    dims = [int(x) for x in shape.split(",")]
    if kind == "conv2d" and len(dims) == 7:
        dims += [1, 0]
    return dims


def flops(kind, shape):
    dims = parse_shape(kind, shape)
    if kind == "matmul":
        m, n, k = dims
        return 2.0 * m * n * k
    n, c, h, w, oc, kh, kw, stride, pad = dims
    oh = (h + 2 * pad - kh) // stride + 1
    ow = (w + 2 * pad - kw) // stride + 1
    return 2.0 * n * oc * oh * ow * c * kh * kw


def cpu_model():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


# ---------------------------------------------------------------------------------------------
# TVM side (runs in a child process: a crash inside TVM must not take the table down).


def tvm_definition(kind, shape):
    """The workload as a TE-built PrimFunc plus a numpy reference: (func, make_inputs, reference)."""
    import numpy as np
    from tvm import te

    dims = parse_shape(kind, shape)
    if kind == "matmul":
        m, n, k = dims
        a = te.placeholder((m, k), "float32", name="A")
        b = te.placeholder((k, n), "float32", name="B")
        r = te.reduce_axis((0, k), name="k")
        c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
        func = te.create_prim_func([a, b, c])

        def make_inputs(rng):
            return [rng.uniform(-1, 1, (m, k)).astype("float32"), rng.uniform(-1, 1, (k, n)).astype("float32")]

        def reference(x, w):
            return x.astype("float64") @ w.astype("float64")

        return func, make_inputs, reference, (m, n)

    n, c, h, w, oc, kh, kw, stride, pad = dims
    oh = (h + 2 * pad - kh) // stride + 1
    ow = (w + 2 * pad - kw) // stride + 1
    data = te.placeholder((n, c, h, w), "float32", name="data")
    weight = te.placeholder((oc, c, kh, kw), "float32", name="weight")
    if pad > 0:
        padded = te.compute(
            (n, c, h + 2 * pad, w + 2 * pad),
            lambda b_, c_, y, x: te.if_then_else(
                te.all(y >= pad, y < h + pad, x >= pad, x < w + pad), data[b_, c_, y - pad, x - pad], 0.0
            ),
            name="pad",
        )
    else:
        padded = data
    rc = te.reduce_axis((0, c), name="rc")
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    out = te.compute(
        (n, oc, oh, ow),
        lambda b_, o, y, x: te.sum(
            padded[b_, rc, y * stride + ry, x * stride + rx] * weight[o, rc, ry, rx], axis=[rc, ry, rx]
        ),
        name="conv",
    )
    func = te.create_prim_func([data, weight, out])

    def make_inputs(rng):
        return [
            rng.uniform(-1, 1, (n, c, h, w)).astype("float32"),
            rng.uniform(-1, 1, (oc, c, kh, kw)).astype("float32"),
        ]

    def reference(x, wt):
        xp = np.pad(x.astype("float64"), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
        win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))
        win = win[:, :, ::stride, ::stride][:, :, :oh, :ow]  # n c oh ow kh kw
        return np.einsum("ncyxij,ocij->noyx", win, wt.astype("float64"), optimize=True)

    return func, make_inputs, reference, (n, oc, oh, ow)


def tvm_child(args):
    """Tunes one workload with MetaSchedule and writes a JSON result to args.result."""
    import numpy as np
    import tvm
    from tvm.s_tir import meta_schedule as ms
    from tvm.target import codegen

    kind, shape, _ = WORKLOADS[args.child]
    cores = len(os.sched_getaffinity(0))
    target = tvm.target.Target({"kind": "llvm", "mcpu": codegen.llvm_get_system_cpu(), "num-cores": args.threads})
    func, make_inputs, reference, out_shape = tvm_definition(kind, shape)
    work_dir = os.path.join(args.work_dir, "tvm-" + args.child)
    os.makedirs(work_dir, exist_ok=True)
    print(f"tvm: {args.child} target {target} builder workers {cores} work dir {work_dir}", file=sys.stderr, flush=True)

    start = time.time()
    database = ms.tune_tir(
        func,
        target,
        work_dir,
        max_trials_global=args.trials,
        num_trials_per_iter=min(64, args.trials),
        builder=ms.builder.LocalBuilder(max_workers=cores, timeout_sec=args.build_timeout),
        runner=ms.runner.LocalRunner(
            timeout_sec=args.run_timeout,
            evaluator_config=ms.runner.EvaluatorConfig(number=1, repeat=args.repeats, min_repeat_ms=20),
        ),
        num_tuning_cores=cores,
        seed=args.seed,
    )
    schedule = ms.tir_integration.compile_tir(database, func, target)
    tune_s = time.time() - start
    measured = sum(1 for r in database.get_all_tuning_records() if r.run_secs)
    if schedule is None:
        raise SystemExit(f"TVM MetaSchedule found no valid schedule for {args.child} in {args.trials} trials "
                         f"(see the logs in {work_dir}/logs)")
    executable = tvm.compile(schedule.mod, target=target)
    executable.export_library(os.path.join(args.work_dir, f"tvm-{args.child}.so"))
    module = executable.jit()

    dev = tvm.cpu(0)
    rng = np.random.default_rng(args.seed)
    inputs = make_inputs(rng)
    tensors = [tvm.runtime.tensor(x, dev) for x in inputs]
    result = tvm.runtime.tensor(np.full(out_shape, np.nan, dtype="float32"), dev)
    module["main"](*tensors, result)
    want = reference(*inputs)
    got = result.numpy().astype("float64")
    err = float(np.max(np.abs(got - want)) / max(1e-30, float(np.max(np.abs(want)))))
    if not np.isfinite(err) or err > 1e-4:
        raise SystemExit(f"TVM's best kernel for {args.child} is wrong: max relative error {err:.3g}")

    evaluator = module.time_evaluator("main", dev, number=1, repeat=args.repeats, min_repeat_ms=200)
    costs = evaluator(*tensors, result).results
    best_ms = statistics.median(costs) * 1e3
    with open(args.result, "w", encoding="utf-8") as f:
        json.dump({"best_ms": best_ms, "trials": measured, "tune_s": tune_s, "max_rel_err": err}, f)


def tvm_time_child(args):
    """Times the exported library of one workload's best TVM kernel; prints {"ms": median}."""
    import numpy as np
    import tvm

    kind, shape, _ = WORKLOADS[args.time_tvm]
    _, make_inputs, _, out_shape = tvm_definition(kind, shape)
    module = tvm.runtime.load_module(os.path.join(args.work_dir, f"tvm-{args.time_tvm}.so"))
    dev = tvm.cpu(0)
    tensors = [tvm.runtime.tensor(x, dev) for x in make_inputs(np.random.default_rng(args.seed))]
    result = tvm.runtime.tensor(np.zeros(out_shape, dtype="float32"), dev)
    evaluator = module.time_evaluator("main", dev, number=1, repeat=args.repeats, min_repeat_ms=200)
    print(json.dumps({"ms": statistics.median(evaluator(*tensors, result).results) * 1e3}))


def alternate(args, wid, work_dir, log):
    """Times tune's and TVM's best kernels of a workload in turn, args.rounds rounds; returns
    ({"tune_ms": median, "tvm_ms": median, "ratio": median of the rounds' tvm/tune} or None, error)."""
    kind, shape, _ = WORKLOADS[wid]
    best = subprocess.run([args.tune_bin, "db", "best", "--db", os.path.join(work_dir, f"tune-{wid}.db"), "--format", "json"],
                          capture_output=True, text=True, check=False)
    rows = json.loads(best.stdout) if best.returncode == 0 and best.stdout.strip() else []
    if not rows:
        return None, f"no best tune config of {wid} to time again: {best.stderr.strip()}"
    config = json.dumps(rows[0]["config"])
    env = dict(os.environ, TVM_NUM_THREADS=str(args.threads), TVM_BIND_THREADS="0",
               TVM_PEER_FAST_STACK="1")
    times = {"tune": [], "tvm": []}
    with open(log, "w", encoding="utf-8") as out:
        for r in range(args.rounds):
            for tool in (("tune", "tvm") if r % 2 == 0 else ("tvm", "tune")):
                if tool == "tune":
                    db = os.path.join(work_dir, f"time-{wid}-{r}.db")
                    cmd = [args.tune_bin, "op", kind, "--shape", shape, "--target", "llvm", "--config", config,
                           "--trials", "1", "--finalists", "0", "--no-start-configs", "--no-transfer",
                           "--threads", str(args.threads), "--repeats", str(args.repeats), "--min-repeat-ms", "200",
                           "--db", db]
                else:
                    cmd = [sys.executable, os.path.abspath(__file__), "--time-tvm", wid, "--work-dir", work_dir,
                           "--repeats", str(args.repeats), "--seed", str(args.seed), "--threads", str(args.threads)]
                proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
                out.write(f"round {r} {tool}: {' '.join(cmd)}\n{proc.stdout}{proc.stderr}\n")
                if proc.returncode != 0:
                    return None, f"timing {tool}'s kernel of {wid} again failed (exit status {proc.returncode}); see {log}"
                if tool == "tune":
                    ms = table_best_ms(proc.stdout)
                else:
                    ms = json.loads(proc.stdout.strip().splitlines()[-1])["ms"]
                if ms is None:
                    return None, f"no time in tune's table when timing {wid} again; see {log}"
                times[tool].append(ms)
    ratios = [v / t for t, v in zip(times["tune"], times["tvm"])]
    return {"tune_ms": statistics.median(times["tune"]), "tvm_ms": statistics.median(times["tvm"]),
            "ratio": statistics.median(ratios), "tune_all": times["tune"], "tvm_all": times["tvm"]}, ""


# TVM_BIND_THREADS=0: TVM's thread pool would otherwise pin its workers to the first cores of
# the machine whatever cores the process may use (taskset), so runs pinned apart would share them.
def run_tvm(args, wid, work_dir, log):
    """Runs the TVM child for one workload; returns (result dict or None, error text, wall seconds)."""
    result = os.path.join(work_dir, f"tvm-{wid}.json")
    cmd = [sys.executable, os.path.abspath(__file__), "--child", wid, "--result", result, "--work-dir", work_dir,
           "--trials", str(args.trials), "--threads", str(args.threads), "--repeats", str(args.repeats),
           "--seed", str(args.seed), "--build-timeout", str(args.build_timeout), "--run-timeout", str(args.run_timeout)]
    env = dict(os.environ, TVM_NUM_THREADS=str(args.threads), TVM_BIND_THREADS="0",
               TVM_PEER_FAST_STACK="1")
    start = time.time()
    with open(log, "w", encoding="utf-8") as out:
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, check=False)
    wall = time.time() - start
    if proc.returncode != 0 or not os.path.exists(result):
        with open(log, encoding="utf-8", errors="replace") as f:
            tail = f.read().splitlines()[-15:]
        why = f"exit status {proc.returncode}" if proc.returncode >= 0 else f"killed by signal {-proc.returncode}"
        return None, f"TVM MetaSchedule failed on {wid} ({why}); last lines of {log}:\n  " + "\n  ".join(tail), wall
    with open(result, encoding="utf-8") as f:
        return json.load(f), "", wall


# ---------------------------------------------------------------------------------------------
# tune side.


def table_best_ms(text):
    """The "best ms" of the one task in `tune op`'s closing table; None when there is none."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if "best ms" in line and i + 2 < len(lines) and lines[i + 1].startswith("---"):
            end = line.index("best ms") + len("best ms")
            fields = lines[i + 2][:end].split()
            try:
                return float(fields[-1]) if fields else None
            except ValueError:
                return None
    return None


def run_tune(args, wid, work_dir, log):
    """Runs `tune op` for one workload into a fresh database; returns (result or None, error, wall)."""
    kind, shape, _ = WORKLOADS[wid]
    db = os.path.join(work_dir, f"tune-{wid}.db")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.remove(db + suffix)
    cmd = [args.tune_bin, "op", kind, "--shape", shape, "--target", "llvm", "--trials", str(args.trials),
           "--threads", str(args.threads), "--repeats", str(args.repeats), "--seed", str(args.seed), "--db", db]
    start = time.time()
    with open(log, "w", encoding="utf-8") as out:
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, check=False)
    wall = time.time() - start
    if proc.returncode != 0:
        with open(log, encoding="utf-8", errors="replace") as f:
            tail = f.read().splitlines()[-10:]
        return None, f"tune failed on {wid} (exit status {proc.returncode}); last lines of {log}:\n  " + "\n  ".join(tail), wall
    # The best time in tune's closing table is that of the kernel tune picks (after its finalists'
    # re-measurement); `tune db best` would give the lowest sample of any record instead.
    with open(log, encoding="utf-8", errors="replace") as f:
        best_ms = table_best_ms(f.read())
    if best_ms is None:
        best = subprocess.run([args.tune_bin, "db", "best", "--db", db, "--format", "json"], capture_output=True,
                              text=True, check=False)
        rows = json.loads(best.stdout) if best.returncode == 0 else []
        if not rows:
            return None, f"tune recorded no valid kernel for {wid} in {db}: {best.stderr.strip()}", wall
        best_ms = min(r["seconds"] for r in rows) * 1e3
    # Candidates tune measured: every history row but the finalists' re-measurements.
    history = subprocess.run([args.tune_bin, "db", "history", "--db", db], capture_output=True, text=True, check=False)
    trials = None
    if history.returncode == 0:
        records = [line.split() for line in history.stdout.splitlines() if line.split() and line.split()[0].isdigit()]
        trials = sum(1 for r in records if "finalist" not in r[:8])
    return {"best_ms": best_ms, "trials": trials}, "", wall


# ---------------------------------------------------------------------------------------------


# Each tool of a row: its key (--tools), its name in progress lines, how it runs one workload,
# and its line when done.
TOOL_RUNS = [
    ("tune", "tune", run_tune, lambda r, w: f"tune best {r['best_ms']:.4f} ms in {w:.0f} s"),
    ("tvm", "TVM MetaSchedule", run_tvm,
     lambda r, w: f"TVM best {r['best_ms']:.4f} ms (tuning {r['tune_s']:.0f} s, process {w:.0f} s, "
                  f"max rel err {r['max_rel_err']:.2g})"),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="workloads: " + ", ".join(f"{k} ({v[2]})" for k, v in WORKLOADS.items())
                                     + "\nscripts/bench/tvm_peer also takes --cpus LIST: both tools run pinned there (taskset).")
    parser.add_argument("--trials", type=int, default=64, help="measured candidates per workload, each tool (default 64)")
    parser.add_argument("--threads", type=int, default=1, help="threads of the tuned kernels (default 1)")
    parser.add_argument("--workloads", default=DEFAULT_WORKLOADS, help=f"comma-separated ids (default {DEFAULT_WORKLOADS})")
    parser.add_argument("--repeats", type=int, default=5, help="timed samples per measurement; the median is kept (default 5)")
    parser.add_argument("--out", help="write the table here as TSV too")
    parser.add_argument("--tools", default="tune,tvm", help="which tools to run: tune, tvm or both (default)")
    parser.add_argument("--seed", type=int, default=1, help="random seed of both tuners and of the check inputs")
    parser.add_argument("--tune-bin", default=os.environ.get("TUNE_BIN", ""), help="tune binary (default $TUNE_BIN or build/bin/tune)")
    parser.add_argument("--work-dir", help="keep databases, logs and TVM's work dirs here (default: a temporary folder)")
    parser.add_argument("--build-timeout", type=float, default=120, help="seconds TVM's builder may take per candidate")
    parser.add_argument("--run-timeout", type=float, default=60, help="seconds TVM's runner may take per candidate")
    parser.add_argument("--rounds", type=int, default=0,
                        help="then time both best kernels again in turn, this many rounds, and add their medians (default 0: off)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--time-tvm", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.trials < 1 or args.threads < 1 or args.repeats < 1:
        parser.error("--trials, --threads and --repeats must be positive")

    if args.child:
        tvm_child(args)
        return 0
    if args.time_tvm:
        tvm_time_child(args)
        return 0

    ids = []
    for w in args.workloads.split(","):
        w = ALIASES.get(w.strip(), w.strip())
        if w not in WORKLOADS:
            parser.error(f"unknown workload '{w}' (known: {', '.join(WORKLOADS)})")
        ids.append(w)
    tools = set(t.strip() for t in args.tools.split(","))
    if not tools or not tools <= {"tune", "tvm"}:
        parser.error("--tools takes tune, tvm or tune,tvm")
    if "tune" in tools:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        args.tune_bin = args.tune_bin or os.path.join(root, "build", "bin", "tune")
        if not os.access(args.tune_bin, os.X_OK):
            parser.error(f"no tune binary at {args.tune_bin} (build it with scripts/build, or set $TUNE_BIN / --tune-bin)")
    cores = sorted(os.sched_getaffinity(0))
    if args.threads > len(cores):
        print(f"warning: {args.threads} threads on {len(cores)} allowed cores", file=sys.stderr)

    work_dir = args.work_dir or tempfile.mkdtemp(prefix="tvm_peer_")
    os.makedirs(work_dir, exist_ok=True)
    model = cpu_model()
    print(f"tvm_peer: {model}, cores {','.join(map(str, cores))}, {args.threads} thread(s), {args.trials} trials, "
          f"{args.repeats} repeats, work dir {work_dir}", file=sys.stderr, flush=True)

    rows, failures = [], []
    for wid in ids:
        kind, shape, label = WORKLOADS[wid]
        res = {"tune": None, "tvm": None}
        wall = {"tune": float("nan"), "tvm": float("nan")}
        for tool, name, run, done in TOOL_RUNS:
            if tool not in tools:
                continue
            print(f"[{wid}] {name} ...", file=sys.stderr, flush=True)
            res[tool], err, wall[tool] = run(args, wid, work_dir, os.path.join(work_dir, f"{tool}-{wid}.log"))
            if err:
                failures.append(err)
                print(err, file=sys.stderr)
            else:
                print(f"[{wid}] {done(res[tool], wall[tool])}", file=sys.stderr, flush=True)
        tune_res, tvm_res, tune_wall, tvm_wall = res["tune"], res["tvm"], wall["tune"], wall["tvm"]
        alt = None
        if args.rounds > 0 and tune_res and tvm_res:
            print(f"[{wid}] both best kernels timed again in turn, {args.rounds} rounds ...", file=sys.stderr, flush=True)
            alt, err = alternate(args, wid, work_dir, os.path.join(work_dir, f"alternate-{wid}.log"))
            if err:
                failures.append(err)
                print(err, file=sys.stderr)
            else:
                print(f"[{wid}] alternated: tune {alt['tune_ms']:.4f} ms {alt['tune_all']}, "
                      f"TVM {alt['tvm_ms']:.4f} ms {alt['tvm_all']}", file=sys.stderr, flush=True)
        rows.append((wid, label, tune_res, tvm_res, tune_wall, tvm_wall, alt))

    def fmt(x, spec):
        return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)

    header = ["workload", "shape", "tune_ms", "tvm_ms", "tvm/tune", "alt_tune_ms", "alt_tvm_ms", "alt_tvm/tune",
              "tune_gflops", "tvm_gflops", "tune_trials", "tvm_trials", "tune_wall_s", "tvm_wall_s", "threads", "cpu"]
    table = []
    for wid, label, tr, vr, tw, vw, alt in rows:
        kind, shape, _ = WORKLOADS[wid]
        t_ms = tr["best_ms"] if tr else None
        v_ms = vr["best_ms"] if vr else None
        # GFLOP/s from the alternated times where there are some.
        gt, gv = (alt["tune_ms"], alt["tvm_ms"]) if alt else (t_ms, v_ms)
        table.append([wid, label, fmt(t_ms, ".4f"), fmt(v_ms, ".4f"), fmt(v_ms / t_ms if t_ms and v_ms else None, ".2f"),
                      fmt(alt["tune_ms"] if alt else None, ".4f"), fmt(alt["tvm_ms"] if alt else None, ".4f"),
                      fmt(alt["ratio"] if alt else None, ".2f"),
                      fmt(flops(kind, shape) / gt / 1e6 if gt else None, ".1f"),
                      fmt(flops(kind, shape) / gv / 1e6 if gv else None, ".1f"),
                      fmt(tr["trials"] if tr else None, "d"), fmt(vr["trials"] if vr else None, "d"),
                      fmt(tw, ".0f"), fmt(vw, ".0f"), str(args.threads), model])
    widths = [max(len(h), *(len(r[i]) for r in table)) for i, h in enumerate(header)]
    print(f"tune vs TVM MetaSchedule on {model}: {args.trials} trials, {args.threads} thread(s); "
          "tvm/tune > 1 means tune's kernel is faster; alt_ = timed again in turn (--rounds, medians); "
          "wall = whole tool run")
    for line in [header, ["-" * w for w in widths], *table]:
        print("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))).rstrip())
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            for line in [header, *table]:
                f.write("\t".join(line) + "\n")
    if not args.work_dir and not failures:
        shutil.rmtree(work_dir, ignore_errors=True)  # logs of a failure stay for reading
    for err in failures:
        print(err, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
