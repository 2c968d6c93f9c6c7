// A configuration as Megatron-LM's pretrain_gpt.py command line
// (megatron/training/arguments.py, whose TransformerConfig and
// DistributedDataParallelConfig fields become flags): the model's shape, tensor
// and sequence parallelism, ZeRO as the distributed optimizer or Megatron-FSDP's
// sharding strategy, recompute, precision and AdamW, with what Megatron-LM's own
// validation (validate_args) asserts of those flags beside them (the checkpoint
// format Megatron-FSDP needs, the optimizer path offload takes, the environment
// tensor parallelism needs; tests/test_megatron_validation.cpp holds every export
// to those assertions). Megatron-LM has no profile
// of its own in estimate/frameworks: it runs the tensor-parallel scheme tune's
// engine runs (core/parallel_plan.h), and its own buffers are not modelled.
#pragma once

#include "core/config.h"
#include "exports/framework_export.h"

namespace tune {

FrameworkExport megatron_export(const TrialConfig& c);

}  // namespace tune
