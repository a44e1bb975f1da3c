#!/usr/bin/env python3
"""End-to-end latency of torchvision models in PyTorch on a GPU: eager fp32 with TF32 off, and
torch.compile where it runs; the reference `tune run --bench --target cuda` is compared with.

usage: torch_e2e.py [--models resnet18,mobilenet_v2] [--size 224] [--runs 50] [--warmup 10]
Prints one line per model and mode: "torch MODEL MODE median_ms=X min_ms=Y" (CUDA events around
each forward pass, after warm-up; medians of --runs passes).
"""
import argparse
import statistics
import sys

import torch
import torchvision


def time_forward(fn, x, runs, warmup):
    with torch.no_grad():
        for _ in range(warmup):
            fn(x)
        torch.cuda.synchronize()
        times = []
        for _ in range(runs):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn(x)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    return statistics.median(times), min(times)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--models", default="resnet18,mobilenet_v2")
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--runs", type=int, default=50)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--no-compile", action="store_true")
    a = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()} (fp32, TF32 off, batch 1)")
    for name in a.models.split(","):
        model = getattr(torchvision.models, name)().eval().cuda()
        x = torch.randn(1, 3, a.size, a.size, device="cuda")
        med, best = time_forward(model, x, a.runs, a.warmup)
        print(f"torch {name} eager median_ms={med:.4f} min_ms={best:.4f}", flush=True)
        if a.no_compile:
            continue
        try:
            compiled = torch.compile(model)
            med, best = time_forward(compiled, x, a.runs, a.warmup)
            print(f"torch {name} compile median_ms={med:.4f} min_ms={best:.4f}", flush=True)
        except Exception as e:  # torch.compile needs a working Triton/C++ toolchain there
            print(f"torch {name} compile failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
