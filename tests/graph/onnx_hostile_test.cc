// ImportOnnxBytes on hostile models (the defects the onnx_import fuzz target found, and the
// cases of the hostile-input rule it did not reach): each is a one-line InvalidArgument or a
// graph with consistent shapes and constants, never a crash, a wrapped shape or a huge
// allocation.
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "graph/onnx_import.h"
#include "gtest/gtest.h"
#include "tests/graph/onnx_writer.h"

namespace tune::graph {
namespace {

using ::testing::HasSubstr;
namespace ox = tune::test_onnx;
using ox::kFloat;
using ox::kInt64;

constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();

absl::StatusOr<Graph> Import(const std::string& bytes, const ImportOptions& options = {}) {
  return ImportOnnxBytes(bytes, "hostile.onnx", options);
}

// A model the importer must refuse, and what its one-line message says.
struct Refused {
  std::string what;
  std::string bytes;
  std::string message;
  ImportOptions options = {};
};

std::vector<Refused> RefusedModels() {
  const std::string x4 = ox::Value("x", kFloat, {1, 2, 4, 4});
  const std::string y = ox::Value("y", kFloat, {});
  std::vector<Refused> cases = {
      // Shapes whose products wrap int64.
      {"tile by 2^62", ox::Model({ox::Node("Tile", {"x", "r"}, {"y"})}, {ox::Value("x", kFloat, {4})}, {y}, {ox::TensorI64("r", {1}, {int64_t{1} << 62})}),
       "more than 2^40 elements"},
      {"negative tile", ox::Model({ox::Node("Tile", {"x", "r"}, {"y"})}, {ox::Value("x", kFloat, {4})}, {y}, {ox::TensorI64("r", {1}, {-3})}),
       "negative repeats"},
      {"pad by INT64_MAX", ox::Model({ox::Node("Pad", {"x", "p"}, {"y"})}, {ox::Value("x", kFloat, {4})}, {y}, {ox::TensorI64("p", {2}, {kI64Max, kI64Max})}),
       "more than 2^40 elements"},
      {"expand to a negative extent",
       ox::Model({ox::Node("Expand", {"x", "s"}, {"y"})}, {ox::Value("x", kFloat, {1})}, {y}, {ox::TensorI64("s", {2}, {-5, 1})}),
       "do not broadcast"},
      {"reshape of an empty tensor to 2^62 x 2^62",
       ox::Model({ox::Node("Reshape", {"x", "s"}, {"y"})}, {ox::Value("x", kFloat, {1})}, {y},
             {ox::TensorI64("s", {3}, {0, int64_t{1} << 62, int64_t{1} << 62})}),
       "cannot reshape"},
      {"concat past 2^40 elements",
       ox::Model({ox::Node("Concat", {"x", "x"}, {"y"}, {ox::AttrInt("axis", 0)})}, {ox::Value("x", kFloat, {(int64_t{1} << 39) + 1})}, {y}),
       "more than 2^40 elements"},
      {"negative split sizes",
       ox::Model({ox::Node("Split", {"x", "s"}, {"a", "b"}, {ox::AttrInt("axis", 0)})}, {ox::Value("x", kFloat, {4})},
             {ox::Value("a", kFloat, {})}, {ox::TensorI64("s", {2}, {-2, 6})}),
       "negative split size"},
      {"float range of 1e30 elements",
       ox::Model({ox::Node("Range", {"s", "l", "d"}, {"y"})}, {ox::Value("x", kFloat, {1})}, {y},
             {ox::TensorF32("s", {}, {0}), ox::TensorF32("l", {}, {1e30f}), ox::TensorF32("d", {}, {1})}),
       "range too long"},
      {"int64 range across the whole int64 span",
       ox::Model({ox::Node("Range", {"s", "l", "d"}, {"y"})}, {ox::Value("x", kFloat, {1})}, {y},
             {ox::TensorI64("s", {}, {kI64Min}), ox::TensorI64("l", {}, {kI64Max}), ox::TensorI64("d", {}, {1})}),
       "range too long"},
      {"conv with negative pads",
       ox::Model({ox::Node("Conv", {"x", "w"}, {"y"}, {ox::AttrInts("pads", {-3, 0, 0, 0})})}, {x4}, {y},
             {ox::TensorF32("w", {3, 2, 1, 1}, std::vector<float>(6, 1))}),
       "pads must be in [0, 2^40]"},
      {"conv with a group that wraps",
       ox::Model({ox::Node("Conv", {"x", "w"}, {"y"}, {ox::AttrInt("group", int64_t{1} << 62)})}, {x4}, {y},
             {ox::TensorF32("w", {3, 4, 1, 1}, std::vector<float>(12, 1))}),
       "do not match the weight"},
      {"max pool with a kernel of 2^62",
       ox::Model({ox::Node("MaxPool", {"x"}, {"y"}, {ox::AttrInts("kernel_shape", {int64_t{1} << 62, 1})})}, {x4}, {y}),
       "kernel, stride or dilation above 2^40"},
      // An input too large for any machine: 2^93 elements, or past 2^40 after --input.
      {"input of 2^31 x 2^31 x 2^31", ox::Model({ox::Node("Relu", {"x"}, {"y"})}, {ox::Value("x", kFloat, {int64_t{1} << 31, int64_t{1} << 31, int64_t{1} << 31})}, {y}),
       "input 'x': shape 2147483648x2147483648x2147483648 has more than 2^40 elements"},
      {"--input of 2^31 x 2^31", ox::Model({ox::Node("Relu", {"x"}, {"y"})}, {ox::Value("x", kFloat, {2, 2})}, {y}),
       "more than 2^40 elements", ImportOptions{{{"x", {int64_t{1} << 31, int64_t{1} << 31}}}}},
      // Names and structure.
      {"a node writing one name twice",
       ox::Model({ox::Node("Split", {"x"}, {"a", "a"}, {ox::AttrInt("axis", 0)})}, {ox::Value("x", kFloat, {4})}, {ox::Value("a", kFloat, {})}),
       "writes tensor 'a' that is already defined"},
      {"an input listed twice", ox::Model({ox::Node("Relu", {"x"}, {"y"})}, {ox::Value("x", kFloat, {2}), ox::Value("x", kFloat, {2})}, {y}),
       "input 'x' is listed twice"},
      {"Dropout without an input", ox::Model({ox::Node("Dropout", {}, {"y", "m"})}, {ox::Value("x", kFloat, {2})}, {y}),
       "missing input"},
      {"a Dropout mask over 2^30 elements",
       ox::Model({ox::Node("Dropout", {"x"}, {"d", "m"}), ox::Node("Cast", {"m"}, {"y"}, {ox::AttrInt("to", kFloat)})},
             {ox::Value("x", kFloat, {int64_t{1} << 30})}, {y}),
       "tune folds masks of at most 2^22 elements"},
      {"Constant value_floats declared as an int",
       ox::Model({ox::Node("Constant", {}, {"c"}, {ox::AttrIntOfType("value_floats", 3, 2)}), ox::Node("Add", {"x", "c"}, {"y"})},
             {ox::Value("x", kFloat, {2})}, {y}),
       "has no value tune reads"},
  };
  return cases;
}

TEST(OnnxHostileTest, MalformedModelsAreOneLineErrors) {
  for (const Refused& c : RefusedModels()) {
    auto graph = Import(c.bytes, c.options);
    ASSERT_FALSE(graph.ok()) << c.what << ": imported";
    EXPECT_EQ(graph.status().code(), absl::StatusCode::kInvalidArgument) << c.what;
    EXPECT_THAT(graph.status().message(), HasSubstr(c.message)) << c.what;
    EXPECT_EQ(std::string(graph.status().message()).find('\n'), std::string::npos) << c.what;
  }
}

// Names from the file are escaped: a name with a newline or an escape sequence still gives
// one line without terminal control characters.
TEST(OnnxHostileTest, NamesWithControlCharactersStayOnOneLine) {
  auto graph = Import(ox::Model({ox::Node("Relu", {"x"}, {"y"})}, {ox::Value("x", kFloat, {2})},
                            {ox::Value("out\nput\x1b[2J", kFloat, {2})}));
  ASSERT_FALSE(graph.ok());
  const std::string message(graph.status().message());
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_EQ(message.find('\x1b'), std::string::npos) << message;
  EXPECT_THAT(message, HasSubstr("out\\nput\\x1b[2J"));
}

// A slice with a step of INT64_MIN (its negation overflows) takes one element.
TEST(OnnxHostileTest, SliceWithTheMostNegativeStep) {
  auto graph = Import(ox::Model({ox::Node("Slice", {"x", "s", "e", "a", "st"}, {"y"})}, {ox::Value("x", kFloat, {5})},
                            {ox::Value("y", kFloat, {})},
                            {ox::TensorI64("s", {1}, {4}), ox::TensorI64("e", {1}, {-100}), ox::TensorI64("a", {1}, {0}),
                             ox::TensorI64("st", {1}, {kI64Min})}));
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(graph->Find("y")->shape, (std::vector<int64_t>{1}));
  // A huge positive step from the start also takes one.
  graph = Import(ox::Model({ox::Node("Slice", {"x", "s", "e", "a", "st"}, {"y"})}, {ox::Value("x", kFloat, {5})},
                       {ox::Value("y", kFloat, {})},
                       {ox::TensorI64("s", {1}, {0}), ox::TensorI64("e", {1}, {kI64Max}), ox::TensorI64("a", {1}, {0}),
                        ox::TensorI64("st", {1}, {kI64Max})}));
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(graph->Find("y")->shape, (std::vector<int64_t>{1}));
}

// Folding an int64 with a float input keeps the int64 type with int64-sized data (it was
// written as one byte per element), and int64 arithmetic saturates rather than wrapping.
TEST(OnnxHostileTest, FoldedMixedAndExtremeIntArithmetic) {
  auto graph = Import(ox::Model({ox::Node("Add", {"a", "b"}, {"c"}), ox::Node("Mul", {"m", "m"}, {"p"}),
                             ox::Node("Div", {"n", "neg"}, {"q"}), ox::Node("Add", {"x", "x"}, {"y"})},
                            {ox::Value("x", kFloat, {2})}, {ox::Value("y", kFloat, {}), ox::Value("c", kInt64, {}),
                                                        ox::Value("p", kInt64, {}), ox::Value("q", kInt64, {})},
                            {ox::TensorI64("a", {2}, {1, 2}), ox::TensorF32("b", {2}, {0.5f, 2.0f}),
                             ox::TensorI64("m", {1}, {int64_t{1} << 40}), ox::TensorI64("n", {1}, {kI64Min}),
                             ox::TensorI64("neg", {1}, {-1})}));
  ASSERT_TRUE(graph.ok()) << graph.status();
  const Tensor* c = graph->Find("c");
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->constant());
  EXPECT_EQ(c->dtype, DType::kInt64);
  ASSERT_EQ(c->data->size(), 16u);
  EXPECT_EQ(c->i64()[0], 1);
  EXPECT_EQ(c->i64()[1], 4);
  const Tensor* p = graph->Find("p");
  ASSERT_TRUE(p && p->constant());
  EXPECT_EQ(p->i64()[0], kI64Max);
  // INT64_MIN / -1 is left to run time (the fold would trap).
  const Tensor* q = graph->Find("q");
  ASSERT_NE(q, nullptr);
  EXPECT_FALSE(q->constant());
}

// A conv whose data input is a constant with asymmetric pads: the Pad node's output is
// computed at run time; it was a "constant" holding the unpadded data (the wrong size), so
// the plan skipped the Pad.
TEST(OnnxHostileTest, AsymmetricPadOfAConstantInputIsNotAConstant) {
  std::vector<float> w(4 * 3 * 3 * 3, 0.5f);
  auto graph = Import(ox::Model({ox::Node("Conv", {"w", "w", "b"}, {"y"}, {ox::AttrInts("pads", {0, 1, 2, 1})}, "conv")},
                            {ox::Value("x", kFloat, {1})}, {ox::Value("y", kFloat, {})},
                            {ox::TensorF32("w", {4, 3, 3, 3}, w), ox::TensorF32("b", {4}, {1, 2, 3, 4})}));
  ASSERT_TRUE(graph.ok()) << graph.status();
  const Tensor* padded = graph->Find("conv/padded");
  ASSERT_NE(padded, nullptr);
  EXPECT_FALSE(padded->constant());
  EXPECT_EQ(padded->shape, (std::vector<int64_t>{4, 3, 5, 3}));
  for (const auto& [name, t] : graph->tensors) {
    if (t.constant()) {
      EXPECT_EQ(static_cast<int64_t>(t.data->size()), t.NumElements() * DTypeSize(t.dtype)) << name;
    }
  }
}

// An int64 Range from INT64_MIN to INT64_MAX by INT64_MAX: three values, computed without
// overflow (start + 2 * delta passes the int64 range on the way).
TEST(OnnxHostileTest, RangeOverTheWholeInt64Span) {
  auto graph = Import(ox::Model({ox::Node("Range", {"s", "l", "d"}, {"r"}), ox::Node("Relu", {"x"}, {"y"})},
                                {ox::Value("x", kFloat, {1})}, {ox::Value("y", kFloat, {}), ox::Value("r", kInt64, {})},
                                {ox::TensorI64("s", {}, {kI64Min}), ox::TensorI64("l", {}, {kI64Max}),
                                 ox::TensorI64("d", {}, {kI64Max})}));
  ASSERT_TRUE(graph.ok()) << graph.status();
  const Tensor* r = graph->Find("r");
  ASSERT_TRUE(r && r->constant());
  ASSERT_EQ(r->NumElements(), 3);
  EXPECT_EQ(r->i64()[0], kI64Min);
  EXPECT_EQ(r->i64()[1], -1);
  EXPECT_EQ(r->i64()[2], kI64Max - 1);
}

// Element counts saturate instead of wrapping.
TEST(OnnxHostileTest, NumElementsSaturates) {
  Tensor t{"t", DType::kFloat32, {int64_t{1} << 40, int64_t{1} << 40}, std::nullopt};
  EXPECT_EQ(t.NumElements(), kI64Max);
  t.shape = {int64_t{1} << 62, 0};
  EXPECT_EQ(t.NumElements(), 0);
  t.shape = {3, 5};
  EXPECT_EQ(t.NumElements(), 15);
}

// A graph input of 1e12 floats is within the importer's 2^40-element bound (the plan refuses
// it for this machine's memory: tests/executor/hostile_plan_test.cc); 2e12 is not.
TEST(OnnxHostileTest, TeraElementInputs) {
  const int64_t tera = 1000000000000;
  auto graph = Import(ox::Model({ox::Node("Relu", {"x"}, {"y"})}, {ox::Value("x", kFloat, {tera})}, {ox::Value("y", kFloat, {})}));
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(graph->Find("y")->NumElements(), tera);
  graph = Import(ox::Model({ox::Node("Relu", {"x"}, {"y"})}, {ox::Value("x", kFloat, {2 * tera})}, {ox::Value("y", kFloat, {})}));
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(graph.status().message(), HasSubstr("more than 2^40 elements"));
}

}  // namespace
}  // namespace tune::graph
