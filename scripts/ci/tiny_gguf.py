"""Write a tiny random-weight llama-architecture GGUF model that llama.cpp loads.

Usage: tiny_gguf.py OUT.gguf [--seed N]

The model is one transformer block (embedding 128, four heads, context
1024) with seeded Gaussian weights, and a SentencePiece-style vocabulary of
the control tokens, one token per printable ASCII character, the word
boundary mark, and the 256 byte-fallback tokens. Its answers are noise; it
exists so a real inference server can be started and audited offline.
"""

import sys

import numpy as np
import gguf


def main() -> None:
    out = sys.argv[1]
    seed = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[2] == "--seed" else 2026
    rng = np.random.default_rng(seed)

    tokens = ["<unk>", "<s>", "</s>", "\u2581"]
    types = [2, 3, 3, 1]
    for c in range(0x21, 0x7F):
        tokens.append(chr(c))
        types.append(1)
    for b in range(256):
        tokens.append(f"<0x{b:02X}>")
        types.append(6)
    vocab = len(tokens)
    scores = [0.0] * vocab

    n_embd, n_head, n_ff, n_ctx, n_layer = 128, 4, 256, 1024, 1
    w = gguf.GGUFWriter(out, "llama")
    w.add_name("kvw-tiny-random")
    w.add_context_length(n_ctx)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head)
    w.add_rope_dimension_count(n_embd // n_head)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(vocab)
    w.add_file_type(0)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)

    def t(*shape):
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    ones = lambda n: np.ones(n, dtype=np.float32)
    w.add_tensor("token_embd.weight", t(vocab, n_embd))
    w.add_tensor("output_norm.weight", ones(n_embd))
    w.add_tensor("output.weight", t(vocab, n_embd))
    for i in range(n_layer):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", ones(n_embd))
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            w.add_tensor(p + name + ".weight", t(n_embd, n_embd))
        w.add_tensor(p + "ffn_norm.weight", ones(n_embd))
        w.add_tensor(p + "ffn_gate.weight", t(n_ff, n_embd))
        w.add_tensor(p + "ffn_up.weight", t(n_ff, n_embd))
        w.add_tensor(p + "ffn_down.weight", t(n_embd, n_ff))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
