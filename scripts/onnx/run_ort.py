#!/usr/bin/env python3
"""Runs an ONNX model with onnxruntime on one float32 input read from a raw file and writes its
first output as raw float32 (test-only: the importer's tests compare tune's kernels with it).

usage: run_ort.py MODEL.onnx INPUT.raw D1xD2x... OUTPUT.raw
"""
import sys

import numpy as np
import onnxruntime


def main():
    model, input_path, shape, output_path = sys.argv[1:5]
    dims = [int(d) for d in shape.split("x")]
    x = np.fromfile(input_path, dtype=np.float32).reshape(dims)
    session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    out = session.run(None, {session.get_inputs()[0].name: x})[0]
    np.ascontiguousarray(out, dtype=np.float32).tofile(output_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
