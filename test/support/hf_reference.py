#!/usr/bin/env python3
"""Tiny random Hugging Face model folders and their reference logits (test/unit/hfModel.test.ts).

    python3 test/support/hf_reference.py OUT_DIR
    python3 test/support/hf_reference.py --logits MODEL_DIR 1,2,3
    python3 test/support/hf_reference.py --smol OUT_DIR
    python3 test/support/hf_reference.py --peft MODEL_DIR ADAPTER_DIR 1,2,3 [ROWS]

The first writes OUT_DIR/<name>/ per configuration: config.json, the weights
(model.safetensors, or two shards and model.safetensors.index.json) and reference.json
{"ids", "logits" [T][V]}. The second reads any such folder (one the lab exported) with the
reader here and prints {"logits": [T][V]} for the ids. The third writes one
SmolLM2-135M-shaped random folder (hidden 576, 30 layers, 9/3 heads, MLP 1536, vocab 49152,
BF16, tied, two shards) with its reference.json (bench/hfLoad.ts measures it). The fourth
applies a PEFT LoRA adapter folder (adapter_config.json, adapter_model.safetensors) to the
model by PEFT's equations (no peft package: W' = W + (lora_alpha / r) * B @ A on each
target module, the keys "base_model.model.<module>.lora_A.weight" / ".lora_B.weight"; each
module of "modules_to_save" replaced whole by its "base_model.model.<module>.weight", which
must have the module's shape, as PEFT's load demands) and prints the logits of the result, as
--logits does. ROWS first resizes the base's embedding (and untied head) to that many rows, as
model.resize_token_embeddings(ROWS) does before PeftModel.from_pretrained (new rows the mean
of the old; a modules_to_save embedding replaces them). A saved lm_head of a tied base unties
it, as PEFT's copy of each module does.

Independent of the lab's code: the safetensors files are written here (struct + json), and
the forward pass follows transformers' modeling_llama.py / modeling_qwen2.py equations in
PyTorch (Debian's python3-torch; transformers itself is not installed): RMSNorm in float32
(x * rsqrt(mean(x^2) + eps) * w), RoPE with inv_freq = 1 / theta^(arange(0, hd, 2) / hd)
and rotate_half, repeat_kv for GQA, scores scaled by head_dim^-0.5 with a causal mask and a
float32 softmax, SwiGLU (silu(gate) * up -> down), Qwen2's q/k/v biases, a tied or untied
head. F16/BF16 weights are stored in that dtype and the reference computes in float32 on
the stored values upcast, which is what the lab's loader does (its backends compute in
float32): so F32, F16 and BF16 all meet the same 1e-4 bound, and the test checks the dtype
conversion exactly rather than half-precision arithmetic noise.
"""
import json
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

IDS = [3, 17, 0, 42, 96, 5, 5, 61, 28, 90, 1, 77, 13]

# name: (architecture, dtype, tied, shards, overrides)
CONFIGS = {
    "llama-f32-tied": ("LlamaForCausalLM", torch.float32, True, 1, {}),
    "llama-f32-untied": ("LlamaForCausalLM", torch.float32, False, 1, {}),
    "llama-f32-headdim": ("LlamaForCausalLM", torch.float32, False, 1, {"head_dim": 12}),
    "llama-f16-tied": ("LlamaForCausalLM", torch.float16, True, 1, {}),
    "llama-bf16-untied-2shards": ("LlamaForCausalLM", torch.bfloat16, False, 2, {}),
    "qwen2-f32-untied": ("Qwen2ForCausalLM", torch.float32, False, 1, {}),
    "qwen2-bf16-tied-2shards": ("Qwen2ForCausalLM", torch.bfloat16, True, 2, {}),
    "qwen2-f16-mha": ("Qwen2ForCausalLM", torch.float16, True, 1, {"num_key_value_heads": 4}),
    # RoPE scaling: wavelengths 6.3 and 63 (kept, smoothed) and 628, 6283 (divided) at original 256, low 1, high 8
    "llama-f32-rope-llama3": ("LlamaForCausalLM", torch.float32, False, 1, {"rope_theta": 10000.0, "rope_scaling": {
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 8.0, "original_max_position_embeddings": 256}}),
    "qwen2-f32-rope-linear": ("Qwen2ForCausalLM", torch.float32, True, 1, {"rope_theta": 10000.0, "rope_scaling": {"type": "linear", "factor": 4.0}}),
}

DTYPE_NAME = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}


def config_for(arch, tied, overrides):
    cfg = {
        "architectures": [arch],
        "model_type": "llama" if arch == "LlamaForCausalLM" else "qwen2",
        "vocab_size": 97,
        "hidden_size": 32,
        "intermediate_size": 56,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "hidden_act": "silu",
        "max_position_embeddings": 128,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "rope_scaling": None,
        "tie_word_embeddings": tied,
        "attention_dropout": 0.0,
        "torch_dtype": "float32",
        "bos_token_id": 1,
        "eos_token_id": 2,
    }
    if arch == "LlamaForCausalLM":
        cfg.update({"attention_bias": False, "mlp_bias": False, "pretraining_tp": 1})
    else:
        cfg.update({"use_sliding_window": False, "sliding_window": 4096, "max_window_layers": 2})
    cfg.update(overrides)
    return cfg


SMOL = {"vocab_size": 49152, "hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30, "num_attention_heads": 9,
        "num_key_value_heads": 3, "max_position_embeddings": 8192, "rope_theta": 100000.0, "rms_norm_eps": 1e-5}


def random_weights(cfg, tied, gen, scale=1.0):
    d, V, L = cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
    H, K, M = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["intermediate_size"]
    hd = cfg.get("head_dim", d // H)
    qwen = cfg["architectures"][0] == "Qwen2ForCausalLM"

    def mat(*shape, std=0.15):
        return torch.randn(*shape, generator=gen) * (std * scale)

    W = {"model.embed_tokens.weight": mat(V, d, std=0.5)}
    for i in range(L):
        p = f"model.layers.{i}."
        W[p + "input_layernorm.weight"] = 1 + mat(d, std=0.1)
        W[p + "self_attn.q_proj.weight"] = mat(H * hd, d, std=0.3)
        W[p + "self_attn.k_proj.weight"] = mat(K * hd, d, std=0.3)
        W[p + "self_attn.v_proj.weight"] = mat(K * hd, d)
        if qwen:
            W[p + "self_attn.q_proj.bias"] = mat(H * hd, std=0.3)
            W[p + "self_attn.k_proj.bias"] = mat(K * hd, std=0.3)
            W[p + "self_attn.v_proj.bias"] = mat(K * hd, std=0.3)
        W[p + "self_attn.o_proj.weight"] = mat(d, H * hd)
        W[p + "post_attention_layernorm.weight"] = 1 + mat(d, std=0.1)
        W[p + "mlp.gate_proj.weight"] = mat(M, d)
        W[p + "mlp.up_proj.weight"] = mat(M, d)
        W[p + "mlp.down_proj.weight"] = mat(d, M)
    W["model.norm.weight"] = 1 + mat(d, std=0.1)
    if not tied:
        W["lm_head.weight"] = mat(V, d, std=0.5)
    return W


def tensor_bytes(t):
    t = t.contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()


def write_safetensors(path, tensors):
    """safetensors by hand: u64 little-endian header length, JSON header, raw little-endian data."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors.items():
        b = tensor_bytes(t)
        header[name] = {"dtype": DTYPE_NAME[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


TORCH_DTYPE = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def read_safetensors(path):
    """Every tensor of a safetensors file, as torch tensors of their stored dtype."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        dtype = TORCH_DTYPE[e["dtype"]]
        raw = bytearray(data[b:end])
        if dtype == torch.bfloat16:
            t = torch.frombuffer(raw, dtype=torch.int16).view(torch.bfloat16)
        else:
            t = torch.frombuffer(raw, dtype=dtype)
        out[name] = t.reshape(e["shape"]) if e["shape"] else t.reshape(())
    return out


def read_folder(folder):
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    index = os.path.join(folder, "model.safetensors.index.json")
    W = {}
    if os.path.exists(index):
        with open(index) as f:
            for shard in sorted(set(json.load(f)["weight_map"].values())):
                W.update(read_safetensors(os.path.join(folder, shard)))
    else:
        W = read_safetensors(os.path.join(folder, "model.safetensors"))
    return cfg, W


def rms_norm(x, w, eps):
    variance = x.pow(2).mean(-1, keepdim=True)
    return w * (x * torch.rsqrt(variance + eps))


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(x, n_rep):
    kv, T, hd = x.shape
    return x[:, None, :, :].expand(kv, n_rep, T, hd).reshape(kv * n_rep, T, hd)


def rope_scaled(inv_freq, rs):
    """transformers' modeling_rope_utils: "linear" and "llama3" (_compute_llama3_parameters)."""
    kind = (rs or {}).get("rope_type", (rs or {}).get("type", "default"))
    if kind == "default":
        return inv_freq
    if kind == "linear":
        return inv_freq / rs["factor"]
    assert kind == "llama3", kind
    factor, low, high, old = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"], rs["original_max_position_embeddings"]
    low_freq_wavelen, high_freq_wavelen = old / low, old / high
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth_factor = (old / wavelen - low) / (high - low)
    smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)


def forward(cfg, W, ids, dtype=torch.float32):
    """transformers' LlamaForCausalLM / Qwen2ForCausalLM forward for one sequence, in float32
    (float64 with dtype=torch.float64 and weights in float64: how far float32 itself is)."""
    d, H, K = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim", d // H)
    eps, theta = cfg["rms_norm_eps"], cfg["rope_theta"]
    T = len(ids)
    inv_freq = rope_scaled(1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.int64).to(dtype) / hd)), cfg.get("rope_scaling"))
    freqs = torch.outer(torch.arange(T).to(dtype), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    mask = torch.full((T, T), torch.finfo(dtype).min, dtype=dtype).triu(1)
    x = W["model.embed_tokens.weight"][torch.tensor(ids)]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms_norm(x, W[p + "input_layernorm.weight"], eps)
        q = F.linear(h, W[p + "self_attn.q_proj.weight"], W.get(p + "self_attn.q_proj.bias")).view(T, H, hd).transpose(0, 1)
        k = F.linear(h, W[p + "self_attn.k_proj.weight"], W.get(p + "self_attn.k_proj.bias")).view(T, K, hd).transpose(0, 1)
        v = F.linear(h, W[p + "self_attn.v_proj.weight"], W.get(p + "self_attn.v_proj.bias")).view(T, K, hd).transpose(0, 1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k, v = repeat_kv(k, H // K), repeat_kv(v, H // K)
        scores = torch.matmul(q, k.transpose(1, 2)) * hd**-0.5 + mask
        probs = torch.softmax(scores, dim=-1, dtype=dtype)
        o = torch.matmul(probs, v).transpose(0, 1).reshape(T, H * hd)
        x = x + F.linear(o, W[p + "self_attn.o_proj.weight"])
        h = rms_norm(x, W[p + "post_attention_layernorm.weight"], eps)
        x = x + F.linear(F.silu(F.linear(h, W[p + "mlp.gate_proj.weight"])) * F.linear(h, W[p + "mlp.up_proj.weight"]), W[p + "mlp.down_proj.weight"])
    x = rms_norm(x, W["model.norm.weight"], eps)
    head = W["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else W["lm_head.weight"]
    return F.linear(x, head)


def resize_rows(cfg, W, rows):
    """transformers' resize_token_embeddings(rows): the embedding (and an untied head) gain rows, the old ones kept."""
    for key in ["model.embed_tokens.weight"] + ([] if cfg["tie_word_embeddings"] else ["lm_head.weight"]):
        old = W[key]
        assert rows >= old.shape[0], (key, rows, old.shape)
        W[key] = torch.cat([old, old.mean(0, keepdim=True).expand(rows - old.shape[0], -1)], 0)
    return dict(cfg, vocab_size=rows), W


def apply_peft(cfg, W, adapter_dir):
    """PEFT's LoRA merge from its files: every lora_A/lora_B pair folded into its module's
    weight; every modules_to_save module replaced by its saved copy."""
    with open(os.path.join(adapter_dir, "adapter_config.json")) as f:
        ac = json.load(f)
    assert ac["peft_type"] == "LORA", ac["peft_type"]
    assert ac.get("bias", "none") == "none" and not ac.get("use_rslora") and not ac.get("use_dora") and not ac.get("fan_in_fan_out")
    scaling = ac["lora_alpha"] / ac["r"]
    saved_whole = ac.get("modules_to_save") or []
    A = read_safetensors(os.path.join(adapter_dir, "adapter_model.safetensors"))
    prefix = "base_model.model."
    done = set()
    for key in sorted(A):
        assert key.startswith(prefix), key
        if not (key.endswith(".lora_A.weight") or key.endswith(".lora_B.weight")):
            # modules_to_save: PEFT saves the module's copy under the module's own path
            module = key[len(prefix):-len(".weight")]
            assert key.endswith(".weight") and module.split(".")[-1] in saved_whole, key
            current = W["model.embed_tokens.weight"] if module == "lm_head" and cfg["tie_word_embeddings"] else W[module + ".weight"]
            assert A[key].shape == current.shape, f"{key}: saved {tuple(A[key].shape)}, the model's {tuple(current.shape)} (resize the base first)"
            W[module + ".weight"] = A[key].float()
            continue
        module = key[len(prefix):-len(".lora_A.weight")]
        if module in done:
            continue
        assert module.split(".")[-1] in ac["target_modules"], module
        a = A[prefix + module + ".lora_A.weight"].float()
        b = A[prefix + module + ".lora_B.weight"].float()
        assert a.shape[0] == ac["r"] and b.shape[1] == ac["r"], (a.shape, b.shape)
        W[module + ".weight"] = W[module + ".weight"].float() + scaling * (b @ a)
        done.add(module)
    if "lm_head.weight" in W and cfg["tie_word_embeddings"]:
        cfg = dict(cfg, tie_word_embeddings=False)  # PEFT copied the head on its own: no longer tied
    return cfg, W


def main():
    if sys.argv[1] == "--peft":
        cfg, W = read_folder(sys.argv[2])
        torch.set_grad_enabled(False)
        W = {k: v.float() for k, v in W.items()}
        if len(sys.argv) > 5:
            cfg, W = resize_rows(cfg, W, int(sys.argv[5]))
        cfg, W = apply_peft(cfg, W, sys.argv[3])
        ids = [int(x) for x in sys.argv[4].split(",")]
        print(json.dumps({"logits": forward(cfg, W, ids).tolist()}))
        return
    if sys.argv[1] == "--logits":
        cfg, W = read_folder(sys.argv[2])
        ids = [int(x) for x in sys.argv[3].split(",")]
        torch.set_grad_enabled(False)
        print(json.dumps({"logits": forward(cfg, {k: v.float() for k, v in W.items()}, ids).tolist()}))
        return
    configs = CONFIGS
    scale = 1.0
    if sys.argv[1] == "--smol":
        sys.argv = sys.argv[1:]
        configs = {"smollm2-135m-shape-bf16": ("LlamaForCausalLM", torch.bfloat16, True, 2, SMOL)}
        scale = 0.3  # projections ~N(0, 0.045^2): about 1/sqrt(hidden), as trained weights are
    out = sys.argv[1]
    gen = torch.Generator().manual_seed(29)
    torch.set_grad_enabled(False)
    for name, (arch, dtype, tied, shards, overrides) in configs.items():
        folder = os.path.join(out, name)
        os.makedirs(folder, exist_ok=True)
        cfg = config_for(arch, tied, overrides)
        cfg["torch_dtype"] = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}[dtype]
        stored = {k: v.to(dtype) for k, v in random_weights(cfg, tied, gen, scale).items()}
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
        if shards == 1:
            write_safetensors(os.path.join(folder, "model.safetensors"), stored)
        else:
            names = list(stored)
            cut = len(names) // 2
            weight_map = {}
            for s, part in enumerate([names[:cut], names[cut:]]):
                fname = f"model-{s + 1:05d}-of-00002.safetensors"
                write_safetensors(os.path.join(folder, fname), {n: stored[n] for n in part})
                weight_map.update({n: fname for n in part})
            total = sum(t.numel() * t.element_size() for t in stored.values())
            with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
                json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
        logits = forward(cfg, {k: v.float() for k, v in stored.items()}, IDS)
        ref = {"ids": IDS, "dtype": DTYPE_NAME[dtype], "torch": torch.__version__, "logits": logits.tolist()}
        if scale != 1.0:  # the large folder: float32's own distance from exact arithmetic, for scale
            ref["logits64"] = forward(cfg, {k: v.double() for k, v in stored.items()}, IDS, torch.float64).tolist()
        with open(os.path.join(folder, "reference.json"), "w") as f:
            json.dump(ref, f)
    print(json.dumps(sorted(configs)))


if __name__ == "__main__":
    main()
