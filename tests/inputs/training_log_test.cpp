// A training log read in one pass: PyTorch's OOM messages, a CUDA library's own allocation failures (field vid_lo's
// real cuBLAS failure), cuDNN finding no plan, as the releases spell it; logs of any size in bounded memory.
#include "inputs/training_log.h"

#include <sys/resource.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "util/bytes.h"
#include "util/error.h"

namespace fs = std::filesystem;
using namespace fragscope::inputs;
using fragscope::format_bytes;

namespace {

const fs::path kVidLoLog =
    fs::path(FRAGSCOPE_SOURCE_DIR) / "tests" / "data" / "library_failure" / "vid_lo" / "train.log";

TEST(TrainingLog, FindsTheOomMessageInTheExampleTrainingLog) {
  const auto log = read_training_log_file(fs::path(FRAGSCOPE_SOURCE_DIR) / "examples" / "frag_oom_104" / "train.log");
  const auto& found = log.oom_messages;
  EXPECT_TRUE(log.library_failures.empty());
  EXPECT_FALSE(log.cudnn_no_plan_line);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].line, 5u);
  EXPECT_EQ(format_bytes(*found[0].tried_to_allocate), "1.54 GiB");
  EXPECT_EQ(format_bytes(*found[0].reserved_unallocated), "3.39 GiB");
  EXPECT_TRUE(found[0].text.starts_with("CUDA out of memory."));
}

// Field batch 59's transducer: the OOM inside torchaudio's rnnt_loss was logged by PyTorch's C shim ("Exception in
// aoti_torch: CUDA out of memory...") and reached Python as a RuntimeError; the message reads as any other.
TEST(TrainingLog, TellsAnOomTheCShimRaisedFromOneRaisedAsItself) {
  const auto log = read_training_log_file(fs::path(FRAGSCOPE_SOURCE_DIR) / "tests" / "data" / "oom_in_c_shim" /
                                          "rnnt_edge" / "train.log");
  ASSERT_EQ(log.oom_messages.size(), 1u);
  const OomMessage& oom = log.oom_messages[0];
  EXPECT_TRUE(oom.raised_in_c_shim);
  EXPECT_EQ(oom.line, 2u);
  EXPECT_EQ(format_bytes(*oom.tried_to_allocate), "3.31 GiB");
  EXPECT_EQ(format_bytes(*oom.reserved_unallocated), "3.78 GiB");
  EXPECT_TRUE(oom.text.starts_with("CUDA out of memory."));
  const auto example = read_training_log_file(fs::path(FRAGSCOPE_SOURCE_DIR) / "examples" / "frag_oom_104" /
                                              "train.log");
  ASSERT_EQ(example.oom_messages.size(), 1u);
  EXPECT_FALSE(example.oom_messages[0].raised_in_c_shim);
}

// Issue 16: logs were read whole (1.9 GB of memory for a 1 GB log) and an OOM message past the
// first GiB was ignored. Now a log of any size streams through a few lines of memory.
TEST(TrainingLog, FindsAMessagePastTheFirstGibInBoundedMemory) {
  const fs::path path = fs::path(::testing::TempDir()) / "oom_past_1gib.log";
  {
    std::ofstream out(path);
    for (int i = 0; i < 2000; ++i) out << "[rank0]: step " << i << " loss 2.0 tokens/s 51234\n";
  }
  fs::resize_file(path, fs::file_size(path) + (std::uint64_t{3} << 29));  // 1.5 GiB of NULs, sparse: no disk
  std::ofstream(path, std::ios::app)
      << "\n[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
         "1.54 GiB. GPU 0 has a total capacity of 139.80 GiB of which 1017.12 MiB is free.\n";
  const auto found = read_training_log_file(path).oom_messages;
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].line, 2002u);  // the NULs are one line
  EXPECT_EQ(found[0].rank, 0);
  EXPECT_EQ(format_bytes(*found[0].tried_to_allocate), "1.54 GiB");
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  EXPECT_LT(usage.ru_maxrss, 256 * 1024) << "KiB of memory at most";
  fs::remove(path);
}

TEST(TrainingLog, SpecialFilesGetOneLine) {
  try {
    read_training_log_file("/dev/zero");
    FAIL();
  } catch (const fragscope::InputError& e) {
    EXPECT_STREQ(e.what(), "/dev/zero: cannot read: is a character device, not a file");
  }
}

TEST(TrainingLog, TheRealCublasFailureNamesItsCallAndLine) {
  const auto log = read_training_log_file(kVidLoLog);
  const auto& found = log.library_failures;
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].library, "cuBLAS");
  EXPECT_EQ(found[0].status, "CUBLAS_STATUS_ALLOC_FAILED");
  EXPECT_EQ(found[0].call, "cublasCreate(handle)");
  EXPECT_EQ(found[0].line, 16u);
}

TEST(TrainingLog, AMissingLogIsAnInputError) {
  EXPECT_THROW(read_training_log_file("/nonexistent/train.log"), fragscope::InputError);
}

// ATen's words when every convolution plan failed: cuDNN frontend's FIND and GET modes (PyTorch 2.x), older releases
// without either, and the v7 API's; behind a traceback's "RuntimeError:" and a rank prefix.
TEST(TrainingLog, CudnnFindingNoPlanIsRecognisedAsEachReleaseSpellsIt) {
  EXPECT_TRUE(is_cudnn_no_plan_error("RuntimeError: FIND was unable to find an engine to execute this computation"));
  EXPECT_TRUE(
      is_cudnn_no_plan_error("[rank3]: RuntimeError: GET was unable to find an engine to execute this computation"));
  EXPECT_TRUE(is_cudnn_no_plan_error("RuntimeError: Unable to find an engine to execute this computation"));
  EXPECT_TRUE(is_cudnn_no_plan_error("RuntimeError: Unable to find a valid cuDNN algorithm to run convolution"));
  EXPECT_FALSE(is_cudnn_no_plan_error("RuntimeError: cuDNN error: CUDNN_STATUS_NOT_SUPPORTED"));
  EXPECT_FALSE(is_cudnn_no_plan_error("unable to find an engine"));
}

TEST(TrainingLog, TheLastNoPlanLineIsKeptBesideTheOtherFailures) {
  const fs::path path = fs::path(::testing::TempDir()) / "no_plan.log";
  std::ofstream(path) << "step 0 loss 6.9\n"
                         "Traceback (most recent call last):\n"
                         "  File \"train.py\", line 40, in <module>\n"
                         "RuntimeError: FIND was unable to find an engine to execute this computation\n"
                         "step 1 loss 6.8\n"
                         "RuntimeError: GET was unable to find an engine to execute this computation\n";
  const TrainingLog log = read_training_log_file(path);
  EXPECT_EQ(log.cudnn_no_plan_line, 6u);
  EXPECT_EQ(log.cudnn_no_plan_rank, std::nullopt);
  EXPECT_TRUE(log.oom_messages.empty());
  EXPECT_TRUE(log.library_failures.empty());
  EXPECT_TRUE(log.any());
  fs::remove(path);
}

TEST(TrainingLog, TheNoPlanLineKeepsItsRank) {
  const fs::path path = fs::path(::testing::TempDir()) / "no_plan_rank3.log";
  std::ofstream(path) << "[rank0]: step 1 loss 6.8\n"
                         "[rank3]: RuntimeError: GET was unable to find an engine to execute this computation\n";
  const TrainingLog log = read_training_log_file(path);
  EXPECT_EQ(log.cudnn_no_plan_line, 2u);
  EXPECT_EQ(log.cudnn_no_plan_rank, 3);
  fs::remove(path);
}

}  // namespace
