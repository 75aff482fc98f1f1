"""A framework bug, reproduced with a release that has it: TRL 0.14-0.16's ORPOTrainer gathers the
full chosen and rejected logits of every rank for its logged metrics (PR #2474). Each batch is
padded to its own longest pair, so the ranks' logits differ in length and the gather cannot match
them (issue #3068; 0.17.0 averages on each rank and gathers scalars, PR #3069). Run it in an
environment with trl==0.15.0 (tests/integration/envs/trl-0.15.txt)."""

from common import VOCAB, hf_args, hf_init_gloo, parse, tiny_llama, tiny_tokenizer


def pairs(n: int = 64):
    """Preference pairs whose prompts and answers run 2 to 20 words: each batch its own length."""
    import random

    from datasets import Dataset

    rng = random.Random(0)

    def words(lo: int, hi: int) -> str:
        return " ".join(f"w{rng.randrange(VOCAB - 4)}" for _ in range(rng.randrange(lo, hi)))

    return Dataset.from_dict({"prompt": [words(2, 10) for _ in range(n)], "chosen": [words(2, 20) for _ in range(n)],
                              "rejected": [words(2, 20) for _ in range(n)]})


def orpo():
    hf_init_gloo()
    import transformers
    from trl import ORPOConfig, ORPOTrainer

    config = hf_args(ORPOConfig, max_length=48, max_prompt_length=16, bf16=False)
    if config.should_log:  # as the transformers example scripts do
        transformers.utils.logging.set_verbosity_info()
    ORPOTrainer(model=tiny_llama(), args=config, train_dataset=pairs(), processing_class=tiny_tokenizer()).train()


if __name__ == "__main__":
    args = parse(("orpo",))
    {"orpo": orpo}[args.framework]()
