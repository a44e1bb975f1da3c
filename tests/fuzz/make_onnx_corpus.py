#!/usr/bin/python3
"""Writes the onnx_import fuzz target's generated seed models into tests/fuzz/corpus/onnx_import/.

Small models built with onnx.helper (Debian's python3-onnx: run with /usr/bin/python3), one or
a few per op family the importer infers and the executor runs, plus a small transformer-like
block. conv_bn.onnx, conv_asym_pad.onnx and shape_arith.onnx come from the OnnxModels fixture
(scripts/onnx/make_models.py) and are copied in by hand.

    /usr/bin/python3 tests/fuzz/make_onnx_corpus.py [OUT_DIR]
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus", "onnx_import")
rng = np.random.default_rng(7)
F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def save(name, nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                          [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs], list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="tune-fuzz")
    m.ir_version = 8
    onnx.save(m, os.path.join(OUT, name + ".onnx"))


N = helper.make_node
os.makedirs(OUT, exist_ok=True)

# Elementwise, broadcasting and unary ops.
save("elementwise",
     [N("Add", ["x", "b"], ["a"]), N("Mul", ["a", "s"], ["m"]), N("Sub", ["m", "x"], ["d"]),
      N("Div", ["d", "s"], ["q"]), N("Relu", ["q"], ["r"]), N("Sigmoid", ["r"], ["sg"]), N("Tanh", ["sg"], ["t"]),
      N("Sqrt", ["sg"], ["sq"]), N("Exp", ["t"], ["e"]), N("Neg", ["e"], ["n"]), N("Erf", ["n"], ["er"]),
      N("Pow", ["sq", "two"], ["p"]), N("Sum", ["p", "er", "x"], ["y"])],
     [("x", F, [2, 3, 4])], [("y", F, [2, 3, 4])],
     [init("b", f32(4)), init("s", f32(3, 1)), init("two", np.float32(2))])
save("activations",
     [N("HardSigmoid", ["x"], ["h"], alpha=0.2, beta=0.5), N("HardSwish", ["h"], ["hs"]),
      N("Clip", ["hs", "lo", "hi"], ["c"]), N("LeakyRelu", ["c"], ["l"], alpha=0.1),
      N("Softmax", ["l"], ["y"], axis=-1)],
     [("x", F, [2, 5])], [("y", F, [2, 5])], [init("lo", np.float32(0)), init("hi", np.float32(6))])
save("gelu", [N("Gelu", ["x"], ["y"])], [("x", F, [3, 4])], [("y", F, [3, 4])], opset=18)
save("clip_attr", [N("Clip", ["x"], ["y"], min=0.0, max=6.0)], [("x", F, [1, 8])], [("y", F, [1, 8])], opset=9)
save("where_equal_cast",
     [N("Equal", ["i", "k"], ["eq"]), N("Where", ["eq", "x", "z"], ["w"]), N("Cast", ["i"], ["fi"], to=F),
      N("Add", ["w", "fi"], ["y"]), N("Cast", ["y"], ["yb"], to=B), N("Not", ["yb"], ["nb"])],
     [("x", F, [2, 3]), ("i", I64, [2, 3])], [("y", F, [2, 3]), ("nb", B, [2, 3])],
     [init("k", np.array([1], np.int64)), init("z", f32(1, 3))])

# Linear algebra: tuned (2-D weights, bias Add, Relu) and built-in (broadcast) forms.
save("matmul_bias_relu", [N("MatMul", ["x", "w"], ["m"]), N("Add", ["m", "b"], ["a"]), N("Relu", ["a"], ["y"])],
     [("x", F, [2, 4, 8])], [("y", F, [2, 4, 6])], [init("w", f32(8, 6)), init("b", f32(6))])
save("batch_matmul", [N("MatMul", ["a", "b"], ["y"])], [("a", F, [2, 3, 4]), ("b", F, [2, 4, 5])],
     [("y", F, [2, 3, 5])])
save("matmul_broadcast", [N("MatMul", ["a", "b"], ["y"])], [("a", F, [2, 1, 3, 4]), ("b", F, [3, 4, 2])],
     [("y", F, [2, 3, 3, 2])])
save("matmul_vector", [N("MatMul", ["a", "v"], ["y"])], [("a", F, [3, 4])], [("y", F, [3])], [init("v", f32(4))])
save("gemm", [N("Gemm", ["x", "w", "c"], ["g"], transB=1), N("Clip", ["g", "lo", "hi"], ["y"])],
     [("x", F, [3, 5])], [("y", F, [3, 4])],
     [init("w", f32(4, 5)), init("c", f32(4)), init("lo", np.float32(0)), init("hi", np.float32(6))])
save("gemm_builtin", [N("Gemm", ["x", "w", "c"], ["y"], alpha=0.5, beta=2.0, transA=1)],
     [("x", F, [5, 3])], [("y", F, [3, 4])], [init("w", f32(5, 4)), init("c", f32(3, 4))])

# Convolution and pooling.
save("conv_groups_pool",
     [N("Conv", ["x", "w", "b"], ["c"], group=2, strides=[2, 1], pads=[1, 0, 1, 0], dilations=[1, 2]),
      N("Relu", ["c"], ["r"]), N("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], ceil_mode=1),
      N("AveragePool", ["p"], ["a"], kernel_shape=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1),
      N("GlobalAveragePool", ["a"], ["y"])],
     [("x", F, [1, 4, 9, 9])], [("y", F, [1, 6, 1, 1])], [init("w", f32(6, 2, 3, 3)), init("b", f32(6))])
save("conv_same_depthwise",
     [N("Conv", ["x", "w"], ["c"], group=4, auto_pad="SAME_UPPER", strides=[2, 2]),
      N("Clip", ["c", "lo", "hi"], ["y"])],
     [("x", F, [1, 4, 7, 7])], [("y", F, [1, 4, 4, 4])],
     [init("w", f32(4, 1, 3, 3)), init("lo", np.float32(0)), init("hi", np.float32(6))])
save("conv1d", [N("Conv", ["x", "w"], ["y"], pads=[1, 1])], [("x", F, [1, 2, 8])], [("y", F, [1, 3, 8])],
     [init("w", f32(3, 2, 3))])
save("conv_dynamic_weight", [N("Conv", ["x", "w"], ["y"])], [("x", F, [1, 2, 5, 5]), ("w", F, [3, 2, 3, 3])],
     [("y", F, [1, 3, 3, 3])])
save("batchnorm_alone",
     [N("Relu", ["x"], ["r"]), N("BatchNormalization", ["r", "s", "b", "m", "v"], ["y"], epsilon=1e-3)],
     [("x", F, [1, 3, 4, 4])], [("y", F, [1, 3, 4, 4])],
     [init("s", f32(3)), init("b", f32(3)), init("m", f32(3)), init("v", np.abs(f32(3)) + 0.5)])

# Shape ops and constant folding.
save("reshape_transpose",
     [N("Shape", ["x"], ["sh"]), N("Gather", ["sh", "zero"], ["n"], axis=0),
      N("Unsqueeze", ["n", "ax0"], ["n1"]), N("Concat", ["n1", "minus1"], ["ns"], axis=0),
      N("Reshape", ["x", "ns"], ["r"]), N("Transpose", ["r"], ["t"], perm=[1, 0]),
      N("Flatten", ["t"], ["f"], axis=1), N("Unsqueeze", ["f", "ax0"], ["u"]), N("Squeeze", ["u", "ax0"], ["y"])],
     [("x", F, [2, 3, 4])], [("y", F, [12, 2])],
     [init("zero", np.array(0, np.int64)), init("ax0", np.array([0], np.int64)),
      init("minus1", np.array([-1], np.int64))])
save("slice_split_concat",
     [N("Slice", ["x", "st", "en", "ax", "sp"], ["s"]), N("Split", ["x", "parts"], ["a", "b"], axis=1),
      N("Concat", ["b", "a", "s"], ["y"], axis=1)],
     [("x", F, [2, 6, 3])], [("y", F, [2, 9, 3])],
     [init("st", np.array([5], np.int64)), init("en", np.array([-100], np.int64)), init("ax", np.array([1], np.int64)),
      init("sp", np.array([-2], np.int64)), init("parts", np.array([2, 4], np.int64))])
save("slice_attr_opset9", [N("Slice", ["x"], ["y"], starts=[1, 0], ends=[3, 100], axes=[0, 1])],
     [("x", F, [4, 5])], [("y", F, [2, 5])], opset=9)
save("split_equal_opset11", [N("Split", ["x"], ["a", "b", "c"], axis=-1), N("Add", ["a", "c"], ["y"])],
     [("x", F, [2, 7])], [("y", F, [2, 3])], opset=11)
save("gather_indices",
     [N("Gather", ["emb", "ids"], ["e"], axis=0), N("Gather", ["e", "neg"], ["y"], axis=-1)],
     [("ids", I64, [2, 3])], [("y", F, [2, 3, 2])],
     [init("emb", f32(10, 4)), init("neg", np.array([-1, 0], np.int64))])
save("pad_expand_tile",
     [N("Pad", ["x", "pads"], ["p"], mode="constant"), N("Expand", ["p", "shape"], ["e"]),
      N("Tile", ["e", "reps"], ["y"])],
     [("x", F, [1, 3])], [("y", F, [4, 2, 10])],
     [init("pads", np.array([0, 1, 0, 2], np.int64)), init("shape", np.array([2, 2, 1], np.int64)),
      init("reps", np.array([2, 1, 2], np.int64))])
save("pad_attr_opset10", [N("Pad", ["x"], ["y"], pads=[0, 1, 0, 1])], [("x", F, [2, 2])], [("y", F, [2, 4])],
     opset=10)
save("constant_of_shape_range",
     [N("Constant", [], ["c"], value=helper.make_tensor("v", I64, [3], [2, 3, 1])),
      N("ConstantOfShape", ["c"], ["z"], value=helper.make_tensor("v", F, [1], [1.5])),
      N("Range", ["r0", "r1", "r2"], ["rg"]), N("Cast", ["rg"], ["rf"], to=F),
      N("Add", ["z", "rf"], ["zz"]), N("Add", ["x", "zz"], ["y"]), N("Size", ["x"], ["n"])],
     [("x", F, [2, 3, 1])], [("y", F, [2, 3, 1])],
     [init("r0", np.array(0, np.int64)), init("r1", np.array(1, np.int64)), init("r2", np.array(1, np.int64))])
save("constant_forms",
     [N("Constant", [], ["a"], value_float=2.0), N("Constant", [], ["b"], value_floats=[1.0, 2.0]),
      N("Constant", [], ["c"], value_ints=[2, 1]), N("Reshape", ["b", "c"], ["br"]),
      N("Mul", ["x", "a"], ["m"]), N("Add", ["m", "br"], ["y"])],
     [("x", F, [2, 1])], [("y", F, [2, 1])])
save("reductions",
     [N("ReduceMean", ["x"], ["m"], axes=[1], keepdims=1), N("ReduceSum", ["x", "ax"], ["s"], keepdims=0),
      N("ArgMax", ["x"], ["am"], axis=2), N("ReduceMax", ["x"], ["mx"], axes=[-1]), N("Sub", ["x", "m"], ["y"])],
     [("x", F, [2, 3, 4])], [("y", F, [2, 3, 4]), ("s", F, [2, 4])], [init("ax", np.array([1], np.int64))])
save("reduce_opset18", [N("ReduceMean", ["x", "ax"], ["y"], keepdims=1)], [("x", F, [2, 3])], [("y", F, [2, 1])],
     [init("ax", np.array([-1], np.int64))], opset=18)
save("dropout_identity",
     [N("Dropout", ["x"], ["d", "mask"]), N("Identity", ["d"], ["i"]), N("Cast", ["mask"], ["mf"], to=F),
      N("Mul", ["i", "mf"], ["y"])],
     [("x", F, [2, 2])], [("y", F, [2, 2])])
save("symbolic_batch", [N("Relu", ["x"], ["y"])], [("x", F, ["N", 4])], [("y", F, ["N", 4])])

# A transformer-like block: embeddings, attention with a mask, layer norm, MLP with Gelu.
S, D, H = 4, 8, 2
save("attention_block",
     [N("Gather", ["emb", "ids"], ["e"]),
      N("LayerNormalization", ["e", "g", "beta"], ["ln"], axis=-1, epsilon=1e-5),
      N("MatMul", ["ln", "wq"], ["q0"]), N("Add", ["q0", "bq"], ["q"]),
      N("MatMul", ["ln", "wk"], ["k0"]), N("MatMul", ["ln", "wv"], ["v0"]),
      N("Reshape", ["q", "hs"], ["qh"]), N("Transpose", ["qh"], ["qt"], perm=[0, 2, 1, 3]),
      N("Reshape", ["k0", "hs"], ["kh"]), N("Transpose", ["kh"], ["kt"], perm=[0, 2, 3, 1]),
      N("Reshape", ["v0", "hs"], ["vh"]), N("Transpose", ["vh"], ["vt"], perm=[0, 2, 1, 3]),
      N("MatMul", ["qt", "kt"], ["sc"]), N("Div", ["sc", "sqrtd"], ["scd"]),
      N("Cast", ["mask"], ["mb"], to=B), N("Where", ["mb", "scd", "ninf"], ["masked"]),
      N("Softmax", ["masked"], ["att"], axis=-1), N("MatMul", ["att", "vt"], ["ctx"]),
      N("Transpose", ["ctx"], ["ct"], perm=[0, 2, 1, 3]), N("Reshape", ["ct", "flat"], ["cf"]),
      N("Add", ["cf", "e"], ["res"]), N("MatMul", ["res", "w1"], ["h1"]), N("Gelu", ["h1"], ["h2"]),
      N("MatMul", ["h2", "w2"], ["y"])],
     [("ids", I64, [1, S]), ("mask", I64, [1, 1, 1, S])], [("y", F, [1, S, D])],
     [init("emb", f32(16, D)), init("g", f32(D)), init("beta", f32(D)), init("wq", f32(D, D)), init("bq", f32(D)),
      init("wk", f32(D, D)), init("wv", f32(D, D)), init("hs", np.array([1, S, H, D // H], np.int64)),
      init("sqrtd", np.float32(np.sqrt(D // H))), init("ninf", np.float32(-1e9)),
      init("flat", np.array([1, S, D], np.int64)), init("w1", f32(D, 2 * D)), init("w2", f32(2 * D, D))],
     opset=18)
print("wrote", len([f for f in os.listdir(OUT) if f.endswith(".onnx")]), "models to", OUT)
