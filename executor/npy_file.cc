// NumPy .npy files: header and data; files written under temporary names, then renamed.
#include "executor/npy_file.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tune::executor {

std::string NpyBytes(graph::DType dtype, const std::vector<int64_t>& shape, const void* data) {
  const char* descr = dtype == graph::DType::kFloat32 ? "<f4" : dtype == graph::DType::kInt64 ? "<i8" : "|b1";
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  // "()" for a scalar, "(3,)" for one dimension, "(1, 3)" for more.
  std::string dims = absl::StrJoin(shape, ", ");
  if (shape.size() == 1) dims += ",";
  std::string header = absl::StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': (", dims, "), }");
  // Magic (6) + version (2) + length (2) + header + '\n', padded to a multiple of 64.
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>(header.size() >> 8));
  out += header;
  out.append(static_cast<const char*>(data), static_cast<size_t>(n * graph::DTypeSize(dtype)));
  return out;
}

std::string SanitizeFileName(const std::string& name) {
  std::string out = name;
  for (char& ch : out) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
                    ch == '.' || ch == '-';
    if (!ok) ch = '_';
  }
  return out.empty() ? "_" : out;
}

absl::Status WriteFilesAtomically(const std::string& dir, const std::vector<std::pair<std::string, std::string>>& files) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) {
    return absl::FailedPreconditionError(absl::StrCat("cannot create the directory ", dir, ": ", ec.message()));
  }
  std::vector<std::pair<std::string, std::string>> written;  // temporary -> final
  auto cleanup = [&] {
    for (const auto& [tmp, final_path] : written) std::remove(tmp.c_str());
  };
  for (const auto& [name, bytes] : files) {
    const std::string final_path = dir + "/" + name;
    const std::string tmp = absl::StrCat(dir, "/.", name, ".tmp", getpid());
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    written.push_back({tmp, final_path});
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      cleanup();
      return absl::InternalError("cannot write " + final_path);
    }
  }
  for (const auto& [tmp, final_path] : written) {
    if (std::rename(tmp.c_str(), final_path.c_str()) != 0) {
      cleanup();
      return absl::InternalError("cannot rename " + tmp + " to " + final_path);
    }
  }
  return absl::OkStatus();
}

}  // namespace tune::executor
