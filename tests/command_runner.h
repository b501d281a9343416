#pragma once
// Test support: run the real `fragscope` binary (env FRAGSCOPE_BIN, set by CTest) and capture
// its exit status, stdout and stderr.

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace fragscope::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

inline std::string fragscope_binary() {
  const char* bin = std::getenv("FRAGSCOPE_BIN");
  return bin ? bin : std::string(FRAGSCOPE_BINARY_DIR) + "/src/cli/fragscope";
}

/// Runs `fragscope ARGS...`; stdin is /dev/null.
inline CommandResult run_fragscope(const std::vector<std::string>& args) {
  static int counter = 0;
  const auto dir = std::filesystem::temp_directory_path();
  const auto tag = std::to_string(::getpid()) + "_" + std::to_string(counter++);
  const auto out_path = dir / ("fragscope_out_" + tag);
  const auto err_path = dir / ("fragscope_err_" + tag);
  std::string cmd = shell_quote(fragscope_binary());
  for (const auto& a : args) cmd += " " + shell_quote(a);
  cmd += " </dev/null >" + shell_quote(out_path.string()) + " 2>" + shell_quote(err_path.string());
  const int status = std::system(cmd.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  auto slurp = [](const std::filesystem::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  std::filesystem::remove(out_path);
  std::filesystem::remove(err_path);
  return r;
}

}  // namespace fragscope::testing
