#!/usr/bin/env python3
"""Write a synthetic Qwen4Exp safetensors checkpoint directory.

What it is: a CONTRACT-CONTROL input for the converter, not an upstream
capture.  Nothing here ran upstream's model code: the tensor names, shapes
and the save layout follow what transformers 5.17 save_pretrained writes for
Qwen4ExpForConditionalGeneration (as seen in tests/fixtures/upstream/*), the
weights are pseudo-random bit patterns chosen by this script, and the PLE hash
buffers (layer_multipliers, ngram_heads_vocab_sizes, ngram_heads_offsets) are
computed by this script's own Python reading of upstream's definition
(Qwen4ExpTextNGramEmbedding and its helpers), independently of the C code in
libstore/model/hb_ple_hash.c.  Use it to exercise geometry, dtypes, layouts, shard
sets and exclusions at sizes the upstream fixtures do not reach (the
conversion benchmark writes several GiB with it); use the upstream fixtures
for any claim about what upstream computes.

Python standard library only.  Memory stays bounded whatever the size: every
tensor is generated and written in chunks of at most 4 MiB.

Weights.  Every tensor's bytes are a slice of a keyed byte stream: block k of
the stream named N is SHAKE-128(seed, N, k) (1 MiB blocks), and each element's
most significant byte is then mapped through a table so that every value is a
finite, normal number of magnitude between about 2^-11 and 2^-4 (FP8 E4M3:
2^-3 .. 2^4; FP8 scales positive).  SHAKE-128 is a standard function, so the
bytes do not depend on the Python version (random.Random makes no such
promise), and it runs in C (hundreds of MB/s).  Streams are keyed by meaning,
not by file layout, so the same --seed gives the same values whatever the
shard count, and per-expert and packed expert layouts hold the same experts.

Output: DIR/config.json, DIR/model.safetensors (one shard) or
DIR/model-0000K-of-0000N.safetensors + DIR/model.safetensors.index.json.
A JSON summary of what was written (tensor and byte counts per group, per
shard, the PLE hash buffers) goes to stdout, or to --summary FILE.

Example (what the tests use):
  scripts/make-synthetic-checkpoint.py --out /tmp/ck --vision --mtp --shards 3
"""

import argparse
import hashlib
import json
import math
import os
import struct
import sys
import time

# --------------------------------------------------------------- elements

DTYPE_SIZE = {"BF16": 2, "F16": 2, "F32": 4, "F8_E4M3": 1, "I64": 8}
BLOCK = 1 << 20          # bytes per SHAKE block of a stream
CHUNK = 4 << 20          # bytes generated and written at once


def _table(fn):
    return bytes(fn(v) for v in range(256))


# The most significant byte of each element, remapped.  Bit 7 keeps the sign.
# bf16 / f32: sign | exponent bits 7..1 in {58..61}: |x| in [2^-11, 2^-3).
_MSB_BF16 = _table(lambda v: (v & 0x80) | (58 + (v & 3)))
# f16: sign | exponent {6..9} | two mantissa bits: |x| in [2^-9, 2^-5).
_MSB_F16 = _table(lambda v: (v & 0x80) | ((6 + ((v >> 2) & 3)) << 2) | (v & 3))
# fp8 e4m3: sign | exponent {4..11} | mantissa: never the NaN pattern.
_ONE_FP8 = _table(lambda v: (v & 0x80) | ((4 + ((v >> 3) & 7)) << 3) | (v & 7))
# positive f32 (FP8 scales): exponent {58..61} without the sign.
_MSB_POS = _table(lambda v: 58 + (v & 3))


def stream_bytes(seed, key, start, n):
    """Bytes [start, start + n) of the stream named key."""
    out = bytearray()
    blk = start // BLOCK
    skip = start - blk * BLOCK
    while len(out) < n:
        h = hashlib.shake_128(b"hebrus-synthetic-v1\0%d\0%s\0%d" %
                              (seed, key.encode(), blk))
        # an XOF: a shorter digest is a prefix of the longer one
        data = h.digest(min(BLOCK, skip + n - len(out)))
        take = data[skip:]
        out += take
        skip = 0
        blk += 1
    return out


def map_elements(buf, dtype, positive=False):
    """Remap the bytes of whole elements in place (buf starts on an element)."""
    if dtype == "BF16":
        buf[1::2] = bytes(buf[1::2]).translate(_MSB_BF16)
    elif dtype == "F16":
        buf[1::2] = bytes(buf[1::2]).translate(_MSB_F16)
    elif dtype == "F32":
        buf[3::4] = bytes(buf[3::4]).translate(_MSB_POS if positive else _MSB_BF16)
    elif dtype == "F8_E4M3":
        buf[:] = bytes(buf).translate(_ONE_FP8)
    else:
        raise ValueError(dtype)
    return buf


class Piece:
    """A run of a tensor's bytes: a slice of a keyed stream, or literal bytes."""

    def __init__(self, nbytes, key=None, start=0, data=None, positive=False):
        self.nbytes, self.key, self.start = nbytes, key, start
        self.data, self.positive = data, positive


class Tensor:
    def __init__(self, name, dtype, shape, pieces, group):
        self.name, self.dtype, self.shape = name, dtype, list(shape)
        self.pieces, self.group = pieces, group
        self.nbytes = math.prod(self.shape) * DTYPE_SIZE[dtype]
        assert sum(p.nbytes for p in pieces) == self.nbytes, name

    def chunks(self, seed):
        es = DTYPE_SIZE[self.dtype]
        for p in self.pieces:
            if p.data is not None:
                yield p.data
                continue
            step = CHUNK - CHUNK % es
            for off in range(0, p.nbytes, step):
                n = min(step, p.nbytes - off)
                yield map_elements(stream_bytes(seed, p.key, p.start + off, n),
                                   self.dtype, p.positive)


def random_tensor(name, dtype, shape, group, key=None):
    n = math.prod(shape) * DTYPE_SIZE[dtype]
    return Tensor(name, dtype, shape, [Piece(n, key or name + "|" + dtype)], group)


def i64_tensor(name, values, group):
    data = b"".join(struct.pack("<q", v) for v in values)
    return Tensor(name, "I64", [len(values)], [Piece(len(data), data=data)], group)


# ------------------------------------------------------- PLE hash identity
# Written from upstream's definition (modeling_qwen4_exp.py): a splitmix64
# finaliser, odd multipliers below (2^63 - 1) // vocab, consecutive primes.

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def splitmix(x):
    x = (x + GOLDEN) & MASK
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & MASK
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def multipliers(vocab, ngram_size, ple_index, seed):
    limit = ((1 << 63) - 1) // max(vocab, 1)
    half = max(1, limit // 2)
    base = seed + 10007 * ple_index
    return [2 * (splitmix((base + GOLDEN * (i + 1)) & MASK) % half) + 1
            for i in range(ngram_size)]


def is_prime(v):
    if v < 2:
        return False
    if v % 2 == 0:
        return v == 2
    d = 3
    while d * d <= v:
        if v % d == 0:
            return False
        d += 2
    return True


def primes_from(start, count):
    """The first `count` primes >= start."""
    out, v = [], start
    while len(out) < count:
        if is_prime(v):
            out.append(v)
        v += 1
    return out


def ple_identity(a, n_tables):
    """Per PLE table: multipliers, head sizes, head offsets, padded rows."""
    heads = (a.ngram_size - 1) * a.heads_per_ngram
    primes = primes_from(a.ngram_base, heads * n_tables)
    out = []
    for p in range(n_tables):
        sizes = primes[p * heads:(p + 1) * heads]
        offsets = [sum(sizes[:i]) for i in range(heads)]
        logical = sum(sizes)
        padded = -(-logical // a.ngram_divisor) * a.ngram_divisor
        out.append({
            "multipliers": multipliers(a.vocab, a.ngram_size, p, a.config_seed),
            "head_sizes": sizes, "head_offsets": offsets,
            "logical_rows": logical, "physical_rows": padded,
        })
    return out


# ---------------------------------------------------------------- model

PFX = "model.language_model."


def layer_kinds(a):
    return ["S" if (i + 1) % a.sparse_every == 0 else "L" for i in range(a.layers)]


def build(a):
    """The tensor list, in upstream's module order, and the config."""
    H, V, hc = a.hidden, a.vocab, a.hc_count
    hch = hc * H
    dt, edt = a.dtype, a.expert_dtype
    kinds = layer_kinds(a)
    ple_ids = sorted(set(a.ple_layers))
    for lid in ple_ids:
        if not 1 <= lid <= a.layers or kinds[lid - 1] != "L":
            sys.exit("make-synthetic-checkpoint: --ple-layers %d is not a linear-attention layer" % lid)
    heads = (a.ngram_size - 1) * a.heads_per_ngram
    if ple_ids and a.ple_embed_dim % heads:
        sys.exit("make-synthetic-checkpoint: --ple-embed-dim %d is not a multiple of %d n-gram heads"
                 % (a.ple_embed_dim, heads))
    ident = ple_identity(a, len(ple_ids))
    T = []

    def add(name, shape, group="base", dtype=None):
        T.append(random_tensor(name, dtype or dt, shape, group))

    def hyper(base, inject):
        add(base + ".hc_norm.weight", [hch])
        add(base + ".input_mix_weight_down.weight", [a.hc_lowrank, hch])
        add(base + ".input_mix_weight_up.weight", [hch, a.hc_lowrank])
        if inject:
            add(base + ".block_inject_weight.weight", [hc, hch])

    add(PFX + "embed_tokens.weight", [V, H])
    hyper(PFX + "hyper_connection_mixer", False)
    I, E = a.moe_intermediate, a.experts
    for i in range(a.layers):
        p = PFX + "layers.%d." % i
        hyper(p + "attn_hyper_connection", True)
        hyper(p + "mlp_hyper_connection", True)
        if kinds[i] == "L":
            kd = a.linear_key_heads * a.linear_key_head_dim
            vd = a.linear_value_heads * a.linear_value_head_dim
            nv = a.linear_value_heads
            add(p + "linear_attn.conv1d.weight", [2 * kd + vd, 1, a.linear_conv_kernel])
            add(p + "linear_attn.dt_bias", [nv])
            add(p + "linear_attn.A_log", [nv])
            add(p + "linear_attn.norm.weight", [a.linear_value_head_dim])
            add(p + "linear_attn.out_proj.weight", [H, vd])
            add(p + "linear_attn.in_proj_qkv.weight", [2 * kd + vd, H])
            add(p + "linear_attn.in_proj_z.weight", [vd, H])
            add(p + "linear_attn.in_proj_b.weight", [nv, H])
            add(p + "linear_attn.in_proj_a.weight", [nv, H])
        else:
            q, kv = a.heads * a.head_dim, a.kv_heads * a.head_dim
            add(p + "self_attn.q_proj.weight", [2 * q, H])
            add(p + "self_attn.k_proj.weight", [kv, H])
            add(p + "self_attn.v_proj.weight", [kv, H])
            add(p + "self_attn.o_proj.weight", [H, q])
            add(p + "self_attn.q_norm.weight", [a.head_dim])
            add(p + "self_attn.k_norm.weight", [a.head_dim])
            add(p + "self_attn.indexer.index_qk_proj.weight",
                [(a.indexer_heads + 1) * a.indexer_head_dim, H])
            add(p + "self_attn.indexer.q_layernorm.weight", [a.indexer_head_dim])
            add(p + "self_attn.indexer.k_layernorm.weight", [a.indexer_head_dim])
        add(p + "mlp.gate.weight", [E, H])
        S = a.shared_intermediate
        add(p + "mlp.shared_expert.gate_proj.weight", [S, H])
        add(p + "mlp.shared_expert.up_proj.weight", [S, H])
        add(p + "mlp.shared_expert.down_proj.weight", [H, S])
        add(p + "mlp.shared_expert_gate.weight", [1, H])
        T.extend(experts(a, i, I, H, E, edt))
        if i + 1 in ple_ids:
            k = ple_ids.index(i + 1)
            T.extend(ple_tensors(a, p, k, ident[k], hch, heads))
    if a.lm_head == "separate":
        add("lm_head.weight", [V, H])
    elif a.lm_head == "embedding-copy":
        # an untied checkpoint whose lm_head holds the embedding's exact bytes:
        # the independent control for a tied one
        T.append(random_tensor("lm_head.weight", dt, [V, H], "base", key=PFX + "embed_tokens.weight|" + dt))
    # "tied": no lm_head tensor at all; config.json says tie_word_embeddings
    if a.vision:
        T.extend(vision_tensors(a))
    if a.mtp:
        T.extend(mtp_tensors(a))
    return T, ident, kinds, ple_ids


def experts(a, layer, I, H, E, edt):
    """Routed experts; stream keys name (layer, expert, matrix) so that the
    per-expert and packed layouts hold the same values."""
    fp8 = edt == "F8_E4M3"
    es = DTYPE_SIZE[edt]
    p = PFX + "layers.%d.mlp.experts." % layer
    key = lambda e, m: "L%d.E%d.%s|%s" % (layer, e, m, edt)
    skey = lambda e, m: "L%d.E%d.%s.scale" % (layer, e, m)
    bl = a.fp8_block
    grid = lambda r, c: [-(-r // bl), -(-c // bl)]
    out = []
    if a.experts_layout == "per-expert":
        for e in range(E):
            for m, (r, c) in (("gate", (I, H)), ("up", (I, H)), ("down", (H, I))):
                name = p + "%d.%s_proj.weight" % (e, m)
                out.append(Tensor(name, edt, [r, c], [Piece(r * c * es, key(e, m))], "expert"))
                if fp8:
                    g = grid(r, c)
                    out.append(Tensor(name + "_scale_inv", "F32", g,
                                      [Piece(g[0] * g[1] * 4, skey(e, m), positive=True)],
                                      "expert"))
        return out
    gu = [Piece(I * H * es, key(e, m)) for e in range(E) for m in ("gate", "up")]
    dn = [Piece(H * I * es, key(e, "down")) for e in range(E)]
    out.append(Tensor(p + "gate_up_proj", edt, [E, 2 * I, H], gu, "expert"))
    out.append(Tensor(p + "down_proj", edt, [E, H, I], dn, "expert"))
    if fp8:
        # packed scales: one block grid per expert matrix; gate and up are
        # blocked separately only when I is a multiple of the block
        if I % bl:
            sys.exit("make-synthetic-checkpoint: packed FP8 needs --moe-intermediate a multiple of %d" % bl)
        g_gu, g_d = grid(2 * I, H), grid(H, I)
        half = g_gu[0] // 2 * g_gu[1] * 4
        sgu = [Piece(half, skey(e, m), positive=True) for e in range(E) for m in ("gate", "up")]
        sdn = [Piece(g_d[0] * g_d[1] * 4, skey(e, "down"), positive=True) for e in range(E)]
        out.append(Tensor(p + "gate_up_proj_scale_inv", "F32", [E] + g_gu, sgu, "expert"))
        out.append(Tensor(p + "down_proj_scale_inv", "F32", [E] + g_d, sdn, "expert"))
    return out


def ple_tensors(a, p, k, ident, hch, heads):
    P, width = a.ple_embed_dim, a.ple_embed_dim // heads
    q = p + "ple."
    T = [
        random_tensor(q + "key_proj.weight", a.dtype, [hch, P], "ple"),
        random_tensor(q + "value_proj.weight", a.dtype, [a.hidden, P], "ple"),
        random_tensor(q + "norm_key.weight", a.dtype, [hch], "ple"),
        random_tensor(q + "norm_query.weight", a.dtype, [hch], "ple"),
        random_tensor(q + "norm_conv.weight", a.dtype, [hch], "ple"),
        random_tensor(q + "conv1d.weight", a.dtype, [hch, 1, a.ple_conv_kernel], "ple"),
    ]
    bufs = {"layer_multipliers": list(ident["multipliers"]),
            "ngram_heads_vocab_sizes": list(ident["head_sizes"]),
            "ngram_heads_offsets": list(ident["head_offsets"])}
    for spec in a.tamper_ple or []:
        which, _, idx = spec.partition(":")
        if which not in bufs:
            sys.exit("make-synthetic-checkpoint: --tamper-ple-buffer %s: unknown buffer" % spec)
        bufs[which][int(idx or 0)] += 2
    for which, vals in bufs.items():
        T.append(i64_tensor(q + "ple_embedding." + which, vals, "ple"))
    rows, es = ident["physical_rows"], DTYPE_SIZE[a.dtype]
    tkey = "PLE%d|%s" % (k, a.dtype)
    base = q + "ple_embedding.ngram_embedding."
    if a.ple_table == "whole":
        T.append(Tensor(base + "weight", a.dtype, [rows, width],
                        [Piece(rows * width * es, tkey)], "ple-table"))
    else:
        parts = a.split_ngram_parts
        if rows % parts:
            sys.exit("make-synthetic-checkpoint: %d PLE rows do not split into %d parts (use --ple-table whole)"
                     % (rows, parts))
        per = rows // parts * width * es
        for s in range(parts):
            T.append(Tensor(base + "shard_%d.weight" % s, a.dtype, [rows // parts, width],
                            [Piece(per, tkey, s * per)], "ple-table"))
    return T


def vision_tensors(a):
    """A depth-1 vision tower shaped like the upstream fixtures' (21 tensors)."""
    h, m, o = a.vision_hidden, 2 * a.vision_hidden, a.hidden
    mh = h * 4  # spatial_merge_size 2 -> 4 patches merged
    v = "model.visual."
    spec = [
        ("blocks.0.attn.proj.bias", [h]), ("blocks.0.attn.proj.weight", [h, h]),
        ("blocks.0.attn.qkv.bias", [3 * h]), ("blocks.0.attn.qkv.weight", [3 * h, h]),
        ("blocks.0.mlp.linear_fc1.bias", [m]), ("blocks.0.mlp.linear_fc1.weight", [m, h]),
        ("blocks.0.mlp.linear_fc2.bias", [h]), ("blocks.0.mlp.linear_fc2.weight", [h, m]),
        ("blocks.0.norm1.bias", [h]), ("blocks.0.norm1.weight", [h]),
        ("blocks.0.norm2.bias", [h]), ("blocks.0.norm2.weight", [h]),
        ("merger.linear_fc1.bias", [mh]), ("merger.linear_fc1.weight", [mh, mh]),
        ("merger.linear_fc2.bias", [o]), ("merger.linear_fc2.weight", [o, mh]),
        ("merger.norm.bias", [h]), ("merger.norm.weight", [h]),
        ("patch_embed.proj.bias", [h]), ("patch_embed.proj.weight", [h, 3, 2, 2, 2]),
        ("pos_embed.weight", [16, h]),
    ]
    return [random_tensor(v + n, a.dtype, s, "vision") for n, s in spec]


def mtp_tensors(a):
    """A one-layer multi-token-prediction head in the Qwen3-Next naming."""
    H, E, I = a.hidden, a.experts, a.moe_intermediate
    q, kv = a.heads * a.head_dim, a.kv_heads * a.head_dim
    m = "mtp."
    spec = [
        ("fc.weight", [H, 2 * H]), ("norm.weight", [H]),
        ("pre_fc_norm_embedding.weight", [H]), ("pre_fc_norm_hidden.weight", [H]),
        ("layers.0.input_layernorm.weight", [H]),
        ("layers.0.post_attention_layernorm.weight", [H]),
        ("layers.0.self_attn.q_proj.weight", [2 * q, H]),
        ("layers.0.self_attn.k_proj.weight", [kv, H]),
        ("layers.0.self_attn.v_proj.weight", [kv, H]),
        ("layers.0.self_attn.o_proj.weight", [H, q]),
        ("layers.0.self_attn.q_norm.weight", [a.head_dim]),
        ("layers.0.self_attn.k_norm.weight", [a.head_dim]),
        ("layers.0.mlp.gate.weight", [E, H]),
        ("layers.0.mlp.shared_expert.gate_proj.weight", [a.shared_intermediate, H]),
        ("layers.0.mlp.shared_expert.up_proj.weight", [a.shared_intermediate, H]),
        ("layers.0.mlp.shared_expert.down_proj.weight", [H, a.shared_intermediate]),
        ("layers.0.mlp.shared_expert_gate.weight", [1, H]),
    ]
    for e in range(min(E, 2)):
        spec += [("layers.0.mlp.experts.%d.gate_proj.weight" % e, [I, H]),
                 ("layers.0.mlp.experts.%d.up_proj.weight" % e, [I, H]),
                 ("layers.0.mlp.experts.%d.down_proj.weight" % e, [H, I])]
    return [random_tensor(m + n, a.dtype, s, "mtp") for n, s in spec]


def make_config(a, kinds, ple_ids):
    rotary = int(a.head_dim * a.partial_rotary)
    half = rotary // 2
    section = [half - 2 * (half // 3), half // 3, half // 3]
    sparse = "full_attention" if a.sparse_spelling == "full_attention" else "qwen_sparse_attention"
    text = {
        "model_type": "qwen4_exp_text",
        "vocab_size": a.vocab, "hidden_size": a.hidden,
        "num_hidden_layers": a.layers, "num_attention_heads": a.heads,
        "num_key_value_heads": a.kv_heads, "head_dim": a.head_dim,
        "hidden_act": "silu", "output_gate_type": "sigmoid",
        "max_position_embeddings": 4096, "rms_norm_eps": 1e-06,
        "tie_word_embeddings": a.lm_head == "tied", "attention_bias": False,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0,
                            "partial_rotary_factor": a.partial_rotary,
                            "mrope_section": section, "mrope_interleaved": True},
        "layer_types": ["linear_attention" if k == "L" else sparse for k in kinds],
        "linear_conv_kernel_dim": a.linear_conv_kernel,
        "linear_key_head_dim": a.linear_key_head_dim,
        "linear_value_head_dim": a.linear_value_head_dim,
        "linear_num_key_heads": a.linear_key_heads,
        "linear_num_value_heads": a.linear_value_heads,
        "moe_intermediate_size": a.moe_intermediate,
        "shared_expert_intermediate_size": a.shared_intermediate,
        "num_experts": a.experts, "num_experts_per_tok": a.top_k,
        "norm_topk_prob": True,
        "hc_count": a.hc_count, "hc_lowrank": a.hc_lowrank,
        "eos_token_id": a.vocab - 24, "pad_token_id": None, "bos_token_id": None,
        "number_of_conv_states": 3 if ple_ids else 1,
    }
    if "S" in kinds:
        text.update({"indexer_n_heads": a.indexer_heads, "indexer_kv_heads": 1,
                     "indexer_head_dim": a.indexer_head_dim,
                     "indexer_budget": a.indexer_budget,
                     "indexer_compress_ratio": a.indexer_compress_ratio})
    if ple_ids:
        text.update({"ple_layer_ids": ple_ids, "ple_embed_dim": a.ple_embed_dim,
                     "ple_conv_kernel_size": a.ple_conv_kernel,
                     "ngram_size": a.ngram_size, "heads_per_ngram": a.heads_per_ngram,
                     "ngram_vocab_size_base": a.ngram_base,
                     "make_ngram_vocab_size_divisible_by": a.ngram_divisor,
                     "split_ngram_parts": a.split_ngram_parts, "seed": a.config_seed})
    if a.mtp:
        text["mtp_num_hidden_layers"] = 1
    cfg = {"architectures": ["Qwen4ExpForConditionalGeneration"],
           "model_type": "qwen4_exp", "dtype": "bfloat16",
           "transformers_version": "5.17.0", "tie_word_embeddings": a.lm_head == "tied",
           "text_config": text}
    if a.vision:
        cfg["vision_config"] = {"model_type": "qwen4_exp_vision", "depth": 1,
                                "hidden_size": a.vision_hidden, "out_hidden_size": a.hidden,
                                "spatial_merge_size": 2, "patch_size": 2,
                                "temporal_patch_size": 2, "in_channels": 3}
        v = a.vocab
        cfg.update({"image_token_id": v - 3, "video_token_id": v - 2,
                    "vision_start_token_id": v - 5, "vision_end_token_id": v - 4})
    if a.expert_dtype == "F8_E4M3":
        cfg["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3",
                                      "activation_scheme": "dynamic",
                                      "weight_block_size": [a.fp8_block, a.fp8_block]}
    return cfg


# ------------------------------------------------------------ safetensors

def st_header(tensors):
    hdr, off = {"__metadata__": {"format": "pt"}}, 0
    for t in tensors:
        hdr[t.name] = {"dtype": t.dtype, "shape": t.shape, "data_offsets": [off, off + t.nbytes]}
        off += t.nbytes
    raw = json.dumps(hdr, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # as the reference writer pads
    return struct.pack("<Q", len(raw)) + raw


def split_shards(tensors, n):
    if n < 1 or n > len(tensors):
        sys.exit("make-synthetic-checkpoint: --shards must be in 1..%d" % len(tensors))
    total = sum(t.nbytes for t in tensors)
    shards, cur, acc = [], [], 0
    for i, t in enumerate(tensors):
        left = len(tensors) - i  # tensors not yet placed, this one included
        # close the current shard once it reached its share, keeping at least
        # one tensor for every shard still to come
        if cur and len(shards) < n - 1 and (acc >= total * (len(shards) + 1) / n
                                            or left == n - 1 - len(shards)):
            shards.append(cur)
            cur = []
        cur.append(t)
        acc += t.nbytes
    shards.append(cur)
    assert len(shards) == n
    return shards


def write_shard(path, tensors, seed):
    with open(path + ".tmp", "wb") as f:
        f.write(st_header(tensors))
        for t in tensors:
            for c in t.chunks(seed):
                f.write(c)
    os.replace(path + ".tmp", path)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    A = ap.add_argument
    A("--out", required=True, help="output directory (created; must be empty or absent)")
    A("--force", action="store_true", help="write into a non-empty --out")
    A("--seed", type=int, default=1, help="weight seed (default 1)")
    A("--summary", help="write the JSON summary here instead of stdout")
    g = ap.add_argument_group("geometry")
    for name, default in (("layers", 4), ("hidden", 64), ("vocab", 256),
                          ("experts", 8), ("top-k", 2), ("moe-intermediate", 64),
                          ("shared-intermediate", 32), ("heads", 4), ("kv-heads", 2),
                          ("head-dim", 32), ("hc-count", 4), ("hc-lowrank", 8),
                          ("linear-key-heads", 2), ("linear-value-heads", 4),
                          ("linear-key-head-dim", 16), ("linear-value-head-dim", 16),
                          ("linear-conv-kernel", 4), ("indexer-heads", 4),
                          ("indexer-head-dim", 16), ("indexer-budget", 16),
                          ("indexer-compress-ratio", 4), ("sparse-every", 4)):
        g.add_argument("--" + name, type=int, default=default, help="(default %d)" % default)
    g.add_argument("--partial-rotary", type=float, default=0.25)
    g.add_argument("--sparse-spelling", choices=["full_attention", "qwen_sparse_attention"],
                   default="full_attention",
                   help="how layer_types spells sparse layers (the released config: full_attention)")
    p = ap.add_argument_group("PLE")
    p.add_argument("--ple-layers", default="2",
                   help="comma-separated one-indexed linear layers ('' for none; default 2)")
    for name, default in (("ple-embed-dim", 64), ("ple-conv-kernel", 4), ("ngram-size", 3),
                          ("heads-per-ngram", 2), ("ngram-base", 100), ("ngram-divisor", 128),
                          ("split-ngram-parts", 4), ("config-seed", 1234)):
        p.add_argument("--" + name, type=int, default=default, help="(default %d)" % default)
    p.add_argument("--ple-table", choices=["shards", "whole"], default="shards",
                   help="ngram_embedding.shard_K.weight (as saved upstream) or one .weight")
    d = ap.add_argument_group("dtypes and layout")
    d.add_argument("--dtype", choices=["bf16", "f16", "f32"], default="bf16",
                   help="every floating-point tensor (default bf16)")
    d.add_argument("--expert-dtype", choices=["bf16", "f16", "f32", "fp8"],
                   help="routed experts (default: --dtype); fp8 = E4M3 + F32 weight_scale_inv")
    d.add_argument("--fp8-block", type=int, default=128)
    d.add_argument("--experts-layout", choices=["per-expert", "packed"], default="per-expert")
    d.add_argument("--shards", type=int, default=1,
                   help="number of .safetensors files; > 1 adds model.safetensors.index.json")
    d.add_argument("--vision", action="store_true", help="add a model.visual.* tower (21 tensors)")
    d.add_argument("--vision-hidden", type=int, default=16)
    d.add_argument("--mtp", action="store_true", help="add an mtp.* group")
    d.add_argument("--lm-head", choices=["separate", "tied", "embedding-copy"], default="separate",
                   help="tied: tie_word_embeddings and no lm_head tensor; embedding-copy: an untied "
                        "lm_head with the embedding's bytes (the control for tied)")
    t = ap.add_argument_group("defects (negative tests)")
    t.add_argument("--omit", action="append", help="leave out this tensor (repeatable)")
    t.add_argument("--extra", action="append", help="add this unknown BF16 [8] tensor (repeatable)")
    t.add_argument("--tamper-ple-buffer", dest="tamper_ple", action="append",
                   metavar="BUFFER:INDEX", help="add 2 to one stored PLE hash value (every PLE layer)")
    a = ap.parse_args(argv)
    names = {"bf16": "BF16", "f16": "F16", "f32": "F32", "fp8": "F8_E4M3"}
    a.dtype = names[a.dtype]
    a.expert_dtype = names[a.expert_dtype] if a.expert_dtype else a.dtype
    a.ple_layers = [int(x) for x in a.ple_layers.split(",") if x.strip()]
    return a


def main(argv):
    a = parse_args(argv)
    t0 = time.monotonic()
    tensors, ident, kinds, ple_ids = build(a)
    names = {t.name for t in tensors}
    for n in a.omit or []:
        if n not in names:
            sys.exit("make-synthetic-checkpoint: --omit %s: no such tensor" % n)
    tensors = [t for t in tensors if t.name not in set(a.omit or [])]
    for n in a.extra or []:
        tensors.append(random_tensor(n, "BF16", [8], "extra"))
    if os.path.isdir(a.out) and os.listdir(a.out) and not a.force:
        sys.exit("make-synthetic-checkpoint: %s is not empty (use --force)" % a.out)
    os.makedirs(a.out, exist_ok=True)
    shards = split_shards(tensors, a.shards)
    files = (["model.safetensors"] if a.shards == 1 else
             ["model-%05d-of-%05d.safetensors" % (k + 1, a.shards) for k in range(a.shards)])
    for f, ts in zip(files, shards):
        write_shard(os.path.join(a.out, f), ts, a.seed)
    total = sum(t.nbytes for t in tensors)
    if a.shards > 1:
        index = {"metadata": {"total_parameters": sum(math.prod(t.shape) for t in tensors),
                              "total_size": total},
                 "weight_map": {t.name: f for f, ts in zip(files, shards) for t in ts}}
        with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as fh:
            json.dump(index, fh, indent=2, sort_keys=True)
            fh.write("\n")
    with open(os.path.join(a.out, "config.json"), "w") as fh:
        json.dump(make_config(a, kinds, ple_ids), fh, indent=2, sort_keys=True)
        fh.write("\n")
    groups = {}
    for t in tensors:
        g = groups.setdefault(t.group, {"tensors": 0, "bytes": 0})
        g["tensors"] += 1
        g["bytes"] += t.nbytes
    summary = {
        "schema": "hebrus-synthetic-checkpoint-v1",
        "provenance": "contract-control (synthetic weights; not an upstream capture)",
        "seed": a.seed, "tensors": len(tensors), "bytes": total,
        "files": {f: {"tensors": len(ts), "bytes": os.path.getsize(os.path.join(a.out, f))}
                  for f, ts in zip(files, shards)},
        "groups": groups,
        "ple": [{"layer_id": lid, "multipliers": [str(m) for m in x["multipliers"]],
                 "head_sizes": x["head_sizes"], "head_offsets": x["head_offsets"],
                 "logical_rows": x["logical_rows"], "physical_rows": x["physical_rows"]}
                for lid, x in zip(ple_ids, ident)],
        "seconds": round(time.monotonic() - t0, 3),
    }
    text = json.dumps(summary, indent=2, sort_keys=True) + "\n"
    if a.summary:
        with open(a.summary, "w") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
