// `fragscope analyze` end to end: --json equals truth.json on every recorded snapshot; the text
// report says what a person needs; bad input exits 2 with one line naming the file.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "../command_runner.h"
#include "../fixture_support.h"

namespace fragscope {
namespace {

using testing::run_fragscope;

class AnalyzeJson : public ::testing::TestWithParam<testing::SnapshotFixture> {};

TEST_P(AnalyzeJson, EqualsTruthExactly) {
  const auto& f = GetParam();
  const auto r = run_fragscope({"analyze", f.snapshot.string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");  // no progress bar when stderr is not a terminal
  const auto j = nlohmann::json::parse(r.out);
  const auto& t = f.truth;
  EXPECT_EQ(j["segments"], t["segments"]);
  EXPECT_EQ(j["blocks"], t["blocks"]);
  EXPECT_EQ(j["total_reserved_bytes"], t["total_reserved"]);
  EXPECT_EQ(j["requested_bytes"], t["total_allocated"]);
  EXPECT_EQ(j["free_internal_bytes"], t["free_internal"]);
  EXPECT_EQ(j["free_external_bytes"], t["free_external"]);
  EXPECT_EQ(j["largest_free_block_bytes"], t["largest_free_block"]);
  EXPECT_EQ(j["trace_entries"], t["trace_entries"]);
  EXPECT_EQ(j["trace_actions"], t["trace_actions"]);
  // allocated_bytes counts rounded block sizes: requested + rounding.
  EXPECT_EQ(j["allocated_bytes"].get<std::uint64_t>(),
            t["total_allocated"].get<std::uint64_t>() + t["free_internal"].get<std::uint64_t>());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, AnalyzeJson, ::testing::ValuesIn(testing::snapshot_fixtures()),
                         [](const auto& info) { return info.param.name; });

TEST(AnalyzeText, ExplainsTheFragmentationOomOfTheBundledExample) {
  const auto r =
      run_fragscope({"analyze", std::string(FRAGSCOPE_SOURCE_DIR) + "/examples/frag_oom_104/snapshot.pickle.zst"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* line : {
           "reserved                 38.64 GiB  in 524 segments, 716 blocks",
           "largest free block      1.23 GiB  of 31.47 GiB in 417 free blocks",
           "fragmentation index        0.961",
           "nvidia-smi would show 1017.12 MiB free (the driver's reading at the OOM).",
           "The failed request was 1.54 GiB: larger than any free block although 31.47 GiB is free in total.",
           "OOM at event 9359: request 1.54 GiB, driver free 1017.12 MiB",
           "reserved: 2.00 MiB when the trace starts, peak 39.61 GiB within it",
       }) {
    EXPECT_NE(r.out.find(line), std::string::npos) << "missing: " << line << "\n" << r.out;
  }
}

TEST(AnalyzeErrors, MissingFileExits2WithOneLineNamingIt) {
  const auto r = run_fragscope({"analyze", "/nonexistent/rank3.pickle"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "fragscope: error: /nonexistent/rank3.pickle: cannot open: No such file or directory\n");
}

TEST(AnalyzeErrors, HostileFileExits2AndExecutesNothing) {
  const auto path = std::filesystem::path(::testing::TempDir()) / "evil.pickle";
  const auto marker = std::filesystem::path(::testing::TempDir()) / "pwned";
  std::filesystem::remove(marker);
  {
    std::ofstream out(path, std::ios::binary);
    // pickle.loads of this runs os.system("touch <marker>").
    out << "\x80\x04" << "cos\nsystem\n(X" ;
    const std::string command = "touch " + marker.string();
    const auto n = static_cast<std::uint32_t>(command.size());
    out.write(reinterpret_cast<const char*>(&n), 4);
    out << command << "tR.";
  }
  const auto r = run_fragscope({"analyze", path.string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "fragscope: error: " + path.string() +
                       ": refusing to load: pickle opcode GLOBAL would import code (at byte 2)\n");
  EXPECT_FALSE(std::filesystem::exists(marker));
}

TEST(AnalyzeErrors, WrongFlagsExit2) {
  EXPECT_EQ(run_fragscope({"analyze"}).exit_code, 2);
  EXPECT_EQ(run_fragscope({"analyze", "x", "--bogus"}).exit_code, 2);
  const auto r = run_fragscope(
      {"analyze", std::string(FRAGSCOPE_SOURCE_DIR) + "/examples/frag_oom_104/snapshot.pickle.zst", "--device", "3"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no segments or trace for device 3"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace fragscope

namespace fragscope {
namespace {

// Issue 16: `analyze` on a snapshot whose memory is on device 1 (every rank but 0 of a multi-GPU
// node) printed 0 bytes and exited 0. The recording of frag_oom_104, moved to device 1 by Python.
TEST(AnalyzeDevice, TheDeviceHoldingTheMemoryIsAnalysedAndNamed) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / "analyze_device1";
  const std::string command =
      "python3 " + testing::shell_quote(std::string(FRAGSCOPE_SOURCE_DIR) + "/tests/cli/hostile_snapshots.py") +
      " device1 " + testing::shell_quote(dir.string()) + " " + testing::shell_quote(FRAGSCOPE_FIXTURES_DIR);
  ASSERT_EQ(std::system(command.c_str()), 0);
  const std::string path = (dir / "device1.pickle.zst").string();
  const auto text = run_fragscope({"analyze", path});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(
      text.out.find("fragscope analyze: " + path + " (device 1, the one holding the memory; --device picks another)"),
      std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("reserved                 38.64 GiB  in 524 segments, 716 blocks"), std::string::npos)
      << text.out;
  const auto json = nlohmann::json::parse(run_fragscope({"analyze", path, "--json"}).out);
  EXPECT_EQ(json["device"], 1);
  EXPECT_TRUE(json["device_picked"].get<bool>());
  EXPECT_EQ(json["trace_entries"], 10370);  // the recording's trace, found on device 1
  const auto chosen = nlohmann::json::parse(run_fragscope({"analyze", path, "--json", "--device", "1"}).out);
  EXPECT_FALSE(chosen["device_picked"].get<bool>());
  const auto other = run_fragscope({"analyze", path, "--device", "0"});
  EXPECT_EQ(other.exit_code, 2);
  EXPECT_EQ(other.err, "fragscope: error: " + path + ": no segments or trace for device 0 (it has device 1)\n");
}

}  // namespace
}  // namespace fragscope
