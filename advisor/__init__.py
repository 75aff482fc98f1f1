"""nccl-advisor: diagnose NCCL / torch.distributed / rendezvous failures from their logs.

The core is `advisor.diagnose.diagnose(DiagnoseRequest) -> Diagnosis`; the CLI (`advisor`), the
HTTP API (`advisor serve`) and the TUI (`advisor tui`) are thin front ends over it. Heavy modules
are imported lazily so `advisor suggest` starts fast.
"""

__version__ = "0.1.0"


def _find_tui_in_a_source_checkout() -> None:
    """A built package ships the TUI as advisor/tui; a source checkout keeps it at the top (tui/).

    Running `python -m advisor tui` from a checkout's root imports this source tree, so let the
    import system look for `advisor.tui` beside the package too (the KB has the same fallback).
    """
    import os.path

    here = os.path.dirname(os.path.abspath(__file__))
    top = os.path.dirname(here)
    if not os.path.isdir(os.path.join(here, "tui")) and os.path.isfile(os.path.join(top, "tui", "app.py")):
        __path__.append(top)  # noqa: F821 - a package's own __path__


_find_tui_in_a_source_checkout()
