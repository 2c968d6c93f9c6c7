#pragma once
// A vocabulary shard's rules (Megatron's vocabulary-parallel embedding and
// cross-entropy), shared by the CPU and CUDA backends: each shard holds the
// embedding rows, and the logits, of tokens [begin, begin + V) of the whole
// vocabulary. The rows' max, sum of exponentials and target logit are
// combined over the shards (kernels/backend.h CrossEntropyStage) before the
// loss and the gradient.
#include <math.h>
#include <stdint.h>

#include "kernels/math/hd.h"

namespace tune::math {

// The target's column in a shard of `vocab` columns from `begin`, or -1 where another holds it (or it is ignored).
TUNE_HD inline int64_t shard_column(int32_t target, int64_t begin, int64_t vocab) {
    const int64_t j = static_cast<int64_t>(target) - begin;
    return target >= 0 && j >= 0 && j < vocab ? j : -1;
}

// A token's row in a vocabulary shard's embedding table of `vocab` rows from `begin`, or -1 where another shard
// holds it.
TUNE_HD inline int64_t vocab_row(int32_t token, int64_t begin, int64_t vocab) {
    return shard_column(token, begin, vocab);
}

// The loss of a row from the combined statistics: log(sum) + max - target logit.
TUNE_HD inline float shard_loss(float row_max, float sum_exp, float target_logit) {
    return ::logf(sum_exp) + row_max - target_logit;
}

// d loss / d logit of column j: the softmax less the one-hot, scaled.
TUNE_HD inline float shard_gradient(float logit, float row_max, float sum_exp, bool is_target, float grad_scale) {
    return grad_scale * (::expf(logit - row_max) / sum_exp - (is_target ? 1.0f : 0.0f));
}

}  // namespace tune::math
