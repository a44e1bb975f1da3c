// A one-layer LSTM over a batch of sequences of different lengths, pooled to each sequence's
// last and mean hidden state, with its forward and backward passes through time written out as
// one LibTorch autograd function (part of the LibTorch module, costmodel/CMakeLists.txt).
//
// Why not torch::nn::LSTM: the cost models' sequences are short and of very different lengths
// (a minibatch's mean is about 50 steps, its longest 256). Padded to the longest, most of the
// work is padding; LibTorch's packed sequences avoid the padding but run each step as a dozen
// separate operators with their autograd records, and at a 64-wide hidden state those cost more
// than the arithmetic. Here a step is one GEMM (OpenBLAS) and one loop over the gates, and only
// the sequences still running take part in it. Same equations and parameter layout as
// torch::nn::LSTM (gates input, forget, cell, output; weight_hh [4h, h]).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace tune::costmodel {

/// Runs the LSTM over a packed batch and pools it.
///  * `lengths`: each sequence's length, >= 1, non-increasing (sort the batch longest first).
///  * `xw`: the input projection plus both biases of every step of every sequence, packed step
///    by step: [sum(lengths), 4h], the rows of step s are the sequences still running at s
///    (the first active(s) of the batch), in batch order, after those of steps 0 .. s-1.
///  * `w_hh`: the recurrent weight [4h, h].
/// Returns [batch, 2h]: each sequence's hidden state after its last step, then the mean of its
/// hidden states over its steps. Differentiable in `xw` and `w_hh`. Initial h and c are zero.
torch::Tensor LstmLastAndMean(const torch::Tensor& xw, const torch::Tensor& w_hh, const std::vector<int64_t>& lengths);

/// Row offsets of the packed layout above: offsets[s] is the first row of step s, offsets[t]
/// the total; active(s) = offsets[s + 1] - offsets[s].
std::vector<int64_t> PackedStepOffsets(const std::vector<int64_t>& lengths);

}  // namespace tune::costmodel
