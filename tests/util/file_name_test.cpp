#include "util/file_name.h"

#include <gtest/gtest.h>

namespace fragscope {
namespace {

TEST(FileName, TheLastComponentOfAPathAsATraceRecordsIt) {
  EXPECT_EQ(file_name_of("/opt/venv/lib/python3.12/site-packages/transformers/trainer.py"), "trainer.py");
  EXPECT_EQ(file_name_of("/tmp/torchinductor_root/c4/c44e4uvpvv6z.py"), "c44e4uvpvv6z.py");
  EXPECT_EQ(file_name_of("train.py"), "train.py");
  EXPECT_EQ(file_name_of("??"), "??");  // the unwinder's unknown file
  EXPECT_EQ(file_name_of("folder/"), "");
  EXPECT_EQ(file_name_of(""), "");
}

}  // namespace
}  // namespace fragscope
