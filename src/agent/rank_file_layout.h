#pragma once
/// @file rank_file_layout.h
/// @brief Byte offsets of the rank file, version 1. The single C++ statement of docs/rank-file.md;
/// python/fragscope/shm.py is the writer's statement, and the tests hold the two together.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "util/job_phase.h"

namespace fragscope::agent::layout {

inline constexpr std::string_view kMagic = "FRAGSCOP";
inline constexpr std::uint32_t kVersion = 1;
inline constexpr std::size_t kSize = 512;  ///< record bytes in version 1
inline constexpr std::size_t kHeaderSize = 32;
inline constexpr std::string_view kFileSuffix = ".fsr";
inline constexpr std::string_view kCheckpointSuffix = ".checkpoint";

// Header.
inline constexpr std::size_t kMagicOffset = 0;
inline constexpr std::size_t kVersionOffset = 8;
inline constexpr std::size_t kSizeOffset = 12;
inline constexpr std::size_t kSeqOffset = 16;
inline constexpr std::size_t kCrcOffset = 24;

// The phase field: 0 train, 1 eval, 2 checkpoint; a reader takes any other value as unknown,
// which a writer writes as kUnknownPhaseCode.
inline constexpr JobPhase kPhaseByCode[] = {JobPhase::kTrain, JobPhase::kEval, JobPhase::kCheckpoint};
inline constexpr std::uint32_t kUnknownPhaseCode = 0xffffffffu;

// Payload.
inline constexpr std::size_t kPid = 32;
inline constexpr std::size_t kRank = 40;
inline constexpr std::size_t kLocalRank = 44;
inline constexpr std::size_t kWorldSize = 48;
inline constexpr std::size_t kGpu = 52;
inline constexpr std::size_t kPhase = 56;  ///< a code of kPhaseByCode
inline constexpr std::size_t kFlags = 60;
inline constexpr std::size_t kUpdateUnixNs = 64;
inline constexpr std::size_t kStepUnixNs = 72;
inline constexpr std::size_t kStep = 80;
inline constexpr std::size_t kAllocatedBytes = 88;
inline constexpr std::size_t kReservedBytes = 96;
inline constexpr std::size_t kActiveBytes = 104;
inline constexpr std::size_t kInactiveSplitBytes = 112;
inline constexpr std::size_t kRequestedBytes = 120;
inline constexpr std::size_t kLargestFreeBlockBytes = 128;
inline constexpr std::size_t kAllocatedPeakBytes = 136;
inline constexpr std::size_t kReservedPeakBytes = 144;
inline constexpr std::size_t kDeviceTotalBytes = 152;
inline constexpr std::size_t kAllocRetries = 160;
inline constexpr std::size_t kOoms = 168;
inline constexpr std::size_t kSegments = 176;
inline constexpr std::size_t kCheckpointAck = 184;
inline constexpr std::size_t kBatchSamples = 192;
inline constexpr std::size_t kBatchTokens = 200;
inline constexpr std::size_t kBatchLongestSequence = 208;
inline constexpr std::size_t kLoaderQueueDepth = 216;
inline constexpr std::size_t kStepSeconds = 224;
inline constexpr std::size_t kDataWaitSeconds = 232;
inline constexpr std::size_t kH2dSeconds = 240;
inline constexpr std::size_t kComputeSeconds = 248;
inline constexpr std::size_t kDataWaitRatio = 256;
inline constexpr std::size_t kSamplesPerSecond = 264;
inline constexpr std::size_t kStepSecondsTotal = 272;
inline constexpr std::size_t kDataWaitSecondsTotal = 280;
inline constexpr std::size_t kHookSecondsTotal = 288;
inline constexpr std::size_t kJob = 296;
inline constexpr std::size_t kGpuUuid = 360;
inline constexpr std::size_t kStringBytes = 64;
// Optional within version 1: a writer that fills them sets kFlagThroughputTotalsKnown; one
// that predates them leaves flag and bytes zero (docs/rank-file.md, versioning rules).
inline constexpr std::size_t kSamplesTotal = 424;
inline constexpr std::size_t kTokensTotal = 432;
inline constexpr std::size_t kPayloadEnd = 440;  ///< bytes after this are zero in version 1

inline constexpr std::uint32_t kFlagLargestFreeKnown = 1;
inline constexpr std::uint32_t kFlagThroughputTotalsKnown = 2;

}  // namespace fragscope::agent::layout
