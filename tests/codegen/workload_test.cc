// Tests of Workload: parsing, validation, keys, shapes and FLOP counts.
#include "codegen/ir/workload.h"

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tune::codegen {
namespace {

using ::testing::HasSubstr;

Workload ParseOrDie(OpKind op, const std::string& shape) {
  absl::StatusOr<Workload> w = Workload::Parse(op, shape);
  EXPECT_TRUE(w.ok()) << w.status();
  return w.ok() ? *w : Workload();
}

// (batch, m, n, k) of a GEMM workload.
std::vector<int64_t> GemmShape(const Workload& w) { return {w.batch, w.m, w.n, w.k}; }

// (batch, in_c, in_h, in_w, out_c, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w,
// dilation_h, dilation_w, groups) of a conv2d workload.
std::vector<int64_t> ConvShape(const Workload& w) {
  return {w.batch,    w.in_c,     w.in_h,  w.in_w,  w.out_c,      w.kernel_h,   w.kernel_w,
          w.stride_h, w.stride_w, w.pad_h, w.pad_w, w.dilation_h, w.dilation_w, w.groups};
}

TEST(OpNameTest, RoundTrips) {
  for (OpKind op : {OpKind::kDense, OpKind::kMatmul, OpKind::kBatchMatmul, OpKind::kConv2d}) {
    absl::StatusOr<OpKind> parsed = ParseOpName(OpName(op));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, op);
  }
  EXPECT_EQ(OpName(OpKind::kBatchMatmul), "batch_matmul");
  absl::StatusOr<OpKind> bad = ParseOpName("conv3d");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("conv3d"));
}

TEST(WorkloadParseTest, Matmul) {
  Workload w = ParseOrDie(OpKind::kMatmul, "128,256,64");
  EXPECT_EQ(w.op, OpKind::kMatmul);
  EXPECT_EQ(GemmShape(w), (std::vector<int64_t>{1, 128, 256, 64}));
  EXPECT_FALSE(w.bias);
  EXPECT_FALSE(w.relu);
  EXPECT_EQ(w.dtype, "float32");
}

TEST(WorkloadParseTest, ToleratesSpacesAroundFields) {
  EXPECT_EQ(GemmShape(ParseOrDie(OpKind::kDense, " 1, 1000 ,512")), (std::vector<int64_t>{1, 1, 1000, 512}));
}

TEST(WorkloadParseTest, BatchMatmul) {
  EXPECT_EQ(GemmShape(ParseOrDie(OpKind::kBatchMatmul, "12,128,64,128")), (std::vector<int64_t>{12, 128, 64, 128}));
}

TEST(WorkloadParseTest, Conv2dDefaultsAndOptionalFields) {
  Workload w = ParseOrDie(OpKind::kConv2d, "1,64,56,56,128,3,3");
  EXPECT_EQ(ConvShape(w), (std::vector<int64_t>{1, 64, 56, 56, 128, 3, 3, 1, 1, 0, 0, 1, 1, 1}));

  Workload full = ParseOrDie(OpKind::kConv2d, "2,32,28,30,32,3,5,2,1,2,32");
  EXPECT_EQ(ConvShape(full), (std::vector<int64_t>{2, 32, 28, 30, 32, 3, 5, 2, 2, 1, 1, 2, 2, 32}));
  EXPECT_TRUE(full.depthwise());
}

// Each malformed string is rejected with InvalidArgument naming the string and the expected
// form, plus a detail.
TEST(WorkloadParseTest, RejectsMalformedStrings) {
  struct Case {
    OpKind op;
    std::string shape;
    std::string detail;
  };
  const Case cases[] = {
      {OpKind::kMatmul, "1,2", "got 2 fields"},
      {OpKind::kMatmul, "a,b,c", "field 1 'a'"},
      {OpKind::kMatmul, "1,x,3", "field 2 'x'"},
      {OpKind::kMatmul, "1,-2,3", "field 2 '-2'"},
      {OpKind::kMatmul, "1,0,3", "N must be positive"},
      {OpKind::kMatmul, "1,2,3,", "field 4 is empty (trailing comma?)"},
      {OpKind::kMatmul, "1,,3", "field 2 is empty"},
      {OpKind::kMatmul, "1,2,3,4", "got 4 fields"},
      {OpKind::kMatmul, "", "empty"},
      {OpKind::kMatmul, "1,99999999999999999999,3", "overflows"},
      {OpKind::kMatmul, "1.5,2,3", "field 1 '1.5'"},
      {OpKind::kMatmul, "+1,2,3", "field 1 '+1'"},
      {OpKind::kDense, "1 2 3", "field 1 '1 2 3'"},
      {OpKind::kBatchMatmul, "1,2,3", "got 3 fields"},
      {OpKind::kConv2d, "1,3,224,224,64,7", "got 6 fields"},
      {OpKind::kConv2d, "1,3,224,224,64,7,7,2,3,1,1,1", "got 12 fields"},
      {OpKind::kConv2d, "1,3,224,224,64,7,7,0", "stride must be positive"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Workload> w = Workload::Parse(c.op, c.shape);
    ASSERT_FALSE(w.ok()) << "accepted '" << c.shape << "'";
    EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(w.status().message(),
                HasSubstr("malformed " + OpName(c.op) + " shape '" + c.shape + "': expected "));
    EXPECT_THAT(w.status().message(), HasSubstr(c.detail)) << w.status();
  }
}

TEST(WorkloadParseTest, MessageNamesExpectedForm) {
  absl::StatusOr<Workload> w = Workload::Parse(OpKind::kMatmul, "1,x,3");
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(w.status().message(),
              HasSubstr("malformed matmul shape '1,x,3': expected M,N,K (positive integers)"));
  w = Workload::Parse(OpKind::kBatchMatmul, "1,2");
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(w.status().message(), HasSubstr("expected B,M,N,K"));
  w = Workload::Parse(OpKind::kConv2d, "1,2");
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(w.status().message(),
              HasSubstr("expected N,C,H,W,OC,KH,KW[,stride[,pad[,dilation[,groups]]]]"));
}

TEST(WorkloadParseTest, PadMayBeZeroButOthersMayNot) {
  EXPECT_TRUE(Workload::Parse(OpKind::kConv2d, "1,3,8,8,4,3,3,1,0").ok());
  EXPECT_FALSE(Workload::Parse(OpKind::kConv2d, "1,3,8,8,4,3,3,1,0,0").ok());    // dilation 0
  EXPECT_FALSE(Workload::Parse(OpKind::kConv2d, "1,3,8,8,4,3,3,1,0,1,0").ok());  // groups 0
  EXPECT_FALSE(Workload::Parse(OpKind::kConv2d, "0,3,8,8,4,3,3").ok());
}

TEST(WorkloadParseTest, RejectsInconsistentConvShapes) {
  // groups must divide both channel counts.
  absl::StatusOr<Workload> w = Workload::Parse(OpKind::kConv2d, "1,6,8,8,4,3,3,1,1,1,4");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(w.status().message(), HasSubstr("groups 4 must divide C 6 and OC 4"));
  // Kernel larger than the padded input.
  w = Workload::Parse(OpKind::kConv2d, "1,3,4,4,8,7,7");
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(w.status().message(), HasSubstr("does not fit"));
  // Dilation makes a 3x3 kernel span 5.
  EXPECT_FALSE(Workload::Parse(OpKind::kConv2d, "1,3,4,4,8,3,3,1,0,2").ok());
  EXPECT_TRUE(Workload::Parse(OpKind::kConv2d, "1,3,5,5,8,3,3,1,0,2").ok());
}

TEST(WorkloadValidateTest, RejectsBadFields) {
  Workload w;
  w.op = OpKind::kMatmul;
  w.m = 4, w.n = 4, w.k = 4;
  EXPECT_TRUE(w.Validate().ok());
  Workload bad = w;
  bad.k = -1;
  EXPECT_EQ(bad.Validate().code(), absl::StatusCode::kInvalidArgument);
  bad = w;
  bad.batch = 2;  // batch belongs to batch_matmul
  EXPECT_FALSE(bad.Validate().ok());
  bad = w;
  bad.dtype = "float16";
  EXPECT_THAT(bad.Validate().message(), HasSubstr("float16"));
  bad = w;
  bad.m = bad.n = bad.k = int64_t{1} << 40;  // tensors too large to index
  EXPECT_FALSE(bad.Validate().ok());

  Workload conv = ParseOrDie(OpKind::kConv2d, "1,3,8,8,4,3,3");
  conv.pad_w = -1;
  EXPECT_FALSE(conv.Validate().ok());
}

TEST(WorkloadTest, OutputExtents) {
  // ResNet stem: 224, k7, s2, p3 -> 112.
  Workload stem = ParseOrDie(OpKind::kConv2d, "1,3,224,224,64,7,7,2,3");
  EXPECT_EQ(stem.out_h(), 112);
  EXPECT_EQ(stem.out_w(), 112);
  // No padding: 56 - 3 + 1.
  EXPECT_EQ(ParseOrDie(OpKind::kConv2d, "1,8,56,56,8,3,3").out_h(), 54);
  // 1x1 stride 2 downsample: 56 -> 28.
  EXPECT_EQ(ParseOrDie(OpKind::kConv2d, "1,64,56,56,128,1,1,2,0").out_w(), 28);
  // Odd extent with stride 2: (7 + 2 - 3) / 2 + 1 = 4.
  EXPECT_EQ(ParseOrDie(OpKind::kConv2d, "1,8,7,7,8,3,3,2,1").out_h(), 4);
  // Dilation 2 makes a 3x3 kernel span 5: (10 + 2*2 - 5) / 1 + 1 = 10.
  EXPECT_EQ(ParseOrDie(OpKind::kConv2d, "1,8,10,10,8,3,3,1,2,2").out_h(), 10);
  // Dilation 3, stride 2, pad 1: span 7, (20 + 2 - 7) / 2 + 1 = 8.
  EXPECT_EQ(ParseOrDie(OpKind::kConv2d, "1,8,20,20,8,3,3,2,1,3").out_h(), 8);

  // Non-square everything, set directly.
  Workload w = stem;
  w.in_h = 17, w.in_w = 31, w.kernel_h = 3, w.kernel_w = 5;
  w.stride_h = 1, w.stride_w = 3, w.pad_h = 0, w.pad_w = 2, w.dilation_h = 2, w.dilation_w = 1;
  EXPECT_EQ(w.out_h(), (17 - 5) / 1 + 1);      // 13
  EXPECT_EQ(w.out_w(), (31 + 4 - 5) / 3 + 1);  // 11
  EXPECT_TRUE(w.Validate().ok());
}

TEST(WorkloadTest, InputsAndOutputShapes) {
  Workload dense = ParseOrDie(OpKind::kDense, "2,3,4");
  dense.bias = true;
  std::vector<TensorSpec> in = dense.Inputs();
  ASSERT_EQ(in.size(), 3u);
  EXPECT_EQ(in[0].shape, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(in[1].shape, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(in[2].shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(dense.Output().shape, (std::vector<int64_t>{2, 3}));

  Workload mm = ParseOrDie(OpKind::kMatmul, "2,3,4");
  in = mm.Inputs();
  ASSERT_EQ(in.size(), 2u);
  EXPECT_EQ(in[1].shape, (std::vector<int64_t>{4, 3}));

  Workload bmm = ParseOrDie(OpKind::kBatchMatmul, "5,2,3,4");
  in = bmm.Inputs();
  EXPECT_EQ(in[0].shape, (std::vector<int64_t>{5, 2, 4}));
  EXPECT_EQ(in[1].shape, (std::vector<int64_t>{5, 4, 3}));
  EXPECT_EQ(bmm.Output().shape, (std::vector<int64_t>{5, 2, 3}));
  EXPECT_EQ(bmm.Output().NumElements(), 30);

  Workload conv = ParseOrDie(OpKind::kConv2d, "2,32,14,14,64,3,3,2,1,1,4");
  conv.bias = true;
  in = conv.Inputs();
  ASSERT_EQ(in.size(), 3u);
  EXPECT_EQ(in[0].name, "data");
  EXPECT_EQ(in[0].shape, (std::vector<int64_t>{2, 32, 14, 14}));
  EXPECT_EQ(in[1].name, "weight");
  EXPECT_EQ(in[1].shape, (std::vector<int64_t>{64, 8, 3, 3}));
  EXPECT_EQ(in[2].name, "bias");
  EXPECT_EQ(in[2].shape, (std::vector<int64_t>{64}));
  EXPECT_EQ(conv.Output().shape, (std::vector<int64_t>{2, 64, 7, 7}));
}

TEST(WorkloadTest, Flops) {
  EXPECT_DOUBLE_EQ(ParseOrDie(OpKind::kMatmul, "1024,1024,1024").Flops(), 2.0 * 1024 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(ParseOrDie(OpKind::kDense, "128,3072,768").Flops(), 2.0 * 128 * 3072 * 768);
  EXPECT_DOUBLE_EQ(ParseOrDie(OpKind::kBatchMatmul, "12,128,128,64").Flops(),
                   2.0 * 12 * 128 * 128 * 64);
  // ResNet stem: 2 * 64 * 112 * 112 * 3 * 7 * 7.
  EXPECT_DOUBLE_EQ(ParseOrDie(OpKind::kConv2d, "1,3,224,224,64,7,7,2,3").Flops(),
                   2.0 * 64 * 112 * 112 * 3 * 49);
  // Depthwise 3x3 over 32 channels at 112: each output reads one channel.
  EXPECT_DOUBLE_EQ(ParseOrDie(OpKind::kConv2d, "1,32,112,112,32,3,3,1,1,1,32").Flops(),
                   2.0 * 32 * 112 * 112 * 1 * 9);
  // Grouped, batch 2: C/G = 8.
  EXPECT_DOUBLE_EQ(ParseOrDie(OpKind::kConv2d, "2,32,14,14,64,3,3,2,1,1,4").Flops(),
                   2.0 * 2 * 64 * 7 * 7 * 8 * 9);
  // Bias and relu are not counted.
  Workload w = ParseOrDie(OpKind::kMatmul, "4,4,4");
  const double plain = w.Flops();
  w.bias = w.relu = true;
  EXPECT_DOUBLE_EQ(w.Flops(), plain);
}

TEST(WorkloadKeyTest, MatchesDocumentedFormat) {
  Workload w = ParseOrDie(OpKind::kConv2d, "1,64,56,56,64,3,3,1,1");
  w.bias = w.relu = true;
  EXPECT_EQ(w.Key(), "conv2d/n1_c64_h56_w56_oc64_k3x3_s1x1_p1x1_d1x1_g1/bias_relu/float32");
  EXPECT_EQ(w.Label(), "conv2d 1x64x56x56 k3 s1 oc64");
  EXPECT_EQ(ParseOrDie(OpKind::kMatmul, "128,768,64").Key(), "matmul/m128_n768_k64/none/float32");
  EXPECT_EQ(ParseOrDie(OpKind::kBatchMatmul, "12,128,128,64").Key(),
            "batch_matmul/b12_m128_n128_k64/none/float32");
}

TEST(WorkloadKeyTest, RoundTrips) {
  std::vector<Workload> workloads = {
      ParseOrDie(OpKind::kDense, "1,1000,512"),
      ParseOrDie(OpKind::kMatmul, "1024,1024,1024"),
      ParseOrDie(OpKind::kBatchMatmul, "12,128,64,128"),
      ParseOrDie(OpKind::kConv2d, "1,3,224,224,64,7,7,2,3"),
      ParseOrDie(OpKind::kConv2d, "4,96,56,56,96,3,3,2,1,1,96"),
  };
  Workload odd = ParseOrDie(OpKind::kConv2d, "1,8,17,31,16,3,5");
  odd.stride_w = 3, odd.pad_w = 2, odd.dilation_h = 2, odd.groups = 2;
  workloads.push_back(odd);
  for (int epilogue = 0; epilogue < 6; ++epilogue) {
    for (Workload w : workloads) {
      w.bias = epilogue & 1;
      w.relu = (epilogue >> 1) == 1;
      w.relu6 = (epilogue >> 1) == 2;
      ASSERT_TRUE(w.Validate().ok()) << w.Validate();
      absl::StatusOr<Workload> back = Workload::FromKey(w.Key());
      ASSERT_TRUE(back.ok()) << w.Key() << ": " << back.status();
      EXPECT_EQ(back->Key(), w.Key());
      EXPECT_EQ(back->op, w.op);
      EXPECT_EQ(back->bias, w.bias);
      EXPECT_EQ(back->relu, w.relu);
      EXPECT_EQ(back->relu6, w.relu6);
      EXPECT_EQ(back->Inputs().size(), w.Inputs().size());
      EXPECT_EQ(back->Output().shape, w.Output().shape);
      EXPECT_DOUBLE_EQ(back->Flops(), w.Flops());
      EXPECT_EQ(back->Label(), w.Label());
    }
  }
  // Every conv field survives, including non-square ones.
  absl::StatusOr<Workload> back = Workload::FromKey(odd.Key());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->in_h, 17);
  EXPECT_EQ(back->in_w, 31);
  EXPECT_EQ(back->kernel_w, 5);
  EXPECT_EQ(back->stride_w, 3);
  EXPECT_EQ(back->pad_w, 2);
  EXPECT_EQ(back->dilation_h, 2);
  EXPECT_EQ(back->groups, 2);
}

TEST(WorkloadKeyTest, DistinguishesEpilogues) {
  Workload a = ParseOrDie(OpKind::kDense, "1,2,3");
  Workload b = a;
  b.relu = true;
  EXPECT_NE(a.Key(), b.Key());
}

TEST(WorkloadKeyTest, FromKeyRejectsBadKeys) {
  for (const std::string key : {
           "",
           "matmul/m1_n2_k3/none",
           "matmul/m1_n2_k3/none/float32/x",
           "conv3d/m1_n2_k3/none/float32",
           "matmul/m1_n2/none/float32",
           "matmul/m1_n2_kx/none/float32",
           "matmul/m1_n2_k3/gelu/float32",
           "matmul/m1_n2_k3/none/float16",
           "matmul/m0_n2_k3/none/float32",
           "matmul/m01_n2_k3/none/float32",
           "batch_matmul/m1_n2_k3/none/float32",
           "conv2d/n1_c64_h56_w56_oc64_k3_s1x1_p1x1_d1x1_g1/none/float32",
           "conv2d/n1_c64_h2_w2_oc64_k3x3_s1x1_p0x0_d1x1_g1/none/float32",
       }) {
    absl::StatusOr<Workload> w = Workload::FromKey(key);
    EXPECT_FALSE(w.ok()) << "accepted '" << key << "'";
    if (!w.ok()) {
      EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(w.status().message(), HasSubstr("'" + key + "'"));
    }
  }
}

// NCHWc convolutions: the layout is the shape's last field and the key's last token, the
// activations are blocked by it, and what it cannot describe is refused.
TEST(WorkloadLayoutTest, NchwcParsesKeysAndShapesItsActivations) {
  Workload w = ParseOrDie(OpKind::kConv2d, "2,32,14,15,48,3,3,2,1,nchw16c");
  EXPECT_EQ(w.layout_block, 16);
  EXPECT_EQ(w.stride_h, 2);
  EXPECT_EQ(w.pad_w, 1);
  w.bias = w.relu = true;
  EXPECT_EQ(w.Key(), "conv2d/n2_c32_h14_w15_oc48_k3x3_s2x2_p1x1_d1x1_g1_nchw16c/bias_relu/float32");
  EXPECT_EQ(w.Label(), "conv2d 2x32x14x15 k3 s2 oc48 nchw16c");
  ASSERT_EQ(w.Inputs().size(), 3u);
  EXPECT_EQ(w.Inputs()[0].shape, (std::vector<int64_t>{2, 2, 14, 15, 16}));
  EXPECT_EQ(w.Inputs()[1].shape, (std::vector<int64_t>{48, 32, 3, 3}));
  EXPECT_EQ(w.Inputs()[2].shape, (std::vector<int64_t>{48}));
  EXPECT_EQ(w.Output().shape, (std::vector<int64_t>{2, 3, 7, 8, 16}));
  Workload plain = w;
  plain.layout_block = 0;
  EXPECT_NE(plain.Key(), w.Key());
  EXPECT_DOUBLE_EQ(plain.Flops(), w.Flops());
  absl::StatusOr<Workload> back = Workload::FromKey(w.Key());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->layout_block, 16);
  EXPECT_EQ(back->Key(), w.Key());
  // Spaces around the field, as around the others.
  EXPECT_EQ(ParseOrDie(OpKind::kConv2d, "1,8,4,4,8,1,1, nchw8c ").layout_block, 8);
}

// A depthwise convolution (groups == C == OC) has an NCHWc form: blocked activations, the
// OIHW weight of one input channel per output channel.
TEST(WorkloadLayoutTest, NchwcTakesDepthwiseConvolutions) {
  Workload w = ParseOrDie(OpKind::kConv2d, "1,32,15,15,32,3,3,2,1,1,32,nchw8c");
  EXPECT_TRUE(w.depthwise());
  EXPECT_EQ(w.layout_block, 8);
  EXPECT_EQ(w.Key(), "conv2d/n1_c32_h15_w15_oc32_k3x3_s2x2_p1x1_d1x1_g32_nchw8c/none/float32");
  ASSERT_EQ(w.Inputs().size(), 2u);
  EXPECT_EQ(w.Inputs()[0].shape, (std::vector<int64_t>{1, 4, 15, 15, 8}));
  EXPECT_EQ(w.Inputs()[1].shape, (std::vector<int64_t>{32, 1, 3, 3}));
  EXPECT_EQ(w.Output().shape, (std::vector<int64_t>{1, 4, 8, 8, 8}));
  absl::StatusOr<Workload> back = Workload::FromKey(w.Key());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->groups, 32);
  EXPECT_EQ(back->layout_block, 8);
  EXPECT_EQ(back->Key(), w.Key());
}

TEST(WorkloadLayoutTest, RefusesLayoutsItCannotDescribe) {
  const struct {
    OpKind op;
    std::string shape, why;
  } cases[] = {
      {OpKind::kConv2d, "1,24,8,8,32,3,3,1,1,nchw16c", "must divide C 24"},
      {OpKind::kConv2d, "1,32,8,8,24,3,3,1,1,nchw16c", "and OC 24"},
      {OpKind::kConv2d, "1,32,8,8,32,3,3,1,1,1,2,nchw16c", "groups 1 or depthwise"},
      // groups == C but OC twice C: grouped, not depthwise.
      {OpKind::kConv2d, "1,32,8,8,64,3,3,1,1,1,32,nchw16c", "groups 1 or depthwise"},
      // Depthwise, but the block does not divide the channels.
      {OpKind::kConv2d, "1,24,8,8,24,3,3,1,1,1,24,nchw16c", "must divide C 24"},
      {OpKind::kConv2d, "1,32,8,8,32,3,3,nchw0c", "nchwXc"},
      {OpKind::kConv2d, "1,32,8,8,32,3,3,nchw16", "nchwXc"},
      {OpKind::kConv2d, "1,32,8,8,32,3,3,nchwc", "nchwXc"},
      {OpKind::kMatmul, "8,8,8,nchw8c", "not a non-negative integer"},
  };
  for (const auto& c : cases) {
    absl::StatusOr<Workload> w = Workload::Parse(c.op, c.shape);
    EXPECT_FALSE(w.ok()) << "accepted " << c.shape;
    if (!w.ok()) EXPECT_THAT(w.status().message(), HasSubstr(c.why)) << c.shape;
  }
  Workload gemm = ParseOrDie(OpKind::kMatmul, "8,8,8");
  gemm.layout_block = 8;
  EXPECT_THAT(gemm.Validate().message(), HasSubstr("conv2d only"));
  for (const std::string key : {"conv2d/n1_c32_h8_w8_oc32_k3x3_s1x1_p1x1_d1x1_g1_nchw0c/none/float32",
                                "conv2d/n1_c32_h8_w8_oc32_k3x3_s1x1_p1x1_d1x1_g1_nchw016c/none/float32",
                                "conv2d/n1_c32_h8_w8_oc32_k3x3_s1x1_p1x1_d1x1_g1_blocked/none/float32",
                                "conv2d/n1_c24_h8_w8_oc32_k3x3_s1x1_p1x1_d1x1_g1_nchw16c/none/float32"}) {
    EXPECT_FALSE(Workload::FromKey(key).ok()) << "accepted " << key;
  }
}

// Products of extents never wrap: element counts saturate, conv output extents of any int64
// fields are computed exactly, and Validate refuses what does not fit.
TEST(WorkloadOverflowTest, ExtentProductsSaturateAndNeverWrap) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  std::mt19937_64 rng(20240611);
  for (int i = 0; i < 200; ++i) {
    const int64_t a = int64_t{1} << (20 + rng() % 43), b = int64_t{1} << (20 + rng() % 43);
    const int64_t c = 1 + static_cast<int64_t>(rng() % 1000);
    TensorSpec t{"t", {a, b, c}};
    const unsigned __int128 exact = static_cast<unsigned __int128>(a) * b * c;
    EXPECT_EQ(t.NumElements(), exact > kMax ? kMax : static_cast<int64_t>(exact)) << a << "x" << b << "x" << c;
    EXPECT_EQ((TensorSpec{"z", {a, 0, c}}.NumElements()), 0);

    Workload w;
    w.op = OpKind::kMatmul;
    w.m = a, w.n = b, w.k = c;
    const unsigned __int128 limit = static_cast<unsigned __int128>(1) << 48;  // elements of one tensor
    const bool fits = static_cast<unsigned __int128>(a) * b <= limit && static_cast<unsigned __int128>(a) * c <= limit &&
                      static_cast<unsigned __int128>(b) * c <= limit;
    EXPECT_EQ(w.Validate().ok(), fits) << w.Key();
    EXPECT_GT(w.Flops(), 0);

    Workload conv;
    conv.op = OpKind::kConv2d;
    conv.in_c = conv.out_c = 1;
    conv.in_h = kMax - static_cast<int64_t>(rng() % 100);
    conv.in_w = 8;
    conv.pad_h = kMax / 2;
    conv.kernel_h = conv.kernel_w = 3;
    EXPECT_GT(conv.out_h(), 0);  // no wrap to a negative extent
    EXPECT_FALSE(conv.Validate().ok());
    conv.in_h = 8;
    conv.pad_h = 0;
    conv.dilation_h = kMax / 2;
    EXPECT_EQ(conv.out_h(), 0) << "the dilated kernel does not fit";
  }
}

}  // namespace
}  // namespace tune::codegen
