#include "agent/rank_record.h"

namespace fragscope::agent {

double RankRecord::fragmentation_ratio() const {
  if (reserved_bytes == 0) return 0.0;
  return static_cast<double>(inactive_split_bytes) / static_cast<double>(reserved_bytes);
}

}  // namespace fragscope::agent
