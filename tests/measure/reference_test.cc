// Tests of the naive reference kernels, AllClose and TaskData::Create.
#include "measure/reference.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "measure/kernel_task.h"
#include "measure/runner.h"
#include "tests/common/test_seed.h"

namespace tune::measure {
namespace {

using codegen::OpKind;
using codegen::Workload;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

Workload Parse(OpKind op, const std::string& shape, bool bias = false, bool relu = false) {
  absl::StatusOr<Workload> w = Workload::Parse(op, shape);
  EXPECT_TRUE(w.ok()) << w.status();
  Workload result = w.ok() ? *w : Workload();
  result.bias = bias;
  result.relu = relu;
  return result;
}

std::vector<float> Reference(const Workload& w, const std::vector<std::vector<float>>& inputs) {
  std::vector<float> out;
  ComputeReference(w, inputs, &out);
  return out;
}

TEST(ReferenceTest, MatmulKnownValues) {
  // [1 2 3; 4 5 6] * [7 8; 9 10; 11 12] = [58 64; 139 154].
  Workload w = Parse(OpKind::kMatmul, "2,2,3");
  EXPECT_THAT(Reference(w, {{1, 2, 3, 4, 5, 6}, {7, 8, 9, 10, 11, 12}}),
              ElementsAre(58, 64, 139, 154));
}

TEST(ReferenceTest, DenseUsesTransposedWeight) {
  // data [1 2 3; 4 5 6], weight rows are the output columns: [7 9 11], [8 10 12].
  Workload w = Parse(OpKind::kDense, "2,2,3");
  EXPECT_THAT(Reference(w, {{1, 2, 3, 4, 5, 6}, {7, 9, 11, 8, 10, 12}}),
              ElementsAre(58, 64, 139, 154));
}

TEST(ReferenceTest, BiasAndRelu) {
  // [1 -2] * [1 0; 0 1] = [1 -2]; + bias [0.5 1] = [1.5 -1]; relu -> [1.5 0].
  const std::vector<std::vector<float>> with_bias = {{1, -2}, {1, 0, 0, 1}, {0.5f, 1}};
  EXPECT_THAT(Reference(Parse(OpKind::kMatmul, "1,2,2"), {{1, -2}, {1, 0, 0, 1}}),
              ElementsAre(1, -2));
  EXPECT_THAT(Reference(Parse(OpKind::kMatmul, "1,2,2", true), with_bias), ElementsAre(1.5f, -1));
  EXPECT_THAT(Reference(Parse(OpKind::kMatmul, "1,2,2", true, true), with_bias),
              ElementsAre(1.5f, 0));
  EXPECT_THAT(Reference(Parse(OpKind::kMatmul, "1,2,2", false, true), {{1, -2}, {1, 0, 0, 1}}),
              ElementsAre(1, 0));
  // relu6 clips to [0, 6]: [7 -2] -> [6 0].
  Workload relu6 = Parse(OpKind::kMatmul, "1,2,2");
  relu6.relu6 = true;
  EXPECT_THAT(Reference(relu6, {{7, -2}, {1, 0, 0, 1}}), ElementsAre(6, 0));
  // Bias is per column in every batch of a batch_matmul.
  EXPECT_THAT(
      Reference(Parse(OpKind::kBatchMatmul, "2,1,2,1", true), {{1, 2}, {1, -1, 3, 4}, {10, 20}}),
      ElementsAre(11, 19, 16, 28));
}

TEST(ReferenceTest, BatchMatmulIsPerBatchMatmul) {
  // Batch 0: [1 2] * [1; 1] = 3; batch 1: [3 4] * [2; -1] = 2.
  Workload w = Parse(OpKind::kBatchMatmul, "2,1,1,2");
  EXPECT_THAT(Reference(w, {{1, 2, 3, 4}, {1, 1, 2, -1}}), ElementsAre(3, 2));
}

TEST(ReferenceTest, ConvKnownValues) {
  // 1x1x3x3 input 1..9, one 2x2 kernel [1 0; 0 -1] (x[i,j] - x[i+1,j+1]) -> all -4.
  Workload w = Parse(OpKind::kConv2d, "1,1,3,3,1,2,2");
  const std::vector<float> input = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  EXPECT_THAT(Reference(w, {input, {1, 0, 0, -1}}), ElementsAre(-4, -4, -4, -4));
  // Kernel [1 2; 3 4]: top-left window 1*1 + 2*2 + 3*4 + 4*5 = 37, then 47, 67, 77.
  EXPECT_THAT(Reference(w, {input, {1, 2, 3, 4}}), ElementsAre(37, 47, 67, 77));
}

TEST(ReferenceTest, ConvPaddingStrideDilation) {
  const std::vector<float> input = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  // Pad 1 with a 2x2 all-ones kernel: 4x4 output of window sums over the zero-padded input.
  Workload pad = Parse(OpKind::kConv2d, "1,1,3,3,1,2,2,1,1");
  EXPECT_THAT(Reference(pad, {input, {1, 1, 1, 1}}), ElementsAre(1, 3, 5, 3,      //
                                                                 5, 12, 16, 9,    //
                                                                 11, 24, 28, 15,  //
                                                                 7, 15, 17, 9));
  // Stride 2 with pad 1 keeps the outputs at even padded positions.
  Workload stride = Parse(OpKind::kConv2d, "1,1,3,3,1,2,2,2,1");
  EXPECT_THAT(Reference(stride, {input, {1, 1, 1, 1}}), ElementsAre(1, 5, 11, 28));
  // Dilation 2: a 2x2 kernel over the corners of the 3x3 input: 1 + 3 + 7 + 9.
  Workload dilation = Parse(OpKind::kConv2d, "1,1,3,3,1,2,2,1,0,2");
  EXPECT_THAT(Reference(dilation, {input, {1, 1, 1, 1}}), ElementsAre(20));
}

TEST(ReferenceTest, ConvChannelsBiasRelu) {
  // Two input channels, two 1x1 filters: out0 = c0 + c1, out1 = c0 - c1; bias [0, -1]; relu.
  Workload w = Parse(OpKind::kConv2d, "1,2,1,2,2,1,1", true, true);
  const std::vector<float> input = {1, 2,    // channel 0
                                    3, -5};  // channel 1
  EXPECT_THAT(Reference(w, {input, {1, 1, 1, -1}, {0, -1}}),
              ElementsAre(4, 0,    // c0 + c1 = [4, -3] -> relu
                          0, 6));  // c0 - c1 - 1 = [-3, 6] -> relu
}

// A grouped conv equals, per group, a dense conv over that group's channels.
TEST(ReferenceTest, GroupedConvEqualsPerGroupDenseConv) {
  for (const std::string shape : {"2,6,7,7,4,3,3,2,1,1,2", "1,8,6,6,8,3,3,1,1,2,8"}) {
    SCOPED_TRACE(shape);
    Workload grouped = Parse(OpKind::kConv2d, shape, /*bias=*/true, /*relu=*/true);
    TaskData task = TaskData::Create(grouped, 7);
    const int64_t g = grouped.groups, cg = grouped.in_c / g, ocg = grouped.out_c / g;
    const int64_t hw = grouped.in_h * grouped.in_w, ohw = grouped.out_h() * grouped.out_w();
    const int64_t khw = grouped.kernel_h * grouped.kernel_w;

    Workload dense = grouped;
    dense.in_c = cg;
    dense.out_c = ocg;
    dense.groups = 1;
    ASSERT_TRUE(dense.Validate().ok());
    for (int64_t group = 0; group < g; ++group) {
      std::vector<float> data, weight, bias;
      for (int64_t b = 0; b < grouped.batch; ++b) {
        const float* base = task.inputs[0].data() + (b * grouped.in_c + group * cg) * hw;
        data.insert(data.end(), base, base + cg * hw);
      }
      const float* wbase = task.inputs[1].data() + group * ocg * cg * khw;
      weight.assign(wbase, wbase + ocg * cg * khw);
      bias.assign(task.inputs[2].begin() + group * ocg, task.inputs[2].begin() + (group + 1) * ocg);
      const std::vector<float> part = Reference(dense, {data, weight, bias});
      for (int64_t b = 0; b < grouped.batch; ++b) {
        for (int64_t i = 0; i < ocg * ohw; ++i) {
          EXPECT_EQ(part[b * ocg * ohw + i],
                    task.reference[(b * grouped.out_c + group * ocg) * ohw + i])
              << "group " << group << " batch " << b << " index " << i;
        }
      }
    }
  }
}

// An NCHWc convolution's reference is the NCHW one's output blocked, from the input unblocked:
// channel ch of a plane at [ch / c][...][ch % c].
TEST(ReferenceTest, NchwcConvIsTheBlockedNchwConv) {
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  absl::StatusOr<codegen::Workload> blocked = codegen::Workload::Parse(OpKind::kConv2d, "2,16,9,7,24,3,3,2,1,nchw8c");
  ASSERT_TRUE(blocked.ok()) << blocked.status();
  blocked->bias = blocked->relu = true;
  codegen::Workload plain = *blocked;
  plain.layout_block = 0;
  std::vector<std::vector<float>> in_plain;
  for (const codegen::TensorSpec& spec : plain.Inputs()) {
    in_plain.emplace_back(spec.NumElements());
    for (float& v : in_plain.back()) v = dist(rng);
  }
  const int64_t c = 8, in_plane = 9 * 7, out_plane = plain.out_h() * plain.out_w();
  std::vector<std::vector<float>> in_blocked = in_plain;
  for (int64_t n = 0; n < 2; ++n) {
    for (int64_t ch = 0; ch < 16; ++ch) {
      for (int64_t i = 0; i < in_plane; ++i) {
        in_blocked[0][((n * 2 + ch / c) * in_plane + i) * c + ch % c] = in_plain[0][(n * 16 + ch) * in_plane + i];
      }
    }
  }
  std::vector<float> want, got;
  ComputeReference(plain, in_plain, &want);
  ComputeReference(*blocked, in_blocked, &got);
  ASSERT_EQ(got.size(), want.size());
  int wrong = 0;
  for (int64_t n = 0; n < 2; ++n) {
    for (int64_t ch = 0; ch < 24; ++ch) {
      for (int64_t i = 0; i < out_plane; ++i) {
        wrong += got[((n * 3 + ch / c) * out_plane + i) * c + ch % c] != want[(n * 24 + ch) * out_plane + i];
      }
    }
  }
  EXPECT_EQ(wrong, 0);
}

TEST(ReferenceTest, DepthwiseIsPerChannel) {
  // Two channels, 2x2 input, 1x1 depthwise weights [2, -3]: each channel scaled alone.
  Workload w = Parse(OpKind::kConv2d, "1,2,2,2,2,1,1,1,0,1,2");
  ASSERT_TRUE(w.depthwise());
  EXPECT_THAT(Reference(w, {{1, 2, 3, 4, 5, 6, 7, 8}, {2, -3}}),
              ElementsAre(2, 4, 6, 8, -15, -18, -21, -24));
}

TEST(ReferenceTest, AccumulatesInDouble) {
  // 1e8 + 1 - 1e8 is 0 in float accumulation and 1 in double.
  Workload w = Parse(OpKind::kMatmul, "1,1,3");
  EXPECT_THAT(Reference(w, {{1e8f, 1, -1e8f}, {1, 1, 1}}), ElementsAre(1));
}

TEST(ReferenceTest, LargeMatmulFinishesQuickly) {
  Workload w = Parse(OpKind::kMatmul, "1024,1024,1024");
  std::vector<std::vector<float>> inputs = {std::vector<float>(1024 * 1024, 0.5f),
                                            std::vector<float>(1024 * 1024, 0.25f)};
  const auto start = std::chrono::steady_clock::now();
  std::vector<float> out;
  ComputeReference(w, inputs, &out);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(out.size(), 1024u * 1024u);
  EXPECT_EQ(out.front(), 128.0f);
  EXPECT_EQ(out.back(), 128.0f);
  // Generous bound (sanitizer or debug builds, loaded machines); it takes well under 1 s.
  EXPECT_LT(seconds, 30.0);
}

// A stop function that says "stop" the `stop_at`-th time it is asked and counts the asks.
struct CountingStop {
  int stop_at = 0;
  int asked = 0;
  StopFn Fn() {
    return [this] { return ++asked >= stop_at; };
  }
};

// Each operator's reference gives up at the first ask that says stop, long before its end, and
// leaves no output; never stopping gives the plain reference's result.
TEST(ReferenceStopTest, GivesUpWhenAskedAndOtherwiseMatches) {
  std::mt19937_64 rng(test::kTestSeed);
  auto extent = [&](int64_t lo, int64_t hi) { return std::to_string(lo + static_cast<int64_t>(rng() % (hi - lo + 1))); };
  struct Case {
    OpKind op;
    std::string shape;
  };
  // Shapes of billions of multiply-adds: minutes of work if the stop were not honoured.
  const std::vector<Case> big = {
      {OpKind::kMatmul, "2048,2048," + extent(2048, 4096)},
      {OpKind::kDense, "2048,2048," + extent(2048, 4096)},
      {OpKind::kBatchMatmul, "4,1024,1024," + extent(1024, 2048)},
      {OpKind::kConv2d, "1,256," + extent(56, 80) + ",56,256,3,3,1,1"},
  };
  for (const Case& c : big) {
    Workload w = Parse(c.op, c.shape);
    TaskData data = TaskData::Create(w, test::kTestSeed, /*with_reference=*/false);
    CountingStop stop{.stop_at = 3};
    std::vector<float> out = {1.0f};
    EXPECT_FALSE(ComputeReference(w, data.inputs, &out, stop.Fn())) << c.shape;
    EXPECT_EQ(stop.asked, 3) << c.shape;
    EXPECT_TRUE(out.empty()) << c.shape;
  }
  const std::vector<Case> small = {
      {OpKind::kMatmul, extent(1, 40) + "," + extent(1, 40) + "," + extent(1, 40)},
      {OpKind::kDense, extent(1, 40) + "," + extent(1, 40) + "," + extent(1, 40)},
      {OpKind::kBatchMatmul, extent(1, 4) + "," + extent(1, 30) + "," + extent(1, 30) + "," + extent(1, 30)},
      {OpKind::kConv2d, "1," + extent(1, 8) + "," + extent(3, 12) + "," + extent(3, 12) + "," + extent(1, 8) + ",3,3,1,1"},
  };
  for (const Case& c : small) {
    Workload w = Parse(c.op, c.shape, /*bias=*/true, /*relu=*/true);
    TaskData data = TaskData::Create(w, test::kTestSeed, /*with_reference=*/true);
    CountingStop never{.stop_at = std::numeric_limits<int>::max()};
    std::vector<float> out;
    EXPECT_TRUE(ComputeReference(w, data.inputs, &out, never.Fn())) << c.shape;
    EXPECT_EQ(out, data.reference) << c.shape;
  }
}

// Drawing a task's inputs gives up as well: a big workload's data is never finished.
TEST(ReferenceStopTest, TaskDataGivesUpWhenAsked) {
  Workload w = Parse(OpKind::kMatmul, "4096,4096,4096");
  CountingStop stop{.stop_at = 2};
  EXPECT_FALSE(CreateTaskData(w, test::kTestSeed, /*with_reference=*/true, stop.Fn()).has_value());
  EXPECT_EQ(stop.asked, 2);
  Workload small = Parse(OpKind::kMatmul, "7,5,3");
  std::optional<TaskData> data = CreateTaskData(small, test::kTestSeed, /*with_reference=*/true, nullptr);
  ASSERT_TRUE(data.has_value());
  TaskData plain = TaskData::Create(small, test::kTestSeed);
  EXPECT_EQ(data->inputs, plain.inputs);
  EXPECT_EQ(data->reference, plain.reference);
}

TEST(AllCloseTest, AcceptsWithinTolerance) {
  const std::vector<float> want = {1.0f, -2.0f, 0.0f, 1000.0f};
  const std::vector<float> got = {1.0005f, -2.001f, 5e-5f, 1000.5f};
  std::string why = "untouched";
  EXPECT_TRUE(AllClose(got.data(), want.data(), 4, 1e-3, 1e-4, &why));
  EXPECT_EQ(why, "untouched");
  EXPECT_TRUE(AllClose(got.data(), want.data(), 0, 0, 0, nullptr));
}

TEST(AllCloseTest, ReportsFirstMismatch) {
  const std::vector<float> want = {1.0f, 2.0f, 3.0f, 4.0f};
  const std::vector<float> got = {1.0f, 2.5f, 3.0f, 5.0f};
  std::string why;
  EXPECT_FALSE(AllClose(got.data(), want.data(), 4, 1e-3, 1e-4, &why));
  EXPECT_THAT(why, HasSubstr("index 1"));
  EXPECT_THAT(why, HasSubstr("got 2.5"));
  EXPECT_THAT(why, HasSubstr("want 2"));
  EXPECT_THAT(why, HasSubstr("2 of 4"));
  EXPECT_FALSE(AllClose(got.data(), want.data(), 4, 1e-3, 1e-4, nullptr));
}

TEST(AllCloseTest, NaNAndInfinity) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> want = {1.0f, 2.0f};
  std::string why;
  const std::vector<float> got_nan = {1.0f, nan};
  EXPECT_FALSE(AllClose(got_nan.data(), want.data(), 2, 1, 1, &why));
  EXPECT_THAT(why, HasSubstr("index 1"));
  EXPECT_THAT(why, HasSubstr("nan"));
  const std::vector<float> both_nan = {nan, nan};
  EXPECT_FALSE(AllClose(both_nan.data(), both_nan.data(), 2, 1, 1, nullptr));
  const std::vector<float> got_inf = {inf, 2.0f};
  EXPECT_FALSE(AllClose(got_inf.data(), want.data(), 2, 1e-3, 1e-4, &why));
  EXPECT_THAT(why, HasSubstr("index 0"));
  EXPECT_THAT(why, HasSubstr("inf"));
  EXPECT_TRUE(AllClose(got_inf.data(), got_inf.data(), 2, 0, 0, nullptr));
}

TEST(TaskDataTest, DeterministicNonZeroInputsInRange) {
  Workload w = Parse(OpKind::kConv2d, "1,4,9,9,8,3,3,2,1", true, true);
  TaskData a = TaskData::Create(w, 42);
  TaskData b = TaskData::Create(w, 42);
  TaskData c = TaskData::Create(w, 43);
  ASSERT_EQ(a.inputs.size(), 3u);
  const std::vector<codegen::TensorSpec> specs = w.Inputs();
  for (size_t i = 0; i < specs.size(); ++i) {
    ASSERT_EQ(static_cast<int64_t>(a.inputs[i].size()), specs[i].NumElements());
    for (float v : a.inputs[i]) {
      EXPECT_GE(v, -1.0f);
      EXPECT_LT(v, 1.0f);
      EXPECT_NE(v, 0.0f);
    }
  }
  EXPECT_EQ(a.inputs, b.inputs);
  EXPECT_EQ(a.reference, b.reference);
  EXPECT_NE(a.inputs[0], c.inputs[0]);
  EXPECT_EQ(a.workload.Key(), w.Key());

  std::vector<float> expected;
  ComputeReference(w, a.inputs, &expected);
  EXPECT_EQ(a.reference, expected);
  EXPECT_EQ(static_cast<int64_t>(a.reference.size()), w.Output().NumElements());
  // relu: some outputs clipped to zero, some positive.
  int zeros = 0;
  for (float v : a.reference) zeros += v == 0.0f;
  EXPECT_GT(zeros, 0);
  EXPECT_LT(zeros, static_cast<int>(a.reference.size()));
}

TEST(TaskDataTest, InputsSpanTheRange) {
  TaskData t = TaskData::Create(Parse(OpKind::kMatmul, "64,64,64"), 1);
  double sum = 0;
  float lo = 1, hi = -1;
  for (float v : t.inputs[0]) {
    sum += v;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_LT(lo, -0.99f);
  EXPECT_GT(hi, 0.99f);
  EXPECT_NEAR(sum / t.inputs[0].size(), 0.0, 0.05);
}

TEST(ReferenceDeathTest, WrongInputSizeAborts) {
  Workload w = Parse(OpKind::kMatmul, "2,2,2");
  std::vector<float> out;
  EXPECT_DEATH(ComputeReference(w, {{1, 2, 3}, {1, 2, 3, 4}}, &out), "input 'a' has 3 elements");
  EXPECT_DEATH(ComputeReference(w, {{1, 2, 3, 4}}, &out), "got 1 inputs, expected 2");
}

}  // namespace
}  // namespace tune::measure
