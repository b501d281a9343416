// The CLI's own words, byte for byte: usage, suggestions for mistyped commands and flags, the
// errors for bad flag values and sizes without a unit. Each tests/cli/golden/NAME.case holds one
// command line and what it must print:
//
//   # what the case shows (comment lines, before the command)
//   $ fragscope ARGS...        (words split at spaces; '' is an empty word)
//   ? EXIT_STATUS
//   --- stdout
//   ...
//   --- stderr
//   ...
//
// The command runs in the source folder, so paths in the cases are relative to it. After a
// deliberate change of the wording, FRAGSCOPE_UPDATE_GOLDEN=1 rewrites the cases with what the
// binary prints now (then read the diff).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../command_runner.h"

namespace fragscope {
namespace {

namespace fs = std::filesystem;

struct GoldenCase {
  std::string name;
  fs::path file;
  std::string comment;  // the lines before the command, kept when the case is rewritten
  std::vector<std::string> args;
  int exit_code = 0;
  std::string out;
  std::string err;
};

void PrintTo(const GoldenCase& c, std::ostream* os) { *os << c.file.filename().string(); }

std::vector<std::string> split_words(const std::string& line) {
  std::vector<std::string> words;
  std::istringstream in(line);
  std::string word;
  while (in >> word) words.push_back(word == "''" ? std::string() : word);
  return words;
}

GoldenCase read_case(const fs::path& file) {
  GoldenCase c;
  c.name = file.stem().string();
  c.file = file;
  std::ifstream in(file);
  std::string line;
  std::string* section = nullptr;
  while (std::getline(in, line)) {
    if (section != nullptr && line != "--- stdout" && line != "--- stderr") {
      *section += line + "\n";
    } else if (line.starts_with("$ fragscope")) {
      c.args = split_words(line.substr(11));
    } else if (line.starts_with("? ")) {
      c.exit_code = std::stoi(line.substr(2));
    } else if (line == "--- stdout") {
      section = &c.out;
    } else if (line == "--- stderr") {
      section = &c.err;
    } else {
      c.comment += line + "\n";
    }
  }
  return c;
}

void write_case(const GoldenCase& c, const testing::CommandResult& r) {
  std::ofstream out(c.file, std::ios::trunc);
  std::string args;
  for (const std::string& a : c.args) args += " " + (a.empty() ? std::string("''") : a);
  out << c.comment << "$ fragscope" << args << "\n? " << r.exit_code << "\n--- stdout\n"
      << r.out << "--- stderr\n" << r.err;
}

std::vector<GoldenCase> golden_cases() {
  std::vector<GoldenCase> cases;
  for (const auto& entry : fs::directory_iterator(fs::path(FRAGSCOPE_SOURCE_DIR) / "tests/cli/golden")) {
    if (entry.path().extension() == ".case") cases.push_back(read_case(entry.path()));
  }
  std::sort(cases.begin(), cases.end(), [](const GoldenCase& a, const GoldenCase& b) { return a.name < b.name; });
  return cases;
}

class Golden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(Golden, PrintsExactly) {
  const GoldenCase& c = GetParam();
  fs::current_path(FRAGSCOPE_SOURCE_DIR);
  const testing::CommandResult r = testing::run_fragscope(c.args);
  if (const char* update = std::getenv("FRAGSCOPE_UPDATE_GOLDEN"); update != nullptr && std::string(update) == "1") {
    write_case(c, r);
    GTEST_SKIP() << "rewrote " << c.file;
  }
  EXPECT_EQ(r.exit_code, c.exit_code);
  EXPECT_EQ(r.out, c.out);
  EXPECT_EQ(r.err, c.err);
}

INSTANTIATE_TEST_SUITE_P(Cases, Golden, ::testing::ValuesIn(golden_cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace fragscope
