// Tests of ConfigSpace: split enumeration, indexing, constraints, sampling, JSON, checks.
#include "search/space.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "base/check.h"

namespace tune::search {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

int64_t Product(const std::vector<int64_t>& factors) {
  int64_t p = 1;
  for (int64_t f : factors) p *= f;
  return p;
}

// Every ordered list of `parts` positive divisors of `extent` whose product is `extent`,
// found by brute force.
std::set<std::vector<int64_t>> BruteForceSplits(int64_t extent, int parts) {
  std::set<std::vector<int64_t>> out;
  std::vector<int64_t> current;
  auto rec = [&](auto&& self, int64_t remaining) -> void {
    if (static_cast<int>(current.size()) == parts) {
      if (remaining == 1) out.insert(current);
      return;
    }
    for (int64_t d = 1; d <= extent; ++d) {
      if (remaining % d != 0) continue;
      current.push_back(d);
      self(self, remaining / d);
      current.pop_back();
    }
  };
  rec(rec, extent);
  return out;
}

// Two splits, a choice and a constraint: 6 * 4 * 3 = 72 points.
ConfigSpace SmallSpace() {
  ConfigSpace space;
  space.AddSplit("tile_m", 12, 2);                  // 6 options
  space.AddSplit("tile_n", 8, 2);                   // 4 options
  space.AddChoice("unroll", {0, 4, 16}, {"off", "x4", "x16"});
  return space;
}

// With tails, inner factors need not divide the extent: besides the divisor splits, splits
// whose outermost factor rounds up (a partial last tile), padded by at most half the extent. A prime extent gets about as many options as a power of two.
TEST(SplitTest, TailsGivePrimeExtentsAsManyOptionsAsPowersOfTwo) {
  ConfigSpace plain, with_tails, pow2;
  plain.AddSplit("m", 97, 3, 16);
  with_tails.AddSplit("m", 97, 3, 16, SplitTails::kAllowed);
  pow2.AddSplit("m", 128, 3, 16);
  const Knob& p = plain.knobs()[0];
  const Knob& t = with_tails.knobs()[0];
  EXPECT_EQ(t.extent, 97);
  ASSERT_EQ(p.options.size(), 2u);  // 1x97x1 and 97x1x1 (1x1x97 is over max_inner)
  ASSERT_GT(t.options.size(), p.options.size());
  EXPECT_GE(t.options.size() * 2, pow2.knobs()[0].options.size())
      << t.options.size() << " options for 97, " << pow2.knobs()[0].options.size() << " for 128";
  EXPECT_TRUE(std::is_sorted(t.options.begin(), t.options.end())) << "options are not in lexicographic order";
  for (const auto& divisor_split : p.options) {
    EXPECT_NE(std::find(t.options.begin(), t.options.end(), divisor_split), t.options.end());
  }
  std::set<std::vector<int64_t>> seen;
  for (const auto& option : t.options) {
    ASSERT_EQ(option.size(), 3u);
    EXPECT_TRUE(seen.insert(option).second) << "option repeats";
    EXPECT_LE(option[2], 16);
    const int64_t inner = option[1] * option[2];
    EXPECT_EQ(option[0], (97 + inner - 1) / inner) << "the outermost factor rounds up";
    EXPECT_GE(PaddedExtent(option), 97);
    EXPECT_LE(2 * PaddedExtent(option), 3 * 97);
  }
  EXPECT_TRUE(seen.count({4, 2, 16})) << "97 = 3 full tiles of 32 and a tail of 1";
  EXPECT_TRUE(seen.count({13, 1, 8}));
  // An extent whose divisors are all powers of two gains nothing from tails.
  ConfigSpace pow2_tails;
  pow2_tails.AddSplit("m", 128, 3, 16, SplitTails::kAllowed);
  EXPECT_EQ(pow2_tails.knobs()[0].options, pow2.knobs()[0].options);
}

// Extra innermost values (register-tile sizes) join the options with tails, innermost only,
// within max_inner and the padding bound, still in lexicographic order.
TEST(SplitTest, InnermostValuesAreOfferedAsTheInnermostFactorOnly) {
  ConfigSpace plain, extra;
  plain.AddSplit("m", 128, 3, 16, SplitTails::kAllowed);
  extra.AddSplit("m", 128, 3, 16, SplitTails::kAllowed, {6, 24, 200});
  const auto& p = plain.knobs()[0].options;
  const auto& e = extra.knobs()[0].options;
  EXPECT_TRUE(std::is_sorted(e.begin(), e.end()));
  for (const auto& option : p) EXPECT_NE(std::find(e.begin(), e.end(), option), e.end());
  std::set<std::vector<int64_t>> seen(e.begin(), e.end());
  EXPECT_EQ(seen.size(), e.size()) << "options repeat";
  EXPECT_TRUE(seen.count({22, 1, 6})) << "128 rows as 21 full tiles of 6 and a tail of 2";
  EXPECT_TRUE(seen.count({11, 2, 6}));
  int with_six = 0;
  for (const auto& option : e) {
    EXPECT_NE(option[1], 6) << "6 is an innermost value, not a middle factor";
    EXPECT_LE(option[2], 16) << "24 and 200 are over max_inner";
    EXPECT_LE(2 * PaddedExtent(option), 3 * 128);
    with_six += option[2] == 6;
  }
  EXPECT_GT(with_six, 3);
  EXPECT_EQ(e.size(), p.size() + static_cast<size_t>(with_six));
}

TEST(SplitTest, TwelveIntoThreeHasAllEighteenFactorizations) {
  ConfigSpace space;
  int k = space.AddSplit("tile", 12, 3);
  EXPECT_EQ(k, 0);
  const Knob& knob = space.knobs()[0];
  EXPECT_EQ(knob.kind, Knob::Kind::kSplit);
  ASSERT_EQ(knob.options.size(), 18u);
  for (const auto& option : knob.options) {
    ASSERT_EQ(option.size(), 3u);
    EXPECT_EQ(Product(option), 12);
    for (int64_t f : option) EXPECT_EQ(12 % f, 0);
  }
  std::set<std::vector<int64_t>> got(knob.options.begin(), knob.options.end());
  EXPECT_EQ(got.size(), 18u) << "options repeat";
  EXPECT_EQ(got, BruteForceSplits(12, 3));
  EXPECT_TRUE(std::is_sorted(knob.options.begin(), knob.options.end()))
      << "options are not in lexicographic order";
  EXPECT_EQ(knob.options.front(), (std::vector<int64_t>{1, 1, 12}));
  EXPECT_EQ(knob.options.back(), (std::vector<int64_t>{12, 1, 1}));
}

TEST(SplitTest, MatchesBruteForceForSeveralExtents) {
  for (int64_t extent : {1, 2, 7, 16, 36, 60, 97, 128}) {
    for (int parts = 1; parts <= 4; ++parts) {
      ConfigSpace space;
      space.AddSplit("s", extent, parts);
      const auto& options = space.knobs()[0].options;
      std::set<std::vector<int64_t>> got(options.begin(), options.end());
      EXPECT_EQ(got.size(), options.size()) << extent << " into " << parts;
      EXPECT_EQ(got, BruteForceSplits(extent, parts)) << extent << " into " << parts;
    }
  }
}

TEST(SplitTest, PrimePowerCountIsStarsAndBars) {
  // 64 = 2^6 into 4 parts: C(6 + 3, 3) = 84 ordered factorizations.
  ConfigSpace space;
  space.AddSplit("s", 64, 4);
  EXPECT_EQ(space.knobs()[0].options.size(), 84u);
}

TEST(SplitTest, MaxInnerBoundsOnlyTheInnermostFactor) {
  ConfigSpace space;
  space.AddSplit("s", 16, 2, /*max_inner=*/4);
  EXPECT_THAT(space.knobs()[0].options,
              ElementsAre(ElementsAre(4, 4), ElementsAre(8, 2), ElementsAre(16, 1)));

  ConfigSpace space3;
  space3.AddSplit("s", 12, 3, /*max_inner=*/2);
  std::set<std::vector<int64_t>> expected;
  for (const auto& f : BruteForceSplits(12, 3)) {
    if (f.back() <= 2) expected.insert(f);
  }
  const auto& options = space3.knobs()[0].options;
  EXPECT_EQ(std::set<std::vector<int64_t>>(options.begin(), options.end()), expected);
  EXPECT_EQ(options.size(), expected.size());
}

TEST(SplitTest, DegenerateSplits) {
  ConfigSpace space;
  space.AddSplit("one_part", 24, 1);
  space.AddSplit("unit", 1, 3);
  EXPECT_THAT(space.knobs()[0].options, ElementsAre(ElementsAre(24)));
  EXPECT_THAT(space.knobs()[1].options, ElementsAre(ElementsAre(1, 1, 1)));
}

TEST(ChoiceTest, OptionsAndLabels) {
  ConfigSpace space;
  space.AddSplit("s", 4, 2);
  int k = space.AddChoice("vec", {1, 2, 4, 8}, {"a", "b", "c", "d"});
  EXPECT_EQ(k, 1);
  const Knob& knob = space.knobs()[1];
  EXPECT_EQ(knob.kind, Knob::Kind::kChoice);
  EXPECT_THAT(knob.options, ElementsAre(ElementsAre(1), ElementsAre(2), ElementsAre(4),
                                        ElementsAre(8)));
  EXPECT_THAT(knob.labels, ElementsAre("a", "b", "c", "d"));
  EXPECT_EQ(space.KnobIndex("vec"), 1);
  EXPECT_EQ(space.KnobIndex("s"), 0);
}

TEST(SizeTest, ProductOfOptionCounts) {
  EXPECT_EQ(SmallSpace().Size(), 72u);
  EXPECT_EQ(ConfigSpace().Size(), 1u);
}

TEST(SizeTest, SaturatesInsteadOfOverflowing) {
  ConfigSpace space;
  for (int i = 0; i < 63; ++i) space.AddChoice(absl::StrCat("b", i), {0, 1});
  EXPECT_EQ(space.Size(), uint64_t{1} << 63);
  space.AddChoice("b63", {0, 1, 2});
  EXPECT_EQ(space.Size(), UINT64_MAX);
  space.AddChoice("more", {0, 1, 2, 3, 4});
  EXPECT_EQ(space.Size(), UINT64_MAX);
}

TEST(IndexTest, RoundTripOverWholeSpaceIsABijection) {
  ConfigSpace space = SmallSpace();
  std::set<Config> seen;
  for (uint64_t i = 0; i < space.Size(); ++i) {
    Config c = space.FromIndex(i);
    ASSERT_EQ(c.size(), 3u);
    EXPECT_EQ(space.ToIndex(c), i);
    seen.insert(c);
  }
  EXPECT_EQ(seen.size(), space.Size());
}

TEST(IndexTest, FirstKnobVariesSlowest) {
  ConfigSpace space = SmallSpace();  // radices 6, 4, 3
  EXPECT_EQ(space.FromIndex(0), (Config{0, 0, 0}));
  EXPECT_EQ(space.FromIndex(1), (Config{0, 0, 1}));
  EXPECT_EQ(space.FromIndex(3), (Config{0, 1, 0}));
  EXPECT_EQ(space.FromIndex(12), (Config{1, 0, 0}));
  EXPECT_EQ(space.FromIndex(71), (Config{5, 3, 2}));
  EXPECT_EQ(space.ToIndex({2, 3, 1}), 2u * 12 + 3 * 3 + 1);
}

TEST(IndexTest, EmptySpaceHasOneEmptyConfig) {
  ConfigSpace space;
  EXPECT_EQ(space.FromIndex(0), Config{});
  EXPECT_EQ(space.ToIndex({}), 0u);
  EXPECT_TRUE(space.IsValid({}));
}

TEST(ConstraintTest, RejectsAndNamesFirstFailingConstraint) {
  ConfigSpace space = SmallSpace();
  space.AddConstraint("inner_product_le_8", [&space](const Config& c) {
    return space.Get(c, "tile_m")[1] * space.Get(c, "tile_n")[1] <= 8;
  });
  space.AddConstraint("no_unroll_with_big_m", [&space](const Config& c) {
    return !(space.GetInt(c, "unroll") == 16 && space.Get(c, "tile_m")[1] == 12);
  });
  // tile_m options: [1,12] [2,6] [3,4] [4,3] [6,2] [12,1]; tile_n: [1,8] [2,4] [4,2] [8,1].
  Config ok = {5, 2, 0};  // inner 2 * 2 = 4
  EXPECT_TRUE(space.IsValid(ok));
  EXPECT_EQ(space.WhyInvalid(ok), "");
  Config too_big = {2, 1, 0};  // inner 4 * 4 = 16
  EXPECT_FALSE(space.IsValid(too_big));
  EXPECT_EQ(space.WhyInvalid(too_big), "inner_product_le_8");
  Config both = {0, 0, 2};  // inner 12 * 8 and unroll 16 with inner m 12: first is named
  EXPECT_EQ(space.WhyInvalid(both), "inner_product_le_8");
  // Isolate the second constraint with a space where the first always holds.
  ConfigSpace other = SmallSpace();
  other.AddConstraint("always", [](const Config&) { return true; });
  other.AddConstraint("never_x16", [&other](const Config& c) {
    return other.GetInt(c, "unroll") != 16;
  });
  EXPECT_EQ(other.WhyInvalid({0, 0, 2}), "never_x16");
  EXPECT_EQ(other.WhyInvalid({0, 0, 1}), "");

  // Brute-force count of valid points agrees with the predicate.
  int valid = 0;
  for (uint64_t i = 0; i < space.Size(); ++i) {
    Config c = space.FromIndex(i);
    bool expected = space.Get(c, "tile_m")[1] * space.Get(c, "tile_n")[1] <= 8 &&
                    !(space.GetInt(c, "unroll") == 16 && space.Get(c, "tile_m")[1] == 12);
    EXPECT_EQ(space.IsValid(c), expected) << i;
    valid += expected;
  }
  EXPECT_GT(valid, 0);
  EXPECT_LT(valid, 72);
}

TEST(ConstraintTest, OutOfRangeIsRange) {
  ConfigSpace space = SmallSpace();
  EXPECT_EQ(space.WhyInvalid({6, 0, 0}), "range");
  EXPECT_EQ(space.WhyInvalid({0, -1, 0}), "range");
  EXPECT_EQ(space.WhyInvalid({0, 0}), "range");
  EXPECT_EQ(space.WhyInvalid({0, 0, 0, 0}), "range");
  EXPECT_FALSE(space.IsValid({0, 0, 3}));
}

TEST(UniformBelowTest, InRangeAndReproducible) {
  std::mt19937_64 a(7), b(7);
  for (uint64_t n : {1ull, 2ull, 3ull, 10ull, 1000003ull, (1ull << 63) + 5}) {
    for (int i = 0; i < 100; ++i) {
      uint64_t x = UniformBelow(a, n);
      EXPECT_LT(x, n);
      EXPECT_EQ(x, UniformBelow(b, n));
    }
  }
}

TEST(SampleTest, SameSeedSameSequenceDifferentSeedDiffers) {
  ConfigSpace space = SmallSpace();
  space.AddConstraint("not_first_m", [](const Config& c) { return c[0] != 0; });
  auto draw = [&space](uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<Config> out;
    for (int i = 0; i < 30; ++i) {
      auto c = space.Sample(rng);
      EXPECT_TRUE(c.ok()) << c.status();
      EXPECT_TRUE(space.IsValid(*c));
      out.push_back(*c);
    }
    return out;
  };
  EXPECT_EQ(draw(42), draw(42));
  EXPECT_NE(draw(42), draw(43));
}

TEST(SampleTest, RoughlyUniformOverValidPoints) {
  ConfigSpace space;
  space.AddChoice("a", {0, 1, 2});
  space.AddChoice("b", {0, 1, 2});
  space.AddConstraint("a_le_b", [](const Config& c) { return c[0] <= c[1]; });  // 6 points
  std::mt19937_64 rng(1);
  std::map<Config, int> counts;
  for (int i = 0; i < 6000; ++i) counts[*space.Sample(rng)]++;
  ASSERT_EQ(counts.size(), 6u);
  for (const auto& [c, n] : counts) {
    EXPECT_TRUE(space.IsValid(c));
    EXPECT_GT(n, 800);
    EXPECT_LT(n, 1200);
  }
}

TEST(SampleTest, NotFoundWhenNothingIsValid) {
  ConfigSpace space = SmallSpace();
  space.AddConstraint("impossible", [](const Config&) { return false; });
  std::mt19937_64 rng(3);
  auto c = space.Sample(rng, 100);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
}

TEST(NeighboursTest, DifferInExactlyOneKnobByOneStep) {
  ConfigSpace space = SmallSpace();
  space.AddConstraint("not_m5_n3", [](const Config& c) { return !(c[0] == 5 && c[1] == 3); });
  for (uint64_t i = 0; i < space.Size(); ++i) {
    Config c = space.FromIndex(i);
    std::vector<Config> ns = space.Neighbours(c);
    std::set<Config> unique(ns.begin(), ns.end());
    EXPECT_EQ(unique.size(), ns.size());
    int expected = 0;
    for (size_t k = 0; k < c.size(); ++k) {
      for (int step : {-1, 1}) {
        Config n = c;
        n[k] += step;
        if (space.IsValid(n)) ++expected;
      }
    }
    EXPECT_EQ(static_cast<int>(ns.size()), expected) << i;
    for (const Config& n : ns) {
      EXPECT_TRUE(space.IsValid(n));
      int differing = 0;
      for (size_t k = 0; k < c.size(); ++k) {
        if (n[k] != c[k]) {
          ++differing;
          EXPECT_EQ(std::abs(n[k] - c[k]), 1);
        }
      }
      EXPECT_EQ(differing, 1);
    }
  }
}

TEST(NeighboursTest, KnobOrderThenDirection) {
  ConfigSpace space = SmallSpace();
  EXPECT_THAT(space.Neighbours({1, 0, 2}),
              ElementsAre(Config{0, 0, 2}, Config{2, 0, 2}, Config{1, 1, 2}, Config{1, 0, 1}));
  space.AddConstraint("not_m2", [](const Config& c) { return c[0] != 2; });
  EXPECT_THAT(space.Neighbours({1, 0, 2}),
              ElementsAre(Config{0, 0, 2}, Config{1, 1, 2}, Config{1, 0, 1}));
}

// Two variants: "a" has its own split, "b" its own choice; "shared" matters in both. Each
// variant's knobs are pinned to option 0 under the other: 2 x (6 + 3) valid points.
ConfigSpace VariantSpace() {
  ConfigSpace space;
  space.AddChoice("shared", {1, 2});
  space.AddSplit("a_tile", 12, 2);  // 6 options
  space.AddChoice("b_unroll", {0, 4, 16});
  space.AddChoice("variant", {0, 1}, {"a", "b"});
  space.AddCondition("a_tile", "variant", {0});
  space.AddCondition("b_unroll", "variant", {1});
  return space;
}

TEST(ConditionTest, PinnedKnobsAreConstraintsAndEveryPointIsCanonical) {
  ConfigSpace space = VariantSpace();
  int valid = 0;
  for (uint64_t i = 0; i < space.Size(); ++i) {
    Config c = space.FromIndex(i);
    EXPECT_EQ(space.IsValid(c), space.Canonical(c) == c) << i;
    valid += space.IsValid(c);
  }
  EXPECT_EQ(valid, 2 * (6 + 3));
  EXPECT_EQ(space.WhyInvalid({0, 0, 1, 0}), "b_unroll_pinned");
  EXPECT_EQ(space.WhyInvalid({0, 2, 1, 1}), "a_tile_pinned");
  EXPECT_EQ(space.Canonical({1, 4, 2, 1}), (Config{1, 0, 2, 1}));
  EXPECT_DEATH(space.AddCondition("variant", "b_unroll", {0}), "itself conditional");
  EXPECT_DEATH(space.AddCondition("shared", "a_tile", {1}), "split knob 'a_tile'");
}

// Draw pins what does not matter, so conditions cost no rejections: every sample is valid
// on its first draw, both variants come up about equally often, and within a variant the
// points are about uniform.
TEST(ConditionTest, SamplesNeedNoRejectionsAndCoverBothVariants) {
  ConfigSpace space = VariantSpace();
  std::mt19937_64 rng(5);
  std::map<Config, int> counts;
  for (int i = 0; i < 9000; ++i) {
    Config c = space.Draw(rng);
    ASSERT_TRUE(space.IsValid(c));
    counts[c]++;
  }
  ASSERT_EQ(counts.size(), 18u);
  for (const auto& [c, n] : counts) {
    const int expected = c[3] == 0 ? 9000 / 2 / 12 : 9000 / 2 / 6;  // 375 or 750
    EXPECT_GT(n, expected * 3 / 4) << ::testing::PrintToString(c);
    EXPECT_LT(n, expected * 5 / 4) << ::testing::PrintToString(c);
  }
  // The same seed gives the same samples.
  std::mt19937_64 a(9), b(9);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(*space.Sample(a), *space.Sample(b));
}

// A step of the variant knob resets the knobs of the variant it leaves; steps of pinned knobs
// are no neighbours at all.
TEST(ConditionTest, NeighboursStayCanonical) {
  ConfigSpace space = VariantSpace();
  EXPECT_THAT(space.Neighbours({0, 3, 0, 0}),
              ElementsAre(Config{1, 3, 0, 0}, Config{0, 2, 0, 0}, Config{0, 4, 0, 0}, Config{0, 0, 0, 1}));
  EXPECT_THAT(space.Neighbours({1, 0, 2, 1}),
              ElementsAre(Config{0, 0, 2, 1}, Config{1, 0, 1, 1}, Config{1, 0, 0, 0}));
}

// A knob added after configs were recorded: old text without it still parses, to option 0.
TEST(ConditionTest, AllowMissingReadsOldText) {
  ConfigSpace space = VariantSpace();
  EXPECT_THAT(std::string(space.FromJson(R"({"shared":[2],"a_tile":[3,4]})").status().message()),
              HasSubstr("'b_unroll' is missing"));
  space.AllowMissing("b_unroll");
  space.AllowMissing("variant");
  auto old = space.FromJson(R"({"shared":[2],"a_tile":[3,4]})");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(*old, (Config{1, 2, 0, 0}));
  EXPECT_EQ(space.ToJson(*old), R"({"shared":[2],"a_tile":[3,4],"b_unroll":[0],"variant":[0]})");
  EXPECT_EQ(*space.FromJson(space.ToJson({0, 0, 2, 1})), (Config{0, 0, 2, 1}));
}

TEST(GetTest, ReturnsChosenOption) {
  ConfigSpace space = SmallSpace();
  Config c = {2, 1, 2};
  EXPECT_THAT(space.Get(c, "tile_m"), ElementsAre(3, 4));
  EXPECT_THAT(space.Get(c, "tile_n"), ElementsAre(2, 4));
  EXPECT_THAT(space.Get(c, "unroll"), ElementsAre(16));
  EXPECT_EQ(space.GetInt(c, "unroll"), 16);
}

TEST(GetDeathTest, UnknownKnobAborts) {
  ConfigSpace space = SmallSpace();
  EXPECT_DEATH(space.Get({0, 0, 0}, "tile_k"), "unknown knob 'tile_k'");
  EXPECT_DEATH(space.GetInt({0, 0, 0}, "tile_k"), "unknown knob 'tile_k'");
  EXPECT_DEATH(space.KnobIndex("nope"), "space.cc:[0-9]+: check failed");
  EXPECT_DEATH(space.GetInt({0, 0, 0}, "tile_m"), "GetInt on split knob 'tile_m'");
}

TEST(SpaceDeathTest, BuildingMistakesAbort) {
  ConfigSpace space = SmallSpace();
  EXPECT_DEATH(space.AddChoice("unroll", {1}), "duplicate knob 'unroll'");
  EXPECT_DEATH(space.AddChoice("empty", {}), "no values");
  EXPECT_DEATH(space.AddChoice("rep", {1, 2, 1}), "repeats value 1");
  EXPECT_DEATH(space.AddChoice("lab", {1, 2}, {"x"}), "labels");
  EXPECT_DEATH(space.AddSplit("zero", 0, 2), "extent 0");
  EXPECT_DEATH(space.FromIndex(72), "out of a space of 72");
  EXPECT_DEATH(space.ToIndex({0, 4, 0}), "knob 'tile_n' index 4");
}

TEST(JsonTest, TextUsesValuesInKnobOrder) {
  ConfigSpace space = SmallSpace();
  EXPECT_EQ(space.ToJson({2, 1, 2}), R"({"tile_m":[3,4],"tile_n":[2,4],"unroll":[16]})");
}

TEST(JsonTest, RoundTripOverWholeSpace) {
  ConfigSpace space = SmallSpace();
  for (uint64_t i = 0; i < space.Size(); ++i) {
    Config c = space.FromIndex(i);
    auto back = space.FromJson(space.ToJson(c));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, c);
  }
}

TEST(JsonTest, SurvivesKeyOrderAndBareChoiceValue) {
  ConfigSpace space = SmallSpace();
  auto c = space.FromJson(R"({"unroll": 4, "tile_n": [8, 1], "tile_m": [12, 1]})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*c, (Config{5, 3, 1}));
}

TEST(JsonTest, BadInputIsInvalidArgument) {
  ConfigSpace space = SmallSpace();
  struct Case {
    std::string text;
    std::string message;
  };
  std::vector<Case> cases = {
      {R"({"tile_m":[3,4],)", "not valid JSON"},
      {R"([1,2,3])", "not an object"},
      {R"({"tile_m":[3,4],"unroll":[16]})", "'tile_n' is missing"},
      {R"({"tile_m":[3,4],"tile_n":[2,4],"unroll":[16],"tile_k":[1]})", "unknown knob 'tile_k'"},
      {R"({"tile_m":[3,5],"tile_n":[2,4],"unroll":[16]})", "[3,5] is not an option of knob 'tile_m'"},
      {R"({"tile_m":[12],"tile_n":[2,4],"unroll":[16]})", "not an option"},
      {R"({"tile_m":[3,4],"tile_n":[2,4],"unroll":[8]})", "not an option of knob 'unroll'"},
      {R"({"tile_m":[3,4],"tile_n":[2,4],"unroll":"16"})", "not an integer list"},
      {R"({"tile_m":[3,4.5],"tile_n":[2,4],"unroll":[16]})", "non-integer"},
  };
  for (const Case& c : cases) {
    auto result = space.FromJson(c.text);
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(std::string(result.status().message()), HasSubstr(c.message)) << c.text;
  }
}

TEST(ConfigHashTest, EqualConfigsHashEqualAndSmallSpaceHasFewCollisions) {
  ConfigSpace space = SmallSpace();
  ConfigHash hash;
  std::set<size_t> hashes;
  for (uint64_t i = 0; i < space.Size(); ++i) {
    Config c = space.FromIndex(i);
    EXPECT_EQ(hash(c), hash(Config(c)));
    hashes.insert(hash(c));
  }
  EXPECT_EQ(hashes.size(), space.Size());
  EXPECT_NE(hash({0}), hash({0, 0}));
}

TEST(CheckTest, PassingCheckDoesNotEvaluateMessage) {
  int evaluated = 0;
  auto side_effect = [&evaluated] { return ++evaluated; };
  TUNE_CHECK(1 + 1 == 2) << side_effect();
  TUNE_CHECK_MSG(true, side_effect());
  EXPECT_EQ(evaluated, 0);
  // The macro is a single expression: safe in an unbraced if/else.
  if (evaluated == 0)
    TUNE_CHECK(true) << "fine";
  else
    ADD_FAILURE() << "dangling else bound to the macro";
}

TEST(CheckDeathTest, FailingCheckPrintsLocationConditionAndMessage) {
  int x = 3;
  EXPECT_DEATH(TUNE_CHECK(x < 2) << "x is " << x,
               "space_test.cc:[0-9]+: check failed: x < 2: x is 3");
  EXPECT_DEATH(TUNE_CHECK_MSG(x == 0, "want zero, got " << x), "check failed: x == 0: want zero, got 3");
  EXPECT_DEATH(TUNE_CHECK(false), "check failed: false");
}

}  // namespace
}  // namespace tune::search
