#!/usr/bin/env python3
"""Tiny random-weight qwen3moe and gemma3 models and their transformers oracle.

Usage: python3 familyfixtures.py OUTDIR

Needs torch, transformers (5.x) and safetensors; no network, no GPU. For each
family it writes OUTDIR/<family>/model.safetensors (the Hugging Face Hub layout:
one gate/up/down matrix per expert, as real Qwen3 MoE checkpoints are published),
OUTDIR/<family>/config.json and OUTDIR/<family>/oracle.json, plus OUTDIR/log.txt.

Why the weights look the way they do:
- Every matrix is rounded to float16 before anything is computed, so the F16
  GGUF holds exactly the weights the oracle was computed with.
- Norm weights are multiples of 1/1024 (Qwen: 1 + k/1024; Gemma: k/1024, which
  Gemma applies as 1 + w): both w and 1 + w are exact in float16 and float32,
  so llama.cpp's convention of storing Gemma's 1 + w loses nothing.
- Widths are scaled so activations and logits are O(1): attention is far from
  uniform and the greedy top-1 is rarely a near tie (the oracle records each
  step's top-1/top-2 margin so a test can see how close it came).
- The vocabulary is the demo one (8192 ids), so the oracle prompts are the ids
  of ../shared/oracle/oracle.json and a demo draft can pair with these targets.

The oracle is transformers in float32 on the CPU with eager attention, the
whole sequence recomputed at every greedy step (no KV cache in the way). The
log also reports the float32 oracle against float64 and against an independent
plain-torch forward of the saved tensors, so a wrong reading of either family
shows up here, before any Go code is written against it.
"""

import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

SEED = 22
GREEDY_TOKENS = 48
TOPK = 8
VOCAB = 8192

# The six prompts of ../shared/oracle/oracle.json and the first 160 ids of its
# held-out text (long enough to cross every sliding window several times).
PROMPTS = [
    [1, 7570, 203, 5139, 1372, 368, 280, 285, 278, 225, 21, 30, 23, 18, 2, 203, 1, 568, 533, 447, 203],
    [1, 7570, 203, 8000, 381, 263, 3768, 18, 2, 203, 1, 568, 533, 447, 203],
    [1, 7250, 203, 905, 411, 263, 1625, 886, 1480, 533, 447, 18, 2, 203, 1, 7570, 203, 1342, 1074, 1369,
     225, 23, 30, 21, 26, 479, 35, 2, 203, 1, 568, 533, 447, 203],
    [1166, 264, 2264, 426, 3766],
    [859, 339, 542, 291, 692, 16, 458, 264],
    [528, 1664, 668, 291, 6463, 1048, 264, 3581, 322],
    [859, 458, 307, 518, 2310, 264, 3604, 5956, 16, 304, 954, 751, 264, 1249, 264, 3130, 273, 369, 311, 470,
     1965, 328, 264, 635, 273, 426, 16, 274, 328, 264, 3415, 416, 354, 3396, 30, 323, 354, 1840, 347, 263,
     3116, 1036, 16, 639, 16, 1405, 982, 16, 498, 707, 16, 1104, 274, 1903, 16, 4419, 383, 348, 1859, 274,
     263, 3277, 622, 1108, 358, 369, 311, 1055, 358, 264, 735, 35, 323, 2856, 4602, 285, 470, 996, 344, 597,
     480, 273, 369, 31, 274, 339, 386, 423, 344, 369, 16, 311, 354, 673, 1127, 909, 328, 263, 1075, 3526,
     16, 1082, 425, 7210, 2437, 1229, 584, 274, 425, 998, 16, 311, 673, 301, 3033, 387, 354, 470, 16, 673,
     301, 3240, 18, 323, 304, 4461, 458, 307, 518, 2310, 264, 4548, 5956, 16, 274, 16, 521, 16, 409, 386,
     263, 650, 735, 556, 436, 31, 274, 264, 1658, 2500, 3405, 387, 4692, 273],
]
# Prompts whose full logit rows (last prompt position and last position) are kept.
FULL_ROW_PROMPTS = (0, 6)

LOG = []


def log(*args):
    line = " ".join(str(a) for a in args)
    print(line, flush=True)
    LOG.append(line)


# ---------------------------------------------------------------- configs


def qwen3moe_config():
    from transformers import Qwen3MoeConfig

    # Qwen3-30B-A3B's choices where they matter to a runner: norm_topk_prob on,
    # every layer sparse, no shared expert, untied head, head_dim not equal to
    # hidden/heads, per-head Q/K norms, rope theta 1e6.
    kw = dict(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=256,
        moe_intermediate_size=256,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        num_experts=8,
        num_experts_per_tok=2,
        norm_topk_prob=True,
        decoder_sparse_step=1,
        mlp_only_layers=[],
        hidden_act="silu",
        max_position_embeddings=4096,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        attention_bias=False,
        use_sliding_window=False,
        bos_token_id=None,
        eos_token_id=2,
        pad_token_id=0,
    )
    return first_config(Qwen3MoeConfig, kw, [
        {"rope_parameters": {"rope_type": "default", "rope_theta": 1e6}},
        {"rope_theta": 1e6},
    ])


GEMMA_LAYERS = 8
GEMMA_WINDOW = 16


def gemma_layer_types():
    # llama.cpp reads no per-layer pattern for gemma3: every sixth layer is
    # global. Eight layers give sliding layers before and after the global one.
    return ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(GEMMA_LAYERS)]


def gemma3_config():
    from transformers import Gemma3TextConfig

    kw = dict(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=256,
        num_hidden_layers=GEMMA_LAYERS,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        hidden_activation="gelu_pytorch_tanh",
        max_position_embeddings=4096,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        attention_bias=False,
        # llama.cpp reads no query_pre_attn_scalar for gemma3: it scales by
        # head_dim^-0.5 (n_embd/n_head for the 62-layer 27B), as every
        # released Gemma 3 does; the fixture must be one it runs alike.
        query_pre_attn_scalar=32,
        sliding_window=GEMMA_WINDOW,
        layer_types=gemma_layer_types(),
        final_logit_softcapping=None,
        attn_logit_softcapping=None,
        bos_token_id=None,
        eos_token_id=2,
        pad_token_id=0,
    )
    return first_config(Gemma3TextConfig, kw, [
        {"rope_parameters": {
            "full_attention": {"rope_type": "default", "rope_theta": 1e6},
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
        }},
        {"rope_theta": 1e6, "rope_local_base_freq": 1e4},
    ])


def first_config(cls, kw, ropes):
    """The first spelling of the RoPE fields this transformers accepts."""
    last = None
    for rope in ropes:
        try:
            cfg = cls(**rope, **kw)
            log(f"  {cls.__name__} built with {sorted(rope)}")
            return cfg
        except Exception as e:  # the other spelling belongs to another release
            log(f"  {cls.__name__}({sorted(rope)}) refused: {e!r}"[:300])
            last = e
    raise last


def build(cls, cfg):
    for extra in ({"attn_implementation": "eager", "experts_implementation": "eager"},
                  {"attn_implementation": "eager"}, {}):
        try:
            model = cls._from_config(cfg, **extra)
            break
        except Exception as e:  # an option this release lacks
            log("  _from_config", extra, "refused:", repr(e)[:200])
    else:
        model = cls(cfg)
    for setter in ("set_attn_implementation", "set_experts_implementation"):
        if hasattr(model, setter):
            try:
                getattr(model, setter)("eager")
            except Exception as e:  # older or newer API: log and carry on
                log("  ", setter, "failed:", repr(e)[:200])
    return model.float().eval()


# ---------------------------------------------------------------- weights


def randomize(model, family, gen):
    """Fills every parameter; see the module comment for the scales."""
    for name, p in model.named_parameters():
        if p.ndim == 1:
            k = torch.randint(-128, 129, tuple(p.shape), generator=gen).float() / 1024.0
            val = k if family == "gemma3" else 1.0 + k
        else:
            fan_in = p.shape[-1]
            std = 1.0 / math.sqrt(fan_in)
            if "embed_tokens" in name:
                std = 0.3 if family == "gemma3" else 1.0
            elif "lm_head" in name:
                std = 3.0 / math.sqrt(fan_in)
            val = (torch.randn(tuple(p.shape), generator=gen) * std).half().float()
        with torch.no_grad():
            p.copy_(val)


def hub_tensors(model, cfg, gate_first=True):
    """The state dict in the Hub layout: per-expert matrices, no tied copy."""
    out = {}
    sd = model.state_dict()
    tied = bool(getattr(cfg, "tie_word_embeddings", False))
    for name, t in sd.items():
        if name == "lm_head.weight" and tied:
            continue
        if name.endswith("mlp.experts.gate_up_proj"):
            base = name[: -len("gate_up_proj")]
            n = t.shape[1] // 2
            a, b = t[:, :n, :], t[:, n:, :]
            gate, up = (a, b) if gate_first else (b, a)
            for e in range(t.shape[0]):
                out[f"{base}{e}.gate_proj.weight"] = gate[e]
                out[f"{base}{e}.up_proj.weight"] = up[e]
            continue
        if name.endswith("mlp.experts.down_proj") and t.ndim == 3:
            base = name[: -len("down_proj")]
            for e in range(t.shape[0]):
                out[f"{base}{e}.down_proj.weight"] = t[e]
            continue
        out[name] = t
    return {k: v.detach().to(torch.float16).contiguous().clone() for k, v in out.items()}


# ---------------------------------------------------------------- plain torch reference


def rms(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope_neox(x, theta, pos):
    # x [T, heads, d]: halves rotated together (rotate_half), as both families do.
    d = x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    f = pos[:, None].to(torch.float64) * inv[None, :]
    emb = torch.cat([f, f], dim=-1).to(x.dtype)
    cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]
    rot = torch.cat([-x[..., d // 2:], x[..., : d // 2]], dim=-1)
    return x * cos + rot * sin


def attention(q, k, v, scale, window):
    # q [T, nh, d], k/v [T, nkv, d]; a query sees keys at distance < window.
    T, nh, _ = q.shape
    rep = nh // k.shape[1]
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    s = torch.einsum("thd,shd->hts", q, k) * scale
    ti = torch.arange(T)[:, None]
    si = torch.arange(T)[None, :]
    masked = si > ti
    if window:
        masked = masked | (ti - si >= window)
    s = s.masked_fill(masked[None], float("-inf"))
    p = torch.softmax(s, dim=-1)
    return torch.einsum("hts,shd->thd", p, v).reshape(T, -1)


def reference_qwen3moe(W, cfg, ids, dt):
    g = lambda n: W[n].to(dt)
    H, nh, nkv = cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads
    hd = W["model.layers.0.self_attn.q_norm.weight"].shape[0]
    eps, E, K = cfg.rms_norm_eps, cfg.num_experts, cfg.num_experts_per_tok
    theta = rope_theta(cfg, None)
    pos = torch.arange(len(ids))
    x = g("model.embed_tokens.weight")[torch.tensor(ids)]
    for L in range(cfg.num_hidden_layers):
        p = f"model.layers.{L}."
        xn = rms(x, g(p + "input_layernorm.weight"), eps)
        q = (xn @ g(p + "self_attn.q_proj.weight").T).view(-1, nh, hd)
        k = (xn @ g(p + "self_attn.k_proj.weight").T).view(-1, nkv, hd)
        v = (xn @ g(p + "self_attn.v_proj.weight").T).view(-1, nkv, hd)
        q = rope_neox(rms(q, g(p + "self_attn.q_norm.weight"), eps), theta, pos)
        k = rope_neox(rms(k, g(p + "self_attn.k_norm.weight"), eps), theta, pos)
        a = attention(q, k, v, hd ** -0.5, 0)
        x = x + a @ g(p + "self_attn.o_proj.weight").T
        xn = rms(x, g(p + "post_attention_layernorm.weight"), eps)
        probs = torch.softmax(xn @ g(p + "mlp.gate.weight").T, dim=-1)
        w, sel = torch.topk(probs, K, dim=-1)
        if cfg.norm_topk_prob:
            w = w / w.sum(-1, keepdim=True)
        out = torch.zeros_like(x)
        for e in range(E):
            rows, slot = (sel == e).nonzero(as_tuple=True)
            if len(rows) == 0:
                continue
            h = xn[rows]
            ep = p + f"mlp.experts.{e}."
            y = F.silu(h @ g(ep + "gate_proj.weight").T) * (h @ g(ep + "up_proj.weight").T)
            y = y @ g(ep + "down_proj.weight").T
            out.index_add_(0, rows, y * w[rows, slot][:, None])
        x = x + out
    x = rms(x, g("model.norm.weight"), eps)
    return x @ g("lm_head.weight").T


def reference_gemma3(W, cfg, ids, dt):
    g = lambda n: W[n].to(dt)
    H, nh, nkv, hd = cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    eps = cfg.rms_norm_eps
    n1 = lambda x, n: rms(x, 1.0 + g(n), eps)
    pos = torch.arange(len(ids))
    emb = g("model.embed_tokens.weight")
    x = emb[torch.tensor(ids)] * torch.tensor(H ** 0.5, dtype=dt)
    for L in range(cfg.num_hidden_layers):
        p = f"model.layers.{L}."
        kind = cfg.layer_types[L]
        theta = rope_theta(cfg, kind)
        window = cfg.sliding_window if kind == "sliding_attention" else 0
        xn = n1(x, p + "input_layernorm.weight")
        q = (xn @ g(p + "self_attn.q_proj.weight").T).view(-1, nh, hd)
        k = (xn @ g(p + "self_attn.k_proj.weight").T).view(-1, nkv, hd)
        v = (xn @ g(p + "self_attn.v_proj.weight").T).view(-1, nkv, hd)
        q = rope_neox(n1(q, p + "self_attn.q_norm.weight"), theta, pos)
        k = rope_neox(n1(k, p + "self_attn.k_norm.weight"), theta, pos)
        a = attention(q, k, v, cfg.query_pre_attn_scalar ** -0.5, window)
        a = a @ g(p + "self_attn.o_proj.weight").T
        x = x + n1(a, p + "post_attention_layernorm.weight")
        xn = n1(x, p + "pre_feedforward_layernorm.weight")
        y = F.gelu(xn @ g(p + "mlp.gate_proj.weight").T, approximate="tanh") * (xn @ g(p + "mlp.up_proj.weight").T)
        y = y @ g(p + "mlp.down_proj.weight").T
        x = x + n1(y, p + "post_feedforward_layernorm.weight")
    x = n1(x, "model.norm.weight")
    logits = x @ emb.T
    if cfg.final_logit_softcapping:
        c = cfg.final_logit_softcapping
        logits = torch.tanh(logits / c) * c
    return logits


def rope_theta(cfg, kind):
    rp = getattr(cfg, "rope_parameters", None)
    if isinstance(rp, dict):
        if kind is not None and isinstance(rp.get(kind), dict):
            return float(rp[kind]["rope_theta"])
        if "rope_theta" in rp:
            return float(rp["rope_theta"])
    if kind == "sliding_attention":
        return float(getattr(cfg, "rope_local_base_freq", 1e4))
    return float(getattr(cfg, "rope_theta", 1e6))


# ---------------------------------------------------------------- oracle


@torch.no_grad()
def logits_of(model, ids):
    out = model(input_ids=torch.tensor([ids]), use_cache=False)
    return out.logits[0]


def f7(v):
    return float("%.7g" % v)


@torch.no_grad()
def oracle_for(model, model64, W, cfg, ref, family):
    prompts = []
    worst = {"f32_vs_f64": 0.0, "reference_vs_transformers": 0.0, "reference64_vs_f32": 0.0,
             "reference64_vs_f64": 0.0}
    for pi, ids in enumerate(PROMPTS):
        seq = list(ids)
        margins = []
        for _ in range(GREEDY_TOKENS):
            last = logits_of(model, seq)[-1]
            top2 = torch.topk(last, 2)
            margins.append(f7(top2.values[0] - top2.values[1]))
            seq.append(int(top2.indices[0]))
        greedy = seq[len(ids):]
        lg = logits_of(model, seq)
        lse = torch.logsumexp(lg.double(), dim=-1)
        top = torch.topk(lg, TOPK, dim=-1)
        scale = float(lg.abs().max())
        r32 = ref(W, cfg, seq, torch.float32)
        worst["reference_vs_transformers"] = max(
            worst["reference_vs_transformers"], float((r32 - lg).abs().max()) / scale)
        r64 = ref(W, cfg, seq, torch.float64)
        worst["reference64_vs_f32"] = max(worst["reference64_vs_f32"], float((r64 - lg.double()).abs().max()) / scale)
        if model64 is not None:
            lg64 = logits_of(model64, seq)
            worst["f32_vs_f64"] = max(worst["f32_vs_f64"], float((lg.double() - lg64).abs().max()) / scale)
            worst["reference64_vs_f64"] = max(worst["reference64_vs_f64"], float((r64 - lg64).abs().max()) / scale)
        entry = {
            "ids": ids,
            "greedy": greedy,
            "greedy_margin": margins,
            "teacher": {
                "top_ids": top.indices.tolist(),
                "top_logits": [[f7(v) for v in row] for row in top.values.tolist()],
                "logsumexp": [f7(v) for v in lse.tolist()],
            },
        }
        if pi in FULL_ROW_PROMPTS:
            rows = {}
            for pos in (len(ids) - 1, len(seq) - 1):
                rows[str(pos)] = [f7(v) for v in lg[pos].tolist()]
            entry["full_rows"] = rows
        prompts.append(entry)
        log(f"  prompt {pi}: {len(ids)} ids, greedy {greedy[:8]}..., smallest top-1 margin {min(margins):.4g}")
    log("  relative errors (of the largest logit):", json.dumps(worst))
    return prompts, worst


def summary(cfg, family):
    keys = ["vocab_size", "hidden_size", "intermediate_size", "moe_intermediate_size", "num_hidden_layers",
            "num_attention_heads", "num_key_value_heads", "head_dim", "num_experts", "num_experts_per_tok",
            "norm_topk_prob", "rms_norm_eps", "tie_word_embeddings", "query_pre_attn_scalar", "sliding_window",
            "layer_types", "final_logit_softcapping", "attn_logit_softcapping", "rope_parameters"]
    out = {"family": family}
    for k in keys:
        if hasattr(cfg, k):
            v = getattr(cfg, k)
            try:
                json.dumps(v)
                out[k] = v
            except TypeError:
                out[k] = str(v)
    return out


def make(family, outdir):
    import transformers
    from safetensors.torch import load_file, save_file

    log(f"== {family} (transformers {transformers.__version__}, torch {torch.__version__})")
    if family == "qwen3moe":
        from transformers import Qwen3MoeForCausalLM as cls
        cfg, ref = qwen3moe_config(), reference_qwen3moe
    else:
        from transformers import Gemma3ForCausalLM as cls
        cfg, ref = gemma3_config(), reference_gemma3
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED + (0 if family == "qwen3moe" else 1))
    model = build(cls, cfg)
    randomize(model, family, gen)
    for n, t in model.state_dict().items():
        if ".layers.0." in n or ".layers." not in n:
            log(f"  {n} {tuple(t.shape)}")

    d = os.path.join(outdir, family)
    os.makedirs(d, exist_ok=True)
    probe = PROMPTS[0] + PROMPTS[3]
    want = logits_of(model, probe)
    scale = float(want.abs().max())
    # The fused expert layout's gate/up order is checked, not assumed: the
    # saved tensors must reproduce transformers through the plain forward.
    chosen = None
    for gate_first in (True, False):
        W = {k: v.float() for k, v in hub_tensors(model, cfg, gate_first).items()}
        err = float((ref(W, cfg, probe, torch.float32) - want).abs().max()) / scale
        log(f"  plain forward of the saved tensors (gate first={gate_first}): relative error {err:.2e}")
        if err < 1e-4:
            chosen = gate_first
            break
        if not any(".experts." in k for k in W):
            break
    if chosen is None:
        log("  WARNING: the plain forward disagrees with transformers; tensors saved gate-first")
        chosen = True
    tensors = hub_tensors(model, cfg, chosen)
    path = os.path.join(d, "model.safetensors")
    save_file(tensors, path, metadata={"format": "pt"})
    cfg.save_pretrained(d)
    W = {k: v.float() for k, v in load_file(path).items()}

    # Another reader of the saved files: transformers itself.
    try:
        again = cls.from_pretrained(d, dtype=torch.float32, attn_implementation="eager").eval()
        err = float((logits_of(again, probe) - want).abs().max()) / scale
        log(f"  from_pretrained of the saved files: relative error {err:.2e}")
    except Exception as e:
        log("  from_pretrained of the saved files failed:", repr(e)[:300])

    model64 = None
    try:
        model64 = build(cls, cfg)
        model64.load_state_dict(model.state_dict())
        model64 = model64.double().eval()
        logits_of(model64, PROMPTS[3])
    except Exception as e:  # only a diagnostic: the float32 oracle stands alone
        log("  float64 copy unavailable:", repr(e)[:300])
        model64 = None
    prompts, worst = oracle_for(model, model64, W, cfg, ref, family)
    doc = {
        "note": ("transformers " + transformers.__version__ + ", float32 on the CPU, eager attention, "
                 "weights as in model.safetensors (float16-exact); greedy continuations of "
                 f"{GREEDY_TOKENS} tokens ignore EOS, each step recomputing the whole sequence; teacher: "
                 f"top-{TOPK} ids and logits and the logsumexp at every position of prompt + continuation; "
                 "full_rows: whole logit rows at the last prompt position and the last position"),
        "seed": SEED,
        "config": summary(cfg, family),
        "oracle_error": worst,
        "greedy": [{"prompt_ids": p["ids"], "greedy_ids": p["greedy"]} for p in prompts],
        "prompts": prompts,
    }
    with open(os.path.join(d, "oracle.json"), "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    for name in sorted(os.listdir(d)):
        log(f"  wrote {family}/{name}: {os.path.getsize(os.path.join(d, name))} bytes")


def main():
    if len(sys.argv) != 2:
        print("usage: familyfixtures.py OUTDIR", file=sys.stderr)
        return 2
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    t0 = time.time()
    status = 0
    for family in ("qwen3moe", "gemma3"):
        try:
            make(family, outdir)
        except Exception as e:
            import traceback

            log(f"{family} FAILED: {e!r}")
            log(traceback.format_exc())
            status = 1
    log(f"done in {time.time() - t0:.1f}s")
    with open(os.path.join(outdir, "log.txt"), "w") as f:
        f.write("\n".join(LOG) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
