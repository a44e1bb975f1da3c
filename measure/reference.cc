// Naive reference kernels (plain loops, double accumulation) and the AllClose check.
#include "measure/reference.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/check.h"

namespace tune::measure {
namespace {

using codegen::OpKind;
using codegen::Workload;

// The activation of an epilogue.
enum class Act { kNone, kRelu, kRelu6 };
Act ActOf(const Workload& w) { return w.relu ? Act::kRelu : w.relu6 ? Act::kRelu6 : Act::kNone; }

// Adds the bias (if any) and applies the activation to one accumulated value.
float Epilogue(double value, const float* bias, int64_t bias_index, Act act) {
  if (bias != nullptr) value += bias[bias_index];
  if (act != Act::kNone) value = std::max(value, 0.0);
  if (act == Act::kRelu6) value = std::min(value, 6.0);
  return static_cast<float>(value);
}

// out[M,N] = a[M,K] * b[K,N] (+ bias[N]) (activation). Loop order i, k, j over a double row
// accumulator, so b and the accumulator are walked contiguously.
// False when `poll` stopped it.
bool Matmul(const float* a, const float* b, const float* bias, Act act, int64_t m, int64_t n,
            int64_t k, float* out, StopPoll& poll) {
  std::vector<double> row(n);
  for (int64_t i = 0; i < m; ++i) {
    std::fill(row.begin(), row.end(), 0.0);
    for (int64_t p = 0; p < k; ++p) {
      if (poll.Tick(n)) return false;
      const double a_ip = a[i * k + p];
      const float* b_row = b + p * n;
      for (int64_t j = 0; j < n; ++j) row[j] += a_ip * static_cast<double>(b_row[j]);
    }
    for (int64_t j = 0; j < n; ++j) out[i * n + j] = Epilogue(row[j], bias, j, act);
  }
  return true;
}

// out[N,OC,OH,OW] = conv2d(data[N,C,H,W], weight[OC,C/G,KH,KW]) (+ bias[OC]) (activation).
// For each output channel a double plane [OH,OW] accumulates one (input channel, kh, kw)
// tap at a time; taps that land in the padding contribute nothing.
bool Conv2d(const Workload& w, const float* data, const float* weight, const float* bias,
            float* out, StopPoll& poll) {
  const int64_t out_h = w.out_h(), out_w = w.out_w();
  const int64_t in_c_per_group = w.in_c / w.groups;
  const int64_t out_c_per_group = w.out_c / w.groups;
  std::vector<double> plane(out_h * out_w);
  for (int64_t b = 0; b < w.batch; ++b) {
    for (int64_t oc = 0; oc < w.out_c; ++oc) {
      const int64_t group = oc / out_c_per_group;
      std::fill(plane.begin(), plane.end(), 0.0);
      for (int64_t icg = 0; icg < in_c_per_group; ++icg) {
        const int64_t ic = group * in_c_per_group + icg;
        const float* in_plane = data + (b * w.in_c + ic) * w.in_h * w.in_w;
        for (int64_t kh = 0; kh < w.kernel_h; ++kh) {
          for (int64_t kw = 0; kw < w.kernel_w; ++kw) {
            if (poll.Tick(out_h * out_w)) return false;
            const double wv =
                weight[((oc * in_c_per_group + icg) * w.kernel_h + kh) * w.kernel_w + kw];
            for (int64_t oh = 0; oh < out_h; ++oh) {
              const int64_t ih = oh * w.stride_h - w.pad_h + kh * w.dilation_h;
              if (ih < 0 || ih >= w.in_h) continue;
              for (int64_t ow = 0; ow < out_w; ++ow) {
                const int64_t iw = ow * w.stride_w - w.pad_w + kw * w.dilation_w;
                if (iw < 0 || iw >= w.in_w) continue;
                plane[oh * out_w + ow] += wv * static_cast<double>(in_plane[ih * w.in_w + iw]);
              }
            }
          }
        }
      }
      float* out_plane = out + (b * w.out_c + oc) * out_h * out_w;
      for (int64_t i = 0; i < out_h * out_w; ++i) {
        out_plane[i] = Epilogue(plane[i], bias, oc, ActOf(w));
      }
    }
  }
  return true;
}

// Between NCHW [batch][channels][plane] and NCHWc [batch][channels/c][plane][c]: channel ch of
// a plane at [ch / c][...][ch % c]. `to_blocked` reads NCHW `src` and writes NCHWc `dst`, else the
// reverse.
void Reblock(const float* src, float* dst, int64_t batch, int64_t channels, int64_t plane, int64_t c,
             bool to_blocked) {
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t ch = 0; ch < channels; ++ch) {
      for (int64_t i = 0; i < plane; ++i) {
        const int64_t nchw = (b * channels + ch) * plane + i;
        const int64_t nchwc = ((b * (channels / c) + ch / c) * plane + i) * c + ch % c;
        if (to_blocked) {
          dst[nchwc] = src[nchw];
        } else {
          dst[nchw] = src[nchwc];
        }
      }
    }
  }
}

std::string FormatFloat(float v) { return absl::StrCat(v); }

}  // namespace

void ComputeReference(const Workload& workload, const std::vector<std::vector<float>>& inputs,
                      std::vector<float>* out) {
  ComputeReference(workload, inputs, out, nullptr);
}

bool ComputeReference(const Workload& workload, const std::vector<std::vector<float>>& inputs,
                      std::vector<float>* out, const StopFn& should_stop) {
  StopPoll poll(should_stop);
  const absl::Status valid = workload.Validate();
  TUNE_CHECK(valid.ok()) << "ComputeReference: " << valid.message();
  const std::vector<codegen::TensorSpec> specs = workload.Inputs();
  TUNE_CHECK(inputs.size() == specs.size())
      << "ComputeReference: " << workload.Key() << ": got " << inputs.size() << " inputs, expected "
      << specs.size();
  for (size_t i = 0; i < specs.size(); ++i) {
    TUNE_CHECK(static_cast<int64_t>(inputs[i].size()) == specs[i].NumElements())
        << "ComputeReference: " << workload.Key() << ": input '" << specs[i].name << "' has "
        << inputs[i].size() << " elements, expected " << specs[i].NumElements();
  }
  out->assign(workload.Output().NumElements(), 0.0f);
  const float* bias = workload.bias ? inputs[2].data() : nullptr;
  const int64_t m = workload.m, n = workload.n, k = workload.k;

  bool done = true;
  switch (workload.op) {
    case OpKind::kMatmul:
      done = Matmul(inputs[0].data(), inputs[1].data(), bias, ActOf(workload), m, n, k, out->data(), poll);
      break;
    case OpKind::kDense: {
      // dense is a matmul with b = weight^T: transpose weight[N,K] into b[K,N] first.
      const std::vector<float>& weight = inputs[1];
      std::vector<float> b(k * n);
      for (int64_t j = 0; done && j < n; ++j) {
        for (int64_t p = 0; p < k; ++p) b[p * n + j] = weight[j * k + p];
        done = !poll.Tick(k);
      }
      done = done && Matmul(inputs[0].data(), b.data(), bias, ActOf(workload), m, n, k, out->data(), poll);
      break;
    }
    case OpKind::kBatchMatmul:
      for (int64_t i = 0; done && i < workload.batch; ++i) {
        done = Matmul(inputs[0].data() + i * m * k, inputs[1].data() + i * k * n, bias, ActOf(workload), m,
                      n, k, out->data() + i * m * n, poll);
      }
      break;
    case OpKind::kConv2d:
      if (workload.layout_block > 0) {
        // NCHWc: the NCHW convolution of the unblocked input, its output blocked again.
        const int64_t c = workload.layout_block;
        std::vector<float> data(inputs[0].size()), plain(out->size());
        Reblock(inputs[0].data(), data.data(), workload.batch, workload.in_c, workload.in_h * workload.in_w, c,
                /*to_blocked=*/false);
        done = Conv2d(workload, data.data(), inputs[1].data(), bias, plain.data(), poll);
        if (done) {
          Reblock(plain.data(), out->data(), workload.batch, workload.out_c, workload.out_h() * workload.out_w(), c,
                  /*to_blocked=*/true);
        }
      } else {
        done = Conv2d(workload, inputs[0].data(), inputs[1].data(), bias, out->data(), poll);
      }
      break;
  }
  if (!done) {
    out->clear();
    out->shrink_to_fit();
  }
  return done;
}

bool AllClose(const float* got, const float* want, int64_t n, double rtol, double atol,
              std::string* why) {
  int64_t mismatches = 0;
  int64_t first = -1;
  for (int64_t i = 0; i < n; ++i) {
    const double g = got[i], w = want[i];
    bool close;
    if (std::isnan(g) || std::isnan(w)) {
      close = false;
    } else if (std::isinf(g) || std::isinf(w)) {
      close = g == w;
    } else {
      close = std::abs(g - w) <= atol + rtol * std::abs(w);
    }
    if (!close) {
      if (first < 0) first = i;
      ++mismatches;
    }
  }
  if (mismatches == 0) return true;
  if (why != nullptr) {
    const double g = got[first], w = want[first];
    *why = absl::StrCat("index ", first, ": got ", FormatFloat(got[first]), ", want ",
                        FormatFloat(want[first]));
    if (!std::isnan(g) && !std::isnan(w) && !std::isinf(g) && !std::isinf(w)) {
      absl::StrAppend(why, " (|diff| ", std::abs(g - w), " > tolerance ", atol + rtol * std::abs(w),
                      ")");
    }
    absl::StrAppend(why, "; ", mismatches, " of ", n, " elements differ");
  }
  return false;
}

}  // namespace tune::measure
