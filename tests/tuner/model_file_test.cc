// Tests of model files: every field of a wrong type is a malformed file, counts add up checked.
#include "tuner/model_file.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/common/test_seed.h"

namespace tune::tuner {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// JSON values of every type, for a field that wants another.
const std::vector<std::string>& AnyTypeValues() {
  static const std::vector<std::string> values = {
      "null", "true", "false", "0", "-7", "1.5", "1e400", "18446744073709551615", "-9223372036854775808",
      "\"\"", "\"x\"", "[]", "[1]", "{}", "{\"a\": null}"};
  return values;
}

std::string LayerJson(const std::string& field, const std::string& value) {
  nlohmann::json layer = {{"name", "fc"}, {"op", "dense"}, {"shape", "1,4,4"}, {"bias", true}, {"relu", false},
                          {"count", 2}};
  std::string text = layer.dump();
  if (field.empty()) return text;
  layer.erase(field);
  text = layer.dump();
  return text.substr(0, text.size() - 1) + ",\"" + field + "\":" + value + "}";
}

// Every field of a layer, and the model's name, with a value of each JSON type: a model or an
// InvalidArgument "malformed model file" error, never an exception or an abort.
TEST(ModelFileTest, EveryFieldOfEveryTypeIsAModelOrAMalformedFile) {
  for (const std::string& value : AnyTypeValues()) {
    absl::StatusOr<ZooModel> named =
        ParseModelJson(R"({"name": )" + value + R"(, "layers": [)" + LayerJson("", "") + "]}", "net.json");
    if (value == "\"\"" || value == "\"x\"") {
      ASSERT_TRUE(named.ok()) << value << ": " << named.status();
      EXPECT_EQ(named->name, value.substr(1, value.size() - 2));
    } else {
      EXPECT_TRUE(absl::IsInvalidArgument(named.status())) << value;
      const std::string why = value == "1e400" ? "not valid JSON" : "\"name\" must be a string";  // beyond a double
      EXPECT_EQ(std::string(named.status().message()), "malformed model file 'net.json': " + why) << value;
    }
    for (const char* field : {"name", "op", "shape", "bias", "relu", "count"}) {
      const std::string text = R"({"name": "n", "layers": [)" + LayerJson(field, value) + "]}";
      absl::StatusOr<ZooModel> m = ParseModelJson(text, "net.json");
      if (!m.ok()) {
        EXPECT_TRUE(absl::IsInvalidArgument(m.status())) << text;
        EXPECT_THAT(std::string(m.status().message()), StartsWith("malformed model file 'net.json': ")) << text;
      }
    }
    // The document itself, and "layers", of another type.
    EXPECT_FALSE(ParseModelJson(value, "net.json").ok()) << value;
    EXPECT_FALSE(ParseModelJson(R"({"layers": )" + value + "}", "net.json").ok()) << value;
    EXPECT_FALSE(ParseModelJson(R"({"layers": [)" + value + "]}", "net.json").ok()) << value;
  }
  absl::StatusOr<ZooModel> unnamed = ParseModelJson(R"({"layers": [)" + LayerJson("", "") + "]}", "dir/my-net.json");
  ASSERT_TRUE(unnamed.ok()) << unnamed.status();
  EXPECT_EQ(unnamed->name, "my-net");
  EXPECT_EQ(unnamed->layers.at(0).count, 2);
}

// Randomly mutated model files (bytes replaced, inserted, removed): a model or an error.
TEST(ModelFileTest, MutatedFilesNeverThrow) {
  const std::string seed_text = R"({"name": "n", "layers": [)" + LayerJson("", "") + "," +
                                R"({"op": "conv2d", "shape": "1,3,8,8,4,3,3,1,1", "count": 1000000}]})";
  const std::string alphabet = "{}[]\",:0123456789-.eE truefalsn\\u";
  std::mt19937_64 rng(test::kTestSeed);
  for (int i = 0; i < 3000; ++i) {
    std::string text = seed_text;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !text.empty(); ++e) {
      const size_t at = rng() % text.size();
      const char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0: text[at] = c; break;
        case 1: text.insert(text.begin() + static_cast<std::ptrdiff_t>(at), c); break;
        default: text.erase(at, 1); break;
      }
    }
    absl::StatusOr<ZooModel> m;
    EXPECT_NO_THROW(m = ParseModelJson(text, "m.json")) << text;
    if (!m.ok()) EXPECT_TRUE(absl::IsInvalidArgument(m.status())) << text << ": " << m.status();
  }
}

// Layers of one workload are merged with their counts added in 64 bits: a sum beyond an int is
// an error naming the layer, never a wrapped (negative) count.
TEST(ModelFileTest, MergedCountsAreCheckedNotWrapped) {
  auto model_of = [](int copies, int64_t count) {
    std::string layers;
    for (int i = 0; i < copies; ++i) {
      layers += std::string(i ? "," : "") + R"({"op": "matmul", "shape": "8,4,4", "count": )" + std::to_string(count) + "}";
    }
    return ParseModelJson(R"({"name": "dup", "layers": [)" + layers + "]}", "dup.json");
  };
  std::mt19937_64 rng(test::kTestSeed + 1);
  const int fits = 1 + static_cast<int>(rng() % 2147);  // x 10^6 <= 2^31 - 1
  absl::StatusOr<ZooModel> ok = model_of(fits, 1000000);
  ASSERT_TRUE(ok.ok()) << ok.status();
  ASSERT_EQ(ok->layers.size(), 1u);
  EXPECT_EQ(ok->layers[0].count, fits * 1000000);
  absl::StatusOr<ZooModel> over = model_of(2148 + static_cast<int>(rng() % 1000), 1000000);
  EXPECT_TRUE(absl::IsInvalidArgument(over.status())) << over.status();
  EXPECT_THAT(std::string(over.status().message()),
              HasSubstr("layer 2147: the counts of the layers with workload matmul 8x4x4 add up to more than 2147483647"));
  for (const char* bad : {"0", "-1", "1000001", "1.0", "18446744073709551615", "9223372036854775807"}) {
    absl::StatusOr<ZooModel> m =
        ParseModelJson(std::string(R"({"layers": [{"op": "matmul", "shape": "8,4,4", "count": )") + bad + "}]}", "c.json");
    EXPECT_THAT(std::string(m.status().message()), HasSubstr("\"count\" must be an integer from 1 to 1000000")) << bad;
  }
}

}  // namespace
}  // namespace tune::tuner
