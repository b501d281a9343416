#include "inputs/library_alloc_failure.h"

#include <array>

#include <fmt/format.h>

#include "inputs/text_file.h"

namespace fragscope::inputs {

namespace {

struct KnownStatus {
  std::string_view token;    ///< as the library spells its status
  std::string_view library;
  std::string_view status;   ///< as reported (the runtime's is named by its enum)
};

constexpr std::array<KnownStatus, 6> kStatuses{{
    {"CUBLAS_STATUS_ALLOC_FAILED", "cuBLAS", "CUBLAS_STATUS_ALLOC_FAILED"},
    {"CUDNN_STATUS_ALLOC_FAILED", "cuDNN", "CUDNN_STATUS_ALLOC_FAILED"},
    {"CUSOLVER_STATUS_ALLOC_FAILED", "cuSOLVER", "CUSOLVER_STATUS_ALLOC_FAILED"},
    {"CUFFT_ALLOC_FAILED", "cuFFT", "CUFFT_ALLOC_FAILED"},
    {"CUSPARSE_STATUS_ALLOC_FAILED", "cuSPARSE", "CUSPARSE_STATUS_ALLOC_FAILED"},
    // PyTorch's C10_CUDA_CHECK spells cudaErrorMemoryAllocation so; its allocator's own OOM reads
    // "CUDA out of memory. Tried to allocate" (no "error:"), which oom_message_parser.h reads.
    {"CUDA error: out of memory", "the CUDA runtime", "cudaErrorMemoryAllocation"},
}};

// NCCL allocates its buffers with cudaMalloc/cuMem itself and reports a failed call as "Cuda failure
// 'out of memory'" (its CUDACHECK; 2.19 and later print the code: "Cuda failure 2 'out of memory'"), in a
// "NCCL WARN" line and in the DistBackendError PyTorch raises ("Last error:"), then "Failed to CUDA calloc
// 6291456 bytes" when the buffer was a calloc.
constexpr std::string_view kNcclCudaFailure = "Cuda failure ";
constexpr std::string_view kNcclOutOfMemory = "'out of memory'";
constexpr std::string_view kNcclCalloc = "Failed to CUDA calloc ";

/// Whether `line` holds NCCL's "Cuda failure [CODE ]'out of memory'"; a code has at most 4 digits.
bool nccl_out_of_memory(std::string_view line) {
  for (auto at = line.find(kNcclCudaFailure); at != std::string_view::npos;
       at = line.find(kNcclCudaFailure, at + 1)) {
    std::string_view rest = line.substr(at + kNcclCudaFailure.size());
    std::size_t digits = 0;
    while (digits < rest.size() && digits <= 4 && rest[digits] >= '0' && rest[digits] <= '9') ++digits;
    if (digits > 4) continue;
    if (digits > 0) {
      if (digits == rest.size() || rest[digits] != ' ') continue;
      rest.remove_prefix(digits + 1);
    }
    if (rest.starts_with(kNcclOutOfMemory)) return true;
  }
  return false;
}

/// "Failed to CUDA calloc 6291456 bytes" → "CUDA calloc 6291456 bytes", else "".
std::string nccl_calloc(std::string_view line) {
  const auto at = line.find(kNcclCalloc);
  if (at == std::string_view::npos) return {};
  std::string_view rest = line.substr(at + kNcclCalloc.size());
  std::size_t digits = 0;
  while (digits < rest.size() && digits < 20 && rest[digits] >= '0' && rest[digits] <= '9') ++digits;
  if (digits == 0 || !rest.substr(digits).starts_with(" bytes")) return {};
  return fmt::format("CUDA calloc {} bytes", rest.substr(0, digits));
}

constexpr std::string_view kNccl = "NCCL";
constexpr std::string_view kRuntimeOom = "cudaErrorMemoryAllocation";

/// "when calling `cublasCreate(handle)`" → "cublasCreate(handle)".
std::string failing_call(std::string_view line) {
  constexpr std::string_view kWhen = "when calling `";
  const auto at = line.find(kWhen);
  if (at == std::string_view::npos) return {};
  const auto start = at + kWhen.size();
  const auto end = line.find('`', start);
  if (end == std::string_view::npos || end - start > 200) return {};
  return printable_excerpt(line.substr(start, end - start), 200);
}

}  // namespace

bool has_library_alloc_failure(std::string_view text) {
  for (const KnownStatus& s : kStatuses)
    if (text.find(s.token) != std::string_view::npos) return true;
  return nccl_out_of_memory(text) || !nccl_calloc(text).empty();
}

std::optional<LibraryAllocFailure> parse_library_alloc_failure(std::string_view line) {
  for (const KnownStatus& s : kStatuses)
    if (line.find(s.token) != std::string_view::npos)
      return LibraryAllocFailure{0, std::string(s.library), std::string(s.status), failing_call(line)};
  if (nccl_out_of_memory(line)) return LibraryAllocFailure{0, std::string(kNccl), std::string(kRuntimeOom), {}};
  if (std::string call = nccl_calloc(line); !call.empty())
    return LibraryAllocFailure{0, std::string(kNccl), std::string(kRuntimeOom), std::move(call)};
  return std::nullopt;
}

std::vector<LibraryAllocFailure> find_library_alloc_failures(std::string_view log) {
  std::vector<LibraryAllocFailure> found;
  std::size_t number = 0;
  while (!log.empty() && found.size() < kMaxLibraryAllocFailures) {
    const auto end = log.find('\n');
    ++number;
    if (auto f = parse_library_alloc_failure(log.substr(0, end))) {
      f->line = number;
      found.push_back(std::move(*f));
    }
    if (end == std::string_view::npos) break;
    log.remove_prefix(end + 1);
  }
  return found;
}

}  // namespace fragscope::inputs
