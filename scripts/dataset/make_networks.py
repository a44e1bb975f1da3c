#!/usr/bin/python3
"""Writes data/networks/<name>.json: the tuning tasks of the dataset's networks, for
`tune dataset collect --models data/networks/*.json`.

Each network is built with random weights (weights=None, seed 0), exported to ONNX in a
temporary directory (static shapes, batch 1, 224x224 images unless noted, opset 13, constants
folded) and imported by `tune tasks X.onnx --json`; the JSON is written with "name" set to the
network's name. Needs Debian's python3-torch, python3-torchvision and python3-onnx.

The BERT models are one encoder layer written op by op (EncoderBlock of
scripts/onnx/make_models.py: Q/K/V/output projections, scaled softmax(Q K^T) V per head, GELU
feed-forward, LayerNorms) at sequence length 128; the layers of a BERT repeat, so every task's
count is multiplied by the number of layers L. The embedding table (a Gather, not tuned) has
1000 rows instead of BERT's 30522: it changes no task.

usage: make_networks.py [--tune build/bin/tune] [--out data/networks] [--only NAME,...] [--list]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "onnx"))
from make_models import EncoderBlock, legacy_exporter  # noqa: E402

tv = torchvision.models

# name -> (constructor, input height/width); every constructor gets weights=None.
IMAGE_NETWORKS = {
    "resnet-18": (lambda: tv.resnet18(weights=None), 224),
    "resnet-34": (lambda: tv.resnet34(weights=None), 224),
    "resnet-50": (lambda: tv.resnet50(weights=None), 224),
    "resnet-101": (lambda: tv.resnet101(weights=None), 224),
    "resnext-50": (lambda: tv.resnext50_32x4d(weights=None), 224),
    "wide-resnet-50": (lambda: tv.wide_resnet50_2(weights=None), 224),
    "mobilenet-v2": (lambda: tv.mobilenet_v2(weights=None), 224),
    "mobilenet-v3-small": (lambda: tv.mobilenet_v3_small(weights=None), 224),
    "mobilenet-v3-large": (lambda: tv.mobilenet_v3_large(weights=None), 224),
    "mnasnet-1.0": (lambda: tv.mnasnet1_0(weights=None), 224),
    "shufflenet-v2": (lambda: tv.shufflenet_v2_x1_0(weights=None), 224),
    "efficientnet-b0": (lambda: tv.efficientnet_b0(weights=None), 224),
    "regnet-y-400mf": (lambda: tv.regnet_y_400mf(weights=None), 224),
    "densenet-121": (lambda: tv.densenet121(weights=None), 224),
    "vgg-16": (lambda: tv.vgg16(weights=None), 224),
    "googlenet": (lambda: tv.googlenet(weights=None, aux_logits=False, init_weights=True), 224),
    "inception-v3": (lambda: tv.inception_v3(weights=None, aux_logits=False, init_weights=True), 299),
    "convnext-tiny": (lambda: tv.convnext_tiny(weights=None), 224),
    "vit-b16": (lambda: tv.vit_b_16(weights=None), 224),
    "squeezenet-1.1": (lambda: tv.squeezenet1_1(weights=None), 224),
    "alexnet": (lambda: tv.alexnet(weights=None), 224),
}

# name -> (layers L, hidden H, heads A, feed-forward size)
BERT_NETWORKS = {
    "bert-tiny": (2, 128, 2, 512),
    "bert-base": (12, 768, 12, 3072),
    "bert-large": (24, 1024, 16, 4096),
}
BERT_SEQ = 128


def export(model, example, path, input_name):
    """Eval mode with gradients enabled: under no_grad, torch 1.13's nn.MultiheadAttention (ViT)
    takes its fused fast path, aten::_native_multi_head_attention, which has no ONNX export; with
    gradients on it runs as plain matmuls and softmax."""
    model.eval()
    torch.onnx.export(model, example, path, input_names=[input_name], output_names=["output"], opset_version=13,
                      do_constant_folding=True, **legacy_exporter())


def make_onnx(name, path):
    """Exports network `name` to `path`; returns how many times its tasks repeat (BERT's L)."""
    torch.manual_seed(0)
    if name in BERT_NETWORKS:
        layers, hidden, heads, ffn = BERT_NETWORKS[name]
        model = EncoderBlock(vocab=1000, seq=BERT_SEQ, hidden=hidden, heads=heads, ffn=ffn)
        export(model, torch.randint(0, 1000, (1, BERT_SEQ)), path, "ids")
        return layers
    make, size = IMAGE_NETWORKS[name]
    export(make(), torch.randn(1, 3, size, size), path, "input")
    return 1


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    p.add_argument("--tune", default=os.path.join(root, "build", "bin", "tune"), help="the tune executable")
    p.add_argument("--out", default=os.path.join(root, "data", "networks"))
    p.add_argument("--only", default="", help="comma-separated network names")
    p.add_argument("--list", action="store_true", help="print the network names and exit")
    a = p.parse_args()
    names = list(IMAGE_NETWORKS) + list(BERT_NETWORKS)
    if a.list:
        print("\n".join(names))
        return 0
    only = [n for n in a.only.split(",") if n]
    unknown = [n for n in only if n not in names]
    if unknown:
        print(f"make_networks: unknown network {', '.join(unknown)} (see --list)", file=sys.stderr)
        return 2
    if not os.access(a.tune, os.X_OK):
        print(f"make_networks: no tune executable at {a.tune} (pass --tune)", file=sys.stderr)
        return 2
    os.makedirs(a.out, exist_ok=True)
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in only or names:
            onnx_path = os.path.join(tmp, name + ".onnx")
            try:
                repeat = make_onnx(name, onnx_path)
            except Exception as e:  # an export failure drops the network, with the reason
                print(f"make_networks: {name}: ONNX export failed: {e}", file=sys.stderr)
                failed.append(name)
                continue
            r = subprocess.run([a.tune, "tasks", onnx_path, "--json"], capture_output=True, text=True)
            if r.returncode != 0:
                print(f"make_networks: {name}: tune tasks failed: {r.stderr.strip()}", file=sys.stderr)
                failed.append(name)
                continue
            model = json.loads(r.stdout)
            model["name"] = name
            for layer in model["layers"]:
                layer["count"] = layer.get("count", 1) * repeat
            out_path = os.path.join(a.out, name + ".json")
            with open(out_path + ".tmp", "w") as f:
                json.dump(model, f, indent=1)
                f.write("\n")
            os.replace(out_path + ".tmp", out_path)
            summary = r.stderr.strip().replace(onnx_path, name + ".onnx")
            print(f"{name}: {len(model['layers'])} tasks, {sum(l['count'] for l in model['layers'])} layers"
                  f"{' (x' + str(repeat) + ' encoder layers)' if repeat > 1 else ''}; {summary}")
    if failed:
        print(f"make_networks: failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
