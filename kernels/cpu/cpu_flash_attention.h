// Internal to the CPU backend: flash attention (AttentionKind::fused), called
// by CpuBackend's attention ops. The workspace is
// workspace::cpu_flash_attention_bytes(threads, seq, head_dim).
#pragma once

#include "kernels/backend.h"

namespace tune::kernels::cpu {

void flash_attention_forward(const AttentionForwardArgs& args, int threads, Workspace ws);
void flash_attention_backward(const AttentionBackwardArgs& args, int threads, Workspace ws);

}  // namespace tune::kernels::cpu
