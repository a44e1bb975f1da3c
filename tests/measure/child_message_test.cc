// Tests of MessageWriter / MessageReader: round trips, and payloads that end early or lie.
#include "measure/child_message.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tune::measure {
namespace {

TEST(ChildMessageTest, RoundTripsValuesStringsFloatsAndResults) {
  MeasureResult result;
  result.status = MeasureStatus::kWrongResult;
  result.number = 16;
  result.message = std::string("with a \0 inside", 15);
  result.costs_s = {1e-3, 2.5e-6};
  result.build_s = 3;  // not sent
  result.wall_s = 4;   // not sent
  MessageWriter w;
  w.Put<int32_t>(-7).PutString("").PutFloats({1.5f, -2.0f}).PutResult(result).Put(0.25);

  MessageReader r(w.bytes());
  int32_t i = 0;
  std::string text = "x";
  std::vector<float> floats;
  MeasureResult back;
  double d = 0;
  ASSERT_TRUE(r.Get(&i) && r.GetString(&text) && r.GetFloats(&floats) && r.GetResult(&back) && r.Get(&d));
  EXPECT_TRUE(r.Done());
  EXPECT_EQ(i, -7);
  EXPECT_EQ(text, "");
  EXPECT_EQ(floats, (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(back.status, MeasureStatus::kWrongResult);
  EXPECT_EQ(back.number, 16);
  EXPECT_EQ(back.message, result.message);
  EXPECT_EQ(back.costs_s, result.costs_s);
  EXPECT_EQ(back.build_s, 0);
  EXPECT_EQ(back.wall_s, 0);
  EXPECT_EQ(d, 0.25);
}

TEST(ChildMessageTest, EveryTruncationFails) {
  MeasureResult result;
  result.status = MeasureStatus::kOk;
  result.message = "note";
  result.costs_s = {1, 2, 3};
  const std::string bytes = MessageWriter().PutResult(result).bytes();
  for (size_t size = 0; size < bytes.size(); ++size) {
    MessageReader r(std::string_view(bytes).substr(0, size));
    MeasureResult back;
    EXPECT_FALSE(r.GetResult(&back) && r.Done()) << size;
  }
  MessageReader whole(bytes);
  MeasureResult back;
  EXPECT_TRUE(whole.GetResult(&back) && whole.Done());
}

TEST(ChildMessageTest, ImpossibleValuesFailAndStayFailed) {
  MeasureResult back;
  const std::string bad_status = MessageWriter().Put<int32_t>(42).Put<int32_t>(1).PutString("").Put<uint64_t>(0).bytes();
  EXPECT_FALSE(MessageReader(bad_status).GetResult(&back));

  const std::string huge_string = MessageWriter().Put<uint64_t>(~uint64_t{0}).bytes();
  std::string text;
  EXPECT_FALSE(MessageReader(huge_string).GetString(&text));

  const std::string huge_floats = MessageWriter().Put<uint64_t>(uint64_t{1} << 62).Put(1.0f).bytes();
  std::vector<float> floats;
  EXPECT_FALSE(MessageReader(huge_floats).GetFloats(&floats));

  MessageReader r(MessageWriter().Put<int32_t>(1).bytes());
  int64_t too_wide = 0;
  int32_t fits = 0;
  EXPECT_FALSE(r.Get(&too_wide));
  EXPECT_FALSE(r.Get(&fits));  // failed once: stays failed
  EXPECT_FALSE(r.Done());
}

}  // namespace
}  // namespace tune::measure
