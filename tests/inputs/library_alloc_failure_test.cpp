// A CUDA library's own allocation that failed, as PyTorch's checks spell them (the real one of field vid_lo, read
// from its log, is in training_log_test.cpp).
#include "inputs/library_alloc_failure.h"

#include <string>

#include <gtest/gtest.h>

namespace fragscope::inputs {
namespace {

TEST(LibraryAllocFailure, EachLibrarysStatus) {
  const auto cudnn = parse_library_alloc_failure("[rank3]: RuntimeError: cuDNN error: CUDNN_STATUS_ALLOC_FAILED");
  ASSERT_TRUE(cudnn.has_value());
  EXPECT_EQ(cudnn->library, "cuDNN");
  EXPECT_EQ(cudnn->call, "");
  EXPECT_EQ(parse_library_alloc_failure("CUSOLVER_STATUS_ALLOC_FAILED")->library, "cuSOLVER");
  EXPECT_EQ(parse_library_alloc_failure("cuFFT error: CUFFT_ALLOC_FAILED")->library, "cuFFT");
  EXPECT_EQ(parse_library_alloc_failure("CUSPARSE_STATUS_ALLOC_FAILED when calling `cusparseCreate(handle)`")->call,
            "cusparseCreate(handle)");
  const auto runtime = parse_library_alloc_failure("RuntimeError: CUDA error: out of memory");
  ASSERT_TRUE(runtime.has_value());
  EXPECT_EQ(runtime->library, "the CUDA runtime");
  EXPECT_EQ(runtime->status, "cudaErrorMemoryAllocation");
}

// NCCL's CUDACHECK, with and without the error code (NCCL 2.19 on), in its WARN line, in the DistBackendError
// PyTorch raises, and the calloc that failed; NCCL's other CUDA failures are not memory.
TEST(LibraryAllocFailure, NcclsCudaFailure) {
  const auto warn = parse_library_alloc_failure("node:2134736:2285781 [0] include/alloc.h:178 NCCL WARN "
                                                "Cuda failure 'out of memory'");
  ASSERT_TRUE(warn.has_value());
  EXPECT_EQ(warn->library, "NCCL");
  EXPECT_EQ(warn->status, "cudaErrorMemoryAllocation");
  EXPECT_EQ(warn->call, "");
  EXPECT_EQ(parse_library_alloc_failure("[rank7]: Cuda failure 2 'out of memory'")->library, "NCCL");
  const auto calloc =
      parse_library_alloc_failure("[3] include/alloc.h:185 NCCL WARN Failed to CUDA calloc 6291456 bytes");
  ASSERT_TRUE(calloc.has_value());
  EXPECT_EQ(calloc->call, "CUDA calloc 6291456 bytes");
  EXPECT_FALSE(parse_library_alloc_failure("[rank7]: Cuda failure 1 'invalid argument'"));
  EXPECT_FALSE(parse_library_alloc_failure("Cuda failure 999 'unknown error'"));
  EXPECT_FALSE(parse_library_alloc_failure("Cuda failure 123456 'out of memory'"));
  EXPECT_FALSE(parse_library_alloc_failure("Failed to CUDA calloc bytes"));
  const std::string log = "[rank7]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
                          "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.27.5\n"
                          "[rank7]: ncclUnhandledCudaError: Call to CUDA function failed.\n[rank7]: Last error:\n"
                          "[rank7]: Cuda failure 2 'out of memory'\n";
  EXPECT_TRUE(has_library_alloc_failure(log));
  const auto found = find_library_alloc_failures(log);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].line, 4u);
}

// PyTorch's own OOM is oom_message_parser.h's, and other statuses are not memory.
TEST(LibraryAllocFailure, NotOtherMessages) {
  EXPECT_FALSE(parse_library_alloc_failure("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"));
  EXPECT_FALSE(parse_library_alloc_failure("RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED"));
  EXPECT_FALSE(parse_library_alloc_failure("cuDNN error: CUDNN_STATUS_NOT_SUPPORTED"));
  EXPECT_FALSE(has_library_alloc_failure("step 3 loss 2.1\n"));
  EXPECT_TRUE(has_library_alloc_failure("x\nCUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate`\n"));
}

// A crash loop repeats the failure without end; a call name is cut, never taken whole.
TEST(LibraryAllocFailure, BoundedOnHostileLogs) {
  std::string log;
  for (int i = 0; i < 1000; ++i) log += "CUDA error: CUBLAS_STATUS_ALLOC_FAILED\n";
  const auto found = find_library_alloc_failures(log);
  ASSERT_EQ(found.size(), kMaxLibraryAllocFailures);
  EXPECT_EQ(found.back().line, kMaxLibraryAllocFailures);
  const auto unterminated = parse_library_alloc_failure("CUBLAS_STATUS_ALLOC_FAILED when calling `" +
                                                        std::string(100000, 'x'));
  ASSERT_TRUE(unterminated.has_value());
  EXPECT_EQ(unterminated->call, "");
  const auto binary = parse_library_alloc_failure(std::string("CUBLAS_STATUS_ALLOC_FAILED when calling `\x01\xff`"));
  EXPECT_EQ(binary->call, "??");
}

}  // namespace
}  // namespace fragscope::inputs
