// The .tcm container: magic, JSON header, payload, checksum.
#include "costmodel/artifact.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "costmodel/features.h"
#include "costmodel/program_graph.h"
#include "nlohmann/json.hpp"

namespace tune::costmodel {
namespace {

uint64_t Fnv1a(const char* data, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 1099511628211ull;
  }
  return h;
}

void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

bool GetU64(const std::string& in, size_t* pos, uint64_t* v) {
  if (in.size() < *pos + 8) return false;
  *v = 0;
  for (int i = 0; i < 8; ++i) *v |= static_cast<uint64_t>(static_cast<unsigned char>(in[*pos + i])) << (8 * i);
  *pos += 8;
  return true;
}

absl::Status Bad(const std::string& why) { return absl::InvalidArgumentError("not a usable tune cost model: " + why); }

std::string NowUtc() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

nlohmann::json ParseObject(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  return j.is_object() ? j : nlohmann::json::object();
}

}  // namespace

absl::StatusOr<std::string> SerializeArtifact(const ArtifactInfo& info, const OfflineModel& model) {
  if (!model.trained()) return absl::FailedPreconditionError("the " + model.kind() + " model is not trained");
  auto payload = model.SavePayload();
  if (!payload.ok()) return payload.status();
  nlohmann::json h;
  h["kind"] = model.kind();
  h["artifact_version"] = kArtifactVersion;
  h["feature_version"] = info.feature_version ? info.feature_version : kFeatureVersion;
  h["graph_feature_version"] = info.graph_feature_version ? info.graph_feature_version : kGraphFeatureVersion;
  h["template_versions"] = info.template_versions;
  h["target_family"] = info.target_family;
  h["target_key"] = info.target_key;
  h["summary"] = ParseObject(info.summary_json);
  h["metrics"] = ParseObject(info.metrics_json);
  h["options"] = ParseObject(info.options_json);
  h["created"] = info.created.empty() ? NowUtc() : info.created;
  const std::string header = h.dump();
  std::string out = kArtifactMagic;
  out.push_back('\n');
  PutU64(&out, header.size());
  out += header;
  PutU64(&out, payload->size());
  out += *payload;
  PutU64(&out, Fnv1a(out.data(), out.size()));
  return out;
}

absl::StatusOr<Artifact> ParseArtifact(const std::string& bytes) {
  const size_t magic_len = std::strlen(kArtifactMagic);
  if (bytes.size() < magic_len + 1 || bytes.compare(0, magic_len, kArtifactMagic) != 0 || bytes[magic_len] != '\n')
    return Bad("no TUNETCM header");
  if (bytes.size() < magic_len + 1 + 24) return Bad("truncated");
  uint64_t sum = 0;
  size_t end = bytes.size() - 8;
  if (!GetU64(bytes, &end, &sum)) return Bad("truncated");
  if (sum != Fnv1a(bytes.data(), bytes.size() - 8)) return Bad("checksum mismatch (corrupt or truncated file)");
  size_t pos = magic_len + 1;
  uint64_t header_len = 0, payload_len = 0;
  if (!GetU64(bytes, &pos, &header_len) || header_len > bytes.size() - pos) return Bad("truncated header");
  auto h = nlohmann::json::parse(bytes.substr(pos, header_len), nullptr, false);
  pos += header_len;
  if (!h.is_object()) return Bad("malformed header");
  if (!GetU64(bytes, &pos, &payload_len) || payload_len != bytes.size() - 8 - pos) return Bad("truncated payload");
  Artifact a;
  try {
    a.info.kind = h.at("kind").get<std::string>();
    a.info.artifact_version = h.at("artifact_version").get<int>();
    a.info.feature_version = h.at("feature_version").get<int>();
    a.info.graph_feature_version = h.at("graph_feature_version").get<int>();
    a.info.template_versions = h.at("template_versions").get<std::map<std::string, int>>();
    a.info.target_family = h.at("target_family").get<std::string>();
    a.info.target_key = h.at("target_key").get<std::string>();
    a.info.summary_json = h.at("summary").dump();
    a.info.metrics_json = h.at("metrics").dump();
    a.info.options_json = h.value("options", nlohmann::json::object()).dump();
    a.info.created = h.at("created").get<std::string>();
  } catch (const std::exception& e) {
    return Bad(absl::StrCat("header field missing or of the wrong type (", e.what(), ")"));
  }
  if (a.info.artifact_version != kArtifactVersion)
    return Bad(absl::StrCat("artifact version ", a.info.artifact_version, ", this build reads ", kArtifactVersion));
  if (a.info.feature_version != kFeatureVersion)
    return Bad(absl::StrCat("trained on feature version ", a.info.feature_version, ", this build extracts ",
                            kFeatureVersion, " (retrain it)"));
  if (a.info.graph_feature_version != kGraphFeatureVersion)
    return Bad(absl::StrCat("trained on program-graph version ", a.info.graph_feature_version,
                            ", this build extracts ", kGraphFeatureVersion, " (retrain it)"));
  auto model = CreateOfflineModel(a.info.kind);
  if (!model.ok()) return Bad(std::string(model.status().message()));
  if (auto s = (*model)->LoadPayload(bytes.substr(pos, payload_len)); !s.ok()) return Bad(std::string(s.message()));
  a.model = std::move(*model);
  return a;
}

absl::Status WriteArtifactFile(const std::string& path, const ArtifactInfo& info, const OfflineModel& model) {
  auto bytes = SerializeArtifact(info, model);
  if (!bytes.ok()) return bytes.status();
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
    f.close();
    if (!f) {
      std::remove(tmp.c_str());
      return absl::PermissionDeniedError("cannot write " + path);
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return absl::PermissionDeniedError("cannot write " + path + ": " + std::strerror(errno));
  }
  return absl::OkStatus();
}

absl::StatusOr<Artifact> ReadArtifactFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError("cannot read cost model " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  auto a = ParseArtifact(ss.str());
  if (!a.ok()) return absl::InvalidArgumentError(path + ": " + std::string(a.status().message()));
  return a;
}

bool LooksLikeArtifactPath(const std::string& text) {
  return text.size() > 4 && text.compare(text.size() - 4, 4, ".tcm") == 0;
}

}  // namespace tune::costmodel
