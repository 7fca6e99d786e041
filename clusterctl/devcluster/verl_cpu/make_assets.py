"""Assets for verl on the dev cluster, made here with no model hub: a BPE tokenizer trained
on the task's own text (with a chat template), a tiny random Qwen2, a parquet data set of
arithmetic prompts and a reward function. Runs in the dev verl image:
    python3 /opt/clusterctl/make_assets.py DIR
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

SEED = 0
ROWS = {"train": 64, "val": 16}
# verl's RLHFDataset renders each prompt with tokenizer.apply_chat_template(messages,
# add_generation_prompt=True) (verl/utils/dataset/rl_dataset.py, 0.5.0)
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
SPECIAL = ["<|pad|>", "<|end|>", "<|user|>", "<|assistant|>", "<|system|>"]
# verl's custom_reward_function: compute_score(data_source, solution_str, ground_truth,
# extra_info) (verl/trainer/ppo/reward.py, 0.5.0). A shaped score, so that a random model's
# samples differ in reward and GRPO's advantages are not all zero.
REWARD = '''
def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    """1 for the right sum anywhere in the answer, else the share of digits in it."""
    if ground_truth in solution_str:
        return 1.0
    return sum(c.isdigit() for c in solution_str) / max(len(solution_str), 1)
'''


def problems(count: int, rng: random.Random) -> list[tuple[str, str]]:
    pairs = [(rng.randint(0, 99), rng.randint(0, 99)) for _ in range(count)]
    return [(f"What is {a} plus {b}? Answer with a number.", str(a + b)) for a, b in pairs]


def make_tokenizer(corpus: list[str]):  # type: ignore[no-untyped-def]
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE(unk_token=None))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator(corpus, trainer)

    bpe.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, pad_token="<|pad|>", eos_token="<|end|>", padding_side="left"
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def main(out: Path) -> None:
    import pandas as pd
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    splits = {name: problems(count, rng) for name, count in ROWS.items()}
    corpus = [f"{q} {a}" for rows in splits.values() for q, a in rows] * 4
    tokenizer = make_tokenizer(corpus)
    model_dir = out / "model"
    tokenizer.save_pretrained(model_dir)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        torch_dtype="float32",
    )
    model = Qwen2ForCausalLM(config)
    model.save_pretrained(model_dir)
    GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id
    ).save_pretrained(model_dir)
    (out / "data").mkdir(parents=True, exist_ok=True)
    for name, rows in splits.items():
        frame = pd.DataFrame(
            [
                {
                    "data_source": "clusterctl/arith",
                    "prompt": [{"role": "user", "content": question}],
                    "ability": "math",
                    "reward_model": {"style": "rule", "ground_truth": answer},
                    "extra_info": {"split": name, "index": index},
                }
                for index, (question, answer) in enumerate(rows)
            ]
        )
        frame.to_parquet(out / "data" / f"{name}.parquet")
    (out / "reward.py").write_text(REWARD.lstrip())
    params = sum(p.numel() for p in model.parameters())
    summary = {"vocab": len(tokenizer), "parameters": params, "rows": ROWS}
    (out / "assets.json").write_text(json.dumps(summary) + "\n")
    print(f"assets: {out}: tokenizer of {len(tokenizer)}, Qwen2 of {params} parameters, {ROWS}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
