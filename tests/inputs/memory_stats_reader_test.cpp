// memory_stats JSON reader, checked against every fixture's stats.json and truth.json.
#include "inputs/memory_stats_reader.h"

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "util/error.h"

namespace fs = std::filesystem;
using fragscope::InputError;
using namespace fragscope::inputs;

namespace {

const fs::path kFixtures = FRAGSCOPE_FIXTURES_DIR;

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

std::vector<fs::path> scenarios_with(const char* file) {
  std::vector<fs::path> dirs;
  for (const auto& entry : fs::directory_iterator(kFixtures))
    if (fs::exists(entry.path() / file) && fs::exists(entry.path() / "truth.json")) dirs.push_back(entry.path());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

std::string error_of(std::string_view json) {
  try {
    parse_memory_stats(json, "stats.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(MemoryStatsReader, EveryFixtureAgreesWithTruth) {
  const auto dirs = scenarios_with("stats.json");
  ASSERT_GE(dirs.size(), 19u);
  for (const auto& dir : dirs) {
    SCOPED_TRACE(dir.filename().string());
    const MemoryStats stats = read_memory_stats_file(dir / "stats.json");
    const auto truth = read_json(dir / "truth.json");
    EXPECT_EQ(stats.reserved_bytes.all.peak, truth["max_memory_reserved"].get<std::int64_t>());
    EXPECT_EQ(stats.allocated_bytes.all.peak, truth["max_memory_allocated"].get<std::int64_t>());
    EXPECT_EQ(stats.num_alloc_retries, truth["num_alloc_retries"].get<std::int64_t>());
    EXPECT_EQ(stats.num_ooms, truth["num_ooms"].get<std::int64_t>());
    EXPECT_EQ(stats.reserved_bytes.all.current, truth["reserved_bytes_end"].get<std::int64_t>());
    EXPECT_EQ(stats.allocated_bytes.all.current, truth["allocated_bytes_end"].get<std::int64_t>());
    // Pools add up, as PyTorch keeps them.
    EXPECT_EQ(stats.reserved_bytes.all.current,
              stats.reserved_bytes.small_pool.current + stats.reserved_bytes.large_pool.current);
    EXPECT_EQ(stats.segment.all.current, stats.segment.small_pool.current + stats.segment.large_pool.current);
  }
}

TEST(MemoryStatsReader, TypedFieldsMirrorTheKeysOfCalib) {
  const auto raw = read_json(kFixtures / "calib" / "stats.json");
  const MemoryStats stats = read_memory_stats_file(kFixtures / "calib" / "stats.json");
  EXPECT_EQ(stats.values.size(), raw.size());
  EXPECT_EQ(stats.inactive_split_bytes.all.current, raw["inactive_split_bytes.all.current"].get<std::int64_t>());
  EXPECT_EQ(stats.requested_bytes.large_pool.peak, raw["requested_bytes.large_pool.peak"].get<std::int64_t>());
  EXPECT_EQ(stats.active_bytes.small_pool.freed, raw["active_bytes.small_pool.freed"].get<std::int64_t>());
  EXPECT_EQ(stats.allocation.all.allocated, 75797);
  EXPECT_EQ(stats.segment.all.current, 673);
  EXPECT_EQ(stats.inactive_split.large_pool.peak, 421);
  EXPECT_EQ(stats.num_device_alloc, raw["num_device_alloc"].get<std::int64_t>());
  EXPECT_FALSE(stats.max_split_size.has_value());  // -1 = unlimited
  EXPECT_EQ(stats.get("max_split_size"), -1);
  EXPECT_EQ(stats.get("segment.all.current"), 673);
  EXPECT_FALSE(stats.get("no.such.key").has_value());
}

TEST(MemoryStatsReader, MaxSplitSizeAndOversizeOfMsplit128) {
  const MemoryStats stats = read_memory_stats_file(kFixtures / "fid_msplit128" / "stats.json");
  EXPECT_EQ(stats.max_split_size, 128 * 1024 * 1024);
  EXPECT_EQ(stats.oversize_segments.current, 135);
  EXPECT_EQ(stats.oversize_allocations.allocated, 427);
}

TEST(MemoryStatsReader, NestedFormReadsLikeTheFlatOne) {
  const auto flat = read_json(kFixtures / "eval_spike" / "stats.json");
  nlohmann::json nested = nlohmann::json::object();
  for (const auto& [key, value] : flat.items()) nested[nlohmann::json::json_pointer("/" + [&] {
    std::string pointer = key;
    std::replace(pointer.begin(), pointer.end(), '.', '/');
    return pointer;
  }())] = value;
  const MemoryStats a = parse_memory_stats(flat.dump(), "flat");
  const MemoryStats b = parse_memory_stats(nested.dump(), "nested");
  EXPECT_EQ(a.values, b.values);
  EXPECT_EQ(b.num_ooms, 1);
  EXPECT_EQ(b.reserved_bytes.all.peak, a.reserved_bytes.all.peak);
}

TEST(MemoryStatsReader, BadInputNamesTheFileAndTheProblemOnOneLine) {
  for (const std::string_view bad : {"", "{", "[1,2]", "{}", "{\"a\": 1}", "\x80\x04\x95garbage"}) {
    const std::string message = error_of(bad);
    EXPECT_TRUE(message.starts_with("stats.json: ")) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  EXPECT_EQ(error_of("[1,2]"), "stats.json: memory_stats must be a JSON object, found array");
  EXPECT_NE(error_of(R"({"num_ooms": "one"})").find("\"num_ooms\" is not an integer"), std::string::npos);
  EXPECT_NE(error_of(R"({"num_ooms": 1.5})").find("num_ooms"), std::string::npos);
  EXPECT_NE(error_of(R"({"reserved_bytes.all.peak": 18446744073709551615})").find("out of range"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"a":{"b":{"c":{"d":{"e":1}}}}})").find("nested too deeply"), std::string::npos);
  EXPECT_THROW(read_memory_stats_file(kFixtures / "no_such_dir" / "stats.json"), InputError);
}
