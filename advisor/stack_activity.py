"""What a stack says a rank was doing: saving, evaluating, reading data or logging.

One reading for every stack the advisor sees: the Python stack Flight Recorder keeps with a rank's
last collective (advisor.flight_recorder) and a stack dump of a hung process (advisor.stackdumps).
Frames come innermost first. Frames of torch and the standard library are skipped, except the few
torch modules that are themselves an activity (torch.save, torch.distributed.checkpoint, the
DataLoader, the TensorBoard writer); the first frame outside them whose function or file name reads
like an activity decides.
"""

from __future__ import annotations

from typing import Protocol, Sequence

from advisor.regex import compile_pattern

# function and file names, matched case-insensitively on "<function> <file name>"
_ACTIVITIES = [
    ("save", compile_pattern(r"save|checkpoint|state_dict|distributed[/\\]checkpoint|safetensors|serializ", wrap=False)),
    ("eval", compile_pattern(r"eval|validat|predict|generat|inference|compute_metrics|test_step", wrap=False)),
    ("data", compile_pattern(r"dataloader|data_loader|dataset|collate|batch|shard|tokeni[sz]|preprocess|"
                             r"main_process_first|fetch|sampler|read_data|load_data", wrap=False)),
    ("logging", compile_pattern(r"\blog|_log\b|logger|logging|wandb|tensorboard|summary_?writer|add_scalar|"
                                r"report|metric|print", wrap=False)),
]

# torch, the interpreter's own frames and threading. A py-spy dump shortens a file to its path
# below the import root ("torch/distributed/distributed_c10d.py"), hence the optional slash.
_TORCH_FRAME = compile_pattern(r"(?:^|[/\\])torch[/\\]|^<frozen |^<string>|(?:^|[/\\])threading\.py$", wrap=False)

# torch modules that are an activity in themselves (torch/serialization.py is torch.save;
# torch/utils/data/dataloader.py a DataLoader iterator waiting for its batch, from its worker
# processes when it has any; the rest of torch/utils/data/ fetching and collating;
# torch/utils/tensorboard/ SummaryWriter)
_TORCH_ACTIVITIES = [
    ("save", compile_pattern(r"(?:^|[/\\])torch[/\\](?:serialization\.py|distributed[/\\]checkpoint[/\\])", wrap=False)),
    ("dataloader", compile_pattern(r"(?:^|[/\\])torch[/\\]utils[/\\]data[/\\]dataloader\.py$", wrap=False)),
    ("data", compile_pattern(r"(?:^|[/\\])torch[/\\]utils[/\\]data[/\\]", wrap=False)),
    ("logging", compile_pattern(r"(?:^|[/\\])torch[/\\]utils[/\\]tensorboard[/\\]", wrap=False)),
]


class FrameLike(Protocol):
    name: str
    file: str


def is_torch_frame(file: str) -> bool:
    return bool(_TORCH_FRAME.search(file))


def user_frames(frames: Sequence[FrameLike]) -> list:
    """The frames outside torch and the standard library, innermost first."""
    return [f for f in frames if not is_torch_frame(f.file)]


def activity(frames: Sequence[FrameLike]) -> str | None:
    """save / eval / data / dataloader / logging, from the innermost frame that shows one (None:
    nothing does)."""
    for f in frames:
        path = f.file.replace("\\", "/")
        if is_torch_frame(path):
            for label, pattern in _TORCH_ACTIVITIES:
                if pattern.search(path):
                    return label
            continue
        text = f"{f.name} {path.rsplit('/', 1)[-1]}"
        for label, pattern in _ACTIVITIES:
            if pattern.search(text):
                return label
    return None
