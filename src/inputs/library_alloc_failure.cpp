#include "inputs/library_alloc_failure.h"

#include <array>

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
  return false;
}

std::optional<LibraryAllocFailure> parse_library_alloc_failure(std::string_view line) {
  for (const KnownStatus& s : kStatuses)
    if (line.find(s.token) != std::string_view::npos)
      return LibraryAllocFailure{0, std::string(s.library), std::string(s.status), failing_call(line)};
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
