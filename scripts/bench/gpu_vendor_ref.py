#!/usr/bin/env python3
"""Vendor references for scripts/bench/gpu_vendor, timed on this GPU in fp32 (no TF32):
cuBLAS through torch (matmul / dense), Triton's autotuned matmul with IEEE fp32 dots, and
cuDNN through torch (conv2d, batch 1). Prints one JSON object per line:
  {"kind": "matmul", "shape": [M, N, K], "lib": "cublas", "ms": ..., "tflops": ...}
Times are medians of triton.testing.do_bench (L2 flushed before each repetition).

usage: gpu_vendor_ref.py [--matmul M,N,K ...] [--dense M,N,K ...] [--bmm B,M,N,K ...]
                         [--conv N,C,H,W,OC,KH,KW,stride,pad[,groups] ...] [--no-triton]
                         [--cudnn-benchmark]
(dense: out[M,N] = data[M,K] x weight[N,K]^T, as torch.nn.functional.linear; bmm: torch.bmm
of [B,M,K] x [B,K,N]; conv groups default to 1, groups = C is a depthwise conv;
--cudnn-benchmark lets cuDNN time its algorithms and keep the fastest for each shape.)
"""
import argparse
import json
import sys

import torch
import triton
import triton.language as tl

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def configs():
    out = []
    for bm, bn, bk, warps, stages in [(128, 128, 32, 8, 3), (128, 128, 16, 8, 4), (128, 64, 32, 4, 4),
                                      (64, 128, 32, 4, 4), (64, 64, 32, 4, 4), (128, 256, 16, 8, 3),
                                      (256, 128, 16, 8, 3), (64, 64, 64, 4, 3), (32, 64, 32, 4, 4),
                                      (64, 32, 32, 4, 4)]:
        out.append(triton.Config({"BM": bm, "BN": bn, "BK": bk, "GROUP": 8}, num_warps=warps, num_stages=stages))
    return out


@triton.autotune(configs=configs(), key=["M", "N", "K"])
@triton.jit
def matmul_kernel(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr):
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BM)
    grid_n = tl.cdiv(N, BN)
    width = GROUP * grid_n
    group = pid // width
    first_m = group * GROUP
    size_m = min(grid_m - first_m, GROUP)
    pid_m = first_m + (pid % size_m)
    pid_n = (pid % width) // size_m
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        am = tl.load(a + rm[:, None] * sam + (k0 + rk)[None, :] * sak,
                     mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K), other=0.0)
        bm = tl.load(b + (k0 + rk)[:, None] * sbk + rn[None, :] * sbn,
                     mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(am, bm, input_precision="ieee")
    tl.store(c + rm[:, None] * scm + rn[None, :] * scn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def triton_mm(a, b):
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=torch.float32)
    grid = lambda meta: (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]),)
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    return c


def emit(**kw):
    print(json.dumps(kw), flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--matmul", nargs="*", default=[])
    p.add_argument("--dense", nargs="*", default=[])
    p.add_argument("--conv", nargs="*", default=[])
    p.add_argument("--bmm", nargs="*", default=[])
    p.add_argument("--no-triton", action="store_true")
    p.add_argument("--cudnn-benchmark", action="store_true")
    args = p.parse_args()
    torch.backends.cudnn.benchmark = args.cudnn_benchmark
    gen = torch.Generator(device="cuda").manual_seed(0)
    jobs = [("matmul", t) for t in args.matmul] + [("dense", t) for t in args.dense]
    for kind, text in jobs:
        M, N, K = (int(x) for x in text.split(","))
        a = torch.rand((M, K), device="cuda", generator=gen) * 2 - 1
        if kind == "dense":
            w = torch.rand((N, K), device="cuda", generator=gen) * 2 - 1
            b = w.t()  # a strided view: cuBLAS and Triton read the transpose in place
            vendor = lambda: torch.nn.functional.linear(a, w)
        else:
            b = torch.rand((K, N), device="cuda", generator=gen) * 2 - 1
            vendor = lambda: torch.mm(a, b)
        ref = (a.double() @ b.double())
        flops = 2.0 * M * N * K
        err = ((vendor().double() - ref).norm() / ref.norm()).item()
        ms = triton.testing.do_bench(vendor, warmup=50, rep=300, return_mode="median")
        emit(kind=kind, shape=[M, N, K], lib="cublas", ms=ms, tflops=flops / ms / 1e9, rel_err=err)
        if not args.no_triton:
            out = triton_mm(a, b)
            err = ((out.double() - ref).norm() / ref.norm()).item()
            ms = triton.testing.do_bench(lambda: triton_mm(a, b), warmup=50, rep=300, return_mode="median")
            emit(kind=kind, shape=[M, N, K], lib="triton", ms=ms, tflops=flops / ms / 1e9, rel_err=err)
    for text in args.bmm:
        B, M, N, K = (int(x) for x in text.split(","))
        a = torch.rand((B, M, K), device="cuda", generator=gen) * 2 - 1
        b = torch.rand((B, K, N), device="cuda", generator=gen) * 2 - 1
        ref = torch.bmm(a.double(), b.double())
        err = ((torch.bmm(a, b).double() - ref).norm() / ref.norm()).item()
        ms = triton.testing.do_bench(lambda: torch.bmm(a, b), warmup=50, rep=300, return_mode="median")
        emit(kind="batch_matmul", shape=[B, M, N, K], lib="cublas", ms=ms, tflops=2.0 * B * M * N * K / ms / 1e9,
             rel_err=err)
    for text in args.conv:
        fields = [int(x) for x in text.split(",")]
        n, c, h, w, oc, kh, kw, stride, pad = fields[:9]
        groups = fields[9] if len(fields) > 9 else 1
        x = torch.rand((n, c, h, w), device="cuda", generator=gen) * 2 - 1
        wt = torch.rand((oc, c // groups, kh, kw), device="cuda", generator=gen) * 2 - 1
        f = lambda: torch.nn.functional.conv2d(x, wt, stride=stride, padding=pad, groups=groups)
        oh = (h + 2 * pad - kh) // stride + 1
        ow = (w + 2 * pad - kw) // stride + 1
        flops = 2.0 * n * oc * oh * ow * (c // groups) * kh * kw
        ms = triton.testing.do_bench(f, warmup=50, rep=300, return_mode="median")
        shape = [n, c, h, w, oc, kh, kw, stride, pad] + ([groups] if groups != 1 else [])
        emit(kind="conv2d", shape=shape, lib="cudnn", ms=ms, tflops=flops / ms / 1e9)
    return 0


if __name__ == "__main__":
    sys.exit(main())
