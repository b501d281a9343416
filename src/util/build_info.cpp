#include "util/build_info.h"

#include "util/build_revision.h"  // generated at every build: FRAGSCOPE_VERSION, FRAGSCOPE_REVISION

namespace fragscope {

BuildInfo build_info() { return {FRAGSCOPE_VERSION, FRAGSCOPE_REVISION}; }

}  // namespace fragscope
