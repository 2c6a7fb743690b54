#!/usr/bin/env python3
"""PyTorch side of `agent-lab bench train`: the same Stack model, data and optimiser.

Run by bench/train.ts as a small server so that the two sides can take turns on the same
CPU (machine noise then hits both alike):

    python3 bench/torch_train.py --data DATA.json [--weights model.safetensors] [--threads 2]

stdin, one command per line:     stdout, one JSON object per line:
    steps N VARIANT                  {"variant", "step_ms": [...], "cpu_ms": [...], "tokens": [...], "losses": [...]}
                                     (cpu_ms: the process's CPU time per step, every thread's)
    decode B P G MODE SEED           {"prefill_ms", "decode_ms", "cpu_ms", "tokens": [[...] per row]}: the first
                                     P tokens of B transcripts, then G tokens each with a KV cache,
                                     all B rows a step; MODE greedy (argmax) or sample (softmax, T = 1)
                                     (bench/decode.ts)
    quit                             (exits)
The first line printed is {"ready": true, "torch", "threads", "params", "init_loss", "blas"}
("blas": which BLAS library the process loaded, its variant and thread count: blas_info()).

DATA.json: {"model": {vocab, dModel, layers, heads, kvHeads, mlp, maxSeq, ropeBase},
            "optim": {lr, betas, weightDecay, clip, eps},
            "batches": [{"batch", "seq", "inputIds": [...], "labels": [...]}]}
Labels are already shifted; -100 = not a target. Weights (optional) are the lab's
safetensors checkpoint (trainer/checkpoint.ts: F32, [in, out] layout), so that
"init_loss" can be compared with the lab's loss on the same weights and batch.

VARIANT:
  natural  the idiomatic implementation: repeat_interleave for GQA, [B, H, T, T] scores,
           logits for every position, cross_entropy(ignore_index=-100)
  matched  the lab's algorithmic choices: a kv group's query heads stacked into one
           matmul, logits only at supervised positions, rows cut after their last label
Both do the same maths (the test of that is init_loss); only the work differs.
"""
import argparse
import ctypes
import json
import os
import re
import math
import struct
import sys
import time

import torch
import torch.nn.functional as F


def blas_info():
    """Which BLAS this process loaded and how it is threaded: the library files mapped into
    the process (Debian's alternatives choose among openblas-pthread, openblas-openmp,
    openblas-serial and the reference libblas), OpenBLAS's own build string and thread count
    when it is OpenBLAS, torch's BLAS_INFO, and the environment that set the threads."""
    libs = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                name = os.path.basename(path)
                if ("blas" in name or "mkl" in name) and path not in libs:
                    libs.append(path)
    except OSError:
        pass
    variant = "unknown"
    for key, v in (("openblas-pthread", "openblas-pthread"), ("openblas-openmp", "openblas-openmp"), ("openblas-serial", "openblas-serial"),
                   ("libopenblasp", "openblas-pthread"), ("libopenblaso", "openblas-openmp"), ("libmkl", "mkl"), ("/blas/libblas", "reference blas")):
        if any(key in p for p in libs):
            variant = v
            break
    config, threads = None, None
    for p in libs:
        if "openblas" not in p:
            continue
        try:
            lib = ctypes.CDLL(p)
            lib.openblas_get_config.restype = ctypes.c_char_p
            config = lib.openblas_get_config().decode()
            threads = int(lib.openblas_get_num_threads())
            break
        except (OSError, AttributeError):
            continue
    m = re.search(r"BLAS_INFO=([\w-]+)", torch.__config__.show())
    info = m.group(1) if m else ""
    return {"variant": variant, "libraries": libs, "openblas_config": config, "openblas_threads": threads, "torch_blas_info": info,
            "env": {k: os.environ.get(k) for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS") if os.environ.get(k) is not None}}


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8 : 8 + n])
    out = {}
    for name, v in header.items():
        if name == "__metadata__":
            continue
        assert v["dtype"] == "F32", v["dtype"]
        b, e = v["data_offsets"]
        t = torch.frombuffer(bytearray(data[8 + n + b : 8 + n + e]), dtype=torch.float32)
        out[name] = t.reshape(v["shape"]).clone()
    return out


class Stack(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        d, H, K = cfg["dModel"], cfg["heads"], cfg["kvHeads"]
        hd = d // H
        self.hd = hd
        P = torch.nn.Parameter
        self.tok_embeddings = P(torch.randn(cfg["vocab"], d) * 0.02)
        # Previous-token tables (trainer/modelConfig.ts prevTokens): "prev_embeddings.k" is
        # added at the id k positions back; row vocab stands for "before the start".
        n_prev = cfg.get("prevTokens", 0) or 0
        if n_prev:
            self.prev_embeddings = torch.nn.ParameterDict({str(k): P(torch.randn(cfg["vocab"] + 1, d) * 0.02) for k in range(1, n_prev + 1)})
        self.layers = torch.nn.ModuleList()
        for _ in range(cfg["layers"]):
            m = torch.nn.Module()
            m.attn_norm = P(torch.ones(d))
            m.wqkv = P(torch.randn(d, (H + 2 * K) * hd) * 0.02)
            m.wo = P(torch.randn(H * hd, d) * 0.02)
            m.mlp_norm = P(torch.ones(d))
            m.w_gate = P(torch.randn(d, cfg["mlp"]) * 0.02)
            m.w_up = P(torch.randn(d, cfg["mlp"]) * 0.02)
            m.w_down = P(torch.randn(cfg["mlp"], d) * 0.02)
            self.layers.append(m)
        self.final_norm = P(torch.ones(d))
        inv = 1.0 / (cfg["ropeBase"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
        t = torch.arange(cfg["maxSeq"], dtype=torch.float64)
        ang = torch.outer(t, inv)
        ang = torch.cat([ang, ang], dim=-1)
        self.register_buffer("cos", ang.cos().float(), persistent=False)
        self.register_buffer("sin", ang.sin().float(), persistent=False)

    def load(self, weights):
        with torch.no_grad():
            for name, p in self.named_parameters():
                p.copy_(weights[name])

    def norm(self, x, g):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.cfg.get("normEps", 1e-5)) * g

    def rope(self, x, T):  # x [..., T, hd]
        a, b = x.chunk(2, dim=-1)
        return x * self.cos[:T] + torch.cat([-b, a], dim=-1) * self.sin[:T]

    def forward(self, ids, variant):
        cfg = self.cfg
        B, T = ids.shape
        H, K, hd = cfg["heads"], cfg["kvHeads"], self.hd
        rep = H // K
        x = F.embedding(ids, self.tok_embeddings)
        for k in range(1, (cfg.get("prevTokens", 0) or 0) + 1):
            prev = torch.full_like(ids, cfg["vocab"])
            prev[:, k:] = ids[:, :-k]
            x = x + F.embedding(prev, self.prev_embeddings[str(k)])
        mask = torch.full((T, T), float("-inf")).triu(1)
        for m in self.layers:
            h = self.norm(x, m.attn_norm)
            qkv = (h @ m.wqkv).view(B, T, H + 2 * K, hd).transpose(1, 2)  # [B, heads, T, hd]
            q = self.rope(qkv[:, :H], T)
            k = self.rope(qkv[:, H : H + K], T)
            v = qkv[:, H + K :]
            if variant == "natural":
                k = k.repeat_interleave(rep, dim=1)
                v = v.repeat_interleave(rep, dim=1)
                att = (q @ k.transpose(-2, -1)) / math.sqrt(hd) + mask
                o = att.softmax(-1) @ v  # [B, H, T, hd]
            else:
                qg = q.reshape(B, K, rep * T, hd)  # a group's heads stacked
                att = (qg @ k.transpose(-2, -1)) / math.sqrt(hd) + mask.repeat(rep, 1)
                o = (att.softmax(-1) @ v).reshape(B, H, T, hd)
            o = o.transpose(1, 2).reshape(B, T, H * hd)
            x = x + o @ m.wo
            h = self.norm(x, m.mlp_norm)
            x = x + (F.silu(h @ m.w_gate) * (h @ m.w_up)) @ m.w_down
        return self.norm(x, self.final_norm)

    @torch.no_grad()
    def decode(self, prompts, G, sample, seed):
        """KV-cache decoding of B prompts [B, P] for G tokens; a kv group's query heads stacked
        into one product as in training's "matched" variant; the cache grows by concatenation
        (as transformers' DynamicCache)."""
        cfg = self.cfg
        B, P = prompts.shape
        H, K, hd = cfg["heads"], cfg["kvHeads"], self.hd
        rep = H // K
        n_prev = cfg.get("prevTokens", 0) or 0
        gen = torch.Generator().manual_seed(seed)
        hist = prompts
        cache = [None] * len(self.layers)

        def run(ids, start):
            T = ids.shape[1]
            x = F.embedding(ids, self.tok_embeddings)
            for k in range(1, n_prev + 1):
                pos = torch.arange(start, start + T) - k
                prev = hist[:, pos.clamp(min=0)]
                prev = torch.where(pos >= 0, prev, torch.full_like(prev, cfg["vocab"]))
                x = x + F.embedding(prev, self.prev_embeddings[str(k)])
            cos, sin = self.cos[start : start + T], self.sin[start : start + T]

            def rope(t):
                a, b = t.chunk(2, dim=-1)
                return t * cos + torch.cat([-b, a], dim=-1) * sin

            L = start + T
            mask = None
            if T > 1:
                mask = torch.full((T, L), float("-inf")).triu(start + 1).repeat(rep, 1)
            for i, m in enumerate(self.layers):
                h = self.norm(x, m.attn_norm)
                qkv = (h @ m.wqkv).view(B, T, H + 2 * K, hd).transpose(1, 2)
                q = rope(qkv[:, :H])
                k = rope(qkv[:, H : H + K])
                v = qkv[:, H + K :]
                if cache[i] is not None:
                    k = torch.cat([cache[i][0], k], dim=2)
                    v = torch.cat([cache[i][1], v], dim=2)
                cache[i] = (k, v)
                att = (q.reshape(B, K, rep * T, hd) @ k.transpose(-2, -1)) / math.sqrt(hd)
                if mask is not None:
                    att = att + mask
                o = (att.softmax(-1) @ v).reshape(B, H, T, hd).transpose(1, 2).reshape(B, T, H * hd)
                x = x + o @ m.wo
                h = self.norm(x, m.mlp_norm)
                x = x + (F.silu(h @ m.w_gate) * (h @ m.w_up)) @ m.w_down
            return self.norm(x[:, -1], self.final_norm) @ self.tok_embeddings.t()

        t0 = time.perf_counter()
        c0 = time.process_time()
        logits = run(prompts, 0)
        t1 = time.perf_counter()
        out = []
        for g in range(G):
            nxt = torch.multinomial(logits.softmax(-1), 1, generator=gen) if sample else logits.argmax(-1, keepdim=True)
            out.append(nxt)
            hist = torch.cat([hist, nxt], dim=1)
            logits = run(nxt, P + g)
        t2 = time.perf_counter()
        toks = torch.cat(out, dim=1).tolist()
        return {"prefill_ms": (t1 - t0) * 1000, "decode_ms": (t2 - t1) * 1000, "cpu_ms": (time.process_time() - c0) * 1000, "tokens": toks}

    def loss(self, ids, labels, variant):
        hf = self.forward(ids, variant)
        E = self.tok_embeddings
        if variant == "natural":
            logits = hf @ E.t()
            return F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1), ignore_index=-100)
        flat = labels.view(-1)
        idx = (flat != -100).nonzero().squeeze(1)
        logits = hf.reshape(-1, hf.shape[-1])[idx] @ E.t()
        return F.cross_entropy(logits, flat[idx])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--weights")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    spec = json.load(open(args.data))
    cfg, opt = spec["model"], spec["optim"]
    batches = []
    for b in spec["batches"]:
        ids = torch.tensor(b["inputIds"], dtype=torch.long).view(b["batch"], b["seq"])
        lab = torch.tensor(b["labels"], dtype=torch.long).view(b["batch"], b["seq"])
        sup = (lab != -100).nonzero()
        last = int(sup[:, 1].max()) + 1 if len(sup) else 1
        tokens = int(sum(int((lab[r] != -100).nonzero().max()) + 1 for r in range(b["batch"]) if (lab[r] != -100).any()))
        batches.append({"ids": ids, "labels": lab, "ids_cut": ids[:, :last].contiguous(), "labels_cut": lab[:, :last].contiguous(), "tokens": tokens})
    model = Stack(cfg)
    if args.weights:
        model.load(load_safetensors(args.weights))
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": opt["weightDecay"]}, {"params": no_decay, "weight_decay": 0.0}]
    try:
        optim = torch.optim.AdamW(groups, lr=opt["lr"], betas=tuple(opt["betas"]), eps=opt["eps"], foreach=True)
    except TypeError:
        optim = torch.optim.AdamW(groups, lr=opt["lr"], betas=tuple(opt["betas"]), eps=opt["eps"])
    # One step before reading the BLAS: some libraries are mapped only at the first matmul.
    with torch.no_grad():
        model.forward(batches[0]["ids_cut"][:, :8], "matched")
    with torch.no_grad():
        b0 = batches[0]
        init_loss = float(model.loss(b0["ids"], b0["labels"], "natural"))
        init_loss_matched = float(model.loss(b0["ids_cut"], b0["labels_cut"], "matched"))
    print(json.dumps({"ready": True, "torch": torch.__version__, "threads": torch.get_num_threads(),
                      "params": sum(p.numel() for p in model.parameters()), "init_loss": init_loss,
                      "init_loss_matched": init_loss_matched, "blas": blas_info()}), flush=True)
    cursor = 0
    for line in sys.stdin:
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "quit":
            break
        if parts[0] == "decode":
            B, P, G, mode, seed = int(parts[1]), int(parts[2]), int(parts[3]), parts[4], int(parts[5])
            rows = [b["ids"][r] for b in batches for r in range(b["ids"].shape[0])][:B]
            prompts = torch.stack([r[:P] for r in rows])
            print(json.dumps(model.decode(prompts, G, mode == "sample", seed)), flush=True)
            continue
        if parts[0] != "steps":
            print(json.dumps({"error": f"unknown command {parts[0]}"}), flush=True)
            continue
        n, variant = int(parts[1]), parts[2] if len(parts) > 2 else "matched"
        step_ms, cpu_ms, tokens, losses = [], [], [], []
        for _ in range(n):
            b = batches[cursor % len(batches)]
            cursor += 1
            t0 = time.perf_counter()
            c0 = time.process_time()
            optim.zero_grad(set_to_none=True)
            if variant == "natural":
                loss = model.loss(b["ids"], b["labels"], "natural")
            else:
                loss = model.loss(b["ids_cut"], b["labels_cut"], "matched")
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), opt["clip"])
            optim.step()
            step_ms.append((time.perf_counter() - t0) * 1000)
            cpu_ms.append((time.process_time() - c0) * 1000)
            tokens.append(b["tokens"])
            losses.append(float(loss))
        print(json.dumps({"variant": variant, "step_ms": step_ms, "cpu_ms": cpu_ms, "tokens": tokens, "losses": losses}), flush=True)


if __name__ == "__main__":
    main()
