// Flags as a user types them, end to end: sizes in every unit mean the bytes docs/README say,
// `--alloc-conf default` is PyTorch's defaults, --version and every --json document name the same
// build, --quiet goes anywhere. (The errors for bad values are golden cases: cli_golden_test.)
#include <gtest/gtest.h>

#include <regex>

#include <nlohmann/json.hpp>

#include "../command_runner.h"

namespace fragscope {
namespace {

using testing::run_fragscope;

const std::string kSnapshot = std::string(FRAGSCOPE_SOURCE_DIR) + "/examples/frag_oom_104/snapshot.pickle.zst";

nlohmann::json replay_json(const std::vector<std::string>& flags) {
  std::vector<std::string> args = {"replay", kSnapshot, "--json"};
  args.insert(args.end(), flags.begin(), flags.end());
  const auto r = run_fragscope(args);
  EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.err;
  return nlohmann::json::parse(r.out);
}

TEST(SizeFlags, EveryUnitMeansWhatTheDocsSay) {
  const struct {
    const char* text;
    std::uint64_t bytes;
  } sizes[] = {
      {"40GiB", 40ull << 30},  {"40G", 40ull << 30},     {"40 GiB", 40ull << 30},
      {"40GB", 40'000'000'000}, {"40960MiB", 40ull << 30}, {"42805960704B", 42'805'960'704},
      {"42805960704 bytes", 42'805'960'704}, {"1.5TiB", 3ull << 39},
  };
  for (const auto& size : sizes) {
    const auto j = replay_json({"--capacity", size.text});
    EXPECT_EQ(j["capacity"]["bytes"], size.bytes) << size.text;
  }
}

TEST(SizeFlags, GpuNamesGiveTheCardNotTheSizeInTheName) {
  // A100-40GB: nvidia-smi memory.total 40960 MiB = 40 GiB, less the CUDA context; never 40e9.
  const auto j = replay_json({"--gpu", "A100-40GB"});
  const auto bytes = j["capacity"]["bytes"].get<std::uint64_t>();
  EXPECT_LT(bytes, 40ull << 30);
  EXPECT_GT(bytes, 40'000'000'000ull - (3ull << 30));
  EXPECT_NE(j["capacity"]["source"].get<std::string>().find("A100-40GB"), std::string::npos);
}

TEST(AllocConfFlag, DefaultNamesPyTorchsDefaults) {
  const auto by_name = replay_json({"--alloc-conf", "default"});
  EXPECT_EQ(by_name["alloc_conf"], "");
  auto empty = replay_json({"--alloc-conf", ""});
  EXPECT_EQ(by_name, empty);
  const auto r = run_fragscope({"whatif", kSnapshot, "--threads", "1", "--alloc-conf", "Defaults", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

TEST(Version, NamesTheProjectVersionAndTheRevision) {
  const auto r = run_fragscope({"--version"});
  EXPECT_EQ(r.exit_code, 0);
  std::smatch m;
  const std::regex line(R"(fragscope (\S+) \(revision ([0-9a-f]{12}(-dirty)?|unknown|\S+)\)\n)");
  ASSERT_TRUE(std::regex_match(r.out, m, line)) << r.out;
  EXPECT_EQ(m[1].str(), FRAGSCOPE_VERSION);
  // Every --json document carries the same build.
  const auto j = replay_json({});
  EXPECT_EQ(j["build_info"]["version"], m[1].str());
  EXPECT_EQ(j["build_info"]["revision"], m[2].str());
}

TEST(JsonDocuments, EachCarriesItsSchemaAndTheBuild) {
  const std::string calib = std::string(FRAGSCOPE_FIXTURES_DIR) + "/calib";
  const std::vector<std::vector<std::string>> commands = {
      {"analyze", kSnapshot, "--json"},
      {"replay", kSnapshot, "--json"},
      {"whatif", kSnapshot, "--threads", "2", "--json"},
      {"doctor", std::string(FRAGSCOPE_SOURCE_DIR) + "/examples/frag_oom_104", "--threads", "2", "--json"},
      {"check", calib + "/steps.jsonl", "--json"},
      {"plan", std::string(FRAGSCOPE_SOURCE_DIR) + "/examples/plan_p1.toml", "--json"},
  };
  for (const auto& args : commands) {
    const auto r = run_fragscope(args);
    ASSERT_LE(r.exit_code, 1) << args[0] << ": " << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["schema"], 1) << args[0];
    EXPECT_TRUE(j["build_info"]["version"].is_string()) << args[0];
    EXPECT_TRUE(j["build_info"]["revision"].is_string()) << args[0];
  }
}

TEST(QuietFlag, GoesBeforeOrAfterTheCommand) {
  for (const auto& args : std::vector<std::vector<std::string>>{{"--quiet", "analyze", kSnapshot},
                                                                {"analyze", kSnapshot, "-q"},
                                                                {"analyze", "--quiet", kSnapshot}}) {
    const auto r = run_fragscope(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err, "");
  }
}

}  // namespace
}  // namespace fragscope
