// `fragscope doctor` end to end: exit status, JSON keys, one-line errors. The HTML report is
// opened in headless Chromium by tests/report/doctor_html_page_test.mjs.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/wait.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../diagnose/doctor_fixture_files.h"

namespace {

namespace fs = std::filesystem;
using fragscope::testing::doctor_user_files;

struct CommandResult {
  int status = -1;
  std::string out;
};

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

CommandResult run(const std::string& command) {
  CommandResult r;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf{};
  std::size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string bin() {
  const char* b = std::getenv("FRAGSCOPE_BIN");
  return b ? b : "";
}

std::string doctor(const std::string& scenario, const std::string& extra) {
  std::string cmd = quote(bin()) + " doctor";
  for (const auto& f : doctor_user_files(scenario)) cmd += " " + quote(f);
  return cmd + " " + extra;
}

fs::path out_dir() {
  const fs::path dir = fs::path(FRAGSCOPE_BINARY_DIR) / "doctor-command";
  fs::create_directories(dir);
  return dir;
}

TEST(DoctorCommand, FragmentationJsonAndExitStatusOne) {
  ASSERT_FALSE(bin().empty());
  const CommandResult r = run(doctor("frag_oom_104", "--json --threads 2"));
  ASSERT_EQ(r.status, 1) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["verdict"], "fragmentation");
  EXPECT_EQ(j["phase"], "train");
  for (const char* key : {"verdict", "phase", "data_wait_fraction", "evidence", "actions"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_TRUE(j["evidence"].is_array());
  EXPECT_FALSE(j["actions"].empty());
  EXPECT_EQ(j["actions"][0]["setting"], "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");
  EXPECT_NEAR(j["data_wait_fraction"].get<double>(), 0.00815, 0.01);
}

TEST(DoctorCommand, OkExitsZeroWithText) {
  const CommandResult r = run(doctor("fid_default", "--threads 2"));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("verdict: ok"), std::string::npos);
  EXPECT_NE(r.out.find("healthy"), std::string::npos);
}

TEST(DoctorCommand, UnusableInputExitsTwoWithOneLine) {
  const fs::path notes = out_dir() / "notes.txt";
  std::ofstream(notes) << "no artifacts here\n";
  CommandResult r = run(quote(bin()) + " doctor " + quote(notes.string()) + " 2>&1");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  r = run(quote(bin()) + " doctor /nonexistent/rank3.pickle 2>&1");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("/nonexistent/rank3.pickle"), std::string::npos);
}

// Issue 16: `doctor --html run/snapshot.pickle.zst run/` replaced the only snapshot with HTML.
TEST(DoctorCommand, TheHtmlReportIsNeverWrittenOntoAnInput) {
  const fs::path dir = out_dir() / "html_onto_input";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path snapshot = dir / "snapshot.pickle.zst";
  fs::copy_file(fragscope::testing::fixtures_dir() / "frag_oom_104" / "snapshot.pickle.zst", snapshot);
  const auto size = fs::file_size(snapshot);
  const CommandResult r = run(quote(bin()) + " doctor --threads 2 --html " + quote(snapshot.string()) + " " +
                              quote(dir.string()) + " 2>&1 >/dev/null");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.out, "fragscope: error: " + snapshot.string() + ": refusing to write the HTML report onto an input\n");
  EXPECT_EQ(fs::file_size(snapshot), size);
  // Written elsewhere, whole: no temporary left beside it.
  const CommandResult ok = run(quote(bin()) + " doctor --threads 2 --html " + quote((dir / "report.html").string()) +
                               " " + quote(dir.string()) + " >/dev/null");
  EXPECT_EQ(ok.status, 1);
  EXPECT_GT(fs::file_size(dir / "report.html"), 10000u);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 2);
}

// Issue 16: one damaged file aborted the doctor (exit 2) even when the rest sufficed.
TEST(DoctorCommand, ADamagedInputIsSkippedAndNamedInTextAndJson) {
  const fs::path dir = out_dir() / "damaged";
  fs::remove_all(dir);
  fs::create_directories(dir / "rank1");
  std::string files;
  for (const auto& f : doctor_user_files("frag_oom_104")) files += " " + quote(f);
  {
    std::ifstream in(fragscope::testing::fixtures_dir() / "frag_oom_104" / "snapshot.pickle.zst", std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    std::ofstream(dir / "rank1" / "snapshot.pickle.zst", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  }
  const std::string damaged = (dir / "rank1" / "snapshot.pickle.zst").string();
  const CommandResult json = run(quote(bin()) + " doctor --json --threads 2" + files + " " + quote(dir.string()));
  ASSERT_EQ(json.status, 1) << json.out;
  const auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["verdict"], "fragmentation");
  ASSERT_EQ(j["skipped_inputs"].size(), 1u);
  EXPECT_EQ(j["skipped_inputs"][0]["path"], damaged);
  EXPECT_EQ(j["skipped_inputs"][0]["reason"], "truncated zstd stream (ends inside a frame)");
  const CommandResult text = run(quote(bin()) + " doctor --threads 2" + files + " " + quote(dir.string()));
  EXPECT_NE(text.out.find("skipped (damaged or special files)\n  - " + damaged +
                          ": truncated zstd stream (ends inside a frame)\n"),
            std::string::npos)
      << text.out;
}

// Issue 16: with steps.jsonl missing or corrupt the doctor said "ok, GPU not waiting for data"
// (exit 0) while it listed the GPU idle in 79.8% of the nvidia-smi samples.
TEST(DoctorCommand, AnIdleGpuWithoutLoaderWaitsIsUndetermined) {
  std::string files;
  for (const auto& f : doctor_user_files("input_bound"))
    if (!f.ends_with("steps.jsonl")) files += " " + quote(f);
  const fs::path corrupt = out_dir() / "corrupt_steps.jsonl";
  std::ofstream(corrupt) << "{\"step\": 0, \"data_wait_ms\": 5, \"compute_ms\": 1}\nnot json\n{\"step\": 1}\n";
  for (const std::string& extra : {std::string(), " " + quote(corrupt.string())}) {
    const CommandResult r = run(quote(bin()) + " doctor --json --threads 2" + files + extra);
    ASSERT_EQ(r.status, 1) << r.out;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["verdict"], "undetermined");
    EXPECT_EQ(j["headline"], "No OOM, but the GPU idles in 79.8% of the nvidia-smi samples and no step telemetry says "
                             "whether it waits for data.");
    ASSERT_FALSE(j["decide_with"].empty());
    EXPECT_NE(j["decide_with"][0].get<std::string>().find("data_wait_ms"), std::string::npos);
    EXPECT_EQ(j["skipped_inputs"].size(), extra.empty() ? 0u : 1u);
  }
}
}  // namespace
