#!/usr/bin/env python3
"""A second reader of the issue-22 fixtures: llama.cpp's own gguf package.

Usage: python3 familycheck.py [--threads N] FIXTURE.gguf [FIXTURE.gguf ...]

Each FIXTURE.gguf (engine/model/testdata/<family>-tiny-<type>.gguf) is read
by readers that are not Tandem's and its logits are compared with the
committed transformers oracle (the F16 file's <family>-tiny-F16-oracle.json
beside it; a quantized file is compared with the same float oracle):

  transformers-gguf        AutoModelForCausalLM.from_pretrained(dir, gguf_file=...):
                           transformers' GGUF loader reads config and weights.
  transformers-gguf+config the same weight path with the fixture's own config
                           (familyfixtures.py), for keys llama.cpp's layout does
                           not carry (Gemma 3's query scale, layer pattern).
  gguf-py                  gguf.GGUFReader (llama.cpp's gguf-py) reads the
                           tensors and keys; this script maps llama.cpp's
                           names onto the transformers model of familyfixtures.py
                           and checks every key against that config.

Needs torch, transformers 5 and numpy; the pure-Python gguf package of
llama.cpp's gguf-py/ on PYTHONPATH (with a gguf-<version>.dist-info beside it
so transformers' version check finds it). The package is not part of this
repository. On the GPU machine, with the package in .carry/NAME/gguf-py:

  PYTHONPATH=.carry/NAME/gguf-py python3 packaging/tools/familycheck.py \\
      engine/model/testdata/qwen3moe-tiny-F16.gguf engine/model/testdata/gemma3-tiny-F16.gguf

It prints one line per reader and file; the exit status is 0 when every
F16 file passes through the gguf-py reader (top-1 equal at every teacher-
forced position, largest logit error under 2e-3 of the largest logit, greedy
48 tokens exact). The transformers loader is reported, not required: whether
its GGUF support covers an architecture is transformers' business.
"""

import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import familyfixtures as ff  # noqa: E402  (configs and model builder of the oracle)

F16_LIMIT = 2e-3  # issue 4's float limit, relative to the largest logit


def log(*args):
    print(" ".join(str(a) for a in args), flush=True)


# ---------------------------------------------------------------- names

# llama.cpp's per-block names and the transformers parameter each one is.
QWEN3MOE_BLOCK = {
    "attn_norm": "input_layernorm.weight",
    "attn_q": "self_attn.q_proj.weight",
    "attn_k": "self_attn.k_proj.weight",
    "attn_v": "self_attn.v_proj.weight",
    "attn_output": "self_attn.o_proj.weight",
    "attn_q_norm": "self_attn.q_norm.weight",
    "attn_k_norm": "self_attn.k_norm.weight",
    "ffn_norm": "post_attention_layernorm.weight",
    "ffn_gate_inp": "mlp.gate.weight",
}
GEMMA3_BLOCK = {
    "attn_norm": "input_layernorm.weight",
    "post_attention_norm": "post_attention_layernorm.weight",
    "ffn_norm": "pre_feedforward_layernorm.weight",
    "post_ffw_norm": "post_feedforward_layernorm.weight",
    "attn_q": "self_attn.q_proj.weight",
    "attn_k": "self_attn.k_proj.weight",
    "attn_v": "self_attn.v_proj.weight",
    "attn_output": "self_attn.o_proj.weight",
    "attn_q_norm": "self_attn.q_norm.weight",
    "attn_k_norm": "self_attn.k_norm.weight",
    "ffn_gate": "mlp.gate_proj.weight",
    "ffn_up": "mlp.up_proj.weight",
    "ffn_down": "mlp.down_proj.weight",
}
TOP = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
       "output.weight": "lm_head.weight"}


def family_of(arch):
    if arch not in ("qwen3moe", "gemma3"):
        raise ValueError(f"familycheck: architecture {arch!r} is not one of issue 22's")
    return arch


def read_gguf(path):
    """Keys and tensors through gguf-py; tensors as float32 torch arrays in
    numpy's (row-major, outermost first) order, quantized ones dequantized."""
    import numpy as np
    from gguf import GGUFReader, GGMLQuantizationType
    from gguf.quants import dequantize

    r = GGUFReader(path)
    keys = {}
    for name, field in r.fields.items():
        if name.startswith("tokenizer.") or name.startswith("GGUF."):
            continue
        keys[name] = field.contents()
    tensors = {}
    for t in r.tensors:
        if t.tensor_type in (GGMLQuantizationType.F32, GGMLQuantizationType.F16):
            a = np.asarray(t.data, dtype=np.float32)
        else:
            a = dequantize(t.data, t.tensor_type).astype(np.float32)
        want = tuple(int(d) for d in reversed(t.shape))  # ggml dims are innermost first
        tensors[t.name] = torch.from_numpy(np.array(a.reshape(want), dtype=np.float32, copy=True))
    return keys, tensors


def hub_weights(family, keys, tensors, cfg):
    """llama.cpp's tensors under the Hub's names (per-expert matrices), and
    the keys checked against cfg. Errors name what does not agree."""
    problems = []

    def want(key, value):
        got = keys.get(f"{family}.{key}")
        if got is None:
            problems.append(f"key {family}.{key} missing")
        elif isinstance(value, float):
            if abs(float(got) - value) > 1e-6 * max(1.0, abs(value)):
                problems.append(f"key {family}.{key} = {got}, config {value}")
        elif got != value:
            problems.append(f"key {family}.{key} = {got}, config {value}")

    want("block_count", cfg.num_hidden_layers)
    want("embedding_length", cfg.hidden_size)
    want("attention.head_count", cfg.num_attention_heads)
    want("attention.head_count_kv", cfg.num_key_value_heads)
    want("attention.key_length", cfg.head_dim)
    want("attention.layer_norm_rms_epsilon", float(cfg.rms_norm_eps))
    want("rope.freq_base", ff.rope_theta(cfg, "full_attention" if family == "gemma3" else None))
    if family == "qwen3moe":
        want("expert_count", cfg.num_experts)
        want("expert_used_count", cfg.num_experts_per_tok)
        want("expert_feed_forward_length", cfg.moe_intermediate_size)
    else:
        want("feed_forward_length", cfg.intermediate_size)
        want("attention.sliding_window", cfg.sliding_window)

    block = QWEN3MOE_BLOCK if family == "qwen3moe" else GEMMA3_BLOCK
    out, used = {}, set()
    for src, dst in TOP.items():
        if src in tensors:
            out[dst] = tensors[src]
            used.add(src)
    if "lm_head.weight" not in out and not cfg.tie_word_embeddings:
        problems.append("no output.weight and the config does not tie the head")
    for L in range(cfg.num_hidden_layers):
        for src, dst in block.items():
            name = f"blk.{L}.{src}.weight"
            if name not in tensors:
                problems.append(f"tensor {name} missing")
                continue
            out[f"model.layers.{L}.{dst}"] = tensors[name]
            used.add(name)
        if family == "qwen3moe":
            for part in ("gate", "up", "down"):
                name = f"blk.{L}.ffn_{part}_exps.weight"
                if name not in tensors:
                    problems.append(f"tensor {name} missing")
                    continue
                used.add(name)
                for e in range(tensors[name].shape[0]):
                    out[f"model.layers.{L}.mlp.experts.{e}.{part}_proj.weight"] = tensors[name][e]
    extra = sorted(set(tensors) - used)
    if extra:
        problems.append(f"tensors this mapping does not know: {extra[:5]}")
    if family == "gemma3":
        # llama.cpp's files hold Gemma's 1 + w; transformers applies 1 + w itself.
        for k in out:
            if k.endswith("norm.weight") or k.endswith("layernorm.weight"):
                out[k] = out[k] - 1.0
    return out, problems


def load_hub(model, cfg, W):
    """W (Hub names, per-expert) into model, fusing experts where this
    transformers keeps them as one 3-D parameter; strict, so a name left
    over on either side is an error."""
    sd = model.state_dict()
    embd = W.get("model.embed_tokens.weight")  # a tied head's, popped with the embedding
    target = {}
    for name, p in sd.items():
        if name.endswith("mlp.experts.gate_up_proj"):
            base = name[: -len("gate_up_proj")]
            E = p.shape[0]
            gate = torch.stack([W.pop(f"{base}{e}.gate_proj.weight") for e in range(E)])
            up = torch.stack([W.pop(f"{base}{e}.up_proj.weight") for e in range(E)])
            target[name] = torch.cat([gate, up], dim=1)
        elif name.endswith("mlp.experts.down_proj") and p.ndim == 3:
            base = name[: -len("down_proj")]
            target[name] = torch.stack([W.pop(f"{base}{e}.down_proj.weight") for e in range(p.shape[0])])
        elif name == "lm_head.weight" and name not in W and cfg.tie_word_embeddings:
            target[name] = embd
        else:
            target[name] = W.pop(name)
        if tuple(target[name].shape) != tuple(p.shape):
            raise ValueError(f"familycheck: {name}: read {tuple(target[name].shape)}, model has {tuple(p.shape)}")
    W.pop("model.embed_tokens.weight", None)
    if W:
        raise ValueError(f"familycheck: tensors with no parameter: {sorted(W)[:5]}")
    model.load_state_dict(target, strict=True)
    return model


# ---------------------------------------------------------------- comparison


@torch.no_grad()
def compare(model, oracle):
    """Teacher-forced top-1 and logit error on prompt + oracle continuation,
    and greedy 48 with the whole sequence recomputed at each step (as the
    oracle was made)."""
    top1_bad = positions = 0
    worst = 0.0
    greedy_ok = 0
    for p in oracle["prompts"]:
        ids, cont = p["ids"], p["greedy"]
        seq = ids + cont
        lg = ff.logits_of(model, seq).float()
        scale = float(lg.abs().max())
        t = p["teacher"]
        for i in range(len(seq)):
            positions += 1
            if int(torch.argmax(lg[i])) != t["top_ids"][i][0]:
                top1_bad += 1
            got = lg[i, torch.tensor(t["top_ids"][i])]
            err = float((got - torch.tensor(t["top_logits"][i])).abs().max()) / scale
            worst = max(worst, err)
        for pos, row in p.get("full_rows", {}).items():
            err = float((lg[int(pos)] - torch.tensor(row)).abs().max()) / scale
            worst = max(worst, err)
        g = list(ids)
        for _ in range(len(cont)):
            g.append(int(torch.argmax(ff.logits_of(model, g)[-1])))
        if g[len(ids):] == cont:
            greedy_ok += 1
    return {"positions": positions, "top1_differ": top1_bad, "max_rel_err": worst,
            "greedy_exact": greedy_ok, "prompts": len(oracle["prompts"])}


def verdict(r, quantized):
    if quantized:
        return "reported"
    return "PASS" if (r["top1_differ"] == 0 and r["max_rel_err"] < F16_LIMIT
                      and r["greedy_exact"] == r["prompts"]) else "FAIL"


def line(reader, path, r, quantized):
    agree = 100.0 * (r["positions"] - r["top1_differ"]) / r["positions"]
    return (f"{os.path.basename(path)} {reader}: top-1 {r['positions'] - r['top1_differ']}/{r['positions']} "
            f"({agree:.1f}%), largest logit error {r['max_rel_err']:.2e} of the largest logit, "
            f"greedy {r['greedy_exact']}/{r['prompts']} exact: {verdict(r, quantized)}")


def fixture_config(family):
    return ff.qwen3moe_config() if family == "qwen3moe" else ff.gemma3_config()


def model_class(family):
    if family == "qwen3moe":
        from transformers import Qwen3MoeForCausalLM as cls
    else:
        from transformers import Gemma3ForCausalLM as cls
    return cls


def eager(model):
    for setter in ("set_attn_implementation", "set_experts_implementation"):
        if hasattr(model, setter):
            try:
                getattr(model, setter)("eager")
            except Exception as e:  # a release without that switch
                log("   ", setter, "refused:", repr(e)[:160])
    dtypes = {p.dtype for p in model.parameters()}
    if dtypes != {torch.float32}:
        # transformers marks a GGUF load as quantized and refuses .float():
        # it was asked for float32, so anything else is a finding.
        raise ValueError(f"familycheck: the loaded model holds {sorted(map(str, dtypes))}, not float32")
    return model.eval()


def check_file(path):
    keys, tensors = read_gguf(path)
    family = family_of(keys.get("general.architecture"))
    oracle_path = path[: path.rfind(f"{family}-tiny-")] + f"{family}-tiny-F16-oracle.json"
    with open(oracle_path) as f:
        oracle = json.load(f)
    quantized = not path.endswith("-F16.gguf")
    ok = True
    results = []

    # 1. gguf-py reads; this script maps the names.
    try:
        cfg = fixture_config(family)
        W, problems = hub_weights(family, keys, tensors, cfg)
        for p in problems:
            log("   gguf-py:", p)
        model = load_hub(ff.build(model_class(family), cfg), cfg, W)
        r = compare(model, oracle)
        results.append(("gguf-py", r))
        log(line("gguf-py", path, r, quantized))
        if problems or verdict(r, quantized) == "FAIL":
            ok = False
    except Exception as e:
        log(f"{os.path.basename(path)} gguf-py: FAILED {e!r}"[:600])
        ok = False

    # 2. transformers' GGUF loader, alone and with the fixture's config.
    from transformers import AutoModelForCausalLM

    d, name = os.path.dirname(os.path.abspath(path)), os.path.basename(path)
    for reader, extra in (("transformers-gguf", {}), ("transformers-gguf+config", {"config": None})):
        try:
            kw = {"gguf_file": name, "dtype": torch.float32}
            if "config" in extra:
                kw["config"] = fixture_config(family)
            try:
                model = AutoModelForCausalLM.from_pretrained(d, attn_implementation="eager", **kw)
            except TypeError:
                kw["torch_dtype"] = kw.pop("dtype")
                model = AutoModelForCausalLM.from_pretrained(d, attn_implementation="eager", **kw)
            model = eager(model)
            c = model.config
            log(f"   {reader}: {type(model).__name__}, model_type {c.model_type}, "
                f"query_pre_attn_scalar {getattr(c, 'query_pre_attn_scalar', '-')}, "
                f"sliding_window {getattr(c, 'sliding_window', '-')}, "
                f"layer_types {getattr(c, 'layer_types', '-')}")
            r = compare(model, oracle)
            results.append((reader, r))
            log(line(reader, path, r, quantized))
        except Exception as e:
            log(f"{name} {reader}: FAILED {e!r}"[:600])
    return ok, results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    import transformers

    try:
        import gguf
        from importlib.metadata import version

        log(f"transformers {transformers.__version__}, torch {torch.__version__}, "
            f"gguf {version('gguf')} from {os.path.dirname(gguf.__file__)}")
    except Exception as e:
        log(f"familycheck: the gguf package cannot be imported: {e!r}")
        return 2
    t0 = time.time()
    status, out = 0, {}
    for path in a.files:
        ok, results = check_file(path)
        out[os.path.basename(path)] = dict(results)
        if not ok:
            status = 1
    log(f"done in {time.time() - t0:.1f}s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return status


if __name__ == "__main__":
    sys.exit(main())
