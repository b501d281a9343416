// `fragscope check` through the real binary (env FRAGSCOPE_BIN): the input_bound and
// input_fixed canaries, --json, and unusable input (exit 2, one line on stderr).
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace fs = std::filesystem;

namespace {

const fs::path kFixtures = FRAGSCOPE_FIXTURES_DIR;

struct CommandResult {
  int status = -1;
  std::string out;
  std::string err;
};

std::string slurp(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string quote(const std::string& arg) {
  std::string q = "'";
  for (const char c : arg) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

class CheckCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* bin = std::getenv("FRAGSCOPE_BIN");
    ASSERT_NE(bin, nullptr) << "FRAGSCOPE_BIN must name the fragscope binary (ctest sets it)";
    bin_ = bin;
    dir_ = fs::temp_directory_path() / ("fragscope_check_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  CommandResult run(const std::vector<std::string>& args) {
    std::string command = quote(bin_);
    for (const auto& a : args) command += " " + quote(a);
    command += " >" + quote((dir_ / "out").string()) + " 2>" + quote((dir_ / "err").string());
    const int raw = std::system(command.c_str());
    CommandResult r;
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    r.out = slurp(dir_ / "out");
    r.err = slurp(dir_ / "err");
    return r;
  }

  fs::path write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return dir_ / name;
  }

  std::string bin_;
  fs::path dir_;
};

std::string fixture(const char* scenario, const char* file) { return (kFixtures / scenario / file).string(); }

}  // namespace

TEST_F(CheckCommand, InputBoundFailsWithExitOne) {
  const CommandResult r =
      run({"check", fixture("input_bound", "steps.jsonl"), "--smi", fixture("input_bound", "smi_trace.csv")});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  EXPECT_NE(r.out.find("criteria from defaults"), std::string::npos);
  EXPECT_NE(r.out.find("rank 0"), std::string::npos);
  // The data wait row: measured 92.8%, limit ≤ 10.0%, FAIL.
  const auto row = r.out.find("data wait");
  ASSERT_NE(row, std::string::npos) << r.out;
  const std::string line = r.out.substr(row, r.out.find('\n', row) - row);
  EXPECT_NE(line.find("92.8%"), std::string::npos) << line;
  EXPECT_NE(line.find("≤ 10.0%"), std::string::npos) << line;
  EXPECT_NE(line.find("FAIL"), std::string::npos) << line;
  EXPECT_NE(r.out.find("gpu 0 (smi_trace.csv)"), std::string::npos);
  EXPECT_NE(r.out.find("result: FAIL"), std::string::npos);
}

TEST_F(CheckCommand, InputFixedPassesWithItsCriteria) {
  const auto criteria = write("criteria.json",
                              R"({"version": 1, "required_phases": ["train"], "max_step_time_spread": 0.25,)"
                              R"( "max_throughput_spread": 0.25})");
  const CommandResult r = run({"check", fixture("input_fixed", "steps.jsonl"), "--criteria", criteria.string(), "--smi",
                     fixture("input_fixed", "smi_trace.csv")});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("result: PASS"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  // The same run under the default criteria fails its phases and its step-time stability.
  const CommandResult strict =
      run({"check", fixture("input_fixed", "steps.jsonl"), "--smi", fixture("input_fixed", "smi_trace.csv")});
  EXPECT_EQ(strict.status, 1);
}

TEST_F(CheckCommand, JsonForCi) {
  const CommandResult r =
      run({"check", fixture("input_bound", "steps.jsonl"), fixture("input_fixed", "steps.jsonl"), "--json"});
  EXPECT_EQ(r.status, 1) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_FALSE(doc["passed"].get<bool>());
  EXPECT_EQ(doc["criteria"]["max_data_wait_fraction"], 0.1);
  std::map<int, double> wait;
  for (const auto& row : doc["results"])
    if (row["criterion"] == "max_data_wait_fraction") wait[row["rank"].get<int>()] = row["measured"].get<double>();
  ASSERT_EQ(wait.size(), 2u);  // one file per rank, in rank order
  EXPECT_NEAR(wait[0], 0.9278312587072136, 1e-12);
  EXPECT_NEAR(wait[1], 0.00615438586116554, 1e-12);
  for (const auto& row : doc["results"])
    EXPECT_TRUE(row["verdict"] == "pass" || row["verdict"] == "fail" || row["verdict"] == "not_evaluated");
}

TEST_F(CheckCommand, UnusableInputExitsTwoWithOneLine) {
  const auto garbage = write("rank0.jsonl", "{\"step\": 0}\nnot json\n");
  const auto bad_criteria = write("bad.json", R"({"version": 1, "max_idle": 0.1})");
  const struct {
    std::vector<std::string> args;
    std::string expected;
  } cases[] = {
      {{"check", (dir_ / "missing.jsonl").string()}, "missing.jsonl: cannot open: No such file or directory"},
      // Issue 16: /dev/zero as telemetry, --smi or --criteria grew to 2.8-4.5 GB.
      {{"check", "/dev/zero"}, "/dev/zero: cannot read: is a character device, not a file"},
      {{"check", fixture("calib", "steps.jsonl"), "--smi", "/dev/zero"},
       "/dev/zero: cannot read: is a character device"},
      {{"check", fixture("calib", "steps.jsonl"), "--criteria", "/dev/zero"},
       "/dev/zero: cannot read: is a character device"},
      {{"check", garbage.string()}, "rank0.jsonl:2: invalid JSON"},
      {{"check", fixture("calib", "steps.jsonl"), "--criteria", bad_criteria.string()}, "unknown key \"max_idle\""},
      {{"check", fixture("calib", "steps.jsonl"), "--smi", fixture("calib", "stats.json")},
       "stats.json:1: no nvidia-smi header"},
      {{"check"}, "TELEMETRY is required"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.expected);
    const CommandResult r = run(c.args);
    EXPECT_EQ(r.status, 2);
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_NE(r.err.find(c.expected), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

// Issue 16: `check` passed when nothing was measured ("PASS (1 passed, 0 failed, 7 not
// evaluated)", exit 0). A criterion the data cannot answer fails the check unless allowed.
TEST_F(CheckCommand, NothingMeasuredFailsClosed) {
  const auto steps = write("rank0.jsonl", "{\"step\": 0}\n{\"step\": 1}\n{\"step\": 2}\n");
  const auto criteria = write("criteria.json", R"({"version": 1, "required_phases": ["train"]})");
  const CommandResult r = run({"check", steps.string(), "--criteria", criteria.string()});
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("result: FAIL (1 passed, 0 failed, 7 not evaluated); a criterion not evaluated fails the check "
                       "(--allow-unevaluated accepts it)"), std::string::npos) << r.out;
  const CommandResult allowed = run({"check", steps.string(), "--criteria", criteria.string(), "--allow-unevaluated"});
  EXPECT_EQ(allowed.status, 0) << allowed.out;
  EXPECT_NE(allowed.out.find(
                "result: PASS (1 passed, 0 failed, 7 not evaluated); not evaluated allowed (--allow-unevaluated)"),
            std::string::npos)
      << allowed.out;
  const CommandResult json = run({"check", steps.string(), "--criteria", criteria.string(), "--json"});
  EXPECT_EQ(json.status, 1);
  const auto doc = nlohmann::json::parse(json.out);
  EXPECT_FALSE(doc["passed"].get<bool>());
  EXPECT_EQ(doc["not_evaluated"], 7);
  EXPECT_FALSE(doc["allow_unevaluated"].get<bool>());
}
