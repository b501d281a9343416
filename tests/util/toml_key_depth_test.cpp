// The bound on TOML key depth checked before toml++ parses (its recursion overflowed on 100,000 parts).
#include "util/toml_key_depth.h"

#include <gtest/gtest.h>

#include <string>

#include "util/error.h"

namespace fragscope {
namespace {

std::string error_of(const std::string& text) {
  try {
    refuse_deep_toml_keys(text, "spec.toml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::string parts(int n) {
  std::string key = "a";
  for (int i = 1; i < n; ++i) key += ".a";
  return key;
}

TEST(TomlKeyDepth, KeysHeadersAndInlineTablesPast32PartsAreRefused) {
  const std::string refused = ": a dotted key or table header of more than 32 parts";
  EXPECT_EQ(error_of(parts(33) + " = 1\n"), "spec.toml: line 1" + refused);
  EXPECT_EQ(error_of("x = 1\n[" + parts(100'000) + "]\n"), "spec.toml: line 2" + refused);
  EXPECT_EQ(error_of("x = {" + parts(40) + " = 1}\n"), "spec.toml: line 1" + refused);
  EXPECT_EQ(error_of("\"a\"" + std::string(40, '.') + " = 1\n"), "");  // dots without parts between them: no chain
}

TEST(TomlKeyDepth, RealFilesAndTheirValuesPass) {
  EXPECT_EQ(error_of(parts(32) + " = 1\n"), "");
  // Floats, versions and prose have dots between parts that are no key, or not side by side.
  EXPECT_EQ(error_of("v = [1.0, 2.5, 3.25, 4.125, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0,"
                     " 17.0, 18.0, 19.0, 20.0, 21.0, 22.0, 23.0, 24.0, 25.0, 26.0, 27.0, 28.0, 29.0, 30.0, 31.0,"
                     " 32.0, 33.0]\n"),
            "");
  EXPECT_EQ(error_of("# " + parts(100) + "\nname = \"" + parts(100) + "\"\n"), "");
  EXPECT_EQ(error_of("[training]\nmicro_batch_size = 4\n[hardware.alloc]\nconf = \"expandable_segments:True\"\n"), "");
}

}  // namespace
}  // namespace fragscope
