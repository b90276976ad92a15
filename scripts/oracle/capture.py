"""Run pinned upstream Qwen4Exp (float32, CPU, eager) on fixed prompts and record
what it computes, through forward hooks only (upstream code is not modified).

Usage (device): python3 capture.py --root DIR realshape general
Reads DIR/<name>/checkpoint + build.json, writes DIR/<name>/oracle/.
"""
import argparse
import json
import os
import random
import sys

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import xcheck  # noqa: E402
from common import Oracle, checkpoint_block, producer  # noqa: E402

DECODE_STEPS = 12
UP, XC, CC, DV = "upstream-capture", "independent-cross-check", "contract-control", "derived"


def make_prompts(name, eos_ids):
    """Author-chosen token ids (contract controls): EOS mid-prompt resets the
    PLE n-gram history; a prompt ending on EOS carries the reset into decode."""
    rng = random.Random("hebrus-oracle-" + name)
    eos = eos_ids[0]

    def draw(n):
        return [rng.randrange(1, min(eos_ids)) for _ in range(n)]

    if name == "realshape":
        p0, p1, p2 = draw(24), draw(40), draw(64)
        p1[17] = eos
        p2[-1] = eos
        notes = ["plain", "EOS at index 17 (PLE history reset)", "64 tokens ending in EOS (reset carried into decode)"]
    else:
        p0, p1, p2 = draw(28), draw(48), draw(33)
        p0[10] = eos_ids[1]  # second listed eos id: upstream resets only on eos_token_id[0]
        p1[20] = p1[21] = eos
        p2[0] = eos
        notes = ["contains eos_token_id[1]=%d (NOT a PLE reset upstream)" % eos_ids[1],
                 "two consecutive EOS at 20,21", "starts with EOS, odd length"]
    return [("p%d" % i, p, n) for i, (p, n) in enumerate(zip((p0, p1, p2), notes))]


class TopkSpy(TorchFunctionMode):
    """Records every topk inside the QSA indexer: its input (block scores) and
    the indices it returns (block rank order)."""

    def __init__(self, sink):
        super().__init__()
        self.sink = sink

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if getattr(func, "__name__", "") == "topk":
            self.sink.append((args[0].detach().float().clone(), out.indices.detach().clone()))
        return out


class Recorder:
    def __init__(self, model):
        self.text = model.model.language_model
        self.cfg = self.text.config
        self.rec = {}
        t = self.text
        t.embed_tokens.register_forward_hook(lambda m, a, o: self.put("emb", o))
        t.hyper_connection_mixer.register_forward_hook(lambda m, a, o: self.put("final", o))
        t.layers[0].register_forward_pre_hook(
            lambda m, a, k: self.put("hin", a[0] if a else k["hidden_states"]), with_kwargs=True)
        for i, layer in enumerate(t.layers):
            layer.register_forward_hook(self.saver(("hid", i)))
            layer.mlp.register_forward_hook(self.saver(("moe_out", i)))
            layer.mlp.gate.register_forward_hook(self.saver(("router", i)))
            mixer = layer.linear_attn if layer.layer_type == "linear_attention" else layer.self_attn
            mixer.register_forward_hook(self.saver(("attn_out", i)))
            if layer.ple is not None:
                layer.ple.register_forward_hook(self.saver(("ple_out", i)))
                layer.ple.ple_embedding.ngram_embedding.register_forward_pre_hook(
                    lambda m, a, i=i: self.put(("ple_ids", i), a[0]))
            if layer.layer_type != "linear_attention":
                idx = layer.self_attn.indexer
                idx.register_forward_hook(self.saver(("qsa_mask", i)))
                idx.forward = self.spy(idx.forward, i)

    def put(self, key, val):
        assert key not in self.rec, key  # each module runs once per forward
        self.rec[key] = val.detach().clone() if torch.is_tensor(val) else val

    def saver(self, key):
        def hook(m, a, o):
            if key[0] == "router":
                self.put(key, tuple(x.detach().clone() for x in o))
            else:
                self.put(key, o[0] if isinstance(o, tuple) else o)
        return hook

    def spy(self, fwd, i):
        def wrapped(*a, **k):
            sink = []
            with TopkSpy(sink):
                out = fwd(*a, **k)
            self.put(("qsa_topk", i), sink)
            return out
        return wrapped


def forward_arrays(rec, model_out, cfg, pos0, T):
    """Turn one forward's hooked tensors into named numpy arrays (T leading rows)."""
    hc, H = cfg.hc_count, cfg.hidden_size
    A = {}
    A["emb"] = rec["emb"][0].numpy()
    # layer-0 input must be the embedding repeated over the hc streams (stream-major
    # [T, hc*H]); asserted instead of stored to keep the fixture small.
    hin = rec["hin"][0].reshape(T, hc, H).numpy()
    assert np.array_equal(hin, np.repeat(A["emb"][:, None, :], hc, 1)), "layer-0 input is not repeat(emb)"
    A["final"] = rec["final"][0].numpy()
    A["logits"] = model_out.logits[0].detach().numpy()
    ratio, budget = cfg.indexer_compress_ratio, cfg.indexer_budget
    btk = budget // ratio
    for i in range(cfg.num_hidden_layers):
        L = "L%02d" % i
        A["hid/" + L] = rec[("hid", i)][0].reshape(T, hc, H).numpy()
        A["attn_out/" + L] = rec[("attn_out", i)][0].numpy()
        A["moe_out/" + L] = rec[("moe_out", i)][0].numpy()
        logits, w, ids = rec[("router", i)]
        A["route/logits/" + L] = logits.numpy()
        A["route/ids/" + L] = ids.numpy()
        A["route/w/" + L] = w.numpy()
        if ("ple_ids", i) in rec:
            A["ple/ids/" + L] = rec[("ple_ids", i)][0].numpy()
            A["ple_out/" + L] = rec[("ple_out", i)][0].reshape(T, hc, H).numpy()
        if ("qsa_mask", i) in rec:
            m = rec[("qsa_mask", i)][0, 0]
            chosen = m if m.dtype == torch.bool else (m == 0)
            width = budget + ratio - 1
            sel = np.full((T, width), -1, np.int64)
            cnt = np.zeros(T, np.int64)
            for r in range(T):
                s = torch.nonzero(chosen[r]).flatten().numpy()  # ascending key positions
                assert len(s) <= width
                sel[r, :len(s)] = s
                cnt[r] = len(s)
            calls = rec[("qsa_topk", i)]
            nblk = [(pos0 + r + 1) // ratio for r in range(T)]
            rows = [r for r in range(T) if nblk[r] > 0]
            assert len(calls) == len(rows), (len(calls), len(rows))
            blk = np.full((T, btk), -1, np.int64)
            score = np.zeros((T, max(1, (pos0 + T) // ratio)), np.float32)
            for r, (sc, ix) in zip(rows, calls):
                assert sc.shape == (nblk[r],), (sc.shape, nblk[r])
                score[r, :nblk[r]] = sc.numpy()
                blk[r, :len(ix)] = ix.numpy()
            A["qsa/sel/" + L], A["qsa/cnt/" + L] = sel, cnt
            A["qsa/blk/" + L], A["qsa/score/" + L] = blk, score
            A["qsa/nblk/" + L] = np.array(nblk, np.int64)
            # relu(scores).sum can be exactly 0 for several blocks; torch.topk's
            # order among equal values is implementation-defined, so flag rows
            # where ties decide the selected set (bit 0) or only the rank order (bit 1).
            tie = np.zeros(T, np.int64)
            for r in rows:
                sv = sorted(score[r, :nblk[r]].tolist(), reverse=True)
                k = min(btk, nblk[r])
                if k < nblk[r] and sv[k - 1] == sv[k]:
                    tie[r] |= 1
                if any(sv[j] == sv[j + 1] for j in range(k - 1)):
                    tie[r] |= 2
            A["qsa/tie/" + L] = tie
    return A


def cat_rows(parts):
    """Stack per-step arrays along rows, padding ragged widths (-1 ints, 0 floats)."""
    out = {}
    for k in parts[0]:
        xs = [p[k] for p in parts]
        if xs[0].ndim == 2 and len({x.shape[1] for x in xs}) > 1:
            w = max(x.shape[1] for x in xs)
            fill = 0 if xs[0].dtype.kind == "f" else -1
            xs = [np.pad(x, ((0, 0), (0, w - x.shape[1])), constant_values=fill) for x in xs]
        out[k] = np.concatenate(xs, 0)
    return out


I64_KEYS = ("ple/ids", "in_ids", "next_ids")  # token / PLE row ids stay int64 like upstream
DERIVED_KEYS = ("qsa/nblk", "qsa/tie", "in_ids", "next_ids")


def dtype_of(a, key=""):
    if a.dtype.kind == "f":
        return "f32"
    return "i64" if any(key.startswith(k) for k in I64_KEYS) else "i32"


SOURCES = {
    "emb": "hook: language_model.embed_tokens output [T,H]",
    "final": "hook: language_model.hyper_connection_mixer output [T,H]",
    "logits": "Qwen4ExpForConditionalGeneration.forward().logits [T,V]",
    "hid": "hook: Qwen4ExpTextDecoderLayer output reshaped [T,hc,H]",
    "attn_out": "hook: linear_attn / self_attn output (before injection) [T,H]",
    "moe_out": "hook: mlp (Qwen4ExpTextSparseMoeBlock) output incl. shared expert [T,H]",
    "ple_out": "hook: Qwen4ExpTextPLELayer output (added to the hc input) [T,hc,H]",
    "route/logits": "hook: mlp.gate (Qwen4ExpTextTopKRouter) output[0] router_logits [T,E]",
    "route/ids": "hook: mlp.gate output[2] router_indices, torch.topk rank order [T,k]",
    "route/w": "hook: mlp.gate output[1] renormalised top-k weights [T,k]",
    "ple/ids": "pre-hook: ple.ple_embedding.ngram_embedding input (row ids incl. head offsets) [T,heads]",
    "qsa/sel": "hook: self_attn.indexer output mask -> selected key positions, ASCENDING, -1 padded [T,budget+ratio-1]",
    "qsa/cnt": "hook: self_attn.indexer output mask -> number of selected positions [T]",
    "qsa/blk": "TorchFunctionMode spy on Tensor.topk inside indexer.forward: returned block indices, rank order, -1 padded [T,budget/ratio]",
    "qsa/score": "TorchFunctionMode spy on Tensor.topk inside indexer.forward: its input (per-block score), 0 padded beyond nblk [T,max nblk]",
    "qsa/nblk": "complete blocks visible to the query = (pos+1)//ratio; asserted equal to the length of the topk input",
    "qsa/tie": "from captured block scores: bit0 = equal scores straddle the top-k cut (selected SET tie-dependent), "
               "bit1 = equal scores inside the kept ranks (rank ORDER tie-dependent)",
}


def source_of(key):
    base = key.rsplit("/", 1)[0] if key.split("/")[-1].startswith("L") else key
    return SOURCES[base]


def emit(O, prefix, A, tokens, positions, cfg, k_top):
    """Write one group's upstream arrays + independent cross-checks."""
    stats = {"min_route_margin": None}
    for key in sorted(A):
        a = A[key]
        # AFN-014: only what upstream's code emitted is an upstream-capture.  The greedy
        # ids are argmaxes this script takes (its own first-maximum policy) and nblk/tie
        # are our bookkeeping, so they are derived (tests/fixtures/upstream/PROVENANCE.rules).
        prov = DV if key.startswith(DERIVED_KEYS) else UP
        O.add(prefix + key, a, dtype_of(a, key), prov, source_of(key))
    eos = cfg.eos_token_id[0] if isinstance(cfg.eos_token_id, list) else cfg.eos_token_id
    margins, tstats = [], []
    for i in range(cfg.num_hidden_layers):
        L = "L%02d" % i
        ids, w, margin = xcheck.router(A["route/logits/" + L], k_top, cfg.norm_topk_prob)
        assert np.array_equal(ids, A["route/ids/" + L]), prefix + " router ids differ at " + L
        assert np.abs(w - A["route/w/" + L]).max() <= 2e-6, prefix + " router weights differ " + L
        margins.append(float(margin.min()))
        src = "xcheck.router: float64 softmax of captured router logits, stable descending top-k, renormalise"
        O.add(prefix + "xc/route/ids/" + L, ids, "i32", XC, src, prefix + "route/ids/" + L)
        O.add(prefix + "xc/route/w/" + L, w, "f32", XC, src, prefix + "route/w/" + L, atol=2e-6)
        if "ple/ids/" + L in A:
            pidx = cfg.ple_layer_ids.index(i + 1)
            rows, _, _, _ = xcheck.ple_row_ids(tokens, positions, eos, cfg.vocab_size, cfg.ngram_size,
                                               cfg.heads_per_ngram, cfg.ngram_vocab_size_base, cfg.seed, pidx)
            assert np.array_equal(rows, A["ple/ids/" + L]), prefix + " PLE ids differ at " + L
            O.add(prefix + "xc/ple/ids/" + L, rows, "i64", XC,
                  "xcheck.ple_row_ids: pure-Python splitmix64 multipliers, primes >= base, EOS-segment shift",
                  prefix + "ple/ids/" + L)
        if "qsa/sel/" + L in A:
            ratio = cfg.indexer_compress_ratio
            btk = cfg.indexer_budget // ratio
            tie, up_blk, sc, nb = A["qsa/tie/" + L], A["qsa/blk/" + L], A["qsa/score/" + L], A["qsa/nblk/" + L]
            blk = xcheck.qsa_blocks_from_scores(sc, nb, btk)  # ties -> lowest block first
            free = tie == 0
            assert np.array_equal(blk[free], up_blk[free]), prefix + " QSA block order differs at " + L
            for r in np.nonzero(tie & 1)[0]:  # tie rows: upstream must still be *a* valid top-k
                chosen = set(up_blk[r][up_blk[r] >= 0].tolist())
                rest = [sc[r, b] for b in range(nb[r]) if b not in chosen]
                assert min(sc[r, b] for b in chosen) >= max(rest), (prefix, L, r)
            sel, cnt = xcheck.qsa_selection(blk, positions, ratio, A["qsa/sel/" + L].shape[1])
            setfree = (tie & 1) == 0
            assert np.array_equal(sel[setfree], A["qsa/sel/" + L][setfree]) and \
                np.array_equal(cnt[setfree], A["qsa/cnt/" + L][setfree]), prefix + " QSA selection differs at " + L
            tstats.append(int((tie & 1).astype(bool).sum()))
            tname = prefix + "qsa/tie/" + L
            O.add(prefix + "xc/qsa/blk/" + L, blk, "i32", XC,
                  "xcheck.qsa_blocks_from_scores: descending sort of captured block scores, ties -> lowest block",
                  prefix + "qsa/blk/" + L, skip_rows=(tname, 3))
            O.add(prefix + "xc/qsa/sel/" + L, sel, "i32", XC,
                  "xcheck.qsa_selection on the cross-check's own blocks: chosen blocks + incomplete tail, ascending",
                  prefix + "qsa/sel/" + L, skip_rows=(tname, 1))
            O.add(prefix + "xc/qsa/cnt/" + L, cnt, "i32", XC, "xcheck.qsa_selection count",
                  prefix + "qsa/cnt/" + L, skip_rows=(tname, 1))
    stats["min_route_margin"] = min(margins)
    stats["qsa_rows_with_tie_dependent_set"] = tstats
    return stats


def resolved_config(model, text):
    cfg = text.config
    rd = cfg.rope_parameters
    ple = {}
    for i, layer in enumerate(text.layers):
        if layer.ple is not None:
            e = layer.ple.ple_embedding
            ple["L%02d" % i] = {
                "ple_layer_index": e.ple_layer_index,
                "head_vocab_sizes": list(e.head_vocab_sizes), "head_offsets": list(e.head_offsets),
                "total_vocab_size": e.total_vocab_size, "padded_rows": e.ngram_embedding.weight.shape[0],
                "head_dim_per_ngram": e.ngram_embedding.weight.shape[1],
                "layer_multipliers_decimal": [str(int(x)) for x in e.layer_multipliers.tolist()],
                "short_conv_state_len": layer.ple.short_conv_state_len,
                "conv_dilation": layer.ple.conv1d.dilation[0],
            }
    return {
        "layer_types": list(cfg.layer_types),
        "output_gate": cfg.output_gate_type or cfg.hidden_act,
        "output_gate_type_raw": cfg.output_gate_type,
        "hidden_act": cfg.hidden_act,
        "ple_layer_ids_one_indexed": list(cfg.ple_layer_ids),
        "ple_embed_dim": cfg.ple_embed_dim, "ple": ple,
        "eos_token_id_raw": cfg.eos_token_id,
        "eos_token_id_used": cfg.eos_token_id[0] if isinstance(cfg.eos_token_id, list) else cfg.eos_token_id,
        "seed": cfg.seed,
        "vocab_size": cfg.vocab_size, "hidden_size": cfg.hidden_size, "num_hidden_layers": cfg.num_hidden_layers,
        "hc_count": cfg.hc_count, "hc_lowrank": cfg.hc_lowrank,
        "num_attention_heads": cfg.num_attention_heads, "num_key_value_heads": cfg.num_key_value_heads,
        "head_dim": cfg.head_dim, "rotary_dim": int(cfg.head_dim * rd.get("partial_rotary_factor", 1.0)),
        "rope_parameters": dict(rd), "attention_scaling": text.rotary_emb.attention_scaling,
        "linear": {k: getattr(cfg, k) for k in ("linear_conv_kernel_dim", "linear_key_head_dim",
                                               "linear_value_head_dim", "linear_num_key_heads",
                                               "linear_num_value_heads")},
        "qsa": {k: getattr(cfg, k) for k in ("indexer_n_heads", "indexer_kv_heads", "indexer_head_dim",
                                            "indexer_budget", "indexer_compress_ratio")},
        "qsa_block_topk": cfg.indexer_budget // cfg.indexer_compress_ratio,
        "moe": {k: getattr(cfg, k) for k in ("num_experts", "num_experts_per_tok", "moe_intermediate_size",
                                            "shared_expert_intermediate_size", "norm_topk_prob")},
        "ngram": {k: getattr(cfg, k) for k in ("ngram_size", "heads_per_ngram", "ngram_vocab_size_base",
                                              "make_ngram_vocab_size_divisible_by", "split_ngram_parts",
                                              "ple_conv_kernel_size")},
        "number_of_conv_states": cfg.number_of_conv_states,
        "rms_norm_eps": cfg.rms_norm_eps, "tie_word_embeddings": model.config.tie_word_embeddings,
        "attn_implementation": cfg._attn_implementation,
        "experts_implementation": getattr(cfg, "_experts_implementation", None),
    }


@torch.no_grad()
def capture(root, name):
    from transformers import Qwen4ExpForConditionalGeneration
    ck = os.path.join(root, name, "checkpoint")
    with open(os.path.join(root, name, "build.json")) as f:
        build = json.load(f)
    model = Qwen4ExpForConditionalGeneration.from_pretrained(ck, dtype=torch.float32,
                                                             attn_implementation="eager").eval()
    text = model.model.language_model
    cfg = text.config
    assert cfg._attn_implementation == "eager", cfg._attn_implementation
    rec = Recorder(model)
    O = Oracle(os.path.join(root, name, "oracle"))
    eos_ids = cfg.eos_token_id if isinstance(cfg.eos_token_id, list) else [cfg.eos_token_id]
    k_top = cfg.num_experts_per_tok

    # Static per-model values upstream holds in buffers, with cross-checks.
    O.add("cfg/rope/inv_freq", text.rotary_emb.inv_freq.numpy(), "f32", UP,
          "language_model.rotary_emb.inv_freq buffer (rotary_dim/2 entries)")
    for i, layer in enumerate(text.layers):
        if layer.ple is None:
            continue
        e, L = layer.ple.ple_embedding, "L%02d" % i
        _, mult, sizes, offs = xcheck.ple_row_ids([0], [0], 0, cfg.vocab_size, cfg.ngram_size, cfg.heads_per_ngram,
                                                  cfg.ngram_vocab_size_base, cfg.seed, e.ple_layer_index)
        for nm, up, xc in (("mult", e.layer_multipliers, mult), ("sizes", e.ngram_heads_vocab_sizes, sizes),
                           ("offsets", e.ngram_heads_offsets, offs)):
            up = up.numpy().astype(np.int64)
            assert np.array_equal(up, np.array(xc, np.int64)), (nm, up, xc)
            O.add("cfg/ple/%s/%s" % (nm, L), up, "i64", UP, "Qwen4ExpTextNGramEmbedding buffer " + nm)
            O.add("cfg/ple/xc/%s/%s" % (nm, L), np.array(xc), "i64", XC,
                  "xcheck.ple_multipliers / ple_tables (pure Python)", "cfg/ple/%s/%s" % (nm, L))

    prompts, agree, stats = [], {}, {}
    for pname, ids, note in make_prompts(name, eos_ids):
        T = len(ids)
        prompts.append({"name": pname, "token_ids": ids, "length": T, "note": note, "provenance": CC})
        O.add("pre/%s/ids" % pname, np.array(ids), "i64", CC, "prompt chosen by the fixture author")
        # 1) prefill with a fresh cache (use_cache=True), explicit text positions 0..T-1
        rec.rec = {}
        pos = torch.arange(T).view(1, 1, -1).expand(4, 1, -1)
        out = model(input_ids=torch.tensor([ids]), position_ids=pos, use_cache=True)
        A = forward_arrays(rec.rec, out, cfg, 0, T)
        stats[pname] = {"prefill": emit(O, "pre/%s/" % pname, A, ids, list(range(T)), cfg, k_top)}
        cache = out.past_key_values
        nxt = int(out.logits[0, -1].argmax())
        # 2) greedy decode, one token per forward through the cache
        stream, steps, fed = list(ids), [], []
        for s in range(DECODE_STEPS):
            fed.append(nxt)
            stream.append(nxt)
            P = len(stream) - 1
            rec.rec = {}
            pos = torch.full((4, 1, 1), P, dtype=torch.long)
            out = model(input_ids=torch.tensor([[nxt]]), position_ids=pos, past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            steps.append(forward_arrays(rec.rec, out, cfg, P, 1))
            nxt = int(out.logits[0, -1].argmax())
        D = cat_rows(steps)
        D["in_ids"] = np.array(fed, np.int64)
        D["next_ids"] = D["logits"].argmax(-1).astype(np.int64)
        SOURCES.setdefault("in_ids", "capture.py: greedy argmax (first max) of the previous logits row, fed at this step")
        SOURCES.setdefault("next_ids", "capture.py: argmax (first max) of this step's logits")
        stats[pname]["decode"] = emit(O, "dec/%s/" % pname, D, stream, list(range(T, T + DECODE_STEPS)), cfg, k_top)
        # 3) one-shot prefill of prompt + fed tokens, no cache
        full = ids + fed
        rec.rec = {}
        pos = torch.arange(len(full)).view(1, 1, -1).expand(4, 1, -1)
        fo = model(input_ids=torch.tensor([full]), position_ids=pos, use_cache=False)
        fl = fo.logits[0].numpy()
        O.add("full/%s/ids" % pname, np.array(full), "i64", DV, "prompt + greedy ids fed during decode")
        # Only rows T-1 .. T+S-1 are kept (they pair with the last prefill row and every decode
        # row); rows < T-1 matched the prefill logits (max diff recorded in agreement).
        O.add("full/%s/logits_tail" % pname, fl[T - 1:], "f32", UP,
              "forward(prompt+fed, use_cache=False).logits rows [T-1, T+S) (T = prompt length)")
        O.add("full/%s/route/ids/L%02d" % (pname, cfg.num_hidden_layers - 1),
              rec.rec[("router", cfg.num_hidden_layers - 1)][2].numpy(), "i32", UP, SOURCES["route/ids"])
        pre_l = O.mem["pre/%s/logits" % pname]
        dec_l = O.mem["dec/%s/logits" % pname]
        a = {
            "prefill_vs_full_logits_max_abs": float(np.abs(pre_l - fl[:T]).max()),
            "decode_vs_full_logits_max_abs": float(np.abs(dec_l - fl[T:]).max()),
            "greedy_ids_equal_full_argmax": bool((fl[T - 1:-1].argmax(-1) == np.array(fed)).all()),
            "logits_absmax": float(np.abs(fl).max()),
        }
        # Recorded, not asserted here: a disagreement is itself an upstream fact worth keeping.
        # check_fixtures.py fails on agreement[*]["ok"] == false.
        a["ok"] = bool(a["prefill_vs_full_logits_max_abs"] < 1e-4 and a["decode_vs_full_logits_max_abs"] < 1e-3
                       and a["greedy_ids_equal_full_argmax"])
        if not a["ok"]:
            print("AGREEMENT FAILED", name, pname, a, flush=True)
        agree[pname] = a
        print(name, pname, a, stats[pname], flush=True)

    O.write_manifest(
        producer=producer(),
        checkpoint=checkpoint_block(ck),
        build={k: build[k] for k in ("torch_seed", "save_kwargs", "config_edits", "reload_check", "text_keys_omitted_by_save_pretrained",
                                     "config_as_saved_by_save_pretrained")},
        runtime_state_dict=build["runtime_state_dict"],
        config_resolved=resolved_config(model, text),
        prompts=prompts, decode_steps=DECODE_STEPS, agreement=agree, stats=stats,
    )
    print(name, "arrays:", len(O.arrays), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("names", nargs="+")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    failed = []
    for n in args.names:
        try:
            capture(args.root, n)
        except Exception:  # keep going so one run reports every problem; never ship a partial oracle
            import shutil
            import traceback
            traceback.print_exc()
            shutil.rmtree(os.path.join(args.root, n, "oracle"), ignore_errors=True)
            failed.append(n)
    if failed:
        sys.exit("capture FAILED for " + ", ".join(failed))


if __name__ == "__main__":
    main()
