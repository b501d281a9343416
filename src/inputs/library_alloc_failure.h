#pragma once
/// @file library_alloc_failure.h
/// @brief A CUDA library that could not get device memory of its own, as a log shows it.
///
/// cuBLAS, cuDNN, cuSOLVER, cuFFT and cuSPARSE allocate their handles (and some of their state)
/// with cudaMalloc themselves, outside PyTorch's caching allocator; so do NCCL (its channels' and
/// proxies' buffers) and a kernel launch that needs more local memory. When the device is full such a
/// call fails with its library's status ("RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when
/// calling `cublasCreate(handle)`", "cuDNN error: CUDNN_STATUS_ALLOC_FAILED"), NCCL's ("NCCL WARN Cuda
/// failure 2 'out of memory'", "Failed to CUDA calloc 6291456 bytes") or the runtime's ("CUDA error: out
/// of memory"), not with PyTorch's "CUDA out of memory. Tried to allocate …" (oom_message.h).
/// PyTorch's allocator frees its unused cached blocks and retries before it raises OutOfMemoryError;
/// these calls do not make it do so (ATen's createCublasHandle checks cublasCreate's status and
/// raises), and neither the OOM observer nor an `except torch.OutOfMemoryError` sees them.
/// Logs are scanned line by line (tracebacks, rank prefixes, colour codes around the status are
/// fine); nothing is executed or evaluated.
/// Thread-safety: pure functions.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fragscope::inputs {

struct LibraryAllocFailure {
  std::size_t line = 0;  ///< 1-based line of the log
  std::string library;   ///< "cuBLAS", "cuDNN", "cuSOLVER", "cuFFT", "cuSPARSE", "NCCL",
                         ///< "the CUDA runtime"
  std::string status;    ///< "CUBLAS_STATUS_ALLOC_FAILED", ..., "cudaErrorMemoryAllocation"
  std::string call;      ///< the failing call when the line names it ("cublasCreate(handle)"), else ""
};

/// @brief The `library` of NCCL's failures (its buffers, not a handle: the advice differs).
inline constexpr std::string_view kNcclLibrary = "NCCL";

/// @brief Failures kept per log: a crash loop repeats one without end.
inline constexpr std::size_t kMaxLibraryAllocFailures = 100;

/// @brief Whether `text` holds a library allocation failure (input_kind.h's check on a log's head).
bool has_library_alloc_failure(std::string_view text);

/// @brief The library allocation failure a log line reports, if any. `line` is left 0.
std::optional<LibraryAllocFailure> parse_library_alloc_failure(std::string_view line);

/// @brief The first kMaxLibraryAllocFailures failures of `log`, in order.
std::vector<LibraryAllocFailure> find_library_alloc_failures(std::string_view log);

}  // namespace fragscope::inputs
