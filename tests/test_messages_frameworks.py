"""The frameworks' part of the message catalogue (kb/messages: deepspeed-*, accelerate*, transformers-trainer,
lightning*, trl, vllm-distributed, vllm-engine, torchtitan, llama-factory) in whole logs, and the miner that keeps it.

`advisor kb check` already tests every entry against its own wording; these tests cover what it does
not: framework lines in their printed form (logger prefixes, rank prefixes, messages that span
lines) reach the right cause and carry their facts, and the miner reads the frameworks' own printing
helpers. Log lines are the messages as the released packages print them, with each package's logging
format (DeepSpeed: `[time] [LEVEL] [file:line:func] msg`, Lightning/TRL: Python logging's default);
values are illustrative.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from advisor.diagnose import diagnose
from advisor.knowledge import load_kb
from advisor.models import DiagnoseRequest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools" / "mine"))

import frameworks  # noqa: E402  (tools/mine/frameworks.py)

FRAMEWORK_COMPONENTS = (
    "deepspeed-comm", "deepspeed-launcher", "deepspeed-engine", "deepspeed-zero", "accelerate", "accelerate-launch",
    "transformers-trainer", "lightning", "lightning-fabric", "trl", "vllm-distributed", "vllm-engine", "torchtitan",
    "llama-factory",
)


def run(log: str, **answers: str):
    return diagnose(DiagnoseRequest(log=log, answers=answers, max_causes=10))


def test_every_framework_component_is_catalogued_with_its_releases():
    kb = load_kb()
    for component in FRAMEWORK_COMPONENTS:
        info = kb.message_files[component]
        assert len(info["mined_from"]) >= 4, component  # several releases, so version ranges are real
        assert all(str(a["url"]).startswith("https://pypi.org/project/") for a in info["mined_from"]), component
        own = [m for m in kb.messages.values() if m.id.startswith(component + ".")]
        assert own, component
        assert all(m.source.endswith(".py") for m in own), component


def test_deepspeed_launcher_return_code_minus_9_is_a_killed_rank():
    log = textwrap.dedent("""\
        [2026-11-02 10:14:55,120] [INFO] [launch.py:253:sigkill_handler] Killing subprocess 41877
        [2026-11-02 10:14:55,121] [ERROR] [launch.py:259:sigkill_handler] ['/usr/bin/python3', '-u', 'train.py', '--local_rank=3', '--deepspeed', 'ds.json'] exits with return code = -9
        """)
    d = run(log)
    assert d.causes[0].id == "rank-killed"
    assert d.facts["exit_code"] == -9
    assert d.facts["signal"] == "SIGKILL"


def test_deepspeed_launcher_positive_return_code_is_only_its_exit_code():
    log = "[2026-11-02 10:14:55,121] [ERROR] [launch.py:259:sigkill_handler] ['/usr/bin/python3', '-u', 'train.py', '--local_rank=0'] exits with return code = 1\n"
    d = run(log)
    assert d.facts["exit_code"] == 1
    assert "signal" not in d.facts
    assert all(c.id != "rank-killed" for c in d.causes[:1])


def test_lightning_unused_parameters_wording_names_the_cause():
    log = textwrap.dedent("""\
        [rank1]: Traceback (most recent call last):
        [rank1]:   File "/venv/lib/python3.11/site-packages/lightning/pytorch/trainer/call.py", line 47, in _call_and_handle_interrupt
        [rank1]:     return trainer_fn(*args, **kwargs)
        [rank1]: RuntimeError: It looks like your LightningModule has parameters that were not used in producing the loss returned by training_step. If this is intentional, you must enable the detection of unused parameters in DDP, either by setting the string value `strategy='ddp_find_unused_parameters_true'` or by setting the flag in the strategy with `strategy=DDPStrategy(find_unused_parameters=True)`.
        """)
    d = run(log)
    assert d.causes[0].id == "ddp-unused-parameters"


def test_lightning_banners_give_the_world_size():
    log = textwrap.dedent("""\
        Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/4
        Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/4
        ----------------------------------------------------------------------------------------------------
        distributed_backend=nccl
        All distributed processes registered. Starting with 4 processes
        ----------------------------------------------------------------------------------------------------
        """)
    d = run(log)
    assert d.facts["world_size"] == 4
    assert d.facts["backend"] == "nccl"


def test_accelerate_state_summary_spans_lines_and_gives_world_size_and_backend():
    log = "Distributed environment: MULTI_GPU  Backend: nccl\nNum processes: 8\nProcess index: 3\nLocal process index: 3\nDevice: cuda:3\n"
    d = run(log)
    assert d.facts["world_size"] == 8
    assert d.facts["backend"] == "nccl"


def test_accelerate_debug_mode_shape_mismatch_is_a_collective_mismatch():
    log = textwrap.dedent("""\
        [rank0]: accelerate.utils.operations.DistributedOperationException: Cannot apply desired operation due to shape mismatches. All shapes across devices must be valid.
        [rank0]:
        [rank0]: Operation: `accelerate.utils.operations.gather`
        [rank0]: Input shapes:
        [rank0]:   - Process 0: [1, 5]
        [rank0]:   - Process 1: [1, 2, 5]
        """)
    d = run(log)
    assert d.causes[0].id == "mismatched-collectives"


def test_trl_vllm_server_unreachable_says_the_run_uses_vllm():
    log = textwrap.dedent("""\
        INFO:trl.generation.vllm_client:Server is not up yet. Retrying in 2.0 seconds...
        ConnectionError: The vLLM server can't be reached at 10.0.0.7:8000 after 240 seconds. Make sure the server is running by running `vllm serve`.
        """)
    d = run(log)
    assert d.causes[0].id == "vllm-server-unreachable"
    assert d.facts["uses_vllm"] is True


def test_vllm_pynccl_version_line_gives_the_nccl_version():
    d = run("INFO 11-02 10:14:55 [pynccl.py:148] vLLM is using nccl==2.27.3\n")
    assert d.facts["nccl_version"] == "2.27.3"


# vLLM's engine and executors as they print (logger prefix `LEVEL MM-DD hh:mm:ss [file:line]`, a worker's
# lines prefixed with its process name)
VLLM_WORKER_OOM = """\
(VllmWorker rank=1 pid=2302) ERROR 06-12 08:14:03 [multiproc_executor.py:527] WorkerProc hit an exception.
(VllmWorker rank=1 pid=2302) ERROR 06-12 08:14:03 [multiproc_executor.py:527] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of 79.19 GiB of which 1.12 GiB is free.
ERROR 06-12 08:14:04 [multiproc_executor.py:140] Worker proc VllmWorker-1 died unexpectedly, shutting down executor.
vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.
"""


def test_vllm_engine_death_is_a_consequence_of_the_worker_that_died():
    d = run(VLLM_WORKER_OOM)
    assert d.causes[0].code == "gpu-oom-on-rank"  # the worker's OOM, not the engine's death
    assert {"vllm-engine.worker-proc-died", "vllm-engine.engine-dead"} <= {m.id for m in d.messages}
    assert d.facts["peer_lost"] is True


def test_vllm_legacy_worker_exit_code_minus_9_is_a_killed_worker():
    d = run("(VllmWorkerProcess pid=4242) ERROR 05-01 10:00:00 multiproc_worker_utils.py:120] Worker VllmWorkerProcess "
            "pid 4242 died, exit code: -9\n")
    assert d.facts["exit_code"] == -9
    assert d.causes[0].code == "host-oom-or-killed"


def test_vllm_ray_placement_group_shortfall_is_a_world_size_problem():
    d = run("ValueError: Cannot provide a placement group of placement_group_specs=[{'GPU': 1.0, 'node:10.0.0.2': 0.001}, "
            "{'GPU': 1.0}] within 1800 seconds. See `ray status` and `ray list nodes` to make sure the cluster has enough "
            "resources.\n")
    assert d.causes[0].code == "rank-world-size-misconfig"
    # near miss: a placement group that was created is no shortfall
    assert not any(m.id.startswith("vllm-engine.") for m in run("INFO placement group created with 8 GPUs\n").messages)


# --- the miner -------------------------------------------------------------------------------


SOURCE = '''
import logging
log = logging.getLogger(__name__)

class Strategy:
    def on_exception(self, exception):
        _augment_message(exception, pattern=".*x.*", new_message="Your module has parameters that were not used in the loss.")

    def sigterm(self, signum):
        log.info(rank_prefixed_message(f"Received SIGTERM: {signum}", self.local_rank))

    def warn(self, n):
        rank_zero_warn(f"The dataloader does not have many workers: {n}")
        warning_cache.warn("It is recommended to use sync_dist=True when logging on epoch level")
        logger.debug(f"{self.process_index}: waiting for the main process to perform {n}")

    def __repr__(self):
        return f"Distributed environment: {self.kind}\\nNum processes: {self.n}\\n"


class EngineDeadError(Exception):
    def __init__(self, *args):
        ENGINE_DEAD_MESSAGE = "EngineCore encountered an issue. See stack trace (above) for the root cause."
        super().__init__(ENGINE_DEAD_MESSAGE, *args)
'''


def test_the_miner_reads_the_frameworks_own_printing_helpers(tmp_path):
    path = tmp_path / "strategy.py"
    path.write_text(SOURCE)
    found = {(c.kind, c.level, c.text) for c in frameworks.file_messages(path, "pkg/strategy.py")}
    assert ("augment", "error", "Your module has parameters that were not used in the loss.") in found
    assert ("helper", "info", "Received SIGTERM: {signum}") in found
    assert ("helper", "warn", "The dataloader does not have many workers: {n}") in found
    assert ("helper", "warn", "It is recommended to use sync_dist=True when logging on epoch level") in found
    assert ("helper", "info", "{self.process_index}: waiting for the main process to perform {n}") in found
    assert ("repr", "info", "Distributed environment: {self.kind}\nNum processes: {self.n}") in found
    # a message kept in a method's constant (vLLM < 0.33's EngineDeadError)
    assert any(t == "EngineCore encountered an issue. See stack trace (above) for the root cause." for _, _, t in found)


def test_version_ranges_bound_on_the_releases_read():
    mined = ["1.0.0", "1.2.0", "1.4.0", "1.6.0"]
    assert frameworks.specifier(mined, mined) == ""
    assert frameworks.specifier(["1.2.0", "1.4.0", "1.6.0"], mined) == ">=1.2.0"
    assert frameworks.specifier(["1.0.0", "1.2.0"], mined) == "<1.4.0"
    assert frameworks.specifier(["1.2.0", "1.6.0"], mined) == ">=1.2.0,!=1.4.0"


def test_a_sample_finds_the_format_it_is_an_instance_of():
    assert frameworks._instance_of("['python', 'train.py'] exits with return code = -9", "{cmd} exits with return code = {last_return_code}")
    assert not frameworks._instance_of("Process 3 exits successfully.", "{cmd} exits with return code = {last_return_code}")
