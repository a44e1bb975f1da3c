// The .tcm artifact: a trained OfflineModel with what it was trained on, versioned and checksummed.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "costmodel/offline_model.h"

namespace tune::costmodel {

/// Written first in every .tcm file.
inline constexpr char kArtifactMagic[] = "TUNETCM";
/// The container layout version; another version is refused.
inline constexpr int kArtifactVersion = 1;

/// What an artifact says about its model. Everything but the parameters.
struct ArtifactInfo {
  std::string kind;                 // OfflineModel::kind()
  int artifact_version = kArtifactVersion;
  int feature_version = 0;          // kFeatureVersion of the AST features it was trained with
  int graph_feature_version = 0;    // kGraphFeatureVersion of the program graphs
  /// Template name -> version of the templates whose records it was trained on; a task of
  /// another template version is still scored, with a warning (its space may differ).
  std::map<std::string, int> template_versions;
  std::string target_family;        // "llvm" or "cuda": the models apply within one family
  std::string target_key;           // the target the records came from (first one when several)
  std::string summary_json = "{}";  // training data: source, records, tasks, networks, holdout
  std::string metrics_json = "{}";  // its own metrics: validation and held-out, per network
  std::string options_json = "{}";  // the TrainOptions used (seed, epochs, ...)
  std::string created;              // UTC time of writing, ISO 8601
};

/// A model with its info, as read back.
struct Artifact {
  ArtifactInfo info;
  std::unique_ptr<OfflineModel> model;
};

/// The bytes of an artifact: magic, header length and JSON header (ArtifactInfo), payload
/// (model.SavePayload()), and a 64-bit FNV-1a checksum of everything before it.
/// FailedPrecondition when the model is untrained.
absl::StatusOr<std::string> SerializeArtifact(const ArtifactInfo& info, const OfflineModel& model);

/// Parses SerializeArtifact's bytes and loads the model they hold. InvalidArgument with one
/// line when the bytes are not a tune cost model, are truncated or corrupt (checksum), have
/// another artifact version, feature version or graph feature version than this build, or a
/// model kind this build does not know.
absl::StatusOr<Artifact> ParseArtifact(const std::string& bytes);

/// The same through a file: written to a temporary name and renamed (never half-written);
/// read errors are NotFound naming the file; parse errors name it too.
absl::Status WriteArtifactFile(const std::string& path, const ArtifactInfo& info, const OfflineModel& model);
absl::StatusOr<Artifact> ReadArtifactFile(const std::string& path);

/// True when `text` names a .tcm file (ends in ".tcm"): how --cost-model tells a file from a model name.
bool LooksLikeArtifactPath(const std::string& text);

}  // namespace tune::costmodel
