// The CUDA driver API through dlopen/dlsym: own minimal declarations, checked calls, RAII wrappers.
#include "codegen/runtime/cuda_driver.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace tune::codegen {

// ---------------------------------------------------------------------------------------------
// Declarations of the part of cuda.h (CUDA 13) this file uses: same types, values and
// signatures, so the functions dlsym returns are called exactly as the driver defines them.
// Where cuda.h maps a name onto a versioned symbol (#define cuMemAlloc cuMemAlloc_v2), the
// versioned symbol is resolved: the unversioned ones are kept by the driver for old binaries
// only and may behave differently (32-bit sizes).
// ---------------------------------------------------------------------------------------------

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUevent = struct CUevent_st*;
using CUstream = struct CUstream_st*;

namespace {

constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_NOT_INITIALIZED = 3;
constexpr CUresult CUDA_ERROR_DEINITIALIZED = 4;
constexpr CUresult CUDA_ERROR_STUB_LIBRARY = 34;
constexpr CUresult CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER = 36;
constexpr CUresult CUDA_ERROR_DEVICE_UNAVAILABLE = 46;
constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
constexpr CUresult CUDA_ERROR_SYSTEM_NOT_READY = 802;
constexpr CUresult CUDA_ERROR_SYSTEM_DRIVER_MISMATCH = 803;
constexpr CUresult CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE = 804;

// cuda.h: "This leaves the process in an inconsistent state and any further CUDA work will
// return the same error. To continue using CUDA, the process must be terminated and
// relaunched." (and the device-side assert, after which the context "cannot be used anymore").
constexpr CUresult kStickyErrors[] = {
    214,  // CUDA_ERROR_ECC_UNCORRECTABLE
    220,  // CUDA_ERROR_NVLINK_UNCORRECTABLE
    226,  // CUDA_ERROR_CONTAINED
    700,  // CUDA_ERROR_ILLEGAL_ADDRESS
    702,  // CUDA_ERROR_LAUNCH_TIMEOUT
    710,  // CUDA_ERROR_ASSERT
    714,  // CUDA_ERROR_HARDWARE_STACK_ERROR
    715,  // CUDA_ERROR_ILLEGAL_INSTRUCTION
    716,  // CUDA_ERROR_MISALIGNED_ADDRESS
    717,  // CUDA_ERROR_INVALID_ADDRESS_SPACE
    718,  // CUDA_ERROR_INVALID_PC
    719,  // CUDA_ERROR_LAUNCH_FAILED
    721,  // CUDA_ERROR_TENSOR_MEMORY_LEAK
    810,  // CUDA_ERROR_MPS_CLIENT_TERMINATED
    911,  // CUDA_ERROR_EXTERNAL_DEVICE
};

// Errors of the call's arguments (image, sizes, names): the caller's fault, nothing broken.
constexpr CUresult kArgumentErrors[] = {
    1,    // CUDA_ERROR_INVALID_VALUE
    101,  // CUDA_ERROR_INVALID_DEVICE
    200,  // CUDA_ERROR_INVALID_IMAGE
    209,  // CUDA_ERROR_NO_BINARY_FOR_GPU
    218,  // CUDA_ERROR_INVALID_PTX
    222,  // CUDA_ERROR_UNSUPPORTED_PTX_VERSION
    400,  // CUDA_ERROR_INVALID_HANDLE
    701,  // CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (too many threads for the registers, bad args)
    912,  // CUDA_ERROR_INVALID_CLUSTER_SIZE
};
constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;

// CUdevice_attribute
constexpr int CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2;  // Y = 3, Z = 4
constexpr int CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5;   // Y = 6, Z = 7
constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8;
constexpr int CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK = 12;
constexpr int CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13;
constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
constexpr int CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = 36;
constexpr int CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH = 37;
constexpr int CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR = 82;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;

// CUfunction_attribute
constexpr int CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0;
constexpr int CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1;
constexpr int CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES = 2;
constexpr int CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3;
constexpr int CU_FUNC_ATTRIBUTE_NUM_REGS = 4;
constexpr int CU_FUNC_ATTRIBUTE_BINARY_VERSION = 6;
constexpr int CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;

constexpr unsigned CU_EVENT_DEFAULT = 0;

/// The Status payload that carries the CUresult, as decimal text.
constexpr absl::string_view kCudaResultPayload = "type.tune/codegen.CudaResult";

}  // namespace

/// The driver entry points this file uses, resolved once per process.
struct CudaDriverApi {
  CUresult (*cuInit)(unsigned flags);
  CUresult (*cuDriverGetVersion)(int* version);
  CUresult (*cuGetErrorName)(CUresult error, const char** name);
  CUresult (*cuGetErrorString)(CUresult error, const char** text);
  CUresult (*cuDeviceGetCount)(int* count);
  CUresult (*cuDeviceGet)(CUdevice* device, int ordinal);
  CUresult (*cuDeviceGetName)(char* name, int length, CUdevice device);
  CUresult (*cuDeviceGetPCIBusId)(char* id, int length, CUdevice device);
  CUresult (*cuDeviceGetAttribute)(int* value, int attribute, CUdevice device);
  CUresult (*cuDeviceTotalMem)(size_t* bytes, CUdevice device);  // _v2
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext* context, CUdevice device);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice device);  // _v2
  CUresult (*cuCtxSetCurrent)(CUcontext context);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuModuleLoadData)(CUmodule* module, const void* image);
  CUresult (*cuModuleUnload)(CUmodule module);
  CUresult (*cuModuleGetFunction)(CUfunction* function, CUmodule module, const char* name);
  CUresult (*cuFuncGetAttribute)(int* value, int attribute, CUfunction function);
  CUresult (*cuFuncSetAttribute)(CUfunction function, int attribute, int value);
  CUresult (*cuMemAlloc)(CUdeviceptr* ptr, size_t bytes);                    // _v2
  CUresult (*cuMemFree)(CUdeviceptr ptr);                                    // _v2
  CUresult (*cuMemcpyHtoD)(CUdeviceptr dst, const void* src, size_t bytes);  // _v2
  CUresult (*cuMemcpyDtoH)(void* dst, CUdeviceptr src, size_t bytes);        // _v2
  CUresult (*cuMemsetD32)(CUdeviceptr dst, unsigned value, size_t count);    // _v2
  CUresult (*cuLaunchKernel)(CUfunction function, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                             unsigned block_x, unsigned block_y, unsigned block_z, unsigned shared_bytes,
                             CUstream stream, void** params, void** extra);
  CUresult (*cuEventCreate)(CUevent* event, unsigned flags);
  CUresult (*cuEventRecord)(CUevent event, CUstream stream);
  CUresult (*cuEventSynchronize)(CUevent event);
  CUresult (*cuEventElapsedTime)(float* ms, CUevent start, CUevent end);  // _v2 if any
  CUresult (*cuEventDestroy)(CUevent event);                              // _v2
  // Optional (drivers >= 12.4); param_count stays -1 without it.
  CUresult (*cuFuncGetParamInfo)(CUfunction function, size_t index, size_t* offset, size_t* size);
};

namespace {

/// The driver as this process found it: `api` is usable iff `status` is OK. `init_result` is
/// cuInit's result (CUDA_ERROR_NO_DEVICE leaves a usable driver with no devices).
struct LoadedDriver {
  CudaDriverApi api{};
  absl::Status status;
  CUresult init_result = CUDA_SUCCESS;
};

LoadedDriver* LoadDriver() {
  auto* d = new LoadedDriver;  // lives for the process: the driver is never unloaded
  // RTLD_LOCAL: the driver's symbols stay out of the global namespace (nothing else here
  // should bind to them by accident). Never dlclose'd: libcuda does not support unloading
  // while contexts or threads it started exist.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* error = dlerror();
    absl::string_view why = error != nullptr ? error : "?";
    absl::ConsumePrefix(&why, "libcuda.so.1: ");  // dlerror repeats the name
    d->status = absl::UnavailableError(absl::StrCat("no CUDA driver (libcuda.so.1 not found: ", why, ")"));
    return d;
  }
  std::string missing;
  auto resolve = [&](auto& fn, const char* symbol, bool required = true) {
    void* p = dlsym(lib, symbol);
    if (p == nullptr && required) absl::StrAppend(&missing, missing.empty() ? "" : ", ", symbol);
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
  };
  CudaDriverApi& a = d->api;
  resolve(a.cuInit, "cuInit");
  resolve(a.cuDriverGetVersion, "cuDriverGetVersion");
  resolve(a.cuGetErrorName, "cuGetErrorName");
  resolve(a.cuGetErrorString, "cuGetErrorString");
  resolve(a.cuDeviceGetCount, "cuDeviceGetCount");
  resolve(a.cuDeviceGet, "cuDeviceGet");
  resolve(a.cuDeviceGetName, "cuDeviceGetName");
  resolve(a.cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId");
  resolve(a.cuDeviceGetAttribute, "cuDeviceGetAttribute");
  resolve(a.cuDeviceTotalMem, "cuDeviceTotalMem_v2");
  resolve(a.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  resolve(a.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
  resolve(a.cuCtxSetCurrent, "cuCtxSetCurrent");
  resolve(a.cuCtxSynchronize, "cuCtxSynchronize");
  resolve(a.cuModuleLoadData, "cuModuleLoadData");
  resolve(a.cuModuleUnload, "cuModuleUnload");
  resolve(a.cuModuleGetFunction, "cuModuleGetFunction");
  resolve(a.cuFuncGetAttribute, "cuFuncGetAttribute");
  resolve(a.cuFuncSetAttribute, "cuFuncSetAttribute");
  resolve(a.cuMemAlloc, "cuMemAlloc_v2");
  resolve(a.cuMemFree, "cuMemFree_v2");
  resolve(a.cuMemcpyHtoD, "cuMemcpyHtoD_v2");
  resolve(a.cuMemcpyDtoH, "cuMemcpyDtoH_v2");
  resolve(a.cuMemsetD32, "cuMemsetD32_v2");
  resolve(a.cuLaunchKernel, "cuLaunchKernel");
  resolve(a.cuEventCreate, "cuEventCreate");
  resolve(a.cuEventRecord, "cuEventRecord");
  resolve(a.cuEventSynchronize, "cuEventSynchronize");
  resolve(a.cuEventDestroy, "cuEventDestroy_v2");
  // cuda.h 12.8+ maps cuEventElapsedTime onto _v2 (same signature); older drivers lack it.
  resolve(a.cuEventElapsedTime, "cuEventElapsedTime_v2", /*required=*/false);
  if (a.cuEventElapsedTime == nullptr) resolve(a.cuEventElapsedTime, "cuEventElapsedTime");
  resolve(a.cuFuncGetParamInfo, "cuFuncGetParamInfo", /*required=*/false);
  if (!missing.empty()) {
    d->status = absl::UnavailableError(
        absl::StrCat("the CUDA driver (libcuda.so.1) lacks ", missing, ": it is too old"));
    return d;
  }

  d->init_result = a.cuInit(0);
  if (d->init_result != CUDA_SUCCESS && d->init_result != CUDA_ERROR_NO_DEVICE) {
    const char* name = nullptr;
    const char* text = nullptr;
    a.cuGetErrorName(d->init_result, &name);
    a.cuGetErrorString(d->init_result, &text);
    d->status = absl::UnavailableError(
        absl::StrCat("the CUDA driver failed to initialize (cuInit: ", name != nullptr ? name : "?", ": ",
                     text != nullptr ? text : "?", ")"));
  }
  return d;
}

const LoadedDriver& Driver() {
  static const LoadedDriver* driver = LoadDriver();  // thread-safe one-time initialization
  return *driver;
}

bool Contains(const CUresult* begin, const CUresult* end, CUresult r) {
  return std::find(begin, end, r) != end;
}

absl::StatusCode CodeFor(CUresult r) {
  if (Contains(std::begin(kStickyErrors), std::end(kStickyErrors), r)) return absl::StatusCode::kInternal;
  if (Contains(std::begin(kArgumentErrors), std::end(kArgumentErrors), r)) {
    return absl::StatusCode::kInvalidArgument;
  }
  switch (r) {
    case CUDA_ERROR_OUT_OF_MEMORY:
      return absl::StatusCode::kResourceExhausted;
    case CUDA_ERROR_NOT_FOUND:
      return absl::StatusCode::kNotFound;
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_DEINITIALIZED:
    case CUDA_ERROR_STUB_LIBRARY:
    case CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER:
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_SYSTEM_NOT_READY:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
      return absl::StatusCode::kUnavailable;
    default:
      return absl::StatusCode::kInternal;
  }
}

/// OK for CUDA_SUCCESS; else a Status naming `call`, what it was `doing`, and the driver's
/// error name and text, carrying the CUresult.
absl::Status Check(const CudaDriverApi& api, CUresult r, absl::string_view call, absl::string_view doing) {
  if (r == CUDA_SUCCESS) return absl::OkStatus();
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.cuGetErrorName(r, &name) != CUDA_SUCCESS || name == nullptr) name = "CUDA_ERROR_?";
  if (api.cuGetErrorString(r, &text) != CUDA_SUCCESS || text == nullptr) text = "unknown error";
  std::string message = absl::StrCat(call, " (", doing, "): ", name, " (", r, "): ", text);
  const bool sticky = Contains(std::begin(kStickyErrors), std::end(kStickyErrors), r);
  if (sticky) message += " [sticky: the CUDA context is unusable; the process must be replaced]";
  absl::Status status(CodeFor(r), message);
  status.SetPayload(kCudaResultPayload, absl::Cord(absl::StrCat(r)));
  return status;
}

}  // namespace

/// The retained primary context of one device; released when the last owner goes.
struct CudaContext {
  const CudaDriverApi* api = nullptr;
  CUdevice device = 0;
  CUcontext context = nullptr;

  ~CudaContext() {
    // After a sticky error this fails like everything else; nothing more can be done then.
    if (context != nullptr) api->cuDevicePrimaryCtxRelease(device);
  }
  /// Makes the context current on the calling thread (a thread-local setting; cheap).
  absl::Status MakeCurrent() const {
    return Check(*api, api->cuCtxSetCurrent(context), "cuCtxSetCurrent", "making the context current");
  }
};

#define TUNE_CU_RETURN_IF_ERROR(expr)           \
  do {                                          \
    if (absl::Status _st = (expr); !_st.ok()) { \
      return _st;                               \
    }                                           \
  } while (false)

// ---------------------------------------------------------------------------------------------

std::string CudaDeviceInfo::Arch() const { return absl::StrCat("sm_", cc_major, cc_minor); }

// ---------------------------------------------------------------------------------------------

CudaModule::CudaModule(std::shared_ptr<const CudaContext> context, void* handle)
    : context_(std::move(context)), handle_(handle) {}

CudaModule::CudaModule(CudaModule&& other) noexcept
    : context_(std::move(other.context_)), handle_(std::exchange(other.handle_, nullptr)) {}

CudaModule& CudaModule::operator=(CudaModule&& other) noexcept {
  if (this != &other) {
    CudaModule old(std::move(*this));
    context_ = std::move(other.context_);
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

CudaModule::~CudaModule() {
  if (handle_ == nullptr) return;
  if (context_->MakeCurrent().ok()) context_->api->cuModuleUnload(static_cast<CUmodule>(handle_));
}

absl::StatusOr<CudaFunction> CudaModule::GetFunction(const std::string& name) const {
  const CudaDriverApi& api = *context_->api;
  TUNE_CU_RETURN_IF_ERROR(context_->MakeCurrent());
  CUfunction fn = nullptr;
  TUNE_CU_RETURN_IF_ERROR(Check(api,
                                api.cuModuleGetFunction(&fn, static_cast<CUmodule>(handle_), name.c_str()),
                                "cuModuleGetFunction", "looking up kernel '" + name + "'"));
  CudaFunction f;
  f.handle_ = fn;
  f.name_ = name;
  auto get = [&](int attribute, const char* what, auto* out) -> absl::Status {
    int value = 0;
    TUNE_CU_RETURN_IF_ERROR(Check(api, api.cuFuncGetAttribute(&value, attribute, fn), "cuFuncGetAttribute",
                                  absl::StrCat("reading ", what, " of kernel '", name, "'")));
    *out = value;
    return absl::OkStatus();
  };
  CudaFunctionAttributes& a = f.attributes_;
  TUNE_CU_RETURN_IF_ERROR(get(CU_FUNC_ATTRIBUTE_NUM_REGS, "its registers", &a.registers));
  TUNE_CU_RETURN_IF_ERROR(
      get(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, "its static shared memory", &a.static_shared_bytes));
  TUNE_CU_RETURN_IF_ERROR(get(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, "its local memory", &a.local_bytes));
  TUNE_CU_RETURN_IF_ERROR(get(CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, "its constant memory", &a.const_bytes));
  TUNE_CU_RETURN_IF_ERROR(
      get(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "its thread limit", &a.max_threads_per_block));
  TUNE_CU_RETURN_IF_ERROR(get(CU_FUNC_ATTRIBUTE_BINARY_VERSION, "its binary version", &a.binary_version));
  TUNE_CU_RETURN_IF_ERROR(get(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                              "its dynamic shared memory limit", &f.dynamic_shared_limit_));
  if (api.cuFuncGetParamInfo != nullptr) {
    // Parameters are numbered from 0; the first index past the end is CUDA_ERROR_INVALID_VALUE.
    // A kernel has at most a few thousand parameter bytes, so this loop is short.
    int count = 0;
    size_t offset = 0, size = 0;
    while (count < 4096 && api.cuFuncGetParamInfo(fn, count, &offset, &size) == CUDA_SUCCESS) ++count;
    a.param_count = count;
  }
  return f;
}

// ---------------------------------------------------------------------------------------------

DeviceBuffer::DeviceBuffer(std::shared_ptr<const CudaContext> context, uint64_t ptr, int64_t bytes)
    : context_(std::move(context)), ptr_(ptr), bytes_(bytes) {}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : context_(std::move(other.context_)),
      ptr_(std::exchange(other.ptr_, 0)),
      bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    DeviceBuffer old(std::move(*this));
    context_ = std::move(other.context_);
    ptr_ = std::exchange(other.ptr_, 0);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_ == 0) return;
  if (context_->MakeCurrent().ok()) context_->api->cuMemFree(ptr_);
}

// The bytes a copy into or out of a buffer of `capacity` bytes moves (all of them for a
// negative `bytes`), or why it cannot; `direction` is "into" or "out of".
static absl::StatusOr<int64_t> CopyBytes(int64_t bytes, int64_t capacity, const char* direction) {
  if (bytes < 0) return capacity;
  if (bytes > capacity) {
    return absl::InvalidArgumentError(
        absl::StrCat("copying ", bytes, " bytes ", direction, " a device buffer of ", capacity));
  }
  return bytes;
}

absl::Status DeviceBuffer::CopyFromHost(const void* src, int64_t bytes) {
  absl::StatusOr<int64_t> n = CopyBytes(bytes, bytes_, "into");
  if (!n.ok() || *n == 0) return n.status();
  TUNE_CU_RETURN_IF_ERROR(context_->MakeCurrent());
  return Check(*context_->api, context_->api->cuMemcpyHtoD(ptr_, src, static_cast<size_t>(*n)),
               "cuMemcpyHtoD_v2", absl::StrCat("copying ", *n, " bytes to the device"));
}

absl::Status DeviceBuffer::CopyToHost(void* dst, int64_t bytes) const {
  absl::StatusOr<int64_t> n = CopyBytes(bytes, bytes_, "out of");
  if (!n.ok() || *n == 0) return n.status();
  TUNE_CU_RETURN_IF_ERROR(context_->MakeCurrent());
  return Check(*context_->api, context_->api->cuMemcpyDtoH(dst, ptr_, static_cast<size_t>(*n)),
               "cuMemcpyDtoH_v2", absl::StrCat("copying ", *n, " bytes to the host"));
}

absl::Status DeviceBuffer::Fill32(uint32_t pattern) {
  if (bytes_ % 4 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("filling a device buffer of ", bytes_, " bytes with 32-bit words"));
  }
  TUNE_CU_RETURN_IF_ERROR(context_->MakeCurrent());
  // cuMemsetD32 is asynchronous for device memory; waiting keeps every buffer operation
  // synchronous, like the copies.
  TUNE_CU_RETURN_IF_ERROR(Check(*context_->api,
                                context_->api->cuMemsetD32(ptr_, pattern, static_cast<size_t>(bytes_ / 4)),
                                "cuMemsetD32_v2", absl::StrCat("filling ", bytes_, " bytes")));
  return Check(*context_->api, context_->api->cuCtxSynchronize(), "cuCtxSynchronize", "waiting for a fill");
}

// ---------------------------------------------------------------------------------------------

absl::StatusOr<int> CudaDeviceCount() {
  const LoadedDriver& driver = Driver();
  if (!driver.status.ok()) return driver.status;
  if (driver.init_result == CUDA_ERROR_NO_DEVICE) return 0;
  int count = 0;
  TUNE_CU_RETURN_IF_ERROR(
      Check(driver.api, driver.api.cuDeviceGetCount(&count), "cuDeviceGetCount", "counting devices"));
  return count;
}

absl::StatusOr<std::unique_ptr<CudaDevice>> CudaDevice::Open(int ordinal) {
  const LoadedDriver& driver = Driver();
  if (!driver.status.ok()) return driver.status;
  const CudaDriverApi& api = driver.api;
  absl::StatusOr<int> count = CudaDeviceCount();
  if (!count.ok()) return count.status();
  if (*count == 0) return absl::UnavailableError("no CUDA device (the driver loads but finds none)");
  if (ordinal < 0 || ordinal >= *count) {
    return absl::NotFoundError(absl::StrCat("no CUDA device ", ordinal, " (devices 0..", *count - 1, ")"));
  }

  CUdevice device = 0;
  TUNE_CU_RETURN_IF_ERROR(
      Check(api, api.cuDeviceGet(&device, ordinal), "cuDeviceGet", absl::StrCat("getting device ", ordinal)));
  CUcontext context = nullptr;
  TUNE_CU_RETURN_IF_ERROR(Check(api, api.cuDevicePrimaryCtxRetain(&context, device),
                                "cuDevicePrimaryCtxRetain",
                                absl::StrCat("retaining the primary context of device ", ordinal)));
  auto ctx = std::make_shared<CudaContext>();
  ctx->api = &api;
  ctx->device = device;
  ctx->context = context;  // from here on, released by ~CudaContext
  TUNE_CU_RETURN_IF_ERROR(ctx->MakeCurrent());

  std::unique_ptr<CudaDevice> dev(new CudaDevice(ctx));
  CudaDeviceInfo& info = dev->info_;
  info.ordinal = ordinal;
  char name[256] = {};
  TUNE_CU_RETURN_IF_ERROR(Check(api, api.cuDeviceGetName(name, sizeof(name) - 1, device), "cuDeviceGetName",
                                "reading the device name"));
  info.name = name;
  char bus_id[64] = {};
  TUNE_CU_RETURN_IF_ERROR(Check(api, api.cuDeviceGetPCIBusId(bus_id, sizeof(bus_id) - 1, device),
                                "cuDeviceGetPCIBusId", "reading the PCI bus id"));
  info.pci_bus_id = bus_id;
  TUNE_CU_RETURN_IF_ERROR(Check(api, api.cuDriverGetVersion(&info.driver_version), "cuDriverGetVersion",
                                "reading the driver version"));
  size_t total = 0;
  TUNE_CU_RETURN_IF_ERROR(
      Check(api, api.cuDeviceTotalMem(&total, device), "cuDeviceTotalMem_v2", "reading the memory size"));
  info.total_memory = static_cast<int64_t>(total);

  auto attr = [&](int attribute, const char* what, auto* out) -> absl::Status {
    int value = 0;
    TUNE_CU_RETURN_IF_ERROR(Check(api, api.cuDeviceGetAttribute(&value, attribute, device),
                                  "cuDeviceGetAttribute", absl::StrCat("reading ", what)));
    *out = value;
    return absl::OkStatus();
  };
  TUNE_CU_RETURN_IF_ERROR(attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "the SM count", &info.sm_count));
  TUNE_CU_RETURN_IF_ERROR(
      attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "the compute capability", &info.cc_major));
  TUNE_CU_RETURN_IF_ERROR(
      attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "the compute capability", &info.cc_minor));
  TUNE_CU_RETURN_IF_ERROR(
      attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "threads per block", &info.max_threads_per_block));
  for (int i = 0; i < 3; ++i) {
    TUNE_CU_RETURN_IF_ERROR(
        attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X + i, "block dimensions", &info.max_block_dim[i]));
    TUNE_CU_RETURN_IF_ERROR(
        attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X + i, "grid dimensions", &info.max_grid_dim[i]));
  }
  TUNE_CU_RETURN_IF_ERROR(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, "shared memory per block",
                               &info.max_shared_per_block));
  TUNE_CU_RETURN_IF_ERROR(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "opt-in shared memory",
                               &info.max_shared_per_block_optin));
  TUNE_CU_RETURN_IF_ERROR(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
                               "shared memory per SM", &info.max_shared_per_sm));
  TUNE_CU_RETURN_IF_ERROR(
      attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, "registers per block", &info.regs_per_block));
  TUNE_CU_RETURN_IF_ERROR(
      attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, "registers per SM", &info.regs_per_sm));
  TUNE_CU_RETURN_IF_ERROR(
      attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, "threads per SM", &info.max_threads_per_sm));
  TUNE_CU_RETURN_IF_ERROR(attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE, "the warp size", &info.warp_size));
  TUNE_CU_RETURN_IF_ERROR(attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "the L2 size", &info.l2_bytes));
  TUNE_CU_RETURN_IF_ERROR(attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE, "the clock rate", &info.clock_khz));
  TUNE_CU_RETURN_IF_ERROR(
      attr(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, "the memory clock", &info.memory_clock_khz));
  TUNE_CU_RETURN_IF_ERROR(
      attr(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, "the memory bus width", &info.memory_bus_bits));
  return dev;
}

CudaDevice::~CudaDevice() = default;

absl::StatusOr<CudaModule> CudaDevice::LoadModule(const std::string& cubin) {
  if (cubin.empty()) return absl::InvalidArgumentError("loading an empty CUDA module image");
  const CudaDriverApi& api = *context_->api;
  TUNE_CU_RETURN_IF_ERROR(context_->MakeCurrent());
  CUmodule module = nullptr;
  TUNE_CU_RETURN_IF_ERROR(Check(
      api, api.cuModuleLoadData(&module, cubin.data()), "cuModuleLoadData",
      absl::StrCat("loading a ", cubin.size(), "-byte module on ", info_.name, " (", info_.Arch(), ")")));
  return CudaModule(context_, module);
}

absl::StatusOr<DeviceBuffer> CudaDevice::Alloc(int64_t bytes) {
  if (bytes <= 0) return absl::InvalidArgumentError(absl::StrCat("allocating ", bytes, " bytes"));
  const CudaDriverApi& api = *context_->api;
  TUNE_CU_RETURN_IF_ERROR(context_->MakeCurrent());
  CUdeviceptr ptr = 0;
  TUNE_CU_RETURN_IF_ERROR(Check(api, api.cuMemAlloc(&ptr, static_cast<size_t>(bytes)), "cuMemAlloc_v2",
                                absl::StrCat("allocating ", bytes, " bytes")));
  return DeviceBuffer(context_, ptr, bytes);
}

absl::Status CudaDevice::CheckLaunch(const CudaFunction& f, Dim3 grid, Dim3 block,
                                     int64_t dynamic_shared_bytes, const std::vector<void*>& args) const {
  auto bad = [&](auto&&... what) {
    return absl::InvalidArgumentError(absl::StrCat("launch of ", f.name(), " with grid (", grid.x, ",",
                                                   grid.y, ",", grid.z, ") block (", block.x, ",", block.y,
                                                   ",", block.z, "): ", what...));
  };
  if (f.handle_ == nullptr) return bad("the kernel handle is empty");
  const uint32_t block_dims[3] = {block.x, block.y, block.z};
  const uint32_t grid_dims[3] = {grid.x, grid.y, grid.z};
  for (int i = 0; i < 3; ++i) {
    const absl::string_view axis = absl::string_view("xyz").substr(i, 1);
    if (block_dims[i] == 0 || grid_dims[i] == 0) return bad("every dimension must be at least 1");
    if (block_dims[i] > static_cast<uint32_t>(info_.max_block_dim[i])) {
      return bad("block dimension ", axis, " exceeds the device's ", info_.max_block_dim[i]);
    }
    if (grid_dims[i] > static_cast<uint32_t>(info_.max_grid_dim[i])) {
      return bad("grid dimension ", axis, " exceeds the device's ", info_.max_grid_dim[i]);
    }
  }
  if (block.Count() > info_.max_threads_per_block) {
    return bad(block.Count(), " threads per block exceed the device's ", info_.max_threads_per_block);
  }
  if (block.Count() > f.attributes().max_threads_per_block) {
    return bad(block.Count(), " threads per block exceed the ", f.attributes().max_threads_per_block,
               " this kernel can run with its ", f.attributes().registers, " registers per thread");
  }
  if (dynamic_shared_bytes < 0) return bad("negative dynamic shared memory");
  const int64_t shared = f.attributes().static_shared_bytes + dynamic_shared_bytes;
  if (shared > info_.max_shared_per_block_optin) {
    return bad(shared, " bytes of shared memory per block (", f.attributes().static_shared_bytes,
               " static + ", dynamic_shared_bytes, " dynamic) exceed the device's ",
               info_.max_shared_per_block_optin);
  }
  if (f.attributes().param_count >= 0 && static_cast<int>(args.size()) != f.attributes().param_count) {
    return bad(args.size(), " arguments for ", f.attributes().param_count, " parameters");
  }
  for (void* arg : args) {
    if (arg == nullptr) return bad("an argument pointer is null (each must point at the value)");
  }
  return absl::OkStatus();
}

absl::Status CudaDevice::Launch(const CudaFunction& f, Dim3 grid, Dim3 block, int64_t dynamic_shared_bytes,
                                const std::vector<void*>& args) {
  TUNE_CU_RETURN_IF_ERROR(CheckLaunch(f, grid, block, dynamic_shared_bytes, args));
  const CudaDriverApi& api = *context_->api;
  TUNE_CU_RETURN_IF_ERROR(context_->MakeCurrent());
  CUfunction fn = static_cast<CUfunction>(f.handle_);
  if (dynamic_shared_bytes > f.dynamic_shared_limit_) {
    // Above 48 KB per block, a kernel must opt in to dynamic shared memory explicitly.
    TUNE_CU_RETURN_IF_ERROR(Check(
        api,
        api.cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                               static_cast<int>(dynamic_shared_bytes)),
        "cuFuncSetAttribute",
        absl::StrCat("allowing ", f.name(), " ", dynamic_shared_bytes, " bytes of dynamic shared memory")));
    f.dynamic_shared_limit_ = dynamic_shared_bytes;
  }
  return Check(api,
               api.cuLaunchKernel(fn, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                                  static_cast<unsigned>(dynamic_shared_bytes), /*stream=*/nullptr,
                                  const_cast<void**>(args.data()), /*extra=*/nullptr),
               "cuLaunchKernel", absl::StrCat("launching ", f.name()));
}

absl::Status CudaDevice::Synchronize() {
  TUNE_CU_RETURN_IF_ERROR(context_->MakeCurrent());
  return Check(*context_->api, context_->api->cuCtxSynchronize(), "cuCtxSynchronize",
               "waiting for the device");
}

absl::StatusOr<double> CudaDevice::TimeMs(const std::function<absl::Status()>& enqueue) {
  const CudaDriverApi& api = *context_->api;
  TUNE_CU_RETURN_IF_ERROR(context_->MakeCurrent());
  // Two events, destroyed on every path.
  struct Event {
    const CudaDriverApi* api;
    CUevent event = nullptr;
    ~Event() {
      if (event != nullptr) api->cuEventDestroy(event);
    }
  } start{&api}, stop{&api};
  TUNE_CU_RETURN_IF_ERROR(Check(api, api.cuEventCreate(&start.event, CU_EVENT_DEFAULT), "cuEventCreate",
                                "creating the start event"));
  TUNE_CU_RETURN_IF_ERROR(Check(api, api.cuEventCreate(&stop.event, CU_EVENT_DEFAULT), "cuEventCreate",
                                "creating the stop event"));
  TUNE_CU_RETURN_IF_ERROR(
      Check(api, api.cuEventRecord(start.event, nullptr), "cuEventRecord", "recording the start event"));
  TUNE_CU_RETURN_IF_ERROR(enqueue());
  TUNE_CU_RETURN_IF_ERROR(context_->MakeCurrent());  // `enqueue` may have changed it
  TUNE_CU_RETURN_IF_ERROR(
      Check(api, api.cuEventRecord(stop.event, nullptr), "cuEventRecord", "recording the stop event"));
  TUNE_CU_RETURN_IF_ERROR(
      Check(api, api.cuEventSynchronize(stop.event), "cuEventSynchronize", "waiting for the timed work"));
  float ms = 0;
  TUNE_CU_RETURN_IF_ERROR(Check(api, api.cuEventElapsedTime(&ms, start.event, stop.event),
                                "cuEventElapsedTime", "reading the elapsed time"));
  return static_cast<double>(ms);
}

absl::StatusOr<double> CudaDevice::TimeLaunches(const CudaFunction& f, Dim3 grid, Dim3 block,
                                                int64_t dynamic_shared_bytes, const std::vector<void*>& args,
                                                int repeats) {
  if (repeats < 1) return absl::InvalidArgumentError(absl::StrCat("timing ", repeats, " launches"));
  // One check up front, so a bad launch fails before any event is recorded.
  TUNE_CU_RETURN_IF_ERROR(CheckLaunch(f, grid, block, dynamic_shared_bytes, args));
  absl::StatusOr<double> ms = TimeMs([&]() -> absl::Status {
    for (int i = 0; i < repeats; ++i) {
      TUNE_CU_RETURN_IF_ERROR(Launch(f, grid, block, dynamic_shared_bytes, args));
    }
    return absl::OkStatus();
  });
  if (!ms.ok()) return ms.status();
  return *ms / repeats;
}

// ---------------------------------------------------------------------------------------------

int CudaResultOf(const absl::Status& status) {
  auto payload = status.GetPayload(kCudaResultPayload);  // absl::optional<absl::Cord>
  if (!payload.has_value()) return 0;
  int r = 0;
  if (!absl::SimpleAtoi(std::string(*payload), &r)) return 0;
  return r;
}

bool IsStickyCudaError(const absl::Status& status) {
  if (status.ok()) return false;
  const int r = CudaResultOf(status);
  return r != 0 && Contains(std::begin(kStickyErrors), std::end(kStickyErrors), r);
}

}  // namespace tune::codegen
