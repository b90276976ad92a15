#!/usr/bin/env python3
"""bench/gpu-upstream.py: upstream transformers' Qwen4Exp on the GPU, the
baseline of bench/gpu-replay.sh (GPU machine only: torch, transformers 5.17).

The real layer geometry (hidden 2560, 32 heads x 256, 2 KV heads, GDN 16 key
/ 48 value heads of 128, indexer 16 heads x 128 with budget 2048 and ratio
4, 512 experts of width 640, top-10, shared expert 640, hc_count 4,
hc_lowrank 320), LAYERS layers (`L L L S` repeated), random bf16 weights
made on the GPU, no PLE table, SDPA attention, one causal chunk of T tokens
per forward (no cache).  Prints one line per T:

  upstream T=1024 layers=8: 0.123 s/chunk, 8325.2 tokens/s, 12.3 TFLOP/s, MFU 0.016

FLOPs counted: 2 x the parameters a token uses (dense matrices whole,
routed experts top_k / num_experts of theirs; not the embedding, a lookup,
nor lm_head: a replay chunk needs no logits, and only the last position's
are computed here, as hb-replay label computes none), plus attention over the visible keys of the sparse layers (at most
budget + ratio - 1 per query: QSA's work, not a dense mask's).  MFU is
against --peak (default 790 TFLOP/s, the bf16 rate measured on random data
on this GPU kind).
"""
import argparse
import sys
import time

import torch

L, S = "linear_attention", "qwen_sparse_attention"


def config(layers, vocab, every=4):
    from transformers import Qwen4ExpConfig
    text = dict(
        vocab_size=vocab, hidden_size=2560, num_hidden_layers=layers,
        layer_types=[S if (i + 1) % every == 0 else L for i in range(layers)],
        num_attention_heads=32, num_key_value_heads=2, head_dim=256,
        rope_parameters={"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                         "mrope_section": [11, 11, 10], "mrope_interleaved": True},
        linear_conv_kernel_dim=4, linear_key_head_dim=128, linear_value_head_dim=128,
        linear_num_key_heads=16, linear_num_value_heads=48,
        hc_count=4, hc_lowrank=320,
        ple_layer_ids=[],
        indexer_n_heads=16, indexer_kv_heads=1, indexer_head_dim=128, indexer_budget=2048,
        indexer_compress_ratio=4,
        num_experts=512, num_experts_per_tok=10, moe_intermediate_size=640, shared_expert_intermediate_size=640,
        output_gate_type="sigmoid", hidden_act="silu", rms_norm_eps=1e-6, max_position_embeddings=65536,
        eos_token_id=vocab - 1, tie_word_embeddings=False,
    )
    vision = dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2, in_channels=3, patch_size=2,
                  spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=16,
                  rope_parameters={"rope_type": "axial", "rope_theta": 10000.0}, out_hidden_size=2560)
    return Qwen4ExpConfig(text_config=text, vision_config=vision, tie_word_embeddings=False,
                          image_token_id=vocab - 5, video_token_id=vocab - 4, vision_start_token_id=vocab - 3,
                          vision_end_token_id=vocab - 2), text


def flops_per_token(model, text, T):
    used = 0
    E, k = text["num_experts"], text["num_experts_per_tok"]
    for name, p in model.named_parameters():
        if "visual" in name or "embed_tokens" in name or "lm_head" in name or p.dim() < 2:
            continue
        used += p.numel() * (k / E if ".experts." in name else 1)
    f = 2.0 * used
    # attention: q.k and p.v over the visible keys, per sparse layer and head
    sparse = sum(1 for t in text["layer_types"] if t == S)
    width = min((T + 1) / 2, text["indexer_budget"] + text["indexer_compress_ratio"] - 1)
    f += sparse * text["num_attention_heads"] * 4.0 * text["head_dim"] * width
    return f


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--sparse-every", type=int, default=4, help="every N-th layer QSA, the rest GDN (default 4)")
    ap.add_argument("--vocab", type=int, default=151936)
    ap.add_argument("--tokens", default="1024,4096,16384")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--peak", type=float, default=790e12)
    a = ap.parse_args()
    from transformers import Qwen4ExpForConditionalGeneration
    cfg, text = config(a.layers, a.vocab, a.sparse_every)
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    t0 = time.time()
    # made in bf16 from the start: a float32 model of 8 real layers (about
    # 80 GiB) does not fit an H100 before its .to(bfloat16)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = Qwen4ExpForConditionalGeneration(cfg).eval()
    torch.set_default_dtype(torch.float32)
    torch.cuda.synchronize()
    print("# upstream: model built on the GPU in %.1f s, %.2f G parameters, %.1f GiB allocated"
          % (time.time() - t0, sum(p.numel() for p in model.parameters()) / 1e9,
             torch.cuda.memory_allocated() / 2**30), flush=True)
    for T in [int(x) for x in a.tokens.split(",")]:
        ids = torch.randint(0, a.vocab - 8, (1, T), device="cuda")
        try:
            with torch.no_grad():
                model(input_ids=ids, use_cache=False, logits_to_keep=1)  # warm-up
                torch.cuda.synchronize()
                t0 = time.time()
                for _ in range(a.reps):
                    model(input_ids=ids, use_cache=False, logits_to_keep=1)
                torch.cuda.synchronize()
                dt = (time.time() - t0) / a.reps
        except Exception as e:  # an out-of-memory at the longest chunk is a result too
            print("upstream T=%d layers=%d: failed: %s" % (T, a.layers, str(e).splitlines()[0][:200]), flush=True)
            torch.cuda.empty_cache()
            continue
        f = flops_per_token(model, text, T)
        print("upstream T=%d layers=%d: %.3f s/chunk, %.1f tokens/s, %.1f TFLOP/s, MFU %.4f"
              % (T, a.layers, dt, T / dt, f * T / dt / 1e12, f * T / dt / a.peak), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
