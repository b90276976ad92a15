#!/usr/bin/env python3
"""make-draft.py: write a DFlash2 draft directory that hb-admit --draft
admits against ARTIFACT (a contract control for tests/cli/draft.bats), then
apply the mutations given.

usage: make-draft.py ARTIFACT DIR [MUTATION...]
  KEY=JSON           set config member KEY (dotted: dflash_config.verifier)
  -KEY               delete config member KEY
  rename:OLD:NEW     rename tensor OLD (same shape and bytes)
  drop:NAME          leave tensor NAME out
  shape:NAME:A,B     give tensor NAME another shape (bytes to match)
  dtype:NAME:DT      store tensor NAME as DT (F16, F32, BF16, I32)

The target's side is read from the artifact's GGUF header: vocabulary,
layers, hidden width, rope base, context, EOS, and the identity strings
(hebrus.source.revision or the inventory digest; the tokenizer digest or
"none").  The draft's own geometry is small and fixed.  Tensors are zeros.
Python standard library only.
"""
import json
import os
import struct
import sys

SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
FMT = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<B",
       10: "<Q", 11: "<q", 12: "<d"}


def gguf_kv(path):
    with open(path, "rb") as f:
        buf = f.read(1 << 22)
    assert buf[:4] == b"GGUF", path
    _, nkv = struct.unpack_from("<QQ", buf, 8)
    off, kv = 24, {}

    def rstr(o):
        n, = struct.unpack_from("<Q", buf, o)
        return buf[o + 8:o + 8 + n].decode("utf-8", "replace"), o + 8 + n
    for _ in range(nkv):
        key, off = rstr(off)
        t, = struct.unpack_from("<I", buf, off)
        off += 4
        if t == 8:
            kv[key], off = rstr(off)
        elif t == 9:
            et, n = struct.unpack_from("<IQ", buf, off)
            off += 12
            vals = []
            for _ in range(n):
                if et == 8:
                    v, off = rstr(off)
                else:
                    v, = struct.unpack_from(FMT[et], buf, off)
                    off += SIZES[et]
                vals.append(v)
            kv[key] = vals
        else:
            kv[key], = struct.unpack_from(FMT[t], buf, off)
            off += SIZES[t]
    return kv


def config_for(kv):
    rev = kv.get("hebrus.source.revision") or "inventory:" + kv["hebrus.source.inventory_sha256"]
    return {
        "architectures": ["DFlash2DraftModel"],
        "model_type": "qwen3",
        "vocab_size": kv["qwen4exp.vocab_size"],
        "num_target_layers": kv["qwen4exp.block_count"],
        "hidden_size": kv["qwen4exp.embedding_length"],
        "eos_token_id": kv["qwen4exp.eos_token_ids"][0],
        "rope_theta": kv["qwen4exp.rope.freq_base"],
        "max_position_embeddings": kv["qwen4exp.context_length"],
        "block_size": 5,
        "num_hidden_layers": 1,
        "intermediate_size": 32,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 16,
        "dflash_config": {
            "target_layer_ids": [1, 4, 6],
            "mask_token_id": 3,
            "num_candidates": 4,
            "verifier": "greedy",
            "rollback": "transactional-prefix",
            "target_revision": rev,
            "tokenizer_sha256": kv.get("hebrus.tokenizer.sha256", "none"),
        },
    }


def tensors_for(c):
    H, I, hd = c["hidden_size"], c["intermediate_size"], c["head_dim"]
    nh, nkv = c["num_attention_heads"], c["num_key_value_heads"]
    ncap = len(c["dflash_config"]["target_layer_ids"])
    t = {"fc.weight": [H, ncap * H], "hidden_norm.weight": [H], "norm.weight": [H]}
    for i in range(c["num_hidden_layers"]):
        p = "layers.%d." % i
        t.update({p + "input_layernorm.weight": [H], p + "post_attention_layernorm.weight": [H],
                  p + "self_attn.q_proj.weight": [nh * hd, H], p + "self_attn.k_proj.weight": [nkv * hd, H],
                  p + "self_attn.v_proj.weight": [nkv * hd, H], p + "self_attn.o_proj.weight": [H, nh * hd],
                  p + "self_attn.q_norm.weight": [hd], p + "self_attn.k_norm.weight": [hd],
                  p + "mlp.gate_proj.weight": [I, H], p + "mlp.up_proj.weight": [I, H],
                  p + "mlp.down_proj.weight": [H, I]})
    return {k: [v, "BF16"] for k, v in t.items()}


def write_safetensors(path, tensors):
    isz = {"BF16": 2, "F16": 2, "F32": 4, "I32": 4}
    header, off = {}, 0
    for name, (shape, dt) in tensors.items():
        n = isz[dt]
        for d in shape:
            n *= d
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + bytes(off))


def setkey(c, key, value):
    parts = key.split(".")
    for p in parts[:-1]:
        c = c[p]
    if value is None:
        del c[parts[-1]]
    else:
        c[parts[-1]] = value


def main(argv):
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    c = config_for(gguf_kv(argv[1]))
    tensor_muts = []
    for m in argv[3:]:
        if m.startswith(("rename:", "drop:", "shape:", "dtype:")):
            tensor_muts.append(m.split(":"))
        elif m.startswith("-"):
            setkey(c, m[1:], None)
        else:
            k, v = m.split("=", 1)
            setkey(c, k, json.loads(v))
    t = tensors_for(config_for(gguf_kv(argv[1])))
    for m in tensor_muts:
        if m[0] == "rename":
            t[m[2]] = t.pop(m[1])
        elif m[0] == "drop":
            del t[m[1]]
        elif m[0] == "shape":
            t[m[1]][0] = [int(x) for x in m[2].split(",")]
        elif m[0] == "dtype":
            t[m[1]][1] = m[2]
    os.makedirs(argv[2], exist_ok=True)
    with open(os.path.join(argv[2], "config.json"), "w") as f:
        json.dump(c, f, indent=1)
    write_safetensors(os.path.join(argv[2], "model.safetensors"), t)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
