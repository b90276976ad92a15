"""Independent re-computations (numpy / pure Python), NOT using any upstream helper.

Each function works from the written-down definition of the operation, so an
agreement with the upstream capture is evidence from two separate codes.
"""
import numpy as np

MASK64 = (1 << 64) - 1


def _mix64(x):
    # splitmix64 finaliser, written from the reference constants.
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & MASK64
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def ple_multipliers(vocab, ngram_size, ple_index, seed):
    half = max(1, ((2 ** 63 - 1) // max(vocab, 1)) // 2)
    base = seed + 10007 * ple_index
    return [2 * (_mix64((base + 0x9E3779B97F4A7C15 * (i + 1)) & MASK64) % half) + 1
            for i in range(ngram_size)]


def _primes_from(lo, count):
    out, n = [], max(lo, 2)
    while len(out) < count:
        if all(n % d for d in range(2, int(n ** 0.5) + 1)):
            out.append(n)
        n += 1
    return out


def ple_tables(base, ngram_size, heads_per_ngram, ple_index):
    """Per-head prime sizes (global head numbering across PLE layers) and the
    module-local running offsets."""
    heads = (ngram_size - 1) * heads_per_ngram
    sizes = _primes_from(base, (ple_index + 1) * heads)[ple_index * heads:]
    offsets = [sum(sizes[:j]) for j in range(heads)]
    return sizes, offsets


def ple_row_ids(tokens, positions, eos, vocab, ngram_size, heads_per_ngram, base, seed, ple_index):
    """Row ids for the given absolute positions of the token stream `tokens`.

    Definition: token t's n-gram context is the previous tokens of its own
    EOS-delimited segment (a segment ends *at* an EOS, which belongs to the
    segment it closes); missing context is the EOS id. Order k of the hash uses
    the token k steps back. Head j of order g: (XOR_k tok[t-k]*m[k]) mod p_j + off_j.
    """
    mult = ple_multipliers(vocab, ngram_size, ple_index, seed)
    sizes, offsets = ple_tables(base, ngram_size, heads_per_ngram, ple_index)
    rows = []
    for t in positions:
        ctx = []
        for k in range(ngram_size):
            src = t - k
            ok = src >= 0 and all(tokens[u] != eos for u in range(src, t))
            ctx.append(tokens[src] if ok else eos)
        row = []
        for g in range(2, ngram_size + 1):
            h = 0
            for k in range(g):
                h ^= ctx[k] * mult[k]
            j0 = (g - 2) * heads_per_ngram
            row += [h % sizes[j] + offsets[j] for j in range(j0, j0 + heads_per_ngram)]
        rows.append(row)
    return np.array(rows, dtype=np.int64), mult, sizes, offsets


def router(logits, k, renorm=True):
    """softmax (float64) -> top-k by descending probability (lowest id first on
    exact ties) -> renormalise over the k kept."""
    x = logits.astype(np.float64)
    p = np.exp(x - x.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    ids = np.stack([sorted(range(p.shape[1]), key=lambda e: (-p[r, e], e))[:k] for r in range(p.shape[0])])
    w = np.take_along_axis(p, ids, -1)
    if renorm:
        w = w / w.sum(-1, keepdims=True)
    # margin between k-th and (k+1)-th logit: how close the call was.
    srt = -np.sort(-x, -1)
    margin = srt[:, k - 1] - srt[:, k] if x.shape[1] > k else np.full(x.shape[0], np.inf)
    return ids, w, margin


def qsa_blocks_from_scores(scores, nblk, block_topk):
    """Rank order of complete blocks: descending score, lowest block first on ties."""
    out = np.full((len(nblk), block_topk), -1, dtype=np.int64)
    for r, n in enumerate(nblk):
        order = sorted(range(n), key=lambda b: (-float(scores[r, b]), b))[:min(block_topk, n)]
        out[r, :len(order)] = order
    return out


def qsa_selection(blocks, positions, ratio, width):
    """Selected token set (ascending) for a causal query at absolute `pos` with
    no padding: tokens of the chosen complete blocks + the incomplete tail."""
    sel = np.full((len(positions), width), -1, dtype=np.int64)
    cnt = np.zeros(len(positions), dtype=np.int64)
    for r, pos in enumerate(positions):
        visible = pos + 1
        nblk = visible // ratio
        toks = set(range(nblk * ratio, visible))
        for b in blocks[r]:
            if b >= 0:
                toks.update(range(b * ratio, b * ratio + ratio))
        s = sorted(toks)
        sel[r, :len(s)] = s
        cnt[r] = len(s)
    return sel, cnt
