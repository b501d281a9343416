#pragma once
/// @file memory_advice.h
/// @brief Memory reductions the snapshot itself shows, each with the bytes it would save: what
/// was live at the failing malloc (the trace walked to it), by the code that allocated it.
///
/// | key | live at the OOM, allocated by | action |
/// | --- | --- | --- |
/// | `kept_per_step` | each earlier step or eval batch, at one call stack (run_growth.h) | `.cpu()`, `.item()` |
/// | `kv_cache` | transformers' `cache_utils.py` (a DynamicCache) in a training step | `use_cache=False` |
/// | `fp32_logits` | transformers' `loss_utils.py` (the fp32 upcast), `cross_entropy` | a fused cross-entropy |
/// | `foreach_temporaries` | torch/optim's `_multi_tensor_*` code in the step the OOM is in, not state | `fused=True` |
/// | `eval_outputs` | earlier eval batches, still live (HF's Trainer keeps them) | `eval_accumulation_steps=1` |
/// | `eval_batch` | the failing eval batch itself | a smaller eval batch |
///
/// A foreach block is a temporary only inside the optimizer step it was made in: one live from an earlier step is
/// state (SGD makes its momentum buffers in `_multi_tensor_sgd` on the first step, which therefore shows none).
/// Each is listed when it holds at least max(64 MiB, 1% of the capacity); the largest first.
/// Thread-safety: a pure function.

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "diagnose/diagnosis.h"
#include "diagnose/trace_units.h"
#include "snapshot/snapshot.h"

namespace fragscope::diagnose {

/// @brief The reductions for the OOM at `oom_index` of `device`'s trace.
/// `live`: the blocks live before it (live_blocks.h).
std::vector<MemoryAdvice> memory_advice(const snapshot::Snapshot& snapshot, int device, std::size_t oom_index,
                                        const std::unordered_map<std::uint64_t, std::size_t>& live,
                                        const TraceUnits& units, const RunGrowth& growth,
                                        std::uint64_t capacity_bytes);

}  // namespace fragscope::diagnose
