"""A framework bug, reproduced with a release that has it: with load_best_model_at_end, transformers
4.50-4.56 lets every rank decide for itself whether the best checkpoint exists, right after the save
that rank 0 alone writes (Trainer._save_checkpoint: `if os.path.exists(best_checkpoint_dir)`). On
storage slower than the other ranks' check (here: rank 0's save takes a few seconds, as on a busy
network file system) they find nothing, skip the barrier before _load_best_model at the end of
training, and rank 0 waits in it for ranks that have left (PR #40923 in 4.57.0 adds a barrier before
the check). Run it in an environment with transformers==4.56.2 (tests/integration/envs/transformers-4.56.txt)."""

import time

from common import TokenDataset, hf_args, hf_init_gloo, parse, say, tiny_llama

SLOW_SAVE_S = 3  # rank 0's writes take this long: slow shared storage


def hf():
    hf_init_gloo()
    import transformers
    from transformers import Trainer

    class SlowStorageTrainer(Trainer):
        def save_model(self, output_dir=None, _internal_call=False):
            if self.args.should_save:
                time.sleep(SLOW_SAVE_S)
            super().save_model(output_dir, _internal_call)

    args = hf_args(save_strategy="steps", save_steps=4, eval_strategy="steps", eval_steps=4, load_best_model_at_end=True,
                   metric_for_best_model="loss", greater_is_better=False, save_only_model=True)
    if args.should_log:  # as the transformers example scripts do
        transformers.utils.logging.set_verbosity_info()
    SlowStorageTrainer(model=tiny_llama(), args=args, train_dataset=TokenDataset(), eval_dataset=TokenDataset(8, seed=1)).train()
    say("training finished")


if __name__ == "__main__":
    args = parse(("hf",))
    {"hf": hf}[args.framework]()
