#!/usr/bin/python3
"""Writes the ONNX test models from torchvision and torch.nn (Debian's python3-torchvision and
python3-onnx): resnet18.onnx, mobilenet_v2.onnx, encoder.onnx (a transformer encoder block),
each with random weights from a fixed seed, plus a symbolic-batch ResNet-18 variant.

usage: make_models.py OUT_DIR [--size HxW] [--only NAME,...]
The input size defaults to 224x224 (64x64 keeps the test suite fast; the task list changes
with it). Models are exported with static shapes unless named *_dynbatch.
"""
import argparse
import os
import sys

import torch
import torchvision


class EncoderBlock(torch.nn.Module):
    """A BERT-style encoder layer written out op by op: token embedding plus learned positions,
    self-attention (Q, K, V projections, 4 heads, scaled softmax(Q K^T) V, output projection),
    residual add + LayerNorm, a GELU feed-forward block, residual add + LayerNorm."""

    def __init__(self, vocab=1000, seq=16, hidden=64, heads=4, ffn=256):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.embed = torch.nn.Embedding(vocab, hidden)
        self.pos = torch.nn.Parameter(torch.randn(1, seq, hidden) * 0.02)
        self.q = torch.nn.Linear(hidden, hidden)
        self.k = torch.nn.Linear(hidden, hidden)
        self.v = torch.nn.Linear(hidden, hidden)
        self.out = torch.nn.Linear(hidden, hidden)
        self.norm1 = torch.nn.LayerNorm(hidden)
        self.ffn1 = torch.nn.Linear(hidden, ffn)
        self.ffn2 = torch.nn.Linear(ffn, hidden)
        self.norm2 = torch.nn.LayerNorm(hidden)

    def split(self, x):
        b, s, _ = x.shape
        return x.reshape(b, s, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, ids):
        x = self.embed(ids) + self.pos
        b, s, h = x.shape
        q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
        att = torch.softmax(torch.matmul(q, k.transpose(2, 3)) / (self.head_dim ** 0.5), dim=-1)
        ctx = torch.matmul(att, v).transpose(1, 2).reshape(b, s, h)
        x = self.norm1(x + self.out(ctx))
        x = self.norm2(x + self.ffn2(torch.nn.functional.gelu(self.ffn1(x))))
        return x


def export(model, args, path, input_names, dynamic_axes=None, opset=13):
    model.eval()
    with torch.no_grad():
        torch.onnx.export(model, args, path, input_names=input_names, output_names=["output"],
                          opset_version=opset, do_constant_folding=True, dynamic_axes=dynamic_axes)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--size", default="224x224")
    p.add_argument("--seq", type=int, default=16)
    p.add_argument("--only", default="")
    a = p.parse_args()
    h, w = (int(v) for v in a.size.split("x"))
    only = set(filter(None, a.only.split(",")))
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(0)
    image = torch.randn(1, 3, h, w)
    models = {
        "resnet18": lambda: export(torchvision.models.resnet18(), image, os.path.join(a.out, "resnet18.onnx"),
                                   ["input"]),
        "mobilenet_v2": lambda: export(torchvision.models.mobilenet_v2(), image,
                                       os.path.join(a.out, "mobilenet_v2.onnx"), ["input"]),
        "encoder": lambda: export(EncoderBlock(seq=a.seq), torch.randint(0, 1000, (1, a.seq)),
                                  os.path.join(a.out, "encoder.onnx"), ["ids"]),
        "resnet18_dynbatch": lambda: export(torchvision.models.resnet18(), image,
                                            os.path.join(a.out, "resnet18_dynbatch.onnx"), ["input"],
                                            dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}),
    }
    for name, make in models.items():
        if only and name not in only:
            continue
        torch.manual_seed(0)
        make()
        print(f"wrote {os.path.join(a.out, name + '.onnx')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
