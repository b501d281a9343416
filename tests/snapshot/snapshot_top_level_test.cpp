// The top level of a snapshot read into the model, on pickles CPython's own pickler writes: the
// allocator settings (interpreted, the rest kept as text), the external annotations, the
// device traces sharing entries, and a one-line error for a top level that is no snapshot.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "snapshot/snapshot_reader.h"
#include "util/error.h"

namespace fragscope::snapshot {
namespace {

/// The file CPython writes with pickle.dump(`value`), `value` a Python expression.
std::string pickled(const std::string& name, const std::string& value) {
  const auto path = std::filesystem::path(::testing::TempDir()) / (name + ".pickle");
  const auto script = std::filesystem::path(::testing::TempDir()) / (name + ".py");
  std::ofstream(script) << "import pickle\nwith open('" << path.string() << "', 'wb') as f:\n    pickle.dump(" << value
                        << ", f, protocol=4)\n";
  EXPECT_EQ(std::system((std::string(FRAGSCOPE_PYTHON) + " " + script.string()).c_str()), 0) << value;
  return path.string();
}

std::string error_of(const std::string& path) {
  try {
    read_snapshot_file(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(SnapshotTopLevel, AllocatorSettingsAreInterpretedAndTheRestKeptAsText) {
  const Snapshot s = read_snapshot_file(
      pickled("settings",
              "{'segments': [], 'device_traces': [], 'allocator_settings': {"
              "'PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:True,max_split_size_mb:128', "
              "'max_split_size': 134217728, 'garbage_collection_threshold': 0.6, 'expandable_segments': True, "
              "'release_lock_on_cudamalloc': False, 'roundup_power2_divisions': {'1': 4, '64': 8, '3': 2}, "
              "'pinned_num_register_threads': 1, 'last_allocator_settings': [1, (2, 'x'), {'k': None}]}}"));
  const AllocatorSettings& a = s.allocator_settings;
  EXPECT_TRUE(a.present);
  EXPECT_EQ(a.alloc_conf, "expandable_segments:True,max_split_size_mb:128");
  EXPECT_EQ(a.max_split_size, 134217728);
  EXPECT_DOUBLE_EQ(a.garbage_collection_threshold, 0.6);
  EXPECT_TRUE(a.expandable_segments);
  EXPECT_FALSE(a.release_lock_on_cudamalloc);
  EXPECT_EQ(a.roundup_power2_divisions[0], 4);  // [1, 2) MiB
  EXPECT_EQ(a.roundup_power2_divisions[6], 8);  // [64, 128) MiB
  EXPECT_EQ(a.roundup_power2_divisions[1], 0);  // 3 MiB is no power of two: left out
  EXPECT_EQ(a.other.at("pinned_num_register_threads"), "1");
  EXPECT_EQ(a.other.at("last_allocator_settings"), "[1, (2, x), {k: None}]");
}

TEST(SnapshotTopLevel, AnnotationsKeepTheirDeviceTimeAndFields) {
  const Snapshot s = read_snapshot_file(
      pickled("annotations",
              "{'segments': [], 'external_annotations': ["
              "{'device': 1, 'time_us': 42, 'stage': 'START', 'name': 'eval'}, "
              "{'device': 1, 'time_us': 99, 'stage': 'END', 'name': 'eval', 'depth': 2}, 'not a dict']}"));
  ASSERT_EQ(s.annotations.size(), 2u);
  EXPECT_EQ(s.annotations[0].device, 1);
  EXPECT_EQ(s.annotations[0].time_us, 42);
  ASSERT_EQ(s.annotations[1].fields.size(), 3u);
  EXPECT_EQ(s.strings.view(s.annotations[1].fields[0].first), "stage");
  EXPECT_EQ(s.strings.view(s.annotations[1].fields[0].second), "END");
  EXPECT_EQ(s.strings.view(s.annotations[1].fields[2].second), "2");  // a value that is not a str, as text
  // Stage and name are decoded as the snapshot is read.
  EXPECT_EQ(s.annotations[0].stage, AnnotationStage::kStart);
  EXPECT_EQ(s.annotations[1].stage, AnnotationStage::kEnd);
  EXPECT_EQ(s.strings.view(s.annotations[0].name), "eval");
  EXPECT_EQ(s.strings.view(s.annotations[1].name), "eval");
}

TEST(SnapshotTopLevel, DeviceTracesMayShareTheirEntries) {
  const Snapshot s = read_snapshot_file(
      pickled("shared",
              "(lambda e: {'segments': [], 'device_traces': [[e[0], e[1]], [], [e[1], e[0], e[1]]]})("
              "[{'action': 'alloc', 'addr': 512, 'size': 1024, 'stream': 0, 'time_us': 1}, "
              "{'action': 'free_completed', 'addr': 512, 'size': 1024, 'stream': 0, 'time_us': 2}])"));
  ASSERT_EQ(s.device_traces.size(), 3u);
  EXPECT_EQ(s.device_traces[0].size(), 2u);
  EXPECT_TRUE(s.device_traces[1].empty());
  ASSERT_EQ(s.device_traces[2].size(), 3u);
  EXPECT_EQ(s.device_traces[2][0].action, TraceAction::kFreeCompleted);
  EXPECT_EQ(s.device_traces[2][1].action, TraceAction::kAlloc);
  EXPECT_EQ(s.device_traces[0][0].action, TraceAction::kAlloc);
}

TEST(SnapshotTopLevel, ATopLevelThatIsNoSnapshotIsOneLine) {
  struct Case {
    std::string name, value, message;
  };
  for (const Case& c :
       {Case{"an_int", "7", "not a memory snapshot: the top-level object is an int"},
        Case{"no_segments", "{'device_traces': []}", "not a memory snapshot: the top-level dict has no 'segments'"},
        Case{"segments_not_a_list", "{'segments': 3}", "not a memory snapshot: 'segments' is not a list"},
        Case{"traces_not_a_list", "{'segments': [], 'device_traces': {}}",
             "not a memory snapshot: 'device_traces' is not a list"}}) {
    const std::string path = pickled(c.name, c.value);
    const std::string message = error_of(path);
    EXPECT_NE(message.find(c.message), std::string::npos) << message;
    EXPECT_EQ(message.rfind(path, 0), 0u) << message;  // names the file first
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace fragscope::snapshot
