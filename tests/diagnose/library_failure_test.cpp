// The doctor on a log in which a CUDA library, not PyTorch's allocator, ran out of memory: field
// vid_lo (torchvision's video recipe at 0.92 × its peak allocated; cuBLAS could not create the
// backward's handle, `RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling
// cublasCreate(handle)`). The user has only train.log: the OOM observer and the except handler
// for torch.OutOfMemoryError never ran. It read "no usable input" before.
#include "diagnose/library_failure.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "diagnose/doctor.h"
#include "field_recordings.h"
#include "../doctor_options.h"

namespace fragscope::diagnose {
namespace {

const std::string kVidLoLog =
    std::string(FRAGSCOPE_SOURCE_DIR) + "/tests/data/library_failure/vid_lo/train.log";

bool has_evidence(const Diagnosis& d, const std::string& key, const std::string& text) {
  return std::any_of(d.evidence.begin(), d.evidence.end(),
                     [&](const Evidence& e) { return e.key == key && e.text.find(text) != std::string::npos; });
}

TEST(LibraryFailureTest, ACublasHandleThatCouldNotBeCreatedIsUndeterminedWithWhatDecidesIt) {
  const Diagnosis d = run_doctor(collect_doctor_inputs({kVidLoLog}), fragscope::testing::doctor_options());
  EXPECT_EQ(d.verdict, Verdict::kUndetermined);
  EXPECT_FALSE(d.oom);
  ASSERT_TRUE(d.library_failure.has_value());
  EXPECT_EQ(d.library_failure->library, "cuBLAS");
  EXPECT_EQ(d.library_failure->status, "CUBLAS_STATUS_ALLOC_FAILED");
  EXPECT_EQ(d.library_failure->call, "cublasCreate(handle)");
  EXPECT_EQ(d.library_failure->source, kVidLoLog + ":16");
  EXPECT_EQ(d.headline, "cuBLAS could not get device memory of its own, outside PyTorch's allocator; the data "
                        "cannot decide why; see what would decide it.");
  EXPECT_EQ(d.trigger, "cuBLAS could not allocate device memory in cublasCreate(handle)");
  EXPECT_TRUE(has_evidence(d, "library_alloc_failure", "cuBLAS reported CUBLAS_STATUS_ALLOC_FAILED"));
  EXPECT_TRUE(has_evidence(d, "outside_allocator", "frees its unused cached blocks and retries"));
  ASSERT_EQ(d.decide_with.size(), 2u);
  EXPECT_NE(d.decide_with[0].find("catch RuntimeError as well as torch.OutOfMemoryError"), std::string::npos);
  ASSERT_GE(d.actions.size(), 2u);
  EXPECT_NE(d.actions[0].setting.find("set_per_process_memory_fraction"), std::string::npos);
  EXPECT_FALSE(d.actions[0].sufficient);
  EXPECT_EQ(d.actions[1].title, "Create the libraries' handles before memory fills");
  EXPECT_TRUE(d.recommended_conf.empty());
}

// The same failure with a snapshot dumped where the RuntimeError was caught (field batch 23):
// what PyTorch held is shown, the cache apart from the tensors; the verdict stays undetermined.
TEST(LibraryFailureTest, ASnapshotDumpedAtTheFailureShowsWhatPyTorchHeld) {
  const std::string dir = std::string(FRAGSCOPE_SOURCE_DIR) + "/tests/data/library_failure/vid_err/";
  const Diagnosis d = run_doctor(collect_doctor_inputs({dir + "error_snapshot.pickle.gz", dir + "train.log"}),
                                 fragscope::testing::doctor_options());
  EXPECT_EQ(d.verdict, Verdict::kUndetermined);
  ASSERT_TRUE(d.library_failure.has_value());
  EXPECT_EQ(d.library_failure->call, "cublasCreate(handle)");
  EXPECT_TRUE(has_evidence(d, "held_at_end", "PyTorch held 11.34 GiB reserved: 11.30 GiB allocated to tensors and "
                                             "45.82 MiB cached and unallocated"));
  ASSERT_EQ(d.decide_with.size(), 1u);
  EXPECT_NE(d.decide_with[0].find("set_per_process_memory_fraction"), std::string::npos);
}

// NCCL's own allocation (a DistBackendError whose last error is NCCL's "Cuda failure 2 'out of memory'", as
// PyTorch 2.x prints it under torchrun): the same verdict, and the advice is NCCL's (its communicators and
// connections made before the device fills), not cuBLAS's handles.
TEST(LibraryFailureTest, NcclsOwnAllocationIsALibraryFailure) {
  const auto dir = std::filesystem::temp_directory_path() / "fragscope_library_failure_nccl";
  std::filesystem::create_directories(dir);
  const std::string log = (dir / "train.log").string();
  std::ofstream(log) << "[rank3]:     model = DDP(model, device_ids=[local_rank])\n"
                        "[rank3]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:3690, "
                        "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.27.5\n"
                        "[rank3]: ncclUnhandledCudaError: Call to CUDA function failed.\n"
                        "[rank3]: Last error:\n"
                        "[rank3]: Cuda failure 2 'out of memory'\n";
  const Diagnosis d = run_doctor(collect_doctor_inputs({log}), fragscope::testing::doctor_options());
  std::filesystem::remove_all(dir);
  EXPECT_EQ(d.verdict, Verdict::kUndetermined);
  ASSERT_TRUE(d.library_failure.has_value());
  EXPECT_EQ(d.library_failure->library, "NCCL");
  EXPECT_EQ(d.library_failure->status, "cudaErrorMemoryAllocation");
  EXPECT_EQ(d.library_failure->source, log + ":5");
  ASSERT_GE(d.actions.size(), 2u);
  EXPECT_NE(d.actions[0].setting.find("set_per_process_memory_fraction"), std::string::npos);
  EXPECT_EQ(d.actions[1].title, "Create NCCL's communicators and connections before memory fills");
  EXPECT_NE(d.actions[1].setting.find("device_id="), std::string::npos);
}

// With PyTorch's own OOM message in the same log, that message is the failure the doctor reads.
TEST(LibraryFailureTest, PyTorchsOwnOomComesFirst) {
  DoctorInputs in =
      collect_doctor_inputs({kVidLoLog, (fragscope::testing::field_dir("gan_lo") / "train.log").string()});
  ASSERT_EQ(in.library_failures.size(), 1u);
  ASSERT_EQ(in.logs.size(), 1u);
  const Diagnosis d = run_doctor(std::move(in), fragscope::testing::doctor_options());
  EXPECT_TRUE(d.oom);
  EXPECT_FALSE(d.library_failure.has_value());
}

}  // namespace
}  // namespace fragscope::diagnose
