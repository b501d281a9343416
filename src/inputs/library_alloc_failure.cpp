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

/// The runtime's status for a failed allocation, as PyTorch's C10_CUDA_CHECK and NCCL's CUDACHECK report it.
constexpr std::string_view kRuntimeOom = "cudaErrorMemoryAllocation";

constexpr std::array<KnownStatus, 6> kStatuses{{
    {"CUBLAS_STATUS_ALLOC_FAILED", "cuBLAS", "CUBLAS_STATUS_ALLOC_FAILED"},
    {"CUDNN_STATUS_ALLOC_FAILED", "cuDNN", "CUDNN_STATUS_ALLOC_FAILED"},
    {"CUSOLVER_STATUS_ALLOC_FAILED", "cuSOLVER", "CUSOLVER_STATUS_ALLOC_FAILED"},
    {"CUFFT_ALLOC_FAILED", "cuFFT", "CUFFT_ALLOC_FAILED"},
    {"CUSPARSE_STATUS_ALLOC_FAILED", "cuSPARSE", "CUSPARSE_STATUS_ALLOC_FAILED"},
    // PyTorch's C10_CUDA_CHECK spells cudaErrorMemoryAllocation so; its allocator's own OOM reads
    // "CUDA out of memory. Tried to allocate" (no "error:"), which oom_message_parser.h reads.
    {"CUDA error: out of memory", "the CUDA runtime", kRuntimeOom},
}};

// NCCL allocates its buffers with cudaMalloc/cuMem itself and reports a failed call as "Cuda failure
// 'out of memory'" (its CUDACHECK; 2.19 and later print the code: "Cuda failure 2 'out of memory'"), in a
// "NCCL WARN" line and in the DistBackendError PyTorch raises ("Last error:"), then "Failed to CUDA calloc
// 6291456 bytes" when the buffer was a calloc.
constexpr std::string_view kNcclCudaFailure = "Cuda failure ";
constexpr std::string_view kNcclOutOfMemory = "'out of memory'";
constexpr std::string_view kNcclCalloc = "Failed to CUDA calloc ";

/// How many ASCII digits `text` begins with, counted up to `most` + 1 (more than `most`: too long a number).
std::size_t leading_digits(std::string_view text, std::size_t most) {
  std::size_t n = 0;
  while (n < text.size() && n <= most && text[n] >= '0' && text[n] <= '9') ++n;
  return n;
}

/// Whether `line` holds NCCL's "Cuda failure [CODE ]'out of memory'"; a code has at most 4 digits.
bool nccl_out_of_memory(std::string_view line) {
  for (auto at = line.find(kNcclCudaFailure); at != std::string_view::npos;
       at = line.find(kNcclCudaFailure, at + 1)) {
    std::string_view rest = line.substr(at + kNcclCudaFailure.size());
    const std::size_t code = leading_digits(rest, 4);
    if (code > 4) continue;
    if (code > 0) {
      if (!rest.substr(code).starts_with(' ')) continue;
      rest.remove_prefix(code + 1);
    }
    if (rest.starts_with(kNcclOutOfMemory)) return true;
  }
  return false;
}

/// "Failed to CUDA calloc 6291456 bytes" → "6291456" (at most 20 digits), else "".
std::string_view nccl_calloc_bytes(std::string_view line) {
  const auto at = line.find(kNcclCalloc);
  if (at == std::string_view::npos) return {};
  const std::string_view rest = line.substr(at + kNcclCalloc.size());
  const std::size_t digits = leading_digits(rest, 20);
  if (digits == 0 || digits > 20 || !rest.substr(digits).starts_with(" bytes")) return {};
  return rest.substr(0, digits);
}

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
  return nccl_out_of_memory(text) || !nccl_calloc_bytes(text).empty();
}

std::optional<LibraryAllocFailure> parse_library_alloc_failure(std::string_view line) {
  for (const KnownStatus& s : kStatuses)
    if (line.find(s.token) != std::string_view::npos)
      return LibraryAllocFailure{0, std::string(s.library), std::string(s.status), failing_call(line)};
  if (nccl_out_of_memory(line)) return LibraryAllocFailure{0, std::string(kNcclLibrary), std::string(kRuntimeOom), {}};
  if (const std::string_view bytes = nccl_calloc_bytes(line); !bytes.empty())
    return LibraryAllocFailure{0, std::string(kNcclLibrary), std::string(kRuntimeOom),
                               fmt::format("CUDA calloc {} bytes", bytes)};
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
