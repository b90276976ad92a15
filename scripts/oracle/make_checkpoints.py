"""Build the tiny Qwen4Exp checkpoints with upstream's own classes and save_pretrained.

Usage (device): python3 make_checkpoints.py --out DIR
Writes DIR/<name>/checkpoint/ and DIR/<name>/build.json (facts for capture.py).

Why this shape: weights are random but rounded to bfloat16 *before* saving so the
bf16 file is an exact image of the float32 model the oracle runs (no rounding
noise between what a converter reads and what upstream computed). Every norm,
conv and gate gets non-trivial random values, because upstream's init zeroes
RMSNorm weights (1+w convention) and the PLE conv, which would hide bugs.
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

L, S = "linear_attention", "qwen_sparse_attention"

# realshape: the released checkpoint's structure in miniature (full_attention
# spelling, sigmoid output gate, one PLE layer, ple_embed_dim != hidden_size,
# partial rotary 0.25, interleaved mrope keys, sharded files + index).
REALSHAPE = dict(
    vocab_size=1024, hidden_size=64, num_hidden_layers=8,
    layer_types=[L, L, L, S, L, L, L, S],
    num_attention_heads=4, num_key_value_heads=2, head_dim=32,
    rope_parameters={"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                     "mrope_section": [2, 1, 1], "mrope_interleaved": True},
    linear_conv_kernel_dim=4, linear_key_head_dim=16, linear_value_head_dim=16,
    linear_num_key_heads=2, linear_num_value_heads=4,
    hc_count=4, hc_lowrank=8,
    ple_layer_ids=[2], ple_embed_dim=80, ple_conv_kernel_size=4, ngram_size=3, heads_per_ngram=8,
    ngram_vocab_size_base=1000, make_ngram_vocab_size_divisible_by=128, split_ngram_parts=4, seed=1234,
    indexer_n_heads=8, indexer_kv_heads=1, indexer_head_dim=16, indexer_budget=16, indexer_compress_ratio=4,
    num_experts=32, num_experts_per_tok=10, moe_intermediate_size=64, shared_expert_intermediate_size=16,
    output_gate_type="sigmoid", hidden_act="silu", rms_norm_eps=1e-6, max_position_embeddings=4096,
    eos_token_id=1000, tie_word_embeddings=False,
)

# general: upstream's general form (PLE on several layers incl. layer index 0,
# ngram_size 4, SiLU output gate by default, list eos, GQA 3, value/key head
# ratio 3, hc_count 3, rotary == indexer head dim, compress ratio 2).
GENERAL = dict(
    vocab_size=768, hidden_size=48, num_hidden_layers=6,
    layer_types=[L, L, S, L, L, S],
    num_attention_heads=6, num_key_value_heads=2, head_dim=16,
    rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
                     "mrope_section": [2, 1, 1], "mrope_interleaved": True},
    linear_conv_kernel_dim=4, linear_key_head_dim=8, linear_value_head_dim=12,
    linear_num_key_heads=2, linear_num_value_heads=6,
    hc_count=3, hc_lowrank=6,
    ple_layer_ids=[1, 5], ple_conv_kernel_size=3, ngram_size=4, heads_per_ngram=4,
    ngram_vocab_size_base=500, make_ngram_vocab_size_divisible_by=64, split_ngram_parts=2, seed=77,
    indexer_n_heads=6, indexer_kv_heads=1, indexer_head_dim=8, indexer_budget=8, indexer_compress_ratio=2,
    num_experts=40, num_experts_per_tok=10, moe_intermediate_size=8, shared_expert_intermediate_size=12,
    hidden_act="silu", rms_norm_eps=1e-6, max_position_embeddings=4096,
    eos_token_id=[700, 701], tie_word_embeddings=False,
)

VISION = dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2, in_channels=3, patch_size=2,
              spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=16,
              rope_parameters={"rope_type": "axial", "rope_theta": 10000.0})

SPECS = {
    # name: (text, special token ids inside vocab, save kwargs, torch seed)
    "realshape": (REALSHAPE, dict(image_token_id=1021, video_token_id=1022, vision_start_token_id=1019,
                                  vision_end_token_id=1020), dict(max_shard_size="1MB"), 20260101),
    "general": (GENERAL, dict(image_token_id=765, video_token_id=766, vision_start_token_id=763,
                              vision_end_token_id=764), dict(), 20260202),
}


def build_config(name):
    from transformers import Qwen4ExpConfig
    text, special, _, _ = SPECS[name]
    vision = dict(VISION, out_hidden_size=text["hidden_size"])
    return Qwen4ExpConfig(text_config=dict(text), vision_config=vision, tie_word_embeddings=False, **special)


@torch.no_grad()
def randomize(model, seed):
    """Deterministic non-trivial weights for the text model (vision keeps upstream init)."""
    g = torch.Generator().manual_seed(seed)
    for name, p in sorted(model.named_parameters()):
        if ".visual." in name or name.startswith("model.visual"):
            continue
        if name.endswith("linear_attn.norm.weight"):
            # RMSNormGated multiplies by `weight` (ones-init, NOT 1+w).
            v = 1.0 + 0.2 * torch.randn(p.shape, generator=g)
        elif name.endswith("A_log"):
            v = torch.empty(p.shape).uniform_(0.01, 16, generator=g).log()
        elif name.endswith("dt_bias"):
            v = 1.0 + 0.5 * torch.randn(p.shape, generator=g)
        elif p.dim() == 1 and "norm" in name:
            # zero-centred RMSNorm: effective scale is 1 + w.
            v = 0.2 * torch.randn(p.shape, generator=g)
        elif "conv1d" in name:
            v = 0.4 * torch.randn(p.shape, generator=g)
        elif name.endswith("embed_tokens.weight") or "ngram_embedding" in name:
            v = torch.randn(p.shape, generator=g)
        elif name.endswith("mlp.gate.weight"):
            # wide router logits: keeps the top-k margin far above f32 noise.
            v = (2.0 / p.shape[-1] ** 0.5) * torch.randn(p.shape, generator=g)
        else:
            v = (1.0 / p.shape[-1] ** 0.5) * torch.randn(p.shape, generator=g)
        p.copy_(v.reshape(p.shape))
    # every float weight (and float buffer) becomes exactly bf16-representable
    for t in list(model.parameters()) + list(model.buffers()):
        if t.is_floating_point():
            t.copy_(t.to(torch.bfloat16).float())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", nargs="*")
    args = ap.parse_args()
    from transformers import Qwen4ExpForConditionalGeneration
    torch.use_deterministic_algorithms(True)
    for name, (text, special, save_kw, seed) in SPECS.items():
        if args.only and name not in args.only:
            continue
        torch.manual_seed(seed)
        cfg = build_config(name)
        model = Qwen4ExpForConditionalGeneration(cfg).eval()
        randomize(model, seed)
        ref = {k: v.detach().clone() for k, v in model.state_dict().items()}
        runtime_names = {k: [list(v.shape), str(v.dtype)] for k, v in ref.items()}
        ck = os.path.join(args.out, name, "checkpoint")
        os.makedirs(ck, exist_ok=True)
        model.to(torch.bfloat16).save_pretrained(ck, **save_kw)

        # config.json as saved, then the spelling fixes the task requires.
        cpath = os.path.join(ck, "config.json")
        with open(cpath) as f:
            doc = json.load(f)
        saved_raw = json.loads(json.dumps(doc))
        tc = doc["text_config"]
        assert S in tc["layer_types"], tc.get("layer_types")
        if name == "realshape":
            # The released checkpoint spells QSA layers "full_attention".
            tc["layer_types"] = ["full_attention" if t == S else t for t in tc["layer_types"]]
            tc["seed"] = text["seed"]  # diff-serialisation drops defaults; keep it explicit
            tc["output_gate_type"] = "sigmoid"
        else:
            tc.pop("output_gate_type", None)  # absent => hidden_act (silu)
            tc["seed"] = text["seed"]
        for k in ("ple_layer_ids", "split_ngram_parts", "ngram_vocab_size_base", "eos_token_id",
                  "indexer_budget", "num_experts"):
            assert k in tc, "saved config lacks " + k
        omitted = sorted(k for k in text if k not in tc)  # defaults dropped by diff serialisation
        print(name, "text_config keys omitted by save_pretrained:", omitted, flush=True)
        with open(cpath, "w") as f:
            json.dump(doc, f, indent=2, sort_keys=True)
            f.write("\n")

        # Reload through upstream: weights bit-identical, layer types resolved.
        re = Qwen4ExpForConditionalGeneration.from_pretrained(ck, dtype=torch.float32,
                                                              attn_implementation="eager").eval()
        got = re.state_dict()
        missing = sorted(set(ref) - set(got))
        extra = sorted(set(got) - set(ref))
        assert not missing and not extra, (missing[:5], extra[:5])
        for k, v in ref.items():
            assert got[k].dtype == v.dtype and torch.equal(got[k], v), "reload mismatch " + k
        resolved = list(re.config.text_config.layer_types)
        assert resolved == text["layer_types"], resolved
        assert (re.config.text_config.output_gate_type or re.config.text_config.hidden_act) == \
            ("sigmoid" if name == "realshape" else "silu")
        build = {
            "name": name, "torch_seed": seed, "save_kwargs": save_kw,
            "config_as_saved_by_save_pretrained": saved_raw,
            "config_edits": ("text_config.layer_types qwen_sparse_attention->full_attention; seed, "
                             "output_gate_type made explicit") if name == "realshape" else
                            "text_config.output_gate_type removed; seed made explicit",
            "reload_check": {"identical_tensors": len(ref), "resolved_layer_types": resolved},
            "text_keys_omitted_by_save_pretrained": omitted,
            "runtime_state_dict": runtime_names,
        }
        with open(os.path.join(args.out, name, "build.json"), "w") as f:
            json.dump(build, f, indent=1)
        print(name, "saved:", sorted(os.listdir(ck)), "tensors", len(ref), flush=True)


if __name__ == "__main__":
    main()
