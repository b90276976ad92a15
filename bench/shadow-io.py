#!/usr/bin/env python3
"""shadow-io.py: AFN-021 Gate 5, shadow I/O, three predictors on one prompt.

usage: bench/shadow-io.py -m ARTIFACT --tokens IDS --checkpoint CKPT
                          [-n N] [--expert-cache SIZE] [--threads N]
                          [--rounds R] [--hb-run PATH] [--owner NAME --thread NAME]
                          -o DIR

Runs hb-run on the same prompt with --expert-cache SIZE and each of
--expert-predict none, router-ahead and learned:CKPT, interleaved
(none, router-ahead, learned, learned, router-ahead, none per round), each
with --json, --dump-logits and --dump-routes.  Prediction only moves
bytes: every run's generated ids, logits and routes must be byte-identical
to a resident run's (--expert-cache all; exit 1 otherwise, naming the run).  Prints, side
by side, per predictor the median and min over its runs of what its
discardable reads did, and the difference to none's median (misses
avoided, evictions caused); writes the same to DIR/shadow.json with every
run's raw counters.  The figures are counts and times of this machine and
this artifact: the fixtures' models have random weights, so nothing here
says how predictable a real checkpoint's routes are.  Python 3 standard
library only.
"""
import argparse
import filecmp
import json
import os
import statistics
import subprocess
import sys

PREDICTORS = ["none", "router-ahead", "learned"]
# (field, source): "x" the decode steps' expert_cache counters, "s" the shadow object
FIELDS = [
    ("wants", "x"), ("hits", "x"), ("misses", "x"), ("tickets_p1", "x"), ("tickets_p2", "x"),
    ("bytes_exact", "x"), ("bytes_predicted", "x"), ("bytes_useful", "x"), ("bytes_rejected", "x"),
    ("prefetch_rejected", "x"), ("evictions", "x"), ("evictions_unused", "x"), ("slot_waits", "x"),
    ("timely_recall", "x"), ("useful_prefetch_ratio", "x"), ("hidden_fraction", "x"),
    ("slack_min_ns", "x"), ("slack_mean_ns", "x"), ("exposed_ns", "x"), ("exposed_per_token_ns", "x"),
    ("p0_starvation_attempts", "s"), ("wants_predicted", "s"), ("wants_predicted_timely", "s"),
    ("predicted_slack_min_ns", "s"), ("predicted_slack_mean_ns", "s"),
]


def run(args, pred, i):
    d = os.path.join(args.o, "run-%02d-%s" % (i, pred.replace(":", "_")))
    os.makedirs(d, exist_ok=True)
    p = "learned:" + args.checkpoint if pred == "learned" else pred
    cmd = [args.hb_run, "-q", "-m", args.m, "--tokens", args.tokens, "-n", str(args.n), "--json",
           "--dump-logits", os.path.join(d, "logits.bin"), "--dump-routes", os.path.join(d, "routes.hbtrace")]
    if pred != "resident":
        cmd += ["--expert-cache", args.expert_cache, "--expert-predict", p]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    if args.owner:
        cmd += ["--owner", args.owner]
    if args.thread:
        cmd += ["--thread", args.thread]
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE).stdout
    return d, json.loads(out)


def pick(j, f, src):
    o = j.get("expert_cache_decode" if src == "x" else "shadow", {})
    v = o.get(f)
    return v if isinstance(v, (int, float)) else None


def summary(vals):
    v = [x for x in vals if x is not None]
    return {"median": statistics.median(v), "min": min(v)} if v else {"median": None, "min": None}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-m", required=True)
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("-n", type=int, default=16)
    ap.add_argument("--expert-cache", default="25%")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--owner")
    ap.add_argument("--thread")
    ap.add_argument("--hb-run", default=os.path.join(os.environ.get("HB_BUILD", "build"), "bin", "hb-run"))
    ap.add_argument("-o", required=True)
    args = ap.parse_args()
    os.makedirs(args.o, exist_ok=True)
    load0 = os.getloadavg()
    order = []
    for _ in range(args.rounds):
        order += PREDICTORS + PREDICTORS[::-1]
    runs = []
    d, j = run(args, "resident", 0)
    ref = (d, j["ids"])
    for i, pred in enumerate(order, 1):
        d, j = run(args, pred, i)
        same = j["ids"] == ref[1] and all(
            filecmp.cmp(os.path.join(ref[0], f), os.path.join(d, f), shallow=False)
            for f in ("logits.bin", "routes.hbtrace"))
        if not same:
            print("shadow-io: run %d (%s) differs from the resident run's ids, logits or routes" % (i, pred),
                  file=sys.stderr)
            return 1
        runs.append({"predictor": pred, "run": i, "expert_cache_decode": j.get("expert_cache_decode"),
                     "shadow": j.get("shadow"), "decode_seconds": j.get("decode_seconds")})
    report = {"format": "hebrus-shadow-io/1", "artifact": args.m, "tokens": args.tokens, "n": args.n,
              "expert_cache": args.expert_cache, "rounds": args.rounds, "identical": True,
              "load_before": load0, "load_after": os.getloadavg(), "predictors": {}, "runs": runs}
    for pred in PREDICTORS:
        mine = [r for r in runs if r["predictor"] == pred]
        row = {f: summary([pick(r, f, s) for r in mine]) for f, s in FIELDS}
        row["decode_seconds"] = summary([r["decode_seconds"] for r in mine])
        report["predictors"][pred] = row
    base = report["predictors"]["none"]
    for pred in PREDICTORS:
        row = report["predictors"][pred]
        row["misses_avoided"] = base["misses"]["median"] - row["misses"]["median"]
        row["evictions_caused"] = row["evictions"]["median"] - base["evictions"]["median"]
        row["exposed_ratio_to_none"] = (row["exposed_ns"]["median"] / base["exposed_ns"]["median"]
                                        if base["exposed_ns"]["median"] else None)
    with open(os.path.join(args.o, "shadow.json"), "w") as f:
        json.dump(report, f, indent=1)
    w = max(len(f) for f, _ in FIELDS) + 2
    print("%-*s" % (w, "decode steps (median / min)") + "".join("%26s" % p for p in PREDICTORS))
    for f, _ in FIELDS + [("decode_seconds", "")]:
        cells = []
        for p in PREDICTORS:
            s = report["predictors"][p][f]
            cells.append("%26s" % ("-" if s["median"] is None else "%.5g / %.5g" % (s["median"], s["min"])))
        print("%-*s" % (w, f) + "".join(cells))
    for f in ("misses_avoided", "evictions_caused", "exposed_ratio_to_none"):
        v = [report["predictors"][p][f] for p in PREDICTORS]
        print("%-*s" % (w, f) + "".join("%26s" % ("-" if x is None else "%.6g" % x) for x in v))
    print("outputs identical to the resident run's in all %d runs; load %.2f -> %.2f" % (len(runs), load0[0],
                                                                            report["load_after"][0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
