// Tests for jit/knobs: parsing of the CUJIT_* environment knobs.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <vector>
#include <string>
#include <thread>

#include "jit/error.h"
#include "jit/knobs.h"

using jit::detail::AutotuneMode;
using jit::detail::LogLevel;

namespace {

template <class Fn>
void expect_invalid_naming(const std::string& knob, const std::string& value, Fn&& fn) {
  try {
    fn();
    ADD_FAILURE() << knob << "='" << value << "' was accepted";
  } catch (const jit::Error& e) {
    EXPECT_EQ(e.code(), jit::ErrorCode::InvalidArgument) << e.what();
    const std::string message = e.what();
    EXPECT_NE(message.find(knob), std::string::npos) << message;
    EXPECT_NE(message.find(value), std::string::npos) << message;
  }
}

}  // namespace

TEST(Knobs, LogLevelDocumentedValues) {
  EXPECT_EQ(jit::detail::parse_log_level(nullptr), LogLevel::off);  // unset: the default
  EXPECT_EQ(jit::detail::parse_log_level(""), LogLevel::off);
  EXPECT_EQ(jit::detail::parse_log_level("off"), LogLevel::off);
  EXPECT_EQ(jit::detail::parse_log_level("info"), LogLevel::info);
  EXPECT_EQ(jit::detail::parse_log_level("debug"), LogLevel::debug);
  // Numeric spellings.
  EXPECT_EQ(jit::detail::parse_log_level("0"), LogLevel::off);
  EXPECT_EQ(jit::detail::parse_log_level("1"), LogLevel::info);
  EXPECT_EQ(jit::detail::parse_log_level("2"), LogLevel::debug);
}

TEST(Knobs, LogLevelRejectsGarbage) {
  for (const char* value : {"verbose", "3", "INFO ", "trace", "-1"}) {
    expect_invalid_naming("CUJIT_LOG", value, [&] { jit::detail::parse_log_level(value); });
  }
}

TEST(Knobs, AutotuneModeDocumentedValues) {
  EXPECT_EQ(jit::detail::parse_autotune_mode(nullptr), AutotuneMode::full);  // unset: the default
  EXPECT_EQ(jit::detail::parse_autotune_mode(""), AutotuneMode::full);
  EXPECT_EQ(jit::detail::parse_autotune_mode("full"), AutotuneMode::full);
  EXPECT_EQ(jit::detail::parse_autotune_mode("off"), AutotuneMode::off);
  EXPECT_EQ(jit::detail::parse_autotune_mode("background"), AutotuneMode::background);
}

TEST(Knobs, AutotuneModeRejectsGarbage) {
  for (const char* value : {"on", "fulll", "none", "Frozen", "Background", "bg"}) {
    expect_invalid_naming("CUJIT_AUTOTUNE", value, [&] { jit::detail::parse_autotune_mode(value); });
  }
}

TEST(Knobs, CompileThreadsDefaultToTheUsableCpus) {
  EXPECT_EQ(jit::detail::parse_compile_threads(nullptr, 6), 6u);
  EXPECT_EQ(jit::detail::parse_compile_threads("", 6), 6u);
  EXPECT_EQ(jit::detail::parse_compile_threads("2", 6), 2u);
  EXPECT_EQ(jit::detail::parse_compile_threads("64", 6), 64u);
  for (const char* value : {"0", "-1", "two", "3x", " 4"}) {
    expect_invalid_naming("CUJIT_COMPILE_THREADS", value, [&] { jit::detail::parse_compile_threads(value, 6); });
  }
  EXPECT_GE(jit::detail::usable_cpus(), 1u);
  EXPECT_LE(jit::detail::usable_cpus(), std::max(1u, std::thread::hardware_concurrency()));
}

TEST(Knobs, TileOrderDocumentedValues) {
  using jit::detail::parse_tile_group_heads;
  EXPECT_EQ(parse_tile_group_heads(nullptr), 0);
  EXPECT_EQ(parse_tile_group_heads(""), 0);
  EXPECT_EQ(parse_tile_group_heads("auto"), 0);
  EXPECT_EQ(parse_tile_group_heads("heads"), 1);
  EXPECT_EQ(parse_tile_group_heads("rows"), jit::detail::kRowsFirst);
  EXPECT_EQ(parse_tile_group_heads("1"), 1);
  EXPECT_EQ(parse_tile_group_heads("3"), 3);
  for (const char* value : {"Rows", "m", "heads_first", "0", "-2", "3x", " 3"}) {
    expect_invalid_naming("CUJIT_SM90_TILE_ORDER", value, [&] { parse_tile_group_heads(value); });
  }
}

// The knob holds a name; which names exist is the attention registry's
// (test_family_choice.cpp), so a new family needs no edit here.
TEST(Knobs, FamilyNameDocumentedValues) {
  EXPECT_EQ(jit::detail::parse_family_name(nullptr), "");
  EXPECT_EQ(jit::detail::parse_family_name(""), "");
  EXPECT_EQ(jit::detail::parse_family_name("auto"), "");
  EXPECT_EQ(jit::detail::parse_family_name("portable"), "portable");
  EXPECT_EQ(jit::detail::parse_family_name("sm90"), "sm90");
  EXPECT_EQ(jit::detail::parse_family_name("my_family2"), "my_family2");
  for (const char* value : {"SM90", "sm-90a", "sm90 ", "../x"}) {
    expect_invalid_naming("CUJIT_FAMILY", value, [&] { jit::detail::parse_family_name(value); });
  }
}

TEST(Knobs, BoolKnobDocumentedValues) {
  // Unset or empty: the fallback.
  EXPECT_TRUE(jit::detail::parse_bool_knob("CUJIT_DISK_CACHE", nullptr, true));
  EXPECT_FALSE(jit::detail::parse_bool_knob("CUJIT_DISK_CACHE", nullptr, false));
  EXPECT_TRUE(jit::detail::parse_bool_knob("CUJIT_DISK_CACHE", "", true));
  EXPECT_FALSE(jit::detail::parse_bool_knob("CUJIT_DISK_CACHE", "", false));
  for (const char* yes : {"1", "on", "true"}) {
    EXPECT_TRUE(jit::detail::parse_bool_knob("CUJIT_DISK_CACHE", yes, false)) << yes;
  }
  for (const char* no : {"0", "off", "false"}) {
    EXPECT_FALSE(jit::detail::parse_bool_knob("CUJIT_DISK_CACHE", no, true)) << no;
  }
}

TEST(Knobs, BoolKnobRejectsGarbageNamingTheKnob) {
  for (const char* value : {"2", "yes please", "maybe", "-1"}) {
    expect_invalid_naming("CUJIT_DISK_CACHE", value,
                          [&] { jit::detail::parse_bool_knob("CUJIT_DISK_CACHE", value, true); });
  }
  // The name comes from the caller, not a fixed string.
  expect_invalid_naming("CUJIT_SOME_FLAG", "x", [] { jit::detail::parse_bool_knob("CUJIT_SOME_FLAG", "x", false); });
}

TEST(Knobs, CacheReadOnlyDirsArePathsInOrder) {
  using jit::detail::parse_cache_read_only_dirs;
  EXPECT_TRUE(parse_cache_read_only_dirs(nullptr).empty());
  EXPECT_TRUE(parse_cache_read_only_dirs("").empty());
  EXPECT_TRUE(parse_cache_read_only_dirs(":::").empty());
  const std::vector<std::filesystem::path> dirs = parse_cache_read_only_dirs(":/opt/cache::/mnt/shared/cujit:");
  ASSERT_EQ(dirs.size(), 2u);  // empty entries are ignored, the order kept
  EXPECT_EQ(dirs[0], "/opt/cache");
  EXPECT_EQ(dirs[1], "/mnt/shared/cujit");
  EXPECT_EQ(parse_cache_read_only_dirs("/a b/c").at(0), "/a b/c");
}

TEST(Knobs, CacheReadOnlyDirsRefuseRelativePaths) {
  for (const char* value : {"cache", "/opt/cache:rel/dir", "./cache", "~/cache"}) {
    const std::string text = value;
    const std::string relative = text.substr(text.find(':') == std::string::npos ? 0 : text.find(':') + 1);
    expect_invalid_naming("CUJIT_CACHE_READONLY_DIRS", relative,
                          [&] { (void)jit::detail::parse_cache_read_only_dirs(value); });
  }
}
