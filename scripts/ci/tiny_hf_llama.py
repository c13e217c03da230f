"""Write a tiny random-weight Llama model directory that vLLM serves offline.

Usage: tiny_hf_llama.py OUT_DIR [--seed N]

The model has four decoder layers (hidden 256, four heads of 64, MLP 512,
context 2048) with seeded random weights, saved by `transformers` as
safetensors in bfloat16. Its tokenizer is a byte-level BPE of 1024 tokens
trained here with `tokenizers` on seeded text of the kind the audit sends
(words, digits, punctuation), so every byte has a token and common words
merge into a few: a real tokenizer's counts differ from one per character,
which is what the audit must measure. The answers are noise; the model
exists so that a real inference server can be started and audited with no
model hub.
"""

import random
import sys
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

VOCAB = 1024
CONTEXT = 2048
WORDS = (
    "the of and to in is that for it as with was on be by at this are from or an have not "
    "which but they his her their one all we can has there been if more when will would "
    "cache tenant request token prompt server answer model memory page block pool context "
    "prefix canary secret value record note report audit gate result key salt"
).split()


def corpus(rng: random.Random, lines: int):
    for _ in range(lines):
        parts = []
        for _ in range(rng.randint(8, 40)):
            r = rng.random()
            if r < 0.75:
                parts.append(rng.choice(WORDS))
            elif r < 0.9:
                parts.append(str(rng.randint(0, 99999)))
            else:
                parts.append("".join(rng.choice("abcdefghijklmnopqrstuvwxyz-_:.,") for _ in range(rng.randint(2, 9))))
        yield " ".join(parts) + rng.choice([".", ",", ";", ":", "!", "?"])


def tokenizer(seed: int) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=["<unk>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(random.Random(seed), 4000), trainer=trainer)
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos)]
    )
    return tok


def main() -> None:
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit("usage: tiny_hf_llama.py OUT_DIR [--seed N]")
    out = Path(args[0])
    seed = int(args[2]) if len(args) > 2 and args[1] == "--seed" else 2026

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer(seed),
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        model_max_length=CONTEXT,
    )
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=CONTEXT,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)


if __name__ == "__main__":
    main()
