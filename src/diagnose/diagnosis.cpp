#include "diagnose/diagnosis.h"

namespace fragscope::diagnose {

std::string_view to_string(Verdict verdict) {
  switch (verdict) {
    case Verdict::kOk: return "ok";
    case Verdict::kCapacity: return "capacity";
    case Verdict::kFragmentation: return "fragmentation";
    case Verdict::kInputBound: return "input_bound";
    case Verdict::kUndetermined: return "undetermined";
  }
  return "undetermined";
}

int exit_status(Verdict verdict) { return verdict == Verdict::kOk ? 0 : 1; }

}  // namespace fragscope::diagnose
