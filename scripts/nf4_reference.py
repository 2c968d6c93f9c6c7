#!/usr/bin/python3
"""NF4 with double quantization in NumPy, from the published algorithm, and
the fixture the C++ implementation (kernels/math/nf4.h) must match bit for bit.

NF4 (Dettmers et al. 2023, "QLoRA", section 3; bitsandbytes' nf4 code values):
  - blocks of 64 weights; absmax = max |w| in fp32; each weight becomes the
    index of the nearest of the 16 NF4 values to w * (1 / absmax) (midpoints
    between neighbouring values computed in float32; a tie keeps the lower
    code); two codes per byte, the first in the high nibble;
  - double quantization: offset = mean of the absmax values (a sequential
    float64 sum, rounded to float32 once); blocks of 256 centred absmax values,
    each block's scale = max |absmax - offset|, each value the index of the
    nearest entry of bitsandbytes' signed dynamic 8-bit map (read from
    tests/fixtures/dynamic_map.txt) found by bitsandbytes' binary search;
  - dequantization: absmax' = map[q] * scale + offset (float32, unfused),
    w' = nf4[code] * absmax'.
Everything is float32 arithmetic, one rounding per operation, as in C++.

Writes tests/fixtures/nf4.safetensors (all F32; integer codes stored exactly):
  x, packed, absmax_codes, scales, offset, dequantized
Usage: /usr/bin/python3 scripts/nf4_reference.py
"""
import json
import os
import struct

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
NF4 = np.array([-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
                -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
                0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
                0.7229568362236023, 1.0], dtype=np.float32)
F = np.float32


def signed_dynamic_map():
    words, section = [], None
    with open(os.path.join(ROOT, "tests", "fixtures", "dynamic_map.txt")) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if line in ("signed", "unsigned"):
                section = line
                continue
            if section == "signed":
                words += [int(w, 16) for w in line.split()]
    return np.array(words, dtype=np.uint32).view(np.float32)


def inverse(absmax):
    return F(1.0) / absmax if absmax > 0 else F(0.0)


def nf4_codes(xn):
    mids = F(0.5) * (NF4[:-1] + NF4[1:])
    return (xn[:, None] > mids[None, :]).sum(axis=1).astype(np.uint8)


def quantize_to_map(code, x):
    """bitsandbytes' binary search over the signed map (kernels/math/quant8.h mirrors it)."""
    pivot, upper_pivot, lower_pivot = 127, 255, 0
    lower, upper = F(-1.0), F(1.0)
    val = code[pivot]
    i = 64
    while i > 0:
        if x > val:
            lower_pivot, lower = pivot, val
            pivot += i
        else:
            upper_pivot, upper = pivot, val
            pivot -= i
        val = code[pivot]
        i >>= 1
    if x > val:
        return upper_pivot if x > (upper + val) * F(0.5) else pivot
    return lower_pivot if x < (lower + val) * F(0.5) else pivot


def quantize(x, dmap):
    blocks = x.reshape(-1, 64)
    absmax = np.abs(blocks).max(axis=1).astype(np.float32)
    codes = np.concatenate([nf4_codes(b * inverse(a)) for b, a in zip(blocks, absmax)])
    packed = (codes[0::2] << 4 | codes[1::2]).astype(np.uint8)
    total = 0.0
    for a in absmax:  # sequential, in float64
        total += float(a)
    offset = F(total / len(absmax))
    centred = (absmax - offset).astype(np.float32)
    absmax_codes, scales = [], []
    for start in range(0, len(centred), 256):
        block = centred[start:start + 256]
        scale = np.abs(block).max().astype(np.float32)
        inv = inverse(scale)
        absmax_codes += [quantize_to_map(dmap, F(v * inv)) for v in block]
        scales.append(scale)
    return packed, np.array(absmax_codes, dtype=np.uint8), np.array(scales, dtype=np.float32), offset


def dequantize(packed, absmax_codes, scales, offset, dmap):
    codes = np.empty(2 * len(packed), dtype=np.uint8)
    codes[0::2], codes[1::2] = packed >> 4, packed & 15
    absmax = (dmap[absmax_codes] * np.repeat(scales, 256)[: len(absmax_codes)]).astype(np.float32) + offset
    return (NF4[codes] * np.repeat(absmax.astype(np.float32), 64)).astype(np.float32)


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        data = np.ascontiguousarray(t, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(text)))
        out.write(text)
        for blob in blobs:
            out.write(blob)


def main():
    rng = np.random.default_rng(17)
    n = 64 * (2 * 256 + 37)  # three second-level blocks, the last one partial
    x = (0.02 * rng.standard_normal(n)).astype(np.float32)
    x[64:128] = 0.0                                                  # an all-zero block
    x[128:192] = (rng.standard_normal(64) * 3.0).astype(np.float32)  # an outlier block
    x[200] = F(-0.5)                                                 # an element at -absmax
    dmap = signed_dynamic_map()
    packed, absmax_codes, scales, offset = quantize(x, dmap)
    out = dequantize(packed, absmax_codes, scales, offset, dmap)
    write_safetensors(os.path.join(ROOT, "tests", "fixtures", "nf4.safetensors"),
                      {"x": x, "packed": packed.astype(np.float32), "absmax_codes": absmax_codes.astype(np.float32),
                       "scales": scales, "offset": np.array([offset], dtype=np.float32), "dequantized": out})
    bits = (8 * (len(packed) + len(absmax_codes) + 4 * len(scales) + 4)) / n
    rms = float(np.sqrt(np.mean((out - x)[np.abs(x) < 1] ** 2)))
    print(f"n = {n}: {bits:.4f} bits per weight, rms error {rms:.3g} (weights ~ N(0, 0.02^2))")


if __name__ == "__main__":
    main()
