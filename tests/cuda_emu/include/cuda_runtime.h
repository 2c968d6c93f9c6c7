// Emulated CUDA runtime (tests/cuda_emu): the language shims and the API.
#pragma once

#include "tune_emu/device_code.h"
#include "tune_emu/runtime.h"
