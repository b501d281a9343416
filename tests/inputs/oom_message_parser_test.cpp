// OOM message parsing: the real messages of every OOM fixture, older PyTorch formats, and logs.
#include "inputs/oom_message_parser.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "util/bytes.h"
#include "util/error.h"

namespace fs = std::filesystem;
using namespace fragscope::inputs;
using fragscope::format_bytes;
using fragscope::kGiB;
using fragscope::kMiB;

namespace {

const fs::path kFixtures = FRAGSCOPE_FIXTURES_DIR;

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// A parsed "1.54 GiB" is the exact value only to two decimals of its unit.
void expect_same_figure(std::optional<std::uint64_t> parsed, std::uint64_t exact) {
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(format_bytes(*parsed), format_bytes(exact));
  const double unit = exact >= kGiB ? double(kGiB) : exact >= kMiB ? double(kMiB) : 1024.0;
  EXPECT_LE(std::fabs(double(*parsed) - double(exact)), 0.005 * unit + 1);
}

const char* kOomScenarios[] = {"frag_oom_104", "capacity_oom", "eval_spike", "frag_oom_observer"};

}  // namespace

TEST(OomMessageParser, EveryFixtureMessageMatchesTheRecordedTruth) {
  for (const char* scenario : kOomScenarios) {
    SCOPED_TRACE(scenario);
    const auto meta = read_json(kFixtures / scenario / "meta.json");
    const auto truth = read_json(kFixtures / scenario / "truth.json");
    const auto text = meta["oom_message"].get<std::string>();
    const auto msg = parse_oom_message(text);
    ASSERT_TRUE(msg.has_value());
    EXPECT_EQ(msg->format, OomFormat::kCurrent);
    EXPECT_EQ(msg->backend, "CUDA");
    EXPECT_EQ(msg->gpu, 0);
    // "Tried to allocate" is the block size, the trace's oom entry the request: large requests
    // round up to a multiple of 2 MiB (capacity_oom: 50.50 MiB asked, "52.00 MiB" printed).
    const auto requested = truth["oom_event"]["size"].get<std::uint64_t>();
    ASSERT_TRUE(msg->tried_to_allocate.has_value());
    EXPECT_GE(double(*msg->tried_to_allocate), double(requested) - 0.005 * double(kGiB));
    EXPECT_LT(double(*msg->tried_to_allocate), double(requested) + 2.0 * double(kMiB) + 0.005 * double(kGiB));
    expect_same_figure(msg->free, truth["oom_event"]["device_free"].get<std::uint64_t>());
    expect_same_figure(msg->total_capacity, meta["mem_get_info"][1].get<std::uint64_t>());
    ASSERT_TRUE(msg->reserved_by_pytorch.has_value());
    // allocated + unallocated, each rounded to 0.005 of a GiB, is what the allocator held.
    EXPECT_NEAR(double(*msg->reserved_by_pytorch), truth["reserved_bytes_end"].get<double>(), 0.01 * kGiB);
    ASSERT_TRUE(msg->process_in_use.has_value());
    EXPECT_TRUE(msg->other_processes.empty());
    EXPECT_FALSE(msg->allowed.has_value());
    EXPECT_FALSE(msg->private_pools.has_value());
  }
}

// Review: sizes of 60,000 digits made std::regex backtrack quadratically (a 600 KB log of 10 such lines: 50 s).
// No size has more than 20 digits: such a line is no allocator OOM message, and is judged at once.
TEST(OomMessageParser, ASizeOfThousandsOfDigitsIsNoSizeAndCostsNoTime) {
  const std::string line = "CUDA out of memory. Tried to allocate " + std::string(60'000, '9') + " MiB. GPU 0\n";
  std::string log;
  for (int i = 0; i < 10; ++i) log += line;
  const auto started = std::chrono::steady_clock::now();
  const auto found = find_oom_messages(log);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(2));
  for (const auto& message : found) EXPECT_FALSE(message.tried_to_allocate);
}

TEST(OomMessageParser, FragOom104FiguresExactly) {
  const auto meta = read_json(kFixtures / "frag_oom_104" / "meta.json");
  const auto msg = parse_oom_message(meta["oom_message"].get<std::string>());
  ASSERT_TRUE(msg);
  EXPECT_EQ(format_bytes(*msg->tried_to_allocate), "1.54 GiB");
  EXPECT_EQ(format_bytes(*msg->total_capacity), "139.80 GiB");
  EXPECT_EQ(format_bytes(*msg->free), "1017.12 MiB");
  EXPECT_EQ(format_bytes(*msg->process_in_use), "138.80 GiB");
  EXPECT_EQ(format_bytes(*msg->allocated_by_pytorch), "35.25 GiB");
  EXPECT_EQ(format_bytes(*msg->reserved_unallocated), "3.39 GiB");
  // The peak allocated of the run is the allocated figure at the OOM.
  const auto truth = read_json(kFixtures / "frag_oom_104" / "truth.json");
  expect_same_figure(msg->allocated_by_pytorch, truth["max_memory_allocated"].get<std::uint64_t>());
}

TEST(OomMessageParser, EvalSpikeReservedButUnallocated) {
  const auto meta = read_json(kFixtures / "eval_spike" / "meta.json");
  const auto msg = parse_oom_message(meta["oom_message"].get<std::string>());
  ASSERT_TRUE(msg);
  EXPECT_EQ(format_bytes(*msg->reserved_unallocated), "12.69 GiB");
  EXPECT_EQ(format_bytes(*msg->allocated_by_pytorch), "39.11 GiB");
}

TEST(OomMessageParser, PrivatePoolsOtherProcessesAndAllowedFraction) {
  const auto msg = parse_oom_message(
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 996.00 MiB. GPU 0 has a total "
      "capacity of 44.43 GiB of which 9.06 GiB is free. Process 2102129 has 17.54 GiB memory in use. "
      "Process 77 has 1.00 GiB memory in use. Including non-PyTorch memory, this process has 17.81 GiB "
      "memory in use. 17.69 GiB allowed; Of the allocated memory 17.44 GiB is allocated by PyTorch, "
      "with 104.00 MiB allocated in private pools (e.g., CUDA Graphs), and 59.88 MiB is reserved by "
      "PyTorch but unallocated.");
  ASSERT_TRUE(msg);
  ASSERT_EQ(msg->other_processes.size(), 2u);
  EXPECT_EQ(msg->other_processes[0].pid, 2102129);
  EXPECT_EQ(format_bytes(msg->other_processes[0].bytes), "17.54 GiB");
  EXPECT_EQ(msg->other_processes[1].pid, 77);
  EXPECT_EQ(msg->other_processes[1].bytes, kGiB);
  EXPECT_EQ(format_bytes(*msg->process_in_use), "17.81 GiB");
  EXPECT_EQ(format_bytes(*msg->allowed), "17.69 GiB");
  EXPECT_EQ(format_bytes(*msg->private_pools), "104.00 MiB");
  EXPECT_EQ(format_bytes(*msg->reserved_unallocated), "59.88 MiB");
  EXPECT_EQ(format_bytes(*msg->tried_to_allocate), "996.00 MiB");
}

TEST(OomMessageParser, HipAndTypoCapactyAndZeroBytesFree) {
  const auto hip = parse_oom_message(
      "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 76.00 MiB. GPU 3 has a total capacity "
      "of 255.69 GiB of which 0 bytes is free. 1.20 GiB allowed; Of the allocated memory 1.14 GiB is "
      "allocated by PyTorch, with 17.00 MiB allocated in private pools (e.g., HIP Graphs), and 18.63 MiB "
      "is reserved by PyTorch but unallocated.");
  ASSERT_TRUE(hip);
  EXPECT_EQ(hip->backend, "HIP");
  EXPECT_EQ(hip->gpu, 3);
  EXPECT_EQ(hip->free, 0u);
  EXPECT_FALSE(hip->process_in_use.has_value());
  // PyTorch 2.1 spelled it "capacty".
  const auto typo = parse_oom_message(
      "OutOfMemoryError: CUDA out of memory. Tried to allocate 496.00 MiB. GPU 0 has a total capacty of "
      "14.75 GiB of which 235.06 MiB is free. Process 20398 has 14.52 GiB memory in use. Of the allocated "
      "memory 14.06 GiB is allocated by PyTorch, and 330.42 MiB is reserved by PyTorch but unallocated. If "
      "reserved but unallocated memory is large try setting max_split_size_mb to avoid fragmentation.");
  ASSERT_TRUE(typo);
  EXPECT_EQ(format_bytes(*typo->total_capacity), "14.75 GiB");
  ASSERT_EQ(typo->other_processes.size(), 1u);
  EXPECT_EQ(typo->other_processes[0].pid, 20398);
}

TEST(OomMessageParser, OlderFormats) {
  // PyTorch ~1.5-2.0
  const auto reserved = parse_oom_message(
      "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 1; 5.80 GiB total capacity; "
      "4.36 GiB already allocated; 6.69 MiB free; 4.63 GiB reserved in total by PyTorch) If reserved "
      "memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.");
  ASSERT_TRUE(reserved);
  EXPECT_EQ(reserved->format, OomFormat::kReservedInTotal);
  EXPECT_EQ(reserved->gpu, 1);
  EXPECT_EQ(reserved->tried_to_allocate, 20 * kMiB);
  EXPECT_EQ(format_bytes(*reserved->total_capacity), "5.80 GiB");
  EXPECT_EQ(format_bytes(*reserved->allocated_by_pytorch), "4.36 GiB");
  EXPECT_EQ(format_bytes(*reserved->free), "6.69 MiB");
  EXPECT_EQ(format_bytes(*reserved->reserved_by_pytorch), "4.63 GiB");
  EXPECT_EQ(*reserved->reserved_unallocated, *reserved->reserved_by_pytorch - *reserved->allocated_by_pytorch);
  // PyTorch ≤1.4: "cached" is the reserved-but-unallocated figure.
  const auto cached = parse_oom_message(
      "RuntimeError: CUDA out of memory. Tried to allocate 12.50 MiB (GPU 0; 10.92 GiB total capacity; "
      "8.57 MiB already allocated; 9.28 GiB free; 4.68 MiB cached)");
  ASSERT_TRUE(cached);
  EXPECT_EQ(cached->format, OomFormat::kCached);
  EXPECT_EQ(format_bytes(*cached->reserved_unallocated), "4.68 MiB");
  EXPECT_EQ(*cached->reserved_by_pytorch, *cached->allocated_by_pytorch + *cached->reserved_unallocated);
}

TEST(OomMessageParser, RankPrefixedWrappedColouredInterleavedLog) {
  const std::string log =
      "[rank0]: step 10 loss 2.31\n"
      "[rank1]: Traceback (most recent call last):\n"
      "[rank1]:   File \"train.py\", line 9, in <module>\n"
      "[rank1]: \x1b[31mtorch.OutOfMemoryError\x1b[0m: CUDA out of memory. Tried to allocate 554.00 MiB. GPU 1 has "
      "a\r\n"
      "[rank0]: step 11 loss 2.30\n"
      "[rank1]: total capacity of 39.49 GiB of which 182.56 MiB is free. Including non-PyTorch memory,\n"
      "[rank1]: this process has 39.31 GiB memory in use. Of the allocated memory 38.33 GiB is\n"
      "[rank1]: allocated by PyTorch, and 499.39 MiB is reserved by PyTorch but unallocated.\n"
      "[rank1]: Done.\n"
      "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total "
      "capacity of 94.97 GiB of which 1.21 GiB is free. Including non-PyTorch memory, this process has "
      "93.75 GiB memory in use. Of the allocated memory 91.23 GiB is allocated by PyTorch, and 1.40 GiB is "
      "reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
      "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
      "Memory Management  "
      "(https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)\n"
      "[rank3]: next line is not part of it\n"
      "RuntimeError: CUDA error: out of memory\n";
  const auto found = find_oom_messages(log);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].line, 4u);
  EXPECT_EQ(found[0].rank, 1);
  EXPECT_EQ(found[0].gpu, 1);
  EXPECT_EQ(format_bytes(*found[0].total_capacity), "39.49 GiB");
  EXPECT_EQ(format_bytes(*found[0].process_in_use), "39.31 GiB");
  EXPECT_EQ(format_bytes(*found[0].allocated_by_pytorch), "38.33 GiB");
  EXPECT_EQ(format_bytes(*found[0].reserved_unallocated), "499.39 MiB");
  EXPECT_EQ(found[0].text.find("Done"), std::string::npos);
  EXPECT_EQ(found[0].text.find("step 11"), std::string::npos);
  EXPECT_EQ(found[1].line, 10u);
  EXPECT_EQ(found[1].rank, 3);
  EXPECT_EQ(format_bytes(*found[1].reserved_unallocated), "1.40 GiB");
  EXPECT_EQ(found[1].text.find("next line"), std::string::npos);
}

TEST(OomMessageParser, WrapAtSentenceBoundaryAndOtherPrefixes) {
  const std::string log =
      "[default2]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB.\n"
      "[default2]:GPU 2 has a total capacity of 14.74 GiB of which 1.25 GiB is free.\n"
      "[default2]:Process 101462 has 13.49 GiB memory in use. Of the allocated memory\n"
      "[default2]:12.27 GiB is allocated by PyTorch, and 1.09 GiB is reserved by PyTorch\n"
      "[default2]:but unallocated.\n"
      "[default2]:Epoch 3 finished\n"
      "[1,5]<stderr>:RuntimeError: CUDA out of memory. Tried to allocate 2.00 MiB (GPU 0; 3.79 GiB total "
      "capacity; 654.97 MiB already allocated; 6.00 MiB free; 666.00 MiB reserved in total by PyTorch)\n";
  const auto found = find_oom_messages(log);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].rank, 2);
  EXPECT_EQ(found[0].gpu, 2);
  ASSERT_EQ(found[0].other_processes.size(), 1u);
  EXPECT_EQ(format_bytes(*found[0].allocated_by_pytorch), "12.27 GiB");
  EXPECT_EQ(format_bytes(*found[0].reserved_unallocated), "1.09 GiB");
  EXPECT_EQ(found[0].text.find("Epoch"), std::string::npos);
  EXPECT_EQ(found[1].rank, 5);
  EXPECT_EQ(found[1].format, OomFormat::kReservedInTotal);
  EXPECT_EQ(format_bytes(*found[1].reserved_by_pytorch), "666.00 MiB");
}

TEST(OomMessageParser, NoMessageAndGarbageAreNotErrors) {
  EXPECT_TRUE(find_oom_messages("").empty());
  EXPECT_TRUE(find_oom_messages("all fine\nstep 1\n").empty());
  EXPECT_TRUE(find_oom_messages("RuntimeError: CUDA error: out of memory\n").empty());
  EXPECT_FALSE(parse_oom_message("nothing here").has_value());
  std::string garbage(4096, '\0');
  for (std::size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<char>((i * 7919) % 256);
  garbage += "out of memory. Tried to allocate 99999999999999999999999 GiB. GPU x";
  const auto found = find_oom_messages(garbage);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_FALSE(found[0].tried_to_allocate.has_value());  // absurd size: not a figure
}

TEST(OomMessageParser, ACrashLoopKeepsTheFirstMessages) {
  std::string log;
  for (std::size_t i = 0; i < kMaxOomMessages + 50; ++i)
    log += "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 MiB. GPU 0 has a total capacity of "
           "10.00 GiB of which 1.00 MiB is free.\n";
  const auto found = find_oom_messages(log);
  ASSERT_EQ(found.size(), kMaxOomMessages);
  EXPECT_EQ(found.front().line, 1u);
  EXPECT_EQ(found.back().line, kMaxOomMessages);
}

