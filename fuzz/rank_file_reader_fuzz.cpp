// libFuzzer target: any bytes decoded as a rank file (the agent reads files any local user can
// write) end in a reading, never a crash, a sanitizer report or an exception. A kOk reading's
// strings are printable UTF-8, as label values must be (util/shown_text.h's printable_text is the
// identity on them); the same bytes read back from a file under the sequence lock give the same verdict.
// Inputs of odd length get a correct CRC written in first, as a forger would, so that random
// payloads reach the decoder instead of stopping at the checksum.
#include <unistd.h>
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "agent/rank_file_layout.h"
#include "agent/rank_file_reader.h"
#include "util/shown_text.h"

namespace {

std::string outcome_of(const fragscope::agent::RankFileReading& reading) {
  std::string out = std::string(fragscope::agent::state_name(reading.state)) + ": " + reading.problem;
  if (reading.state == fragscope::agent::RankFileState::kOk) {
    out += " job=" + reading.record.job + " uuid=" + reading.record.gpu_uuid +
           " pid=" + std::to_string(reading.record.pid);
  }
  return out;
}

// One file per fuzzing process, rewritten for each input (tmpfs where there is one).
const std::string& scratch_file() {
  static const std::string path = [] {
    char pattern[] = "/dev/shm/fragscope-fuzz-XXXXXX";
    char fallback[] = "/tmp/fragscope-fuzz-XXXXXX";
    const char* folder = ::mkdtemp(pattern);
    if (folder == nullptr) folder = ::mkdtemp(fallback);
    if (folder == nullptr) std::abort();
    static const std::string folder_path = folder;
    std::atexit([] {
      ::unlink((folder_path + "/rank0-pid1.fsr").c_str());
      ::rmdir(folder_path.c_str());
    });
    return folder_path + "/rank0-pid1.fsr";
  }();
  return path;
}

void forge_crc(std::vector<std::uint8_t>& bytes) {
  namespace layout = fragscope::agent::layout;
  if (bytes.size() < layout::kSize) return;
  const auto crc = static_cast<std::uint32_t>(
      crc32(0L, bytes.data() + layout::kHeaderSize, static_cast<uInt>(layout::kSize - layout::kHeaderSize)));
  std::memcpy(bytes.data() + layout::kCrcOffset, &crc, sizeof crc);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* input, std::size_t size) {
  std::vector<std::uint8_t> copy(input, input + size);
  if (size % 2 == 1) forge_crc(copy);
  const std::uint8_t* data = copy.data();
  const auto bytes = std::as_bytes(std::span<const std::uint8_t>(data, size));
  const auto decoded = fragscope::agent::decode_rank_file(bytes);
  if (decoded.state == fragscope::agent::RankFileState::kOk) {
    for (const std::string* text : {&decoded.record.job, &decoded.record.gpu_uuid}) {
      if (fragscope::printable_text(*text) != *text) {
        std::fprintf(stderr, "not printable UTF-8 after decoding: %s\n", text->c_str());
        std::abort();
      }
    }
  }
  // The file path: the same verdict, unless the copy's seq is odd (torn, which decode leaves to it).
  std::FILE* file = std::fopen(scratch_file().c_str(), "wb");
  if (file == nullptr) std::abort();
  std::fwrite(data, 1, size, file);
  std::fclose(file);
  const auto read = fragscope::agent::read_rank_file(scratch_file(), 1);
  if (read.state != fragscope::agent::RankFileState::kTorn && outcome_of(read) != outcome_of(decoded)) {
    std::fprintf(stderr, "decoded: %s\nread:    %s\n", outcome_of(decoded).c_str(), outcome_of(read).c_str());
    std::abort();
  }
  return 0;
}
