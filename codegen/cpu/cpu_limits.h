// CpuLimits: the vector ISA a CPU template sizes its register tiles for.
#pragma once

#include <string>

namespace tune::codegen {

/// What the CPU templates need to know of the CPU their kernels run on: the float32 lanes of
/// its widest vector register and how many such registers there are. They bound the register
/// tiles a template offers, so a space never holds micro-kernels for an ISA the CPU lacks.
/// Where the thread count of the target is known (more than one), a template offers only
/// parallel loops that share out evenly among that many threads.
struct CpuLimits {
  int vector_lanes = 8;       // float32 lanes per vector register (4 SSE, 8 AVX2, 16 AVX-512)
  int vector_registers = 16;  // architectural vector registers (16 xmm/ymm, 32 zmm)
  std::string isa = "avx2";   // "sse", "avx2" or "avx512": how records and tests name it
  int threads = 0;            // threads a kernel may use (the target's); 0 = unknown, any split

  bool operator==(const CpuLimits&) const = default;
};

/// The limits of a CPU with `features` as target keys list them ("+avx2,+avx512f,+fma";
/// signs optional): AVX-512 (avx512f) gives 16 lanes and 32 registers, AVX2 or AVX 8 and 16,
/// anything else 4 and 16.
CpuLimits CpuLimitsOf(const std::string& features);

/// The limits of the CPU this process runs on (LLVM's view of its features).
CpuLimits HostCpuLimits();

}  // namespace tune::codegen
