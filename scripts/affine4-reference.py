#!/usr/bin/env python3
"""Independent reference for the MLX affine 4-bit codec (Python stdlib only).

Written from the layout and quantiser description in ARCHITECTURE.md 4.1 and
the contract text of libstore/codec/hb_affine4.h, not from the C code.  Where the C
code rounds with bit tricks, this script rounds with exact rational
arithmetic (fractions.Fraction), so a bit-trick mistake on either side shows
up as a byte mismatch in tests/unit/test_store_affine4.c.

Layout of one group of G weights (G/2 + 4 bytes): G/2 bytes of nibbles
(weight 2k in the low nibble of byte k, 2k+1 in the high nibble), then the
bfloat16 scale, then the bfloat16 bias, little-endian.  w = scale * q + bias.

Quantiser ("min-max, bf16-first"):
    lo, hi = min and max of the group
    bias   = bf16(lo)                         round to nearest, ties to even
    scale  = bf16(f32(((double)hi - (double)lo) / 15))
    q      = 0 if scale == 0 else clamp(round_half_even((w - bias) / scale), 0, 15)
             with the quotient evaluated in IEEE double, as written.

Usage: scripts/affine4-reference.py [OUTPUT]   (default
tests/fixtures/codec/affine4-cases.json).  The output is deterministic.
"""

import json
import math
import struct
import sys
from fractions import Fraction
from pathlib import Path

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "codec" / "affine4-cases.json"


def round_to_format(x, significand_bits, min_normal_exp):
    """Round a finite double to a binary format with the given significand
    width and minimum normal exponent (subnormals kept), ties to even, using
    exact rationals.  Returns a double (exact: the result fits a double)."""
    if x == 0.0:
        return x
    exact = Fraction(x)
    _, e = math.frexp(x)              # |x| = m * 2^e, m in [0.5, 1)
    lead = max(e - 1, min_normal_exp)  # exponent of the leading bit
    quantum = lead - (significand_bits - 1)
    steps = round(exact / (Fraction(2) ** quantum))  # Fraction round: half even
    return float(Fraction(steps) * (Fraction(2) ** quantum))


def to_f32(x):
    return round_to_format(x, 24, -126)


def to_bf16(x):
    return round_to_format(x, 8, -126)


def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def bits_f32(u):
    return struct.unpack("<f", struct.pack("<I", u))[0]


def bf16_bits(x):
    """x must already be representable in bfloat16."""
    u = f32_bits(x)
    assert u & 0xFFFF == 0, x
    return u >> 16


def encode_group(ws):
    lo = ws[0]
    hi = ws[0]
    for w in ws:
        if w < lo:
            lo = w
        if w > hi:
            hi = w
    bias = to_bf16(lo)
    scale = to_bf16(to_f32((hi - lo) / 15.0))
    qs = []
    for w in ws:
        if scale == 0.0:
            qs.append(0)
            continue
        x = (w - bias) / scale
        if x <= 0.0:
            q = 0
        elif x >= 15.0:
            q = 15
        else:
            q = round(x)              # Python rounds floats half to even
        qs.append(q)
    out = bytearray()
    for k in range(len(ws) // 2):
        out.append(qs[2 * k] | (qs[2 * k + 1] << 4))
    out += struct.pack("<HH", bf16_bits(scale), bf16_bits(bias))
    # Decode exactly, then round once to float32.
    dec = [to_f32(float(Fraction(scale) * q + Fraction(bias))) for q in qs]
    return bytes(out), dec, bf16_bits(scale), bf16_bits(bias)


def encode(ws, group):
    assert len(ws) % group == 0
    enc = bytearray()
    dec = []
    params = []
    for g in range(0, len(ws), group):
        b, d, s, bi = encode_group(ws[g:g + group])
        enc += b
        dec += d
        params.append((s, bi))
    return bytes(enc), dec, params


def lcg(seed):
    state = seed & 0xFFFFFFFF
    while True:
        state = (state * 1664525 + 1013904223) & 0xFFFFFFFF
        yield state / 4294967296.0


def cases():
    out = []
    # 1. constant group: scale 0, bias exact.
    out.append(("constant", 64, [to_f32(0.75)] * 64,
                "every weight 0.75 (bf16-representable): scale 0, exact"))
    # 2. ramp 0..15: scale exactly 1, bias 0, q equals the value.
    out.append(("ramp-0-15", 64, [float(i % 16) for i in range(64)],
                "values 0..15 repeated: scale 1.0, bias 0, q = value"))
    # 3. negative values only.
    r = lcg(3)
    out.append(("negative", 64, [to_f32(-0.25 - 3.0 * next(r)) for _ in range(64)],
                "all weights in [-3.25, -0.25]: negative bias, rounded bias"))
    # 4. tiny range on a large offset: bias rounding dominates the error.
    out.append(("tiny-range", 64, [to_f32(1000.0 + i * 1e-4) for i in range(64)],
                "1000 + i*1e-4: range far below the bf16 spacing of the bias"))
    # 5. one outlier stretches the scale.
    r = lcg(5)
    ws = [to_f32(0.01 * (next(r) - 0.5)) for _ in range(64)]
    ws[37] = to_f32(8.0)
    out.append(("outlier", 64, ws, "small weights with one outlier 8.0 at index 37"))
    # 6. exact ties: lo 0, hi 15 fix scale 1; k + 0.5 rounds to even.
    ws = [0.0, 15.0] + [k + 0.5 for k in range(15)] + [0.5, 1.5, 2.5, 13.5, 14.5]
    ws += [float(i % 15) for i in range(64 - len(ws))]
    out.append(("exact-ties", 64, ws,
                "scale 1, bias 0; k+0.5 for k in 0..14 rounds half to even"))
    # 7. mixed sign, unrepresentable endpoints.
    r = lcg(7)
    out.append(("mixed-sign", 64, [to_f32(2.0 * next(r) - 0.7) for _ in range(64)],
                "weights in [-0.7, 1.3]"))
    # 8. two groups in one row: groups are independent.
    r = lcg(8)
    ws = [to_f32(next(r)) for _ in range(64)] + [to_f32(-50.0 * next(r)) for _ in range(64)]
    out.append(("two-groups", 64, ws, "a 128-weight row: two independent groups"))
    # 9. group size 32 (the PLE use): 20 bytes per group.
    r = lcg(9)
    out.append(("group-32", 32, [to_f32(0.2 * next(r) - 0.1) for _ in range(64)],
                "group size 32, two groups of 20 bytes"))
    # 10. a subnormal range: the scale is a bf16 subnormal.
    out.append(("subnormal-range", 32, [to_f32(i * 1e-39) for i in range(32)],
                "values 0 .. 3.1e-38: scale and bias near the subnormal range"))
    return out


def main():
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT
    doc = {
        "format": "hebrus-affine4-cases-v1",
        "generator": "scripts/affine4-reference.py",
        "codec": "mlx-affine4: per group G/2 nibble bytes (low nibble first), "
                 "bf16 scale, bf16 bias, little-endian; w = scale*q + bias",
        "quantiser": "min-max, bf16-first (see libstore/hb_affine4.h)",
        "cases": [],
    }
    for name, group, ws, why in cases():
        ws = [to_f32(w) for w in ws]
        enc, dec, params = encode(ws, group)
        doc["cases"].append({
            "name": name,
            "why": why,
            "group_size": group,
            "inputs": {
                "provenance": "contract-control",
                "f32_bits": ["%08x" % f32_bits(w) for w in ws],
            },
            "encoded": {
                "provenance": "independent-cross-check",
                "hex": enc.hex(),
            },
            "params": {
                "provenance": "independent-cross-check",
                "scale_bf16": ["%04x" % s for s, _ in params],
                "bias_bf16": ["%04x" % b for _, b in params],
            },
            "decoded": {
                "provenance": "independent-cross-check",
                "f32_bits": ["%08x" % f32_bits(d) for d in dec],
            },
        })
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
