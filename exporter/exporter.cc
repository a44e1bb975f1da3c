// Export: the target and each task's schedule picked from the record database, kernels
// compiled for that target, the library written whole under a temporary name.
#include "exporter/exporter.h"

#include <stdlib.h>

#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "codegen/cpu/llvm_codegen.h"
#include "dataset/record_database.h"
#include "exporter/library_files.h"
#include "measure/task_factory.h"
#include "tuner/model_file.h"

namespace tune::exporter {
namespace {

namespace fs = std::filesystem;

/// The x86 features a CPU target key records (measure/target.cc); those the key lacks are
/// turned off, so a CPU name whose model has them (e.g. AVX-512 in a VM without it) is not
/// trusted beyond what the tuned machine had.
constexpr const char* kX86KeyFeatures[] = {
    "sse4.2",   "avx",        "avx2",       "fma",        "f16c",     "avx512f",
    "avx512bw", "avx512vl",   "avx512vnni", "avx512bf16", "avx512fp16", "amx-tile",
};

/// LLVM's feature string for the CPU of a target key: its features on, on x86 the key's
/// other features off.
std::string CpuFeatures(const measure::Target& target) {
  std::set<std::string> on;
  std::vector<std::string> out;
  for (absl::string_view f : absl::StrSplit(target.features, ',', absl::SkipEmpty())) {
    std::string name(f[0] == '+' ? f.substr(1) : f);
    if (name.empty() || name[0] == '-') continue;
    on.insert(name);
    out.push_back("+" + name);
  }
#if defined(__x86_64__)
  for (const char* f : kX86KeyFeatures) {
    if (on.count(f) == 0) out.push_back(absl::StrCat("-", f));
  }
#endif
  return absl::StrJoin(out, ",");
}

/// "layer1.0.conv1" -> "layer1_0_conv1": letters, digits and single underscores.
std::string Sanitize(const std::string& name) {
  std::string out;
  for (char c : name) {
    const bool keep = std::isalnum(static_cast<unsigned char>(c)) != 0;
    if (keep) {
      out += c;
    } else if (!out.empty() && out.back() != '_') {
      out += '_';
    }
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  return out;
}

/// The C function of a layer: "tune_" and its sanitised name (the op's name when none is
/// left), never one of the library's own names, "_2", "_3", ... when taken.
std::string FunctionName(const std::string& layer, codegen::OpKind op, std::set<std::string>& used) {
  std::string base = Sanitize(layer);
  if (base.empty()) base = codegen::OpName(op);
  for (const char* reserved : {"kernels_", "impl_", "rt_", "layer_"}) {
    if (base.rfind(reserved, 0) == 0) base = "layer_" + base;
  }
  std::string name = "tune_" + base;
  for (int n = 2; used.count(name) != 0; ++n) name = absl::StrCat("tune_", base, "_", n);
  used.insert(name);
  return name;
}

std::string TargetList(const std::vector<dataset::TargetInfo>& targets) {
  if (targets.empty()) return "it has no targets";
  std::vector<std::string> items;
  for (const dataset::TargetInfo& t : targets) items.push_back(absl::StrCat(t.key, " (id ", t.id, ")"));
  return "its targets: " + absl::StrJoin(items, "; ");
}

/// The database's target the request names.
absl::StatusOr<dataset::TargetInfo> SelectTarget(const dataset::RecordDatabase& db, const ExportRequest& request) {
  auto targets = db.Targets();
  if (!targets.ok()) return targets.status();
  std::string key = request.target_key;
  std::string what = "target '" + key + "'";
  if (key.empty()) {
    auto target = measure::Target::Parse(request.target, request.threads);
    if (!target.ok()) return target.status();
    key = target->Key();
    what = "records for " + key + " (--target " + request.target +
           (target->kind == "llvm" ? absl::StrCat(" --threads ", request.threads) : std::string()) + ")";
  }
  for (const dataset::TargetInfo& t : *targets) {
    if (t.key == key || (!request.target_key.empty() && std::to_string(t.id) == key)) return t;
  }
  return absl::NotFoundError(absl::StrCat("no ", what, " in ", request.db_path, "; ", TargetList(*targets)));
}

/// The best ok record of a task on the target, if any.
absl::StatusOr<std::optional<dataset::Record>> BestRecord(const dataset::RecordDatabase& db, const std::string& key,
                                                          int template_version, int64_t target_id) {
  auto task = db.FindTask(key, template_version);
  if (!task.ok()) return task.status();
  if (!task->has_value()) return std::optional<dataset::Record>();
  auto best = db.Best((*task)->id, target_id, 1);
  if (!best.ok()) return best.status();
  if (best->empty()) return std::optional<dataset::Record>();
  return std::optional<dataset::Record>((*best)[0]);
}

absl::Status WriteFile(const fs::path& path, const std::string& bytes) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) return absl::InternalError("cannot create " + path.parent_path().string() + ": " + ec.message());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return absl::InternalError("cannot write " + path.string());
  return absl::OkStatus();
}

/// FailedPrecondition unless `dir` can be written as asked: absent or empty, or any
/// directory with `force`; its parent must exist.
absl::Status CheckOutDir(const ExportRequest& request) {
  if (request.out_dir.empty()) return absl::InvalidArgumentError("--out names no directory");
  const fs::path dir = fs::absolute(request.out_dir);
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (fs::exists(st)) {
    if (!fs::is_directory(st)) return absl::FailedPreconditionError("--out " + request.out_dir + " is not a directory");
    if (!request.force && !fs::is_empty(dir, ec)) {
      return absl::FailedPreconditionError("--out " + request.out_dir +
                                           " exists and is not empty (--force replaces it)");
    }
  } else if (!fs::is_directory(dir.parent_path(), ec)) {
    return absl::FailedPreconditionError("--out " + request.out_dir + ": " + dir.parent_path().string() +
                                         " is not a directory");
  }
  return absl::OkStatus();
}

/// A fresh directory beside `dir`, named after it.
absl::StatusOr<fs::path> MakeSibling(const fs::path& dir, const std::string& what) {
  std::string templ = (dir.parent_path() / absl::StrCat(".", dir.filename().string(), ".", what, "-XXXXXX")).string();
  if (::mkdtemp(templ.data()) == nullptr) {
    return absl::FailedPreconditionError("cannot create a directory beside " + dir.string());
  }
  return fs::path(templ);
}

/// Writes the library's files into `tmp`, then puts `tmp` in the place of `dir` (an existing
/// `dir` is moved aside first and removed once the new one is in place).
absl::Status WriteLibrary(const ExportedLibrary& library, const fs::path& dir) {
  auto tmp = MakeSibling(dir, "tmp");
  if (!tmp.ok()) return tmp.status();
  std::error_code ec;
  auto fail = [&](absl::Status st) {
    fs::remove_all(*tmp, ec);
    return st;
  };
  for (const LibraryFile& f : LibraryFiles(library)) {
    if (absl::Status st = WriteFile(*tmp / f.path, f.bytes); !st.ok()) return fail(st);
  }
  fs::permissions(*tmp, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec, ec);
  std::optional<fs::path> old;
  if (fs::exists(dir, ec) && !fs::is_empty(dir, ec)) {
    auto aside = MakeSibling(dir, "old");
    if (!aside.ok()) return fail(aside.status());
    fs::rename(dir, *aside, ec);  // replaces the empty directory just made
    if (ec) {
      fs::remove(*aside, ec);
      return fail(absl::InternalError("cannot move " + dir.string() + " aside: " + ec.message()));
    }
    old = *aside;
  }
  fs::rename(*tmp, dir, ec);
  if (ec) {
    const std::string why = ec.message();
    if (old) fs::rename(*old, dir, ec);
    return fail(absl::InternalError("cannot rename the library to " + dir.string() + ": " + why));
  }
  if (old) fs::remove_all(*old, ec);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ExportedLibrary> BuildLibrary(const ExportRequest& request) {
  if (request.db_path.empty()) return absl::InvalidArgumentError("--db names no record database");
  // (Checked for the CPU here; the target, known below, is checked again.)
  const absl::StatusOr<int64_t> layout_block = tuner::LayoutBlock(request.layout, "llvm");
  if (!layout_block.ok()) return layout_block.status();
  auto model = tuner::LoadModel(request.model, request.inputs, *layout_block);
  if (!model.ok()) return model.status();
  const std::vector<tuner::TuneTask> tasks = tuner::ExtractTasks(*model);
  if (tasks.empty()) return absl::InvalidArgumentError("model " + request.model + " has no tasks to export");
  auto db = dataset::RecordDatabase::Open(request.db_path, /*create=*/false);
  if (!db.ok()) return db.status();
  auto info = SelectTarget(**db, request);
  if (!info.ok()) return info.status();
  auto target = measure::Target::FromJson(info->json);
  if (!target.ok()) return target.status();

  ExportedLibrary library;
  library.model = model->name;
  library.target = *target;
  library.target_id = info->id;
  const bool cuda = target->kind == "cuda";
  if (absl::Status st = tuner::LayoutBlock(request.layout, target->kind).status(); !st.ok()) return st;
  const std::string features = cuda ? "" : CpuFeatures(*target);
  std::set<std::string> used;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const tuner::TuneTask& task = tasks[i];
    ExportedKernel k;
    k.layer = task.name;
    k.count = task.count;
    k.workload = task.workload;
    k.function = FunctionName(task.name, task.workload.op, used);
    k.symbol = absl::StrCat("tune_impl_", i);
    // The template as the target's tasks made it (its CPU's register tiles and threads, its
    // GPU's limits), not this host's: the records' configs are configs of that space.
    auto tmpl = measure::TaskFactory::MakeTemplateFor(*target, task.workload);
    if (!tmpl.ok()) return tmpl.status();
    k.template_name = (*tmpl)->name();
    k.template_version = (*tmpl)->version();
    auto record = BestRecord(**db, task.workload.Key(), k.template_version, info->id);
    if (!record.ok()) return record.status();
    search::Config config;
    if (record->has_value()) {
      const dataset::Record& r = **record;
      auto parsed = (*tmpl)->space().FromJson(r.config_json);
      if (!parsed.ok()) {
        return absl::InternalError(absl::StrCat("record ", r.id, " of ", task.workload.Label(),
                                                ": its config does not parse: ", parsed.status().message()));
      }
      config = *parsed;
      k.tuned = true;
      k.record_id = r.id;
      k.time_s = r.result.Median();
      k.strategy = r.strategy;
      k.config_json = r.config_json;
    } else {
      auto def = (*tmpl)->ValidDefaultConfig();
      if (!def.ok()) return def.status();
      config = *def;
      k.config_json = (*tmpl)->space().ToJson(config);
    }
    auto func = (*tmpl)->Lower(config, k.symbol);
    if (!func.ok()) {
      return absl::InternalError(absl::StrCat(task.workload.Label(), ": the schedule does not lower: ",
                                              func.status().message()));
    }
    if (cuda) {
      auto kernel = codegen::GenerateCuda(*func);
      if (!kernel.ok()) {
        return absl::InternalError(absl::StrCat(task.workload.Label(), ": ", kernel.status().message()));
      }
      if (kernel->scratch.size() > 4) {
        return absl::InternalError(absl::StrCat(task.workload.Label(), ": more than 4 scratch buffers"));
      }
      k.cuda = *std::move(kernel);
    } else {
      auto compiled = codegen::CompileForCpu(*func, target->cpu, features);
      if (!compiled.ok()) {
        if (absl::IsInvalidArgument(compiled.status())) {
          return absl::InvalidArgumentError(absl::StrCat("target ", target->Key(), ": ", compiled.status().message()));
        }
        return absl::InternalError(absl::StrCat(task.workload.Label(), ": ", compiled.status().message()));
      }
      k.object_code = std::move(compiled->object_code);
    }
    library.kernels.push_back(std::move(k));
  }
  return library;
}

absl::StatusOr<ExportedLibrary> Export(const ExportRequest& request) {
  if (absl::Status st = CheckOutDir(request); !st.ok()) return st;
  auto library = BuildLibrary(request);
  if (!library.ok()) return library.status();
  if (absl::Status st = CheckOutDir(request); !st.ok()) return st;  // unchanged meanwhile
  if (absl::Status st = WriteLibrary(*library, fs::absolute(request.out_dir)); !st.ok()) return st;
  return library;
}

}  // namespace tune::exporter
