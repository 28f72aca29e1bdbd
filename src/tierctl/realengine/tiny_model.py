"""A tiny Llama made on this machine, deterministically, for the real vLLM engine on CPU.

No hub access, ever: the weights are random from a fixed seed, the tokenizer is a byte-level
BPE trained with ``tokenizers`` on text generated here from a fixed seed, and the chat template
is written out. The result is a Hugging Face model folder (``config.json``,
``model.safetensors``, ``tokenizer.json``, ``tokenizer_config.json``, ``generation_config.json``)
that ``vllm.entrypoints.openai.api_server --model DIR`` serves.

Shape (measured to serve on vLLM 0.32 CPU): hidden 256, 4 heads of head_dim 64 (the CPU
attention backend refuses head_dim 16), 2 layers, vocabulary 2048, float32, tied embeddings.

This file runs as a script under the engine's virtualenv (it needs ``torch``, ``transformers``
and ``tokenizers``, which tierctl's own install does not have), so it imports nothing from
tierctl and nothing heavy at module level::

    VENV_PY src/tierctl/realengine/tiny_model.py OUT_DIR

:func:`recipe_digest` names the recipe: the cache folder of a made model is keyed by it, so a
change of the recipe makes a new model instead of reusing a stale one.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from pathlib import Path

SEED = 20260
HIDDEN = 256
HEADS = 4
LAYERS = 2
INTERMEDIATE = 512
VOCAB = 2048
MAX_POSITIONS = 4096
MODEL_NAME = "tiny-llama"
SPECIALS = ["<unk>", "<s>", "</s>", "<|system|>", "<|user|>", "<|assistant|>"]
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
# Marks a finished folder; written last, so a crash mid-way is never taken for a model.
DONE = ".tierctl-tiny-model"


def recipe_digest() -> str:
    """SHA-256 (first 12 hex) of this file: the cache key of the model it makes."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]


#: The training text's words, and the syllables its pseudo-words are made of.
_WORDS = [
    "the",
    "a",
    "of",
    "to",
    "and",
    "in",
    "is",
    "that",
    "for",
    "it",
    "on",
    "with",
    "as",
    "was",
    "by",
    "be",
    "this",
    "are",
    "or",
    "at",
    "from",
    "an",
    "engine",
    "replica",
    "request",
    "token",
    "prompt",
    "decode",
    "prefill",
    "batch",
    "queue",
    "latency",
    "router",
    "health",
    "metric",
    "canary",
    "control",
    "rollout",
    "tier",
    "model",
    "server",
    "serving",
    "cache",
    "memory",
    "scheduler",
    "chunk",
    "stream",
    "first",
    "time",
    "output",
    "input",
    "through",
    "before",
    "after",
    "every",
    "which",
    "when",
    "while",
    "where",
    "one",
    "two",
    "three",
    "four",
    "five",
    "long",
    "short",
    "fast",
    "slow",
    "small",
    "large",
    "operator",
    "host",
    "change",
    "flag",
    "value",
    "test",
    "proof",
    "measure",
    "report",
    "verdict",
    "window",
]
_SYLLABLES = [
    "ka",
    "lo",
    "mi",
    "ne",
    "ru",
    "sa",
    "to",
    "vi",
    "ze",
    "qua",
    "pre",
    "dec",
    "tor",
    "ing",
    "ed",
    "er",
    "al",
    "on",
    "ly",
    "ment",
]


def corpus(n_sentences: int = 6000) -> list[str]:
    """Deterministic English-like training text: words from a fixed list, a fixed seed.

    Mixed with pseudo-words from syllables so that BPE finds enough merges for the vocabulary.
    """
    rng = random.Random(SEED)
    out = []
    for _ in range(n_sentences):
        parts = []
        for _ in range(rng.randint(6, 18)):
            if rng.random() < 0.7:
                parts.append(rng.choice(_WORDS))
            else:
                parts.append("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 3))))
        sentence = " ".join(parts)
        out.append(sentence[0].upper() + sentence[1:] + rng.choice([".", ".", "?", "!", ","]))
        if rng.random() < 0.1:
            out.append(str(rng.randint(0, 99999)))
    return out


def make(out: Path) -> Path:
    """Write the tiny model into ``out`` (created); returns ``out``. Deterministic."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="</s>",
        model_max_length=MAX_POSITIONS,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)

    torch.manual_seed(SEED)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=INTERMEDIATE,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=HEADS,
        head_dim=HIDDEN // HEADS,
        max_position_embeddings=MAX_POSITIONS,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        tie_word_embeddings=True,
        torch_dtype="float32",
    )
    model = LlamaForCausalLM(config).to(torch.float32)
    model.eval()
    model.save_pretrained(out, safe_serialization=True)
    (out / DONE).write_text(json.dumps({"recipe": recipe_digest(), "seed": SEED}) + "\n")
    return out


def main(argv: list[str]) -> None:
    """``tiny_model.py OUT_DIR``: make the model, print its folder."""
    import argparse

    parser = argparse.ArgumentParser(description="Make the tiny Llama (deterministic, offline).")
    parser.add_argument("out", type=Path, help="the model folder to write")
    print(make(parser.parse_args(argv).out))


if __name__ == "__main__":
    main(sys.argv[1:])
