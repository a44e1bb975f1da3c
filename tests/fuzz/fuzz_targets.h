// Fuzz targets: one function per parser or handler over one input, in libFuzzer's signature.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tune::fuzz {

/// Each target takes any bytes and returns 0. An input the code under test refuses (an
/// absl::Status or gRPC error) is fine; a defect ends the process (abort, uncaught exception,
/// sanitizer report) or never returns (a hang, caught by the harness's time limit).
int FuzzModelFile(const uint8_t* data, size_t size);
/// The Kernel Tuner cache loader: the bytes as a cache file (gzip or plain JSON), plain JSON
/// inputs also gzip-compressed (both must agree), and a loaded cache replayed.
int FuzzKernelTunerCache(const uint8_t* data, size_t size);
/// The bytes as a record database file: opened without creating, read by every query; a file
/// that is refused must be left as it was.
int FuzzRecordDatabase(const uint8_t* data, size_t size);
/// The bytes as a sequence of daemon requests (see daemon_fuzz.cc for the framing), each
/// parsed as its request proto and sent to the Tune and Worker services of a fresh daemon
/// state over a private database, in process, through an in-process channel (no network).
int FuzzDaemonRequests(const uint8_t* data, size_t size);
/// The bytes as an ONNX model: imported (graph::ImportOnnxBytes) as they are and once more
/// after structure-aware edits of the parsed ModelProto; a graph the importer accepts gets an
/// execution plan (built-in kernels, memory plan; tuned nodes without a compile) and, when
/// small, one run on random inputs.
int FuzzOnnxImport(const uint8_t* data, size_t size);
/// The onnx_import target's structure-aware mutation: the input parsed as a ModelProto and
/// edited (attribute values and types, dims, element types, op types, tensor names, node order,
/// initializer data, opset, graph outputs, an --input override kept in metadata_props); an
/// input that does not parse comes back unchanged.
std::string MutateOnnxModel(const std::string& input, uint64_t seed);

/// A private folder of this process for a target's files: under $TUNE_FUZZ_TMP (the harness
/// makes one per run and removes it at the end), else in /dev/shm or the temporary directory.
std::string ScratchFolder(const std::string& name);

/// A target as the harness knows it.
struct FuzzTarget {
  std::string name;  // its corpus folder: tests/fuzz/corpus/<name>/
  int (*run)(const uint8_t* data, size_t size);
  std::vector<std::string> dictionary;  // tokens the mutator inserts
  size_t max_size = 1 << 16;            // mutated inputs are cut to this many bytes
  bool binary = false;                  // mutate proto-style varints rather than JSON numbers
  /// A structure-aware mutation of one input (e.g. a parsed protobuf edited and serialized
  /// again), a function of (input, seed) only; the harness makes half of the target's inputs
  /// with it, stacked 1 to 4 times, some followed by a byte-level mutation. nullptr: none.
  std::string (*mutate)(const std::string& input, uint64_t seed) = nullptr;
};

/// Every target, by name.
const std::vector<FuzzTarget>& Targets();
const FuzzTarget* FindTarget(const std::string& name);

}  // namespace tune::fuzz
