// `fragscope doctor` end to end: exit status, JSON keys, one-line errors. The HTML report is
// opened in headless Chromium by tests/report/doctor_html_page_test.mjs.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
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
  for (const char* key : {"verdict", "phase", "data_wait_fraction", "evidence", "actions"}) EXPECT_TRUE(j.contains(key)) << key;
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

}  // namespace
