// CPU kernel checks shared by codegen tests: fenced fp32 arrays that catch out-of-bounds
// accesses, random inputs, and every workload's output by plain loops in double precision.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "codegen/cpu/cpu_limits.h"
#include "codegen/cpu/llvm_codegen.h"
#include "codegen/ir/ir_printer.h"
#include "codegen/ir/template.h"
#include "codegen/ir/workload.h"
#include "codegen/runtime/loaded_kernel.h"
#include "codegen/runtime/runtime.h"
#include "gtest/gtest.h"
#include "search/space.h"
#include "tests/common/random_values.h"

namespace tune::test {

/// The conv2d workload of `shape` (Workload::Parse's text) with the given epilogue; a test
/// failure (and an empty workload) when the shape does not parse.
inline codegen::Workload ConvWorkloadForTest(const std::string& shape, bool bias, bool relu, bool relu6 = false) {
  absl::StatusOr<codegen::Workload> w = codegen::Workload::Parse(codegen::OpKind::kConv2d, shape);
  EXPECT_TRUE(w.ok()) << w.status();
  codegen::Workload out = w.ok() ? *w : codegen::Workload{};
  out.bias = bias;
  out.relu = relu;
  out.relu6 = relu6;
  return out;
}

/// What FencedArray keeps in the slack after the last element.
inline constexpr float kFenceSentinel = -7777.0f;

/// An fp32 array, 64-byte aligned as the kernel ABI requires, that ends less than 64 bytes
/// before an inaccessible page (and starts after one): a kernel that reads or writes more than
/// a few elements past either end crashes instead of passing. The slack between the end and
/// the page holds a sentinel that Intact() checks.
class FencedArray {
 public:
  explicit FencedArray(int64_t n) : n_(n) {
    const int64_t page = sysconf(_SC_PAGESIZE);
    const int64_t data_pages = (n * 4 + 64 + page - 1) / page;
    bytes_ = (data_pages + 2) * page;
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(p, MAP_FAILED);
    base_ = static_cast<char*>(p);
    mprotect(base_, page, PROT_NONE);
    char* end = base_ + (data_pages + 1) * page;
    mprotect(end, page, PROT_NONE);
    data_ = reinterpret_cast<float*>(reinterpret_cast<uintptr_t>(end - n * 4) & ~uintptr_t{63});
    slack_ = (end - reinterpret_cast<char*>(data_ + n)) / 4;
    for (int64_t i = 0; i < slack_; ++i) data_[n + i] = kFenceSentinel;
  }
  ~FencedArray() { munmap(base_, bytes_); }
  FencedArray(const FencedArray&) = delete;
  FencedArray& operator=(const FencedArray&) = delete;

  float* data() const { return data_; }
  int64_t size() const { return n_; }
  /// True iff the slack after the last element still holds the sentinel.
  bool Intact() const {
    for (int64_t i = 0; i < slack_; ++i) {
      if (data_[n_ + i] != kFenceSentinel) return false;
    }
    return true;
  }

 private:
  int64_t n_;
  int64_t bytes_ = 0;
  int64_t slack_ = 0;
  char* base_ = nullptr;
  float* data_ = nullptr;
};

inline float ReferenceEpilogue(const codegen::Workload& w, double v, const std::vector<float>* bias, int64_t channel) {
  if (w.bias) v += (*bias)[channel];
  if (w.relu) v = std::max(v, 0.0);
  if (w.relu6) v = std::min(std::max(v, 0.0), 6.0);
  return static_cast<float>(v);
}

/// The workload's output by plain loops in double precision (the definitions of workload.h).
inline std::vector<float> ReferenceOutput(const codegen::Workload& w, const std::vector<std::vector<float>>& in) {
  if (w.layout_block > 0) {
    // NCHWc: channel ch of a plane at [ch / c][...][ch % c]; the NCHW result blocked.
    const int64_t c = w.layout_block, in_plane = w.in_h * w.in_w, out_plane = w.out_h() * w.out_w();
    codegen::Workload plain = w;
    plain.layout_block = 0;
    std::vector<std::vector<float>> unblocked = in;
    for (int64_t n = 0; n < w.batch; ++n) {
      for (int64_t ch = 0; ch < w.in_c; ++ch) {
        for (int64_t i = 0; i < in_plane; ++i) {
          unblocked[0][(n * w.in_c + ch) * in_plane + i] = in[0][((n * w.in_c / c + ch / c) * in_plane + i) * c + ch % c];
        }
      }
    }
    const std::vector<float> nchw = ReferenceOutput(plain, unblocked);
    std::vector<float> out(nchw.size());
    for (int64_t n = 0; n < w.batch; ++n) {
      for (int64_t ch = 0; ch < w.out_c; ++ch) {
        for (int64_t i = 0; i < out_plane; ++i) {
          out[((n * w.out_c / c + ch / c) * out_plane + i) * c + ch % c] = nchw[(n * w.out_c + ch) * out_plane + i];
        }
      }
    }
    return out;
  }
  const std::vector<float>* bias = w.bias ? &in[2] : nullptr;
  std::vector<float> out(w.Output().NumElements());
  if (w.op != codegen::OpKind::kConv2d) {
    for (int64_t b = 0; b < w.batch; ++b) {
      for (int64_t m = 0; m < w.m; ++m) {
        for (int64_t n = 0; n < w.n; ++n) {
          double acc = 0;
          for (int64_t k = 0; k < w.k; ++k) {
            double x = in[0][(b * w.m + m) * w.k + k];
            double y = w.op == codegen::OpKind::kDense ? in[1][n * w.k + k] : in[1][(b * w.k + k) * w.n + n];
            acc += x * y;
          }
          out[(b * w.m + m) * w.n + n] = ReferenceEpilogue(w, acc, bias, n);
        }
      }
    }
    return out;
  }
  const int64_t oh = w.out_h(), ow = w.out_w(), icg = w.in_c / w.groups, ocg = w.out_c / w.groups;
  for (int64_t n = 0; n < w.batch; ++n) {
    for (int64_t oc = 0; oc < w.out_c; ++oc) {
      for (int64_t y = 0; y < oh; ++y) {
        for (int64_t x = 0; x < ow; ++x) {
          double acc = 0;
          for (int64_t ic = 0; ic < icg; ++ic) {
            const int64_t c = oc / ocg * icg + ic;
            for (int64_t kh = 0; kh < w.kernel_h; ++kh) {
              for (int64_t kw = 0; kw < w.kernel_w; ++kw) {
                const int64_t ih = y * w.stride_h + kh * w.dilation_h - w.pad_h;
                const int64_t iw = x * w.stride_w + kw * w.dilation_w - w.pad_w;
                if (ih < 0 || ih >= w.in_h || iw < 0 || iw >= w.in_w) continue;
                acc += static_cast<double>(in[0][((n * w.in_c + c) * w.in_h + ih) * w.in_w + iw]) *
                       in[1][((oc * icg + ic) * w.kernel_h + kh) * w.kernel_w + kw];
              }
            }
          }
          out[((n * w.out_c + oc) * oh + y) * ow + x] = ReferenceEpilogue(w, acc, bias, oc);
        }
      }
    }
  }
  return out;
}

/// Each config of `tmpl` lowered (its pseudo-C in `texts`, named prefix + index) and compiled
/// for the host, on two threads (each compile has its own LLVM context).
struct CompiledConfigs {
  std::vector<absl::StatusOr<codegen::CompiledKernel>> kernels;
  std::vector<std::string> texts;
};
inline CompiledConfigs CompileConfigs(const codegen::Template& tmpl, const std::vector<search::Config>& configs,
                                      const std::string& prefix) {
  CompiledConfigs out;
  out.kernels.assign(configs.size(), absl::UnknownError("not compiled"));
  out.texts.resize(configs.size());
  std::vector<std::thread> workers;
  for (size_t t = 0; t < 2; ++t) {
    workers.emplace_back([&, t] {
      for (size_t i = t; i < configs.size(); i += 2) {
        absl::StatusOr<codegen::LoweredFunc> f = tmpl.Lower(configs[i], absl::StrCat(prefix, i));
        if (!f.ok()) {
          out.kernels[i] = f.status();
          continue;
        }
        out.texts[i] = codegen::Print(*f);
        out.kernels[i] = codegen::CompileForHost(*f, codegen::CodegenOptions{});
      }
    });
  }
  for (auto& worker : workers) worker.join();
  return out;
}

/// Runs `fn` once on fresh random inputs of `w` (drawn from `rng`) in fenced arrays, the output
/// starting as NaN, and checks it against ReferenceOutput. Empty when all is well, else why
/// not: a wrong element, a write past a buffer, or a write into an input. Weights packed once
/// by earlier calls are forgotten first: the fresh weights may lie at an address an earlier
/// run's did, and a kernel of the same config would reuse that run's packing.
inline std::string RunFencedAgainstReference(void (*fn)(float* const*), const codegen::Workload& w,
                                             std::mt19937_64& rng) {
  std::vector<std::vector<float>> values;
  std::vector<std::unique_ptr<FencedArray>> arrays;
  std::vector<float*> args;
  for (const codegen::TensorSpec& spec : w.Inputs()) {
    values.push_back(RandomValues(spec.NumElements(), rng));
    arrays.push_back(std::make_unique<FencedArray>(spec.NumElements()));
    std::memcpy(arrays.back()->data(), values.back().data(), values.back().size() * 4);
    args.push_back(arrays.back()->data());
  }
  const int64_t out_n = w.Output().NumElements();
  arrays.push_back(std::make_unique<FencedArray>(out_n));
  for (int64_t j = 0; j < out_n; ++j) arrays.back()->data()[j] = std::nanf("");
  args.push_back(arrays.back()->data());
  tune_rt_prepacked_reset();
  fn(args.data());

  const std::vector<float> want = ReferenceOutput(w, values);
  const float* got = arrays.back()->data();
  for (int64_t j = 0; j < out_n; ++j) {
    if (!(std::fabs(got[j] - want[j]) <= 1e-4 + 1e-3 * std::fabs(want[j]))) {
      return absl::StrCat("wrong result at ", j, ": ", got[j], " vs ", want[j]);
    }
  }
  for (const auto& a : arrays) {
    if (!a->Intact()) return "wrote past a buffer";
  }
  for (size_t a = 0; a < values.size(); ++a) {
    if (std::memcmp(arrays[a]->data(), values[a].data(), values[a].size() * 4) != 0) return "wrote into an input";
  }
  return "";
}

/// The option of knob `name` whose value is `value` (-1: none).
inline int OptionWithValue(const search::ConfigSpace& space, const std::string& name, int64_t value) {
  const search::Knob& knob = space.knobs()[space.KnobIndex(name)];
  for (size_t i = 0; i < knob.options.size(); ++i) {
    if (knob.options[i][0] == value) return static_cast<int>(i);
  }
  return -1;
}

/// `count` distinct random valid configs of `tmpl` that pack the weight once; with `layout` >= 0
/// (conv2d) in that layout.
inline std::vector<search::Config> RandomPrepackConfigs(const codegen::Template& tmpl, int count, std::mt19937_64& rng,
                                                        int64_t layout = -1) {
  const search::ConfigSpace& space = tmpl.space();
  const bool conv = tmpl.workload().op == codegen::OpKind::kConv2d;
  std::vector<search::Config> out;
  for (int tries = 0; tries < 20000 && static_cast<int>(out.size()) < count; ++tries) {
    search::Config c = space.Draw(rng);
    if (conv) {
      if (layout >= 0) c[space.KnobIndex("layout")] = OptionWithValue(space, "layout", layout);
      c[space.KnobIndex("pack_weight")] = OptionWithValue(space, "pack_weight", 1);
    } else {
      c[space.KnobIndex("pack_b")] = OptionWithValue(space, "pack_b", 1);
    }
    c[space.KnobIndex("prepack")] = OptionWithValue(space, "prepack", 1);
    c = space.Canonical(c);
    if (!space.IsValid(c) || space.GetInt(c, "prepack") != 1) continue;
    bool seen = false;
    for (const search::Config& o : out) seen |= o == c;
    if (!seen) out.push_back(c);
  }
  EXPECT_EQ(static_cast<int>(out.size()), count) << "too few prepack configs of " << tmpl.workload().Key();
  return out;
}

/// Compiles `configs` of `tmpl` and runs each once on fresh random inputs against the
/// reference (RunFencedAgainstReference): the number that failed (did not compile, load or
/// match), the first two reported as test failures with `context` and the config.
inline int ConfigsFailingReference(const codegen::Template& tmpl, const std::vector<search::Config>& configs,
                                   const std::string& prefix, const std::string& context, std::mt19937_64& rng) {
  const CompiledConfigs compiled = CompileConfigs(tmpl, configs, prefix);
  int failures = 0;
  for (size_t i = 0; i < configs.size(); ++i) {
    const std::string where = absl::StrCat(tmpl.workload().Key(), " ", context, " ", tmpl.space().ToJson(configs[i]));
    std::string why;
    if (!compiled.kernels[i].ok()) {
      why = absl::StrCat("compile: ", compiled.kernels[i].status().ToString());
    } else if (auto loaded = codegen::LoadedKernel::Load(*compiled.kernels[i]); !loaded.ok()) {
      why = absl::StrCat("load: ", loaded.status().ToString());
    } else {
      why = RunFencedAgainstReference((*loaded)->fn(), tmpl.workload(), rng);
    }
    if (!why.empty() && ++failures <= 2) ADD_FAILURE() << why << "\n" << where;
  }
  return failures;
}

/// The limits of a CPU with `features` (codegen::CpuLimitsOf) running `threads` threads.
inline codegen::CpuLimits CpuLimitsAt(const std::string& features, int threads) {
  codegen::CpuLimits cpu = codegen::CpuLimitsOf(features);
  cpu.threads = threads;
  return cpu;
}

/// `configs` of `tmpl` as their JSON texts.
inline std::vector<std::string> ConfigTexts(const codegen::Template& tmpl, const std::vector<search::Config>& configs) {
  std::vector<std::string> out;
  for (const search::Config& c : configs) out.push_back(tmpl.space().ToJson(c));
  return out;
}

/// Whether one of `texts` contains every one of `parts`.
inline bool AnyContainsAll(const std::vector<std::string>& texts, const std::vector<std::string>& parts) {
  return std::any_of(texts.begin(), texts.end(), [&](const std::string& t) {
    return std::all_of(parts.begin(), parts.end(), [&](const std::string& p) { return t.find(p) != std::string::npos; });
  });
}

}  // namespace tune::test
