"""nccl-advisor: diagnose NCCL / torch.distributed / rendezvous failures from their logs.

The core is `advisor.diagnose.diagnose(DiagnoseRequest) -> Diagnosis`; the CLI (`advisor`), the
HTTP API (`advisor serve`) and the TUI (`advisor tui`) are thin front ends over it. Heavy modules
are imported lazily so `advisor suggest` starts fast.
"""

__version__ = "0.1.0"
