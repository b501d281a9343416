#pragma once
/// @file rank_file_writer.h
/// @brief Publishes rank files (docs/rank-file.md) from C++: the simulator's writer. The hook's
/// writer is python/fragscope/shm.py; tests hold the two byte for byte together.

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>

#include "agent/rank_file_layout.h"
#include "agent/rank_record.h"

namespace fragscope::agent {

/// @brief The payload bytes [32, 512) of `record`, the inverse of the reader's decoding.
std::array<std::byte, layout::kSize - layout::kHeaderSize> encode_rank_payload(const RankRecord& record);

/// @brief One rank file under the sequence lock. The file appears (by rename) with the first
/// record and is removed by the destructor. Not thread-safe: one writer per file.
class RankFileWriter {
 public:
  /// @throws InputError naming the path when the file cannot be created.
  RankFileWriter(std::filesystem::path path, const RankRecord& first);
  ~RankFileWriter();
  RankFileWriter(const RankFileWriter&) = delete;
  RankFileWriter& operator=(const RankFileWriter&) = delete;

  /// @brief Steps 1-4 of the update protocol: seq odd, payload, CRC, seq even.
  /// @throws InputError when the file cannot be written.
  void publish(const RankRecord& record);

  const std::filesystem::path& path() const { return path_; }

 private:
  void write_at(std::size_t offset, const void* data, std::size_t size);

  std::filesystem::path path_;
  int fd_ = -1;
  std::uint64_t seq_ = 0;
};

}  // namespace fragscope::agent
