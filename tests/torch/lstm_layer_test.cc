// The hand-written LSTM layer (costmodel/lstm_layer.h) against LibTorch's torch::nn::LSTM run
// on one sequence at a time: pooled outputs and every gradient, on fresh random inputs.
#include "costmodel/lstm_layer.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <random>
#include <vector>

namespace tune::costmodel {
namespace {

constexpr int64_t kIn = 5, kHidden = 8;

struct Case {
  torch::nn::LSTM lstm{torch::nn::LSTMOptions(kIn, kHidden).batch_first(true)};
  std::vector<torch::Tensor> sequences;  // [length, kIn] each, longest first
  std::vector<int64_t> lengths;
  torch::Tensor weights;                 // [batch, 2 * kHidden]: the loss is sum(out * weights)

  explicit Case(std::vector<int64_t> lens, uint64_t seed) : lengths(std::move(lens)) {
    torch::manual_seed(seed);
    lstm = torch::nn::LSTM(torch::nn::LSTMOptions(kIn, kHidden).batch_first(true));
    for (int64_t len : lengths) sequences.push_back(torch::randn({len, kIn}).requires_grad_(true));
    weights = torch::randn({static_cast<int64_t>(lengths.size()), 2 * kHidden});
  }

  torch::Tensor Param(const char* name) { return *lstm->named_parameters(false).find(name); }

  /// LibTorch's LSTM, each sequence alone: [batch, 2h] of (last, mean) hidden states.
  torch::Tensor Reference() {
    std::vector<torch::Tensor> rows;
    for (const torch::Tensor& x : sequences) {
      auto out = std::get<0>(lstm(x.unsqueeze(0))).squeeze(0);  // [len, h]
      rows.push_back(torch::cat({out[out.size(0) - 1], out.mean(0)}));
    }
    return torch::stack(rows);
  }

  /// The layer under test on the same parameters, the inputs packed step by step.
  torch::Tensor Packed() {
    const std::vector<int64_t> offsets = PackedStepOffsets(lengths);
    std::vector<torch::Tensor> rows;
    for (int64_t s = 0; s + 1 < static_cast<int64_t>(offsets.size()); ++s) {
      for (int64_t r = 0; r < offsets[s + 1] - offsets[s]; ++r) rows.push_back(sequences[r][s]);
    }
    auto x = torch::stack(rows);
    auto xw = torch::addmm(Param("bias_ih_l0") + Param("bias_hh_l0"), x, Param("weight_ih_l0").t());
    return LstmLastAndMean(xw, Param("weight_hh_l0"), lengths);
  }

  /// Gradients of sum(out * weights) with respect to the parameters and the inputs.
  std::vector<torch::Tensor> Gradients(const torch::Tensor& out) {
    std::vector<torch::Tensor> wrt = lstm->parameters();
    wrt.insert(wrt.end(), sequences.begin(), sequences.end());
    return torch::autograd::grad({(out * weights).sum()}, wrt);
  }
};

TEST(LstmLayer, MatchesLibTorchsLstmOnSequencesOfDifferentLengths) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int64_t> len(1, 12);
    std::vector<int64_t> lengths(7);
    for (int64_t& l : lengths) l = len(rng);
    lengths.push_back(1);
    std::sort(lengths.rbegin(), lengths.rend());
    Case c(lengths, seed);
    auto ref = c.Reference();
    auto got = c.Packed();
    ASSERT_EQ(got.sizes(), ref.sizes());
    EXPECT_LT((got - ref).abs().max().item<float>(), 1e-5f) << "seed " << seed;
    EXPECT_GT(ref.abs().max().item<float>(), 0.05f);  // not a comparison of near-zeros
    auto ref_grads = c.Gradients(ref);
    auto got_grads = c.Gradients(got);
    ASSERT_EQ(ref_grads.size(), got_grads.size());
    for (size_t i = 0; i < ref_grads.size(); ++i) {
      const float scale = std::max(1.0f, ref_grads[i].abs().max().item<float>());
      EXPECT_LT((got_grads[i] - ref_grads[i]).abs().max().item<float>(), 1e-4f * scale)
          << "gradient " << i << ", seed " << seed;
    }
  }
}

TEST(LstmLayer, ScoringWithoutGradientsGivesTheSameOutputs) {
  Case c({9, 6, 6, 2}, 7);
  auto with_grad = c.Packed();
  torch::Tensor without;
  {
    torch::NoGradGuard no_grad;
    without = c.Packed();
  }
  EXPECT_FALSE(without.requires_grad());
  EXPECT_TRUE(torch::equal(with_grad.detach(), without));
}

TEST(LstmLayer, RefusesUnsortedLengthsAndMisshapedInputs) {
  auto w = torch::randn({4 * kHidden, kHidden});
  EXPECT_THROW(LstmLastAndMean(torch::randn({5, 4 * kHidden}), w, {2, 3}), std::invalid_argument);
  EXPECT_THROW(LstmLastAndMean(torch::randn({5, 4 * kHidden}), w, {3, 0}), std::invalid_argument);
  EXPECT_THROW(LstmLastAndMean(torch::randn({4, 4 * kHidden}), w, {3, 2}), std::invalid_argument);
  EXPECT_NO_THROW(LstmLastAndMean(torch::randn({5, 4 * kHidden}), w, {3, 2}));
}

TEST(LstmLayer, PackedStepOffsetsCountTheSequencesStillRunning) {
  EXPECT_EQ(PackedStepOffsets({3, 2, 2, 1}), (std::vector<int64_t>{0, 4, 7, 8}));
  EXPECT_EQ(PackedStepOffsets({1}), (std::vector<int64_t>{0, 1}));
}

}  // namespace
}  // namespace tune::costmodel
