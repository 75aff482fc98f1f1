"""A framework bug, reproduced with the release that has it: TRL 0.15.0's SFTTrainer gathers the
full logits of every rank for its mean_token_accuracy metric (PR #2597). Without packing each batch
is padded to its own longest text, so the ranks' logits differ in length and the gather cannot
match them (issue #2879; 0.15.1 gathers two counts instead, PR #2890). Run it in an environment
with trl==0.15.0 (tests/integration/envs/trl-0.15.txt)."""

from common import VOCAB, hf_args, hf_init_gloo, parse, tiny_llama, tiny_tokenizer


def texts(n: int = 64):
    """Texts of 4 to 30 words: dynamic padding gives each batch its own length."""
    import random

    from datasets import Dataset

    rng = random.Random(0)
    return Dataset.from_dict({"text": [" ".join(f"w{rng.randrange(VOCAB - 4)}" for _ in range(rng.randrange(4, 31)))
                                       for _ in range(n)]})


def trl():
    hf_init_gloo()
    import transformers
    from trl import SFTConfig, SFTTrainer

    config = hf_args(SFTConfig, max_seq_length=48, packing=False, bf16=False)
    if config.should_log:  # as the transformers example scripts do
        transformers.utils.logging.set_verbosity_info()
    SFTTrainer(model=tiny_llama(), args=config, train_dataset=texts(), processing_class=tiny_tokenizer()).train()


if __name__ == "__main__":
    args = parse(("trl",))
    {"trl": trl}[args.framework]()
