#pragma once
/// @file test_support.h
/// @brief Temp directories and the real Python hook writer, for the agent's tests.

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace fragscope::agent::testing {

/// Where rank files live in production (tmpfs), where creating thousands of files is cheap.
inline std::filesystem::path shared_memory_dir() {
  std::error_code error;
  return std::filesystem::is_directory("/dev/shm", error) ? std::filesystem::path("/dev/shm")
                                                          : std::filesystem::temp_directory_path();
}

/// A fresh directory under `base` (the system temp dir by default), removed with everything in it.
class TempDir {
 public:
  explicit TempDir(const std::filesystem::path& base = std::filesystem::temp_directory_path()) {
    std::string pattern = (base / "fragscope-test-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// Runs `code` with the project's python/ on the path; returns the exit status.
inline int run_python(const TempDir& dir, const std::string& code) {
  const auto script = dir.path() / "writer.py";
  std::ofstream(script) << "import sys, os, time\nsys.path.insert(0, '" FRAGSCOPE_SOURCE_DIR "/python')\n"
                        << "from fragscope import shm\n" << code << '\n';
  const std::string command = std::string(FRAGSCOPE_PYTHON) + " " + script.string();
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// A per-user folder `<root>/<uid>` of `files` rank-named files of junk, folder and files owned by
/// `uid`, as a pod that may run as any uid makes them (chown: the tests run as root). Newest last.
inline void make_flooded_folder(const std::filesystem::path& root, uid_t uid, int files) {
  const auto folder = root / std::to_string(uid);
  std::filesystem::create_directory(folder);
  for (int i = 0; i < files; ++i) {
    const auto path = folder / ("rank" + std::to_string(i) + "-pid" + std::to_string(100 + i) + ".fsr");
    std::ofstream(path) << "junk";
    ASSERT_EQ(::chown(path.c_str(), uid, uid), 0);
  }
  ASSERT_EQ(::chown(folder.c_str(), uid, uid), 0);
}

inline std::uint64_t unix_ns_now() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

}  // namespace fragscope::agent::testing
