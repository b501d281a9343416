// Content sniffing over the fixtures' files (named as recorded, but detection ignores names).
#include "inputs/input_kind.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <zlib.h>

#include "util/error.h"

namespace fs = std::filesystem;
using namespace fragscope::inputs;

namespace {

const fs::path kFixtures = FRAGSCOPE_FIXTURES_DIR;

InputKind of_text(std::string_view text) {
  return detect_input_kind({reinterpret_cast<const std::uint8_t*>(text.data()), text.size()});
}

std::vector<std::uint8_t> gzip(std::string_view data) {
  z_stream zs{};
  deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  std::vector<std::uint8_t> out(data.size() + 64);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = out.data();
  zs.avail_out = static_cast<uInt>(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

}  // namespace

TEST(InputKind, EveryFixtureFileIsRecognised) {
  std::size_t files = 0;
  for (const auto& dir : fs::directory_iterator(kFixtures)) {
    if (!dir.is_directory()) continue;
    for (const auto& file : fs::directory_iterator(dir.path())) {
      SCOPED_TRACE(file.path().string());
      const auto name = file.path().filename().string();
      const InputKind kind = detect_input_kind_file(file.path());
      if (name.ends_with(".pickle.zst")) EXPECT_EQ(kind, InputKind::kSnapshotPickle);
      else if (name == "stats.json") EXPECT_EQ(kind, InputKind::kMemoryStatsJson);
      else if (name == "steps.jsonl") EXPECT_EQ(kind, InputKind::kTelemetryJsonl);
      else if (name.ends_with(".csv")) EXPECT_EQ(kind, InputKind::kNvidiaSmiCsv);
      else if (name == "summary.txt") EXPECT_EQ(kind, InputKind::kMemorySummaryText);
      else if (name == "meta.json" || name == "truth.json") {
        // meta.json of an OOM run quotes the message; truth.json is not an input.
        const bool oom = fs::exists(dir.path() / "snapshot.pickle.zst") &&
                         (name == "meta.json") && kind == InputKind::kOomLog;
        EXPECT_TRUE(kind == InputKind::kUnknown || oom) << to_string(kind);
      }
      ++files;
    }
  }
  EXPECT_GE(files, 130u);  // 19 scenarios × 6–8 files
  EXPECT_EQ(detect_input_kind_file(kFixtures / "eval_spike" / "meta.json"), InputKind::kOomLog);
  EXPECT_EQ(detect_input_kind_file(kFixtures / "calib" / "meta.json"), InputKind::kUnknown);
  EXPECT_EQ(detect_input_kind_file(fs::path(FRAGSCOPE_SOURCE_DIR) / "examples" / "frag_oom_104" / "train.log"),
            InputKind::kOomLog);
}

TEST(InputKind, PickleMagicRawGzipAndNotAPickle) {
  const std::string pickle = "\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00}";
  EXPECT_EQ(of_text(pickle), InputKind::kSnapshotPickle);
  const auto gz = gzip(pickle);
  EXPECT_EQ(detect_input_kind(gz), InputKind::kSnapshotPickle);
  const auto gz_text = gzip("hello world, not a pickle");
  EXPECT_EQ(detect_input_kind(gz_text), InputKind::kUnknown);
  const std::vector<std::uint8_t> zstd_garbage = {0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x01};
  EXPECT_EQ(detect_input_kind(zstd_garbage), InputKind::kUnknown);
  EXPECT_EQ(detect_input_kind({}), InputKind::kUnknown);
  EXPECT_EQ(of_text(std::string("\x80\x09", 2)), InputKind::kUnknown);  // no such protocol
}

TEST(InputKind, TextKinds) {
  EXPECT_EQ(of_text(R"({"step": 0, "data_wait_ms": 1})" "\n"), InputKind::kTelemetryJsonl);
  EXPECT_EQ(of_text(R"({"allocated_bytes.all.current": 1, "num_ooms": 0})"), InputKind::kMemoryStatsJson);
  EXPECT_EQ(of_text("{\n \"reserved_bytes.all.peak\": 5,\n"), InputKind::kMemoryStatsJson);
  EXPECT_EQ(of_text(R"({"version": 1, "max_hbm_fraction": 0.9})"), InputKind::kUnknown);
  EXPECT_EQ(of_text("index, memory.used [MiB]\n0, 5 MiB\n"), InputKind::kNvidiaSmiCsv);
  EXPECT_EQ(of_text("x\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 MiB"), InputKind::kOomLog);
  EXPECT_EQ(of_text("RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`\n"),
            InputKind::kOomLog);  // a library's own allocation failed (library_alloc_failure.h)
  EXPECT_EQ(of_text("just a log\n"), InputKind::kUnknown);
  EXPECT_EQ(to_string(InputKind::kOomLog), "oom-log");
}

TEST(InputKind, OomFarIntoALongLogIsFound) {
  const fs::path path = fs::temp_directory_path() / "fragscope_input_kind_long.log";
  {
    std::ofstream out(path);
    for (int i = 0; i < 20000; ++i) out << "[rank0]: step " << i << " loss 2.0 tokens/s 51234\n";
    out << "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.54 GiB. GPU 0\n";
  }
  EXPECT_GT(fs::file_size(path), kInputKindHeadBytes);
  EXPECT_EQ(detect_input_kind_file(path), InputKind::kOomLog);
  fs::remove(path);
  EXPECT_THROW(detect_input_kind_file(path), fragscope::InputError);
  EXPECT_THROW(detect_input_kind_file(kFixtures), fragscope::InputError);
}
