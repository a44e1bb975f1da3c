// The CUDA driver API, loaded at run time from libcuda.so.1: devices, modules, memory, launches, timing.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tune::codegen {

// The driver is never linked: libcuda.so.1 is dlopen'ed on first use, so binaries start (and
// every non-CUDA path works) on hosts without a GPU or driver. Every driver call's result is
// checked; a failure becomes a Status whose message names the call, what it was doing, and
// the driver's error name and text, and which carries the CUresult (CudaResultOf).
//
// Ownership: a CudaDevice holds a reference to its device's primary context; modules and
// buffers made from it share that reference, so the context lives until the last of them is
// gone (a CudaFunction is a plain handle: keep its CudaModule alive while launching it).
// Thread-compatible: one object is used by one thread at a time, any thread (each call makes
// the primary context current on the calling thread first); distinct objects may be used
// from distinct threads.

struct Dim3 {
  uint32_t x = 1, y = 1, z = 1;
  int64_t Count() const { return int64_t{x} * y * z; }
};

struct CudaDeviceInfo {
  std::string name;                        // e.g. "NVIDIA H100 80GB HBM3"
  std::string pci_bus_id;                  // cuDeviceGetPCIBusId, e.g. "0000:1B:00.0": one physical GPU
  int ordinal = -1;                        // the driver's device index
  int sm_count = 0;                        // streaming multiprocessors
  int cc_major = 0, cc_minor = 0;          // compute capability (9.0 for Hopper)
  int driver_version = 0;                  // cuDriverGetVersion: 1000 * major + 10 * minor (13000)
  int64_t total_memory = 0;                // device memory, bytes
  int max_threads_per_block = 0;           // threads
  int max_block_dim[3] = {0, 0, 0};        // threads per block along x, y, z
  int max_grid_dim[3] = {0, 0, 0};         // blocks per grid along x, y, z
  int64_t max_shared_per_block = 0;        // bytes a block may use without opting in (48 KB)
  int64_t max_shared_per_block_optin = 0;  // bytes with opt-in (227 KB on sm_90)
  int64_t max_shared_per_sm = 0;           // bytes per multiprocessor
  int regs_per_block = 0;                  // 32-bit registers per block
  int regs_per_sm = 0;                     // 32-bit registers per multiprocessor
  int max_threads_per_sm = 0;              // resident threads per multiprocessor
  int warp_size = 0;                       // threads
  int64_t l2_bytes = 0;                    // L2 cache, bytes
  int clock_khz = 0;                       // typical SM clock, kHz
  int memory_clock_khz = 0;                // peak memory clock, kHz
  int memory_bus_bits = 0;                 // global memory bus width, bits

  /// The real architecture to compile for: "sm_" and the compute capability ("sm_90").
  std::string Arch() const;
};

/// The resources the driver reports for one loaded kernel (cuFuncGetAttribute).
struct CudaFunctionAttributes {
  int registers = 0;                // 32-bit registers per thread
  int64_t static_shared_bytes = 0;  // statically allocated shared memory per block
  int64_t local_bytes = 0;          // local memory per thread (stack, spills)
  int64_t const_bytes = 0;          // user constant memory
  int max_threads_per_block = 0;    // what this kernel can launch with (registers allowing)
  int binary_version = 0;           // SASS version, 10 * major + minor (90)
  int param_count = -1;             // kernel parameters; -1 where the driver can't tell
};

/// A kernel of a loaded module: a plain handle, valid while its CudaModule lives.
class CudaFunction {
 public:
  const std::string& name() const { return name_; }
  const CudaFunctionAttributes& attributes() const { return attributes_; }

 private:
  friend class CudaModule;
  friend class CudaDevice;
  void* handle_ = nullptr;  // CUfunction
  std::string name_;
  CudaFunctionAttributes attributes_;
  // The dynamic shared memory the kernel is currently allowed (raised by Launch on demand).
  mutable int64_t dynamic_shared_limit_ = 0;
};

struct CudaContext;  // the retained primary context and the driver entry points (cuda_driver.cc)

/// A loaded cubin (cuModuleLoadData); unloaded when destroyed. Move-only.
class CudaModule {
 public:
  CudaModule(CudaModule&&) noexcept;
  CudaModule& operator=(CudaModule&&) noexcept;
  ~CudaModule();

  /// The kernel `name` (the extern "C" name, else the mangled one) with its attributes.
  /// NotFound when the module has no such kernel.
  absl::StatusOr<CudaFunction> GetFunction(const std::string& name) const;

 private:
  friend class CudaDevice;
  CudaModule(std::shared_ptr<const CudaContext> context, void* handle);
  std::shared_ptr<const CudaContext> context_;
  void* handle_ = nullptr;  // CUmodule
};

/// Device memory (cuMemAlloc); freed when destroyed. Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer(DeviceBuffer&&) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&&) noexcept;
  ~DeviceBuffer();

  /// The device address, as a kernel's pointer parameter takes it (pass &ptr() or
  /// KernelArgs::Add(buffer)). Allocations are at least 256-byte aligned.
  uint64_t ptr() const { return ptr_; }
  int64_t bytes() const { return bytes_; }

  /// Synchronous copies of `bytes` (default: the whole buffer) from / to host memory.
  /// InvalidArgument when `bytes` exceeds the buffer.
  absl::Status CopyFromHost(const void* src, int64_t bytes = -1);
  absl::Status CopyToHost(void* dst, int64_t bytes = -1) const;
  /// Sets every 32-bit word of the buffer to `pattern` (its size must be a multiple of 4).
  absl::Status Fill32(uint32_t pattern);

 private:
  friend class CudaDevice;
  DeviceBuffer(std::shared_ptr<const CudaContext> context, uint64_t ptr, int64_t bytes);
  std::shared_ptr<const CudaContext> context_;
  uint64_t ptr_ = 0;  // CUdeviceptr
  int64_t bytes_ = 0;
};

/// Kernel arguments by value, in parameter order; pointers() is what Launch takes (one
/// pointer to each value, the cuLaunchKernel convention). Values are copied, so temporaries
/// are fine; pointers() stays valid while this object lives.
class KernelArgs {
 public:
  template <typename T>
  KernelArgs& Add(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>, "kernel arguments are passed by bytes");
    auto& slot = storage_.emplace_back(std::make_unique<unsigned char[]>(sizeof(T)));
    std::memcpy(slot.get(), &value, sizeof(T));
    pointers_.push_back(slot.get());
    return *this;
  }
  KernelArgs& Add(const DeviceBuffer& buffer) { return Add(buffer.ptr()); }
  const std::vector<void*>& pointers() const { return pointers_; }

 private:
  std::vector<std::unique_ptr<unsigned char[]>> storage_;  // new[]: aligned for any scalar
  std::vector<void*> pointers_;
};

/// One device with its primary context. See the ownership and threading notes above.
class CudaDevice {
 public:
  ~CudaDevice();
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  /// Loads the driver (once per process), retains device `ordinal`'s primary context and makes
  /// it current on the calling thread. Unavailable when there is no driver ("no CUDA driver
  /// (libcuda.so.1 not found: ...)"), the driver fails to initialize, or there is no device;
  /// NotFound when `ordinal` is not a device.
  static absl::StatusOr<std::unique_ptr<CudaDevice>> Open(int ordinal);

  const CudaDeviceInfo& info() const { return info_; }

  /// Loads a cubin (CompiledCuda::cubin). InvalidArgument when the driver rejects the image
  /// (corrupt, or built for another arch: CUDA_ERROR_NO_BINARY_FOR_GPU).
  absl::StatusOr<CudaModule> LoadModule(const std::string& cubin);

  /// Allocates `bytes` (> 0) of device memory, uninitialized. ResourceExhausted when full.
  absl::StatusOr<DeviceBuffer> Alloc(int64_t bytes);

  /// Enqueues `f` on the default stream; returns without waiting for it. `args` holds one
  /// pointer per kernel parameter (KernelArgs::pointers()). The launch is checked against the
  /// device's and the kernel's limits first (block and grid sizes, threads the kernel's
  /// registers allow, shared memory, parameter count where known): InvalidArgument, nothing
  /// launched. Dynamic shared memory above the default 48 KB is opted into here. Faults in
  /// the kernel surface later, at the next synchronizing call (IsStickyCudaError).
  absl::Status Launch(const CudaFunction& f, Dim3 grid, Dim3 block, int64_t dynamic_shared_bytes,
                      const std::vector<void*>& args);

  /// Waits for all work on the device (cuCtxSynchronize); a kernel's fault is reported here.
  absl::Status Synchronize();

  /// Device time in milliseconds of the work `enqueue` puts on the default stream, measured
  /// with two CUDA events around it (resolution about 0.5 us); waits for it to finish.
  /// `enqueue`'s error is returned as it is.
  absl::StatusOr<double> TimeMs(const std::function<absl::Status()>& enqueue);

  /// Mean device milliseconds per launch of `repeats` (>= 1) back-to-back launches of `f`.
  absl::StatusOr<double> TimeLaunches(const CudaFunction& f, Dim3 grid, Dim3 block,
                                      int64_t dynamic_shared_bytes, const std::vector<void*>& args,
                                      int repeats);

 private:
  explicit CudaDevice(std::shared_ptr<const CudaContext> context) : context_(std::move(context)) {}
  absl::Status CheckLaunch(const CudaFunction& f, Dim3 grid, Dim3 block, int64_t dynamic_shared_bytes,
                           const std::vector<void*>& args) const;
  std::shared_ptr<const CudaContext> context_;
  CudaDeviceInfo info_;
};

/// The number of CUDA devices; 0 when the driver loads but finds none. Unavailable when there
/// is no driver or it fails to initialize.
absl::StatusOr<int> CudaDeviceCount();

/// The CUresult a Status from this file carries (CUDA_ERROR_ILLEGAL_ADDRESS is 700), or 0.
int CudaResultOf(const absl::Status& status);

/// True when the status came from a sticky CUDA error (illegal address, misaligned address,
/// launch failure, illegal instruction, hardware stack error, device assert, ...): the
/// context is unusable, every later call fails the same way, and the process must be
/// replaced to use the device again.
bool IsStickyCudaError(const absl::Status& status);

}  // namespace tune::codegen
