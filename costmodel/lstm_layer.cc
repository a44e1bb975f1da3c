// The LSTM layer of lstm_layer.h: forward and backward through time over packed steps.
#include "costmodel/lstm_layer.h"

#include <cblas.h>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace tune::costmodel {
namespace {

inline float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
/// tanh through expf: libm's tanhf (by expm1f) took a quarter of a training's time; this is
/// within 1e-7 of it in absolute terms, and saturates to +-1 without overflow trouble.
inline float Tanh(float x) { return 1.0f - 2.0f / (std::exp(2.0f * x) + 1.0f); }

/// What one forward pass needs to know about the batch.
struct Batch {
  const std::vector<int64_t>& lengths;  // non-increasing, >= 1
  std::vector<int64_t> offsets;         // PackedStepOffsets(lengths)
  int64_t hidden;

  int64_t size() const { return static_cast<int64_t>(lengths.size()); }
  int64_t steps() const { return lengths.empty() ? 0 : lengths[0]; }
  int64_t active(int64_t s) const { return offsets[s + 1] - offsets[s]; }
};

/// The step rows every pass keeps: activated gates (i, f, g, o) [rows, 4h], cells and hidden
/// states [rows, h]. `keep`: every step's rows in the packed layout (for the backward pass);
/// otherwise two steps' rows in turn, step s at row (s % 2) * batch.
struct StepRows {
  torch::Tensor gates, cells, hiddens;
  bool keep;

  int64_t Base(const Batch& batch, int64_t s) const { return keep ? batch.offsets[s] : (s % 2) * batch.size(); }
};

/// The forward pass: out [batch, 2h] = (last hidden state, mean hidden state) of each sequence.
torch::Tensor Forward(const Batch& batch, const float* xw, const float* w_hh, StepRows* rows) {
  const int64_t b = batch.size(), h = batch.hidden, h4 = 4 * h;
  const int64_t n = rows->keep ? batch.offsets.back() : 2 * b;
  rows->gates = torch::empty({n, h4});
  rows->cells = torch::empty({n, h});
  rows->hiddens = torch::empty({n, h});
  auto out = torch::zeros({b, 2 * h});
  float* gates = rows->gates.data_ptr<float>();
  float* cells = rows->cells.data_ptr<float>();
  float* hiddens = rows->hiddens.data_ptr<float>();
  float* pooled = out.data_ptr<float>();
  for (int64_t s = 0; s < batch.steps(); ++s) {
    const int64_t k = batch.active(s), base = rows->Base(batch, s);
    const int64_t prev = s > 0 ? rows->Base(batch, s - 1) : 0;
    float* g = gates + base * h4;
    std::memcpy(g, xw + batch.offsets[s] * h4, sizeof(float) * static_cast<size_t>(k * h4));
    if (s > 0) {  // g += h_prev w_hh^T
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(k), static_cast<int>(h4),
                  static_cast<int>(h), 1.0f, hiddens + prev * h, static_cast<int>(h), w_hh, static_cast<int>(h), 1.0f, g,
                  static_cast<int>(h4));
    }
    for (int64_t r = 0; r < k; ++r) {
      float* gr = g + r * h4;
      float* c = cells + (base + r) * h;
      float* hr = hiddens + (base + r) * h;
      const float* c_prev = s > 0 ? cells + (prev + r) * h : nullptr;
      float* last = pooled + r * 2 * h;
      float* sum = last + h;
      const bool ends = batch.lengths[r] == s + 1;
      for (int64_t j = 0; j < h; ++j) {
        const float i = Sigmoid(gr[j]), f = Sigmoid(gr[h + j]), cand = Tanh(gr[2 * h + j]),
                    o = Sigmoid(gr[3 * h + j]);
        gr[j] = i;
        gr[h + j] = f;
        gr[2 * h + j] = cand;
        gr[3 * h + j] = o;
        c[j] = i * cand + (c_prev ? f * c_prev[j] : 0.0f);
        hr[j] = o * Tanh(c[j]);
        sum[j] += hr[j];
        if (ends) last[j] = hr[j];
      }
    }
  }
  for (int64_t r = 0; r < b; ++r) {
    const float inv = 1.0f / static_cast<float>(batch.lengths[r]);
    for (int64_t j = 0; j < h; ++j) pooled[r * 2 * h + h + j] *= inv;
  }
  return out;
}

class LstmFunction : public torch::autograd::Function<LstmFunction> {
 public:
  /// `offsets`: PackedStepOffsets(lengths), computed once by the caller and kept for backward.
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& xw,
                               const torch::Tensor& w_hh, const std::vector<int64_t>& lengths,
                               const std::vector<int64_t>& offsets) {
    Batch batch{lengths, offsets, w_hh.size(1)};
    StepRows rows{{}, {}, {}, /*keep=*/true};
    auto out = Forward(batch, xw.data_ptr<float>(), w_hh.data_ptr<float>(), &rows);
    ctx->save_for_backward({w_hh, rows.gates, rows.cells, rows.hiddens});
    ctx->saved_data["lengths"] = lengths;
    ctx->saved_data["offsets"] = offsets;
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const std::vector<int64_t> lengths = ctx->saved_data["lengths"].toIntVector();
    auto saved = ctx->get_saved_variables();
    const torch::Tensor &w_hh = saved[0], &gates_t = saved[1], &cells_t = saved[2], &hiddens_t = saved[3];
    const Batch batch{lengths, ctx->saved_data["offsets"].toIntVector(), w_hh.size(1)};
    const int64_t b = batch.size(), h = batch.hidden, h4 = 4 * h;
    auto d_out = grad_outputs[0].contiguous();
    auto d_xw = torch::empty({batch.offsets.back(), h4});
    auto d_w = torch::zeros({h4, h});
    // Carried from step s + 1 to s: d loss / d h and d loss / d c of the sequences still running.
    auto d_h_t = torch::zeros({b, h}), d_c_t = torch::zeros({b, h});
    const float* gates = gates_t.data_ptr<float>();
    const float* cells = cells_t.data_ptr<float>();
    const float* hiddens = hiddens_t.data_ptr<float>();
    const float* w = w_hh.data_ptr<float>();
    const float* d_pooled = d_out.data_ptr<float>();
    float* d_h = d_h_t.data_ptr<float>();
    float* d_c = d_c_t.data_ptr<float>();
    for (int64_t s = batch.steps() - 1; s >= 0; --s) {
      const int64_t k = batch.active(s), base = batch.offsets[s], prev = s > 0 ? batch.offsets[s - 1] : 0;
      float* dg = d_xw.data_ptr<float>() + base * h4;
      for (int64_t r = 0; r < k; ++r) {
        const float* gr = gates + (base + r) * h4;
        const float* c = cells + (base + r) * h;
        const float* c_prev = s > 0 ? cells + (prev + r) * h : nullptr;
        const float* d_last = d_pooled + r * 2 * h;
        const float* d_mean = d_last + h;
        const float inv_len = 1.0f / static_cast<float>(lengths[r]);
        const bool ends = lengths[r] == s + 1;
        float* dgr = dg + r * h4;
        for (int64_t j = 0; j < h; ++j) {
          const float i = gr[j], f = gr[h + j], cand = gr[2 * h + j], o = gr[3 * h + j];
          const float dh = d_h[r * h + j] + d_mean[j] * inv_len + (ends ? d_last[j] : 0.0f);
          const float tc = Tanh(c[j]);
          const float dc = d_c[r * h + j] + dh * o * (1.0f - tc * tc);
          dgr[j] = dc * cand * i * (1.0f - i);
          dgr[h + j] = c_prev ? dc * c_prev[j] * f * (1.0f - f) : 0.0f;
          dgr[2 * h + j] = dc * i * (1.0f - cand * cand);
          dgr[3 * h + j] = dh * tc * o * (1.0f - o);
          d_c[r * h + j] = dc * f;
        }
      }
      if (s > 0) {
        // d w_hh += dg^T h_prev; the carry d h_prev = dg w_hh (rows past active(s) stay zero:
        // those sequences had ended, and no later step wrote them).
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(h4), static_cast<int>(h),
                    static_cast<int>(k), 1.0f, dg, static_cast<int>(h4), hiddens + prev * h, static_cast<int>(h), 1.0f,
                    d_w.data_ptr<float>(), static_cast<int>(h));
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(k), static_cast<int>(h),
                    static_cast<int>(h4), 1.0f, dg, static_cast<int>(h4), w, static_cast<int>(h), 0.0f, d_h,
                    static_cast<int>(h));
      }
    }
    return {d_xw, d_w, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

std::vector<int64_t> PackedStepOffsets(const std::vector<int64_t>& lengths) {
  const int64_t steps = lengths.empty() ? 0 : lengths[0];
  std::vector<int64_t> offsets(static_cast<size_t>(steps) + 1, 0);
  for (int64_t len : lengths) {
    for (int64_t s = 0; s < len; ++s) ++offsets[static_cast<size_t>(s) + 1];
  }
  for (int64_t s = 0; s < steps; ++s) offsets[s + 1] += offsets[s];
  return offsets;
}

torch::Tensor LstmLastAndMean(const torch::Tensor& xw, const torch::Tensor& w_hh, const std::vector<int64_t>& lengths) {
  if (lengths.empty()) throw std::invalid_argument("LstmLastAndMean: an empty batch");
  for (size_t r = 0; r < lengths.size(); ++r) {
    if (lengths[r] < 1 || (r > 0 && lengths[r] > lengths[r - 1]))
      throw std::invalid_argument("LstmLastAndMean: lengths must be >= 1 and non-increasing");
  }
  const std::vector<int64_t> offsets = PackedStepOffsets(lengths);
  const int64_t h = w_hh.dim() == 2 ? w_hh.size(1) : 0;
  if (h == 0 || w_hh.size(0) != 4 * h || xw.dim() != 2 || xw.size(0) != offsets.back() || xw.size(1) != 4 * h)
    throw std::invalid_argument("LstmLastAndMean: xw must be [" + std::to_string(offsets.back()) + ", 4h] and w_hh [4h, h]");
  auto x = xw.contiguous();
  auto w = w_hh.contiguous();
  if (torch::GradMode::is_enabled() && (x.requires_grad() || w.requires_grad()))
    return LstmFunction::apply(x, w, lengths, offsets);
  // Nothing to differentiate (scoring): two steps' rows are enough.
  torch::NoGradGuard no_grad;
  Batch batch{lengths, offsets, h};
  StepRows rows{{}, {}, {}, /*keep=*/false};
  return Forward(batch, x.data_ptr<float>(), w.data_ptr<float>(), &rows);
}

}  // namespace tune::costmodel
