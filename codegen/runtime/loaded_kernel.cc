// LoadedKernel: links a CompiledKernel's object code into this process with ORC LLJIT.
#include "codegen/runtime/loaded_kernel.h"

#include <cstring>
#include <mutex>

#include "codegen/runtime/runtime.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"

namespace tune::codegen {

struct LoadedKernel::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
};

LoadedKernel::~LoadedKernel() = default;

absl::StatusOr<std::unique_ptr<LoadedKernel>> LoadedKernel::Load(const CompiledKernel& kernel) {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
  auto err_text = [](llvm::Error e) { return llvm::toString(std::move(e)); };
  auto jit = llvm::orc::LLJITBuilder().create();
  if (!jit) return absl::InternalError("cannot create JIT: " + err_text(jit.takeError()));
  auto& jd = (*jit)->getMainJITDylib();
  auto& es = (*jit)->getExecutionSession();
  es.setErrorReporter([](llvm::Error e) { llvm::consumeError(std::move(e)); });  // errors come back through lookup
  llvm::orc::MangleAndInterner mangle(es, (*jit)->getDataLayout());
  auto flags = llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable;
  llvm::orc::SymbolMap runtime_symbols{
      {mangle("tune_rt_parallel_for"),
       llvm::JITEvaluatedSymbol(llvm::pointerToJITTargetAddress(&tune_rt_parallel_for), flags)},
      {mangle("tune_rt_alloc"),
       llvm::JITEvaluatedSymbol(llvm::pointerToJITTargetAddress(&tune_rt_alloc), flags)},
      {mangle("tune_rt_free"),
       llvm::JITEvaluatedSymbol(llvm::pointerToJITTargetAddress(&tune_rt_free), flags)},
      {mangle("tune_rt_prepacked"),
       llvm::JITEvaluatedSymbol(llvm::pointerToJITTargetAddress(&tune_rt_prepacked), flags)},
      {mangle("tune_rt_prepacked_release"),
       llvm::JITEvaluatedSymbol(llvm::pointerToJITTargetAddress(&tune_rt_prepacked_release), flags)},
      // LLVM turns zero-fill and copy loops into these libc calls.
      {mangle("memset"), llvm::JITEvaluatedSymbol(llvm::pointerToJITTargetAddress(&memset), flags)},
      {mangle("memcpy"), llvm::JITEvaluatedSymbol(llvm::pointerToJITTargetAddress(&memcpy), flags)},
      {mangle("memmove"), llvm::JITEvaluatedSymbol(llvm::pointerToJITTargetAddress(&memmove), flags)},
  };
  if (auto e = jd.define(llvm::orc::absoluteSymbols(runtime_symbols))) {
    return absl::InternalError("cannot define runtime symbols: " + err_text(std::move(e)));
  }
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(kernel.object_code, kernel.symbol);
  if (auto e = (*jit)->addObjectFile(std::move(buffer))) {
    return absl::InternalError("cannot add kernel object: " + err_text(std::move(e)));
  }
  auto addr = (*jit)->lookup(kernel.symbol);
  if (!addr) return absl::InternalError("cannot link kernel: " + err_text(addr.takeError()));
  std::unique_ptr<LoadedKernel> out(new LoadedKernel());
  out->impl_ = std::make_unique<Impl>();
  out->fn_ = addr->toPtr<KernelFn>();
  out->impl_->jit = std::move(*jit);
  return out;
}

}  // namespace tune::codegen
