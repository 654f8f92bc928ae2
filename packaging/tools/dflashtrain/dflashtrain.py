#!/usr/bin/env python3
"""Train a DFlash block draft for a target on the target's own hidden states.

The PyTorch half of packaging/tools/dflashtrain (see main.go there):

  dflashtrain.py corpus --out corpus.jsonl            # Debian's bible-kjv + fortunes, ChatML turns
  go run ./packaging/tools/dflashtrain dump -target T.gguf -corpus corpus.jsonl -out DIR
  dflashtrain.py train --data DIR --out DIR/draft --device cpu --minutes 5
  go run ./packaging/tools/dflashtrain pack -target T.gguf -weights DIR/draft -out D.gguf

The draft computes what Tandem's engine/model/dflash.go runs (llama.cpp's
DFlash layout): g = RMSNorm(fc(concat of the target's block inputs)) gives
every layer's K and V at the positions the target has run; a block
[anchor, mask, ...] at positions p..p+B-1 runs through qwen3-style layers
whose attention sees those positions before p and the whole block; the
output norm and the target's head (frozen, borrowed) give each slot's
logits. Slot i is trained on the target's own choice at p+i given the true
prefix (dump's next.i32), so the draft learns what verification accepts.
Token embedding and head are the target's, frozen; nothing else is shared.
"""

import argparse
import json
import math
import os
import random
import re
import struct
import subprocess
import sys
import time

CHAT_SYSTEM = "You are a helpful assistant."


def turn(q, a, system=False):
    s = ""
    if system:
        s += "<|im_start|>system\n" + CHAT_SYSTEM + "<|im_end|>\n"
    return s + "<|im_start|>user\n" + q + "<|im_end|>\n<|im_start|>assistant\n" + a + "<|im_end|>\n"


def bible_verses():
    """(book, chapter, verse, text) from the bible program (bible-kjv)."""
    out = subprocess.run(["bible", "-l100000", "Gen1:1-Rev22:21"], capture_output=True, text=True, check=True).stdout
    book, chapter = None, None
    for line in out.splitlines():
        m = re.match(r"^(\S.*) (\d+)$", line)
        if m:
            book, chapter = m.group(1), int(m.group(2))
            continue
        m = re.match(r"^\s+(\d+) (.*)$", line)
        if m and book:
            yield book, chapter, int(m.group(1)), m.group(2).strip()


def fortunes(root="/usr/share/games/fortunes"):
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if "." in name or not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            for item in f.read().split("\n%\n"):
                item = item.strip("\n")
                if 0 < len(item) < 600:
                    yield item


def corpus(args):
    rng = random.Random(args.seed)
    verses = list(bible_verses())
    fs = list(fortunes())
    if not verses or not fs:
        sys.exit("corpus: install bible-kjv (and bible-kjv-text) and fortunes")
    asks = ["Quote {}.", "What does {} say?", "Recite {}, please."]
    wise = ["Tell me a fortune.", "Say something wise."]
    docs = []
    for _ in range(args.docs):
        kind = rng.random()
        if kind < 0.45:  # scripture turns
            doc = ""
            for _ in range(rng.randint(1, 3)):
                b, c, v, t = verses[rng.randrange(len(verses))]
                doc += turn(rng.choice(asks).format(f"{b} {c}:{v}"), t, rng.random() < 0.3) + "<|endoftext|>"
        elif kind < 0.75:  # fortune turns
            doc = ""
            for _ in range(rng.randint(1, 3)):
                doc += turn(rng.choice(wise), rng.choice(fs), rng.random() < 0.3) + "<|endoftext|>"
        elif kind < 0.9:  # running scripture
            i = rng.randrange(len(verses) - 20)
            doc = " ".join(v[3] for v in verses[i:i + rng.randint(3, 12)])
        else:  # running fortunes
            doc = "\n".join(rng.choice(fs) for _ in range(rng.randint(1, 3)))
        docs.append(doc)
    with open(args.out, "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps(d) + "\n")
    print(f"corpus: {len(docs)} documents to {args.out}")


def train(args):
    import numpy as np
    import torch
    import torch.nn.functional as F

    torch.manual_seed(args.seed)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    dev = torch.device(args.device)
    meta = json.load(open(os.path.join(args.data, "meta.json")))
    E, V, L = meta["n_embd"], meta["n_vocab"], len(meta["target_layers"])
    eps = meta["norm_eps"]
    tokens = np.fromfile(os.path.join(args.data, "tokens.i32"), dtype="<i4")
    nxt = np.fromfile(os.path.join(args.data, "next.i32"), dtype="<i4")
    starts = np.fromfile(os.path.join(args.data, "starts.i32"), dtype="<i4")
    feats = np.memmap(os.path.join(args.data, "feats.f16"), dtype="<f2", mode="r").reshape(-1, L * E)
    assert feats.shape[0] == len(tokens) == len(nxt) == starts[-1], "dump files disagree"
    embd = torch.from_numpy(np.fromfile(os.path.join(args.data, "embd.f32"), dtype="<f4").reshape(V, E)).to(dev)
    head = torch.from_numpy(np.fromfile(os.path.join(args.data, "head.f32"), dtype="<f4").reshape(V, E)).to(dev)
    tnorm = torch.from_numpy(np.fromfile(os.path.join(args.data, "norm.f32"), dtype="<f4")).to(dev)
    H, KV, D, FF, NL, B = args.heads, args.kv_heads, E // args.heads, args.ff, args.layers, args.block
    mask_id = meta["mask_token"]
    seqs = [(int(starts[i]), int(starts[i + 1])) for i in range(len(starts) - 1) if starts[i + 1] - starts[i] >= B + 2]
    rng = random.Random(args.seed)
    rng.shuffle(seqs)
    held = seqs[: max(1, len(seqs) // 50)]
    seqs = seqs[len(held):]

    def param(*shape, std=0.02):
        return torch.nn.Parameter(torch.randn(*shape, device=dev) * std)

    def ones(n):
        return torch.nn.Parameter(torch.ones(n, device=dev))

    P = {"fc": param(E, L * E, std=1 / math.sqrt(L * E)), "enc_norm": ones(E), "out_norm": torch.nn.Parameter(tnorm.clone())}
    for l in range(NL):
        P.update({
            f"{l}.attn_norm": ones(E), f"{l}.q": param(H * D, E), f"{l}.k": param(KV * D, E), f"{l}.v": param(KV * D, E),
            f"{l}.o": param(E, H * D, std=0.02 / math.sqrt(2 * NL)), f"{l}.q_norm": ones(D), f"{l}.k_norm": ones(D),
            f"{l}.ffn_norm": ones(E), f"{l}.gate": param(FF, E), f"{l}.up": param(FF, E),
            f"{l}.down": param(E, FF, std=0.02 / math.sqrt(2 * NL)),
        })

    def rms(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w

    inv = 1.0 / (args.rope_base ** (torch.arange(0, D // 2, device=dev, dtype=torch.float32) * 2 / D))

    def rope(x, pos):  # x [..., T, D], pos [..., T]: NEOX halves
        ang = pos.unsqueeze(-1).float() * inv
        c, s = ang.cos(), ang.sin()
        a, b = x[..., : D // 2], x[..., D // 2:]
        return torch.cat([a * c - b * s, a * s + b * c], -1)

    def batch(pool, n):
        """n sequences padded to S; A anchors each; labels per slot."""
        picks = [pool[rng.randrange(len(pool))] for _ in range(n)]
        S = max(e - s for s, e in picks)
        A = args.anchors
        tok = torch.zeros(n, S, dtype=torch.long)
        ft = torch.zeros(n, S, L * E, dtype=torch.float32)
        lens = torch.zeros(n, dtype=torch.long)
        anchors = torch.zeros(n, A, dtype=torch.long)
        labels = torch.full((n, A, B - 1), -100, dtype=torch.long)
        for i, (s, e) in enumerate(picks):
            m = e - s
            tok[i, :m] = torch.from_numpy(tokens[s:e].astype(np.int64))
            ft[i, :m] = torch.from_numpy(np.asarray(feats[s:e], dtype=np.float32))
            lens[i] = m
            for j in range(A):
                a = rng.randrange(1, m - 1)
                anchors[i, j] = a
                for k in range(1, B):
                    if a + k - 1 < m:
                        labels[i, j, k - 1] = int(nxt[s + a + k - 1])
        return tok.to(dev), ft.to(dev), lens.to(dev), anchors.to(dev), labels.to(dev)

    def forward(tok, ft, lens, anchors):
        n, S = tok.shape
        A = anchors.shape[1]
        g = rms(ft @ P["fc"].t(), P["enc_norm"])  # [n, S, E]
        ctx_pos = torch.arange(S, device=dev).expand(n, S)
        bpos = (anchors.unsqueeze(-1) + torch.arange(B, device=dev)).reshape(n, A * B)  # [n, A*B]
        btok = torch.full((n, A, B), mask_id, dtype=torch.long, device=dev)
        btok[:, :, 0] = torch.gather(tok, 1, anchors)
        x = embd[btok.reshape(n, A * B)]  # [n, A*B, E]
        # a slot sees the context before its anchor (within the sequence) and its whole block
        qa = anchors.unsqueeze(-1).expand(n, A, B).reshape(n, A * B)
        see_ctx = (ctx_pos.unsqueeze(1) < qa.unsqueeze(-1)) & (ctx_pos.unsqueeze(1) < lens.view(n, 1, 1))
        blk = torch.arange(A, device=dev).repeat_interleave(B)
        see_blk = (blk.view(1, -1, 1) == blk.view(1, 1, -1)).expand(n, -1, -1)
        allowed = torch.cat([see_ctx, see_blk], -1).unsqueeze(1)  # [n, 1, A*B, S+A*B]
        rep = H // KV
        for l in range(NL):
            kc = rope(rms((g @ P[f"{l}.k"].t()).view(n, S, KV, D), P[f"{l}.k_norm"]).transpose(1, 2), ctx_pos.unsqueeze(1))
            vc = (g @ P[f"{l}.v"].t()).view(n, S, KV, D).transpose(1, 2)
            h = rms(x, P[f"{l}.attn_norm"])
            q = rope(rms((h @ P[f"{l}.q"].t()).view(n, A * B, H, D), P[f"{l}.q_norm"]).transpose(1, 2), bpos.unsqueeze(1))
            kb = rope(rms((h @ P[f"{l}.k"].t()).view(n, A * B, KV, D), P[f"{l}.k_norm"]).transpose(1, 2), bpos.unsqueeze(1))
            vb = (h @ P[f"{l}.v"].t()).view(n, A * B, KV, D).transpose(1, 2)
            k = torch.cat([kc, kb], 2).repeat_interleave(rep, 1)
            v = torch.cat([vc, vb], 2).repeat_interleave(rep, 1)
            att = (q @ k.transpose(-1, -2)) / math.sqrt(D)
            att = att.masked_fill(~allowed, float("-inf")).softmax(-1)
            o = (att @ v).transpose(1, 2).reshape(n, A * B, H * D)
            x = x + o @ P[f"{l}.o"].t()
            h = rms(x, P[f"{l}.ffn_norm"])
            x = x + (F.silu(h @ P[f"{l}.gate"].t()) * (h @ P[f"{l}.up"].t())) @ P[f"{l}.down"].t()
        out = rms(x.view(n, A, B, E)[:, :, 1:], P["out_norm"])
        return out @ head.t()  # [n, A, B-1, V]

    weights = torch.tensor([math.exp(-(k) / args.decay) for k in range(B - 1)], device=dev)

    def loss_of(logits, labels):
        ce = F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1), ignore_index=-100, reduction="none").view(labels.shape)
        valid = (labels != -100).float()
        return (ce * valid * weights).sum() / (valid * weights).sum()

    def accuracy(logits, labels):
        hit = (logits.argmax(-1) == labels) & (labels != -100)
        # the accepted length under greedy verification: slots up to the first miss
        run = torch.cumprod(hit.long(), -1).sum(-1).float().mean().item()
        return [((hit[..., k]).float().sum() / (labels[..., k] != -100).float().sum()).item() for k in range(B - 1)], run

    opt = torch.optim.AdamW(P.values(), lr=args.lr, weight_decay=0.01, betas=(0.9, 0.95))
    t0, step = time.time(), 0
    budget = args.minutes * 60
    while True:
        elapsed = time.time() - t0
        if elapsed > budget or (args.steps and step >= args.steps):
            break
        frac = min(1.0, elapsed / budget)
        for grp in opt.param_groups:
            grp["lr"] = args.lr * min(1.0, (step + 1) / 50) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        tok, ft, lens, anchors, labels = batch(seqs, args.batch)
        loss = loss_of(forward(tok, ft, lens, anchors), labels)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(P.values(), 1.0)
        opt.step()
        step += 1
        if step % args.log_every == 0:
            print(f"step {step} {elapsed:.0f}s loss {loss.item():.3f}", flush=True)
    with torch.no_grad():
        tok, ft, lens, anchors, labels = batch(held, min(len(held), 32))
        acc, run = accuracy(forward(tok, ft, lens, anchors), labels)
    print(f"held-out: {step} steps; top-1 by slot {[round(a, 3) for a in acc]}; mean accepted run {run:.2f}")

    # GGUF names, dims ne0 first (a PyTorch [out, in] matrix is ne [in, out])
    names = [("fc.weight", "fc"), ("enc.output_norm.weight", "enc_norm"), ("output_norm.weight", "out_norm")]
    for l in range(NL):
        for g, k in [("attn_norm", "attn_norm"), ("attn_q", "q"), ("attn_k", "k"), ("attn_v", "v"), ("attn_output", "o"),
                     ("attn_q_norm", "q_norm"), ("attn_k_norm", "k_norm"), ("ffn_norm", "ffn_norm"), ("ffn_gate", "gate"),
                     ("ffn_up", "up"), ("ffn_down", "down")]:
            names.append((f"blk.{l}.{g}.weight", f"{l}.{k}"))
    man = {"tensors": [], "n_embd": E, "n_layer": NL, "n_head": H, "n_head_kv": KV, "head_dim": D, "n_ff": FF,
           "n_ctx": args.ctx, "rope_base": args.rope_base, "norm_eps": eps, "block_size": B, "mask_token": mask_id,
           "target_layers": meta["target_layers"], "name": args.name}
    off = 0
    with open(args.out + ".f32", "wb") as f:
        for gname, key in names:
            t = P[key].detach().float().cpu().contiguous()
            man["tensors"].append({"name": gname, "dims": list(reversed(t.shape)), "offset": off})
            f.write(t.numpy().astype("<f4").tobytes())
            off += t.numel()
    json.dump(man, open(args.out + ".json", "w"), indent=1)
    print(f"wrote {args.out}.json and {args.out}.f32 ({off} floats)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("corpus", help="write the demo corpus as JSON lines")
    c.add_argument("--out", required=True)
    c.add_argument("--docs", type=int, default=6000)
    c.add_argument("--seed", type=int, default=1)
    t = sub.add_parser("train", help="train a DFlash draft on a dump")
    t.add_argument("--data", required=True, help="dflashtrain dump's directory")
    t.add_argument("--out", required=True, help="output prefix: PREFIX.json, PREFIX.f32")
    t.add_argument("--device", default="cpu", help="cpu, cuda, cuda:0, ...")
    t.add_argument("--minutes", type=float, default=5)
    t.add_argument("--steps", type=int, default=0, help="stop after this many steps too (0: the time decides)")
    t.add_argument("--threads", type=int, default=2, help="CPU threads (0: torch's default)")
    t.add_argument("--layers", type=int, default=1)
    t.add_argument("--heads", type=int, default=6)
    t.add_argument("--kv-heads", type=int, default=2)
    t.add_argument("--ff", type=int, default=1024)
    t.add_argument("--block", type=int, default=8, help="block size, anchor included")
    t.add_argument("--anchors", type=int, default=8, help="blocks per sequence and step")
    t.add_argument("--batch", type=int, default=8, help="sequences per step")
    t.add_argument("--lr", type=float, default=2e-3)
    t.add_argument("--decay", type=float, default=4.0, help="slot k's loss weight is exp(-k/decay)")
    t.add_argument("--rope-base", type=float, default=1e6)
    t.add_argument("--ctx", type=int, default=4096)
    t.add_argument("--seed", type=int, default=1)
    t.add_argument("--log-every", type=int, default=10)
    t.add_argument("--name", default="factory-dflash")
    args = ap.parse_args()
    {"corpus": corpus, "train": train}[args.cmd](args)


if __name__ == "__main__":
    main()
