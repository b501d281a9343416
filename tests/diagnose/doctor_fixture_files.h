#pragma once
// Test support for the doctor: the files a user would have for one recorded fixture.
// meta.json and truth.json are never handed to the doctor; the OOM message of meta.json is
// written into a temporary training log, as the job would have printed it.

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../fixture_support.h"

namespace fragscope::testing {

inline std::filesystem::path doctor_scratch_dir() {
  const std::filesystem::path dir = std::filesystem::path(FRAGSCOPE_BINARY_DIR) / "doctor-test-files";
  std::filesystem::create_directories(dir);
  return dir;
}

/// Every file of the recording in `dir` a user would hand the doctor, plus a log with the OOM
/// message; `scenario` names the log.
inline std::vector<std::string> doctor_user_files_in(const std::filesystem::path& dir, const std::string& scenario) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    const bool snapshot =
        name.starts_with("snapshot") && (name.ends_with(".pickle.zst") || name.ends_with(".pickle.gz"));
    const bool wanted = snapshot || name == "steps.jsonl" || name == "stats.json" ||
                        (name.starts_with("smi") && name.ends_with(".csv")) || name == "summary.txt";
    if (wanted) files.push_back(entry.path().string());
  }
  const auto meta = read_json(dir / "meta.json");
  if (meta.contains("oom_message") && meta["oom_message"].is_string()) {
    // Test processes run in parallel and rewrite the same log: each writes its own and renames
    // it over the shared name, so no reader ever sees it half written.
    const fs::path log = doctor_scratch_dir() / (scenario + "-train.log");
    const fs::path written = log.string() + "." + std::to_string(::getpid());
    {
      std::ofstream out(written);
      out << "step 0 loss 10.43\n"
          << "Traceback (most recent call last):\n"
          << "  File \"train.py\", line 136, in run\n"
          << "    loss = model(input_ids=ids, labels=ids).loss / args.ga\n"
          << "torch.OutOfMemoryError: " << meta["oom_message"].get<std::string>() << "\n";
    }
    fs::rename(written, log);
    files.push_back(log.string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

/// Every file of fixture `scenario` a user would hand the doctor, plus a log with the OOM message.
inline std::vector<std::string> doctor_user_files(const std::string& scenario) {
  return doctor_user_files_in(fixtures_dir() / scenario, scenario);
}

/// Names of every fixture folder with a truth.json.
inline std::vector<std::string> doctor_scenarios() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(fixtures_dir()))
    if (entry.is_directory() && std::filesystem::exists(entry.path() / "truth.json"))
      names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace fragscope::testing
