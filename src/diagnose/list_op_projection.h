#pragma once
/// @file list_op_projection.h
/// @brief The rest of an optimizer list op that ran out of memory part-way.
///
/// A foreach optimizer (AdamW's default) computes with `torch._foreach_*` ops: each allocates
/// one result per parameter, all before any is freed. When such an op fails part-way (its
/// first k results allocated, the (k+1)-th refused), the rest is known from an earlier site of
/// the same optimizer step that allocated one tensor per parameter in the same order (the
/// state: `zeros_like(p)` per parameter) and whose sizes begin as the failing site's did:
///
///     projected = live at the OOM + held idle by private pools + the refused request + the sizes after it
///
/// a lower bound on the op's peak even with perfect packing (a CUDA graph's private pool keeps the most it
/// had live while its graph lives, and lends none of it to the optimizer: alloc/ideal_packer.h). The
/// optimizer step of the trace is the run of allocations made by `torch/optim` code that ends at the OOM
/// (allocations without frames do not break it).
/// Thread-safety: a pure function over read-only inputs.

#include <cstddef>
#include <cstdint>
#include <string>

#include "diagnose/recorded_curve.h"
#include "snapshot/snapshot.h"

namespace fragscope::diagnose {

struct ListOpProjection {
  bool available = false;
  std::string unavailable_reason;
  std::string site;            ///< the failing allocation site: "adam.py:791 in _multi_tensor_adam"
  std::string list_site;       ///< the earlier site that allocated the whole list
  std::size_t done = 0;        ///< results the failing op had allocated before the refused one
  std::size_t total = 0;       ///< tensors in the list
  std::uint64_t remaining_bytes = 0;       ///< the refused request and the results after it
  std::uint64_t private_pool_idle_bytes = 0;  ///< what private pools hold beyond their live blocks
  std::uint64_t projected_peak_bytes = 0;  ///< live at the OOM + private_pool_idle_bytes + remaining_bytes
};

/// @brief Projects the rest of the optimizer list op whose malloc failed at `oom_index`, with
/// `private_pool_idle_bytes` held by private pools beyond their live blocks there (the ideal packer's).
/// REQUIRES: curve is walk_recorded_curve(snapshot, device); oom_index < its length.
ListOpProjection project_failing_list_op(const snapshot::Snapshot& snapshot, int device, const RecordedCurve& curve,
                                         std::size_t oom_index, std::uint64_t private_pool_idle_bytes = 0);

}  // namespace fragscope::diagnose
