// FieldMap: a record's memory_stats and unknown fields, sorted by name, exactly sized when made at
// once, the names shared and not counted.
#include "inputs/field_map.h"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace fragscope::inputs {
namespace {

TEST(FieldMap, FindsAndIteratesByName) {
  FieldMap<std::int64_t> stats;
  EXPECT_TRUE(stats.empty());
  stats["reserved_bytes.all.peak"] = 5;
  stats["num_ooms"] = 1;
  stats["allocated_bytes.all.current"] = 3;
  stats["num_ooms"] = 2;  // the same field
  ASSERT_EQ(stats.size(), 3u);
  std::vector<std::string> names;
  for (const auto& [name, value] : stats) names.push_back(*name);
  EXPECT_EQ(names, (std::vector<std::string>{"allocated_bytes.all.current", "num_ooms", "reserved_bytes.all.peak"}));
  ASSERT_NE(stats.find("num_ooms"), nullptr);
  EXPECT_EQ(*stats.find("num_ooms"), 2);
  EXPECT_EQ(stats.find("num_alloc_retries"), nullptr);
  EXPECT_EQ(stats.at("reserved_bytes.all.peak"), 5);
  EXPECT_THROW(stats.at("segment.all.current"), std::out_of_range);
}

TEST(FieldMap, MadeAtOnceFromSortedFieldsExactlySized) {
  SharedTextPool names;
  std::vector<FieldMap<std::string>::Field> fields{{names.get("gpu_util"), "[90,91]"},
                                                   {names.get("host"), "\"a host name longer than inline\""}};
  const FieldMap<std::string> extra(fields);
  EXPECT_EQ(extra.at("host"), "\"a host name longer than inline\"");
  // Two fields (the names are the pool's), and the long value's own buffer.
  EXPECT_EQ(extra.heap_bytes(), 2 * sizeof(FieldMap<std::string>::Field) + extra.at("host").capacity() + 1);
  std::swap(fields[0], fields[1]);
  EXPECT_THROW(FieldMap<std::string>{fields}, std::invalid_argument);
  fields[0] = fields[1];
  EXPECT_THROW(FieldMap<std::string>{fields}, std::invalid_argument);  // a name twice
}

}  // namespace
}  // namespace fragscope::inputs
