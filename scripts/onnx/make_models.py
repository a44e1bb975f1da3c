#!/usr/bin/python3
"""Writes the ONNX test models from torchvision and torch.nn (Debian's python3-torchvision and
python3-onnx): resnet18.onnx, mobilenet_v2.onnx, encoder.onnx (a transformer encoder block),
each with random weights from a fixed seed, plus a symbolic-batch ResNet-18 variant, and small
models for the importer's tests: conv_bn.onnx (Conv + BatchNormalization + Relu kept unfolded),
conv_asym_pad.onnx (a Conv with asymmetric pads), conv3d.onnx (a Conv3d), shape_arith.onnx
(a symbolic batch and shape arithmetic left unfolded: Shape, Gather, Unsqueeze, Concat, Reshape), opset5.onnx (an
unsupported opset) and conv_bn_external.onnx (+ its data file: weights as external data).

usage: make_models.py OUT_DIR [--size HxW] [--only NAME,...]
The input size defaults to 224x224 (64x64 keeps the test suite fast; the task list changes
with it). Models are exported with static shapes unless named *_dynbatch.
"""
import argparse
import os
import sys

import onnx.numpy_helper

import onnx
import onnx.helper
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


class ConvBn(torch.nn.Module):
    """Conv + BatchNorm (random running statistics) + ReLU."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8, eps=0.1)  # an epsilon a folding must not drop
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


class ShapeArith(torch.nn.Module):
    """x.reshape(batch, channels, -1) from the tensor's own shape, then a projection."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Parameter(torch.randn(16, 8))

    def forward(self, x):
        y = x.reshape(x.shape[0], x.shape[1], -1)
        return torch.matmul(y, self.proj)


def conv_asym_pad(path):
    """Conv 1x3x16x16 -> 4 channels, 3x3, pads top 0, left 1, bottom 2, right 1, built with onnx.helper."""
    w = onnx.numpy_helper.from_array(torch.randn(4, 3, 3, 3).numpy(), "w")
    b = onnx.numpy_helper.from_array(torch.randn(4).numpy(), "b")
    node = onnx.helper.make_node("Conv", ["input", "w", "b"], ["output"], name="conv", pads=[0, 1, 2, 1])
    graph = onnx.helper.make_graph(
        [node], "conv_asym_pad", [onnx.helper.make_tensor_value_info("input", onnx.TensorProto.FLOAT, [1, 3, 16, 16])],
        [onnx.helper.make_tensor_value_info("output", onnx.TensorProto.FLOAT, [1, 4, 17, 16])], [w, b])
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)]), path)


def opset5(path):
    """A Relu model declaring opset 5 of the default domain."""
    node = onnx.helper.make_node("Relu", ["input"], ["output"], name="relu")
    graph = onnx.helper.make_graph(
        [node], "opset5", [onnx.helper.make_tensor_value_info("input", onnx.TensorProto.FLOAT, [1, 4])],
        [onnx.helper.make_tensor_value_info("output", onnx.TensorProto.FLOAT, [1, 4])])
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 5)]), path)


def calibrated(model, h, w):
    """`model` with BatchNorm statistics measured on random images (a few training-mode passes
    with a cumulative average), so activations keep a realistic scale through the network:
    with the initial statistics (mean 0, variance 1) MobileNet-V2's outputs shrink to ~1e-9,
    which would make any comparison of outputs meaningless."""
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.reset_running_stats()
            m.momentum = None
    model.train()
    with torch.no_grad():
        for _ in range(3):
            model(torch.randn(4, 3, h, w))
    return model.eval()


def legacy_exporter():
    """Newer torch (2.5+) also has an exporter based on torch.export; these models are written
    with the TorchScript-based one that torch 1.13 has, so both give the same graphs."""
    import inspect
    return {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}


def export_unfolded(model, args, path, opset=13, dynamic_axes=None):
    """Exported in eval mode with nothing folded: BatchNormalization and shape ops stay."""
    model.eval()
    with torch.no_grad():
        torch.onnx.export(model, args, path, input_names=["input"], output_names=["output"], opset_version=opset,
                          do_constant_folding=False, training=torch.onnx.TrainingMode.PRESERVE,
                          dynamic_axes=dynamic_axes, **legacy_exporter())


def conv_bn_external(out):
    """conv_bn.onnx saved again with every weight in the external file conv_bn_external.data."""
    model = onnx.load(os.path.join(out, "conv_bn.onnx"))
    onnx.save_model(model, os.path.join(out, "conv_bn_external.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="conv_bn_external.data", size_threshold=0)


def export(model, args, path, input_names, dynamic_axes=None, opset=13):
    model.eval()
    with torch.no_grad():
        torch.onnx.export(model, args, path, input_names=input_names, output_names=["output"],
                          opset_version=opset, do_constant_folding=True, dynamic_axes=dynamic_axes,
                          **legacy_exporter())


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
        "resnet18": lambda: export(calibrated(torchvision.models.resnet18(), h, w), image, os.path.join(a.out, "resnet18.onnx"),
                                   ["input"]),
        "mobilenet_v2": lambda: export(calibrated(torchvision.models.mobilenet_v2(), h, w), image,
                                       os.path.join(a.out, "mobilenet_v2.onnx"), ["input"]),
        "encoder": lambda: export(EncoderBlock(seq=a.seq), torch.randint(0, 1000, (1, a.seq)),
                                  os.path.join(a.out, "encoder.onnx"), ["ids"]),
        "resnet18_dynbatch": lambda: export(calibrated(torchvision.models.resnet18(), h, w), image,
                                            os.path.join(a.out, "resnet18_dynbatch.onnx"), ["input"],
                                            dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}),
        "conv_bn": lambda: export_unfolded(ConvBn(), torch.randn(1, 3, 16, 16), os.path.join(a.out, "conv_bn.onnx")),
        "conv_asym_pad": lambda: conv_asym_pad(os.path.join(a.out, "conv_asym_pad.onnx")),
        "conv3d": lambda: export_unfolded(torch.nn.Conv3d(2, 4, 3), torch.randn(1, 2, 6, 6, 6),
                                          os.path.join(a.out, "conv3d.onnx")),
        "shape_arith": lambda: export_unfolded(ShapeArith(), torch.randn(1, 8, 4, 4),
                                               os.path.join(a.out, "shape_arith.onnx"),
                                               dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}),
        "opset5": lambda: opset5(os.path.join(a.out, "opset5.onnx")),
        "conv_bn_external": lambda: conv_bn_external(a.out),
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
