"""`advisor`: the command-line front end. Parses arguments, reads input, prints; nothing more.

Exit codes (also in `advisor --help` and the README):
  0  a cause was diagnosed (or `kb check` passed)
  1  no confident diagnosis: the output says what to answer or turn on next
  2  usage error: a bad flag, a bad --answer
  3  input error: a missing, unreadable, empty or binary log
  4  the knowledge base is invalid (the message names the file and field)
  130 interrupted
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import os
import sys
from pathlib import Path
from typing import BinaryIO, Callable, Sequence, TextIO

from advisor import __version__
from advisor.inputs import InputError, open_log, sniff

EXIT_OK, EXIT_UNSURE, EXIT_USAGE, EXIT_INPUT, EXIT_KB, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130
PROGRESS_MIN_BYTES = 32 << 20
MAX_ERROR_ARG = 10 << 20

EXAMPLES = """\
examples:
  advisor suggest --error "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=38, OpType=_ALLGATHER_BASE, NumelIn=1, NumelOut=8, Timeout(ms)=1800000) ran for 1800033 milliseconds before timing out."
  advisor suggest --log train.log --framework llama-factory --answer phase=save --answer model_size_b=7
  kubectl logs job/train | advisor suggest - --json
  advisor suggest --log rank0.log.gz --interactive
  advisor suggest --describe "保存模型时NCCL超时" --framework llama-factory
  advisor suggest --log train.log --dumps /tmp/fr-dumps/       # with the ranks' Flight Recorder dumps
  for p in $(pgrep -f train.py); do py-spy dump --pid $p; done | advisor suggest -   # a silent hang's stacks
  PYTHONFAULTHANDLER=1 torchrun --tee 3 ... train.py 2>&1 | tee run.log; advisor suggest --log run.log   # aborted ranks' stacks too
  advisor suggest --log train.log --answer run_outcome=finished   # a quiet log of a run that finished: explain its warnings
  advisor kb check --kb ./team-kb
  advisor kb list --json
  advisor kb coverage
  advisor kb facts --json
  advisor env -o node0.json
  advisor preflight --env node0.json --env node1.json --config train.yaml

exit codes:
  0 diagnosed  1 no confident diagnosis  2 usage error  3 input error  4 invalid knowledge base  130 interrupted
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="advisor",
        description="Diagnose NCCL, gloo and rendezvous failures in distributed training logs, and get a fix for your framework.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"nccl-advisor {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    suggest = sub.add_parser(
        "suggest", help="diagnose an error line or a log and suggest a fix",
        description="Diagnose an error line or a whole multi-rank log. Reads --error TEXT, --log FILE (plain or .gz), or standard input.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    src = suggest.add_mutually_exclusive_group()
    src.add_argument("--error", "-e", metavar="TEXT", help="the error text (one line or several)")
    src.add_argument("--log", "-l", metavar="FILE", help="a log file of any size, plain or gzip")
    src.add_argument("stdin", nargs="?", metavar="-", help="read the log from standard input")
    suggest.add_argument("--dumps", nargs="+", action="extend", metavar="PATH",
                         help="Flight Recorder dumps: a folder, files or a glob (torch's pickle or JSON, gzip too); alone or with a log")
    suggest.add_argument("--describe", "-d", metavar="TEXT", help="what you saw, in your own words (any language)")
    suggest.add_argument("--framework", "-f", metavar="NAME", help="llama-factory, open-r1, torchtitan, lightning, trl, transformers, accelerate, deepspeed, pytorch")
    suggest.add_argument("--answer", "-a", action="append", default=[], metavar="ID=VALUE",
                         help="answer a guided question (repeatable); VALUE may be 'unknown'")
    suggest.add_argument("--interactive", "-i", action="store_true", help="ask the guided questions in the terminal")
    suggest.add_argument("--json", action="store_true", help="print the machine-readable diagnosis (see README: JSON contract)")
    suggest.add_argument("--verbose", "-v", action="store_true", help="show all evidence, facts and snippets")
    suggest.add_argument("--mask-hosts", action="store_true", help="also mask host names and IP addresses in the output")
    suggest.add_argument("--color", choices=["auto", "always", "never"], default="auto", help="colour output (default: only on a terminal)")
    suggest.add_argument("--max-causes", type=_max_causes, default=5, metavar="N", help="causes to list, 1-50 (default 5)")
    suggest.add_argument("--kb", action="append", default=[], metavar="DIR", help="add a team KB directory on top of the built-in one (also $ADVISOR_KB_PATH)")
    suggest.add_argument("--env", action="append", default=[], metavar="FILE",
                         help="an env snapshot (`advisor env -o FILE`): it answers the versions, GPUs and framework (repeatable, one per node)")

    kb = sub.add_parser("kb", help="check or list the knowledge base")
    kb_sub = kb.add_subparsers(dest="kb_command", metavar="ACTION")
    check = kb_sub.add_parser("check", help="validate every KB file and run every cause's example logs")
    check.add_argument("--kb", action="append", default=[], metavar="DIR")
    check.add_argument("--json", action="store_true")
    listing = kb_sub.add_parser("list", help="list the causes")
    listing.add_argument("--kb", action="append", default=[], metavar="DIR")
    listing.add_argument("--json", action="store_true")
    facts = kb_sub.add_parser("facts", help="every versioned fact of the KB (knob, default, versions, reference), for audit")
    facts.add_argument("--kb", action="append", default=[], metavar="DIR")
    facts.add_argument("--json", action="store_true")
    show = kb_sub.add_parser("show", help="print one cause (or catalogue message) as JSON")
    show.add_argument("id")
    show.add_argument("--kb", action="append", default=[], metavar="DIR")
    cov = kb_sub.add_parser("coverage", help="the message catalogue: messages per component and how many point to a cause")
    cov.add_argument("--kb", action="append", default=[], metavar="DIR")
    cov.add_argument("--json", action="store_true")

    serve = sub.add_parser("serve", help="run the HTTP API for bots")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--workers", type=int, default=1)
    serve.add_argument("--kb", action="append", default=[], metavar="DIR")

    from advisor.cli_checks import add_parsers

    add_parsers(sub)

    tui = sub.add_parser("tui", help="the guided terminal wizard")
    tui.add_argument("--log", metavar="FILE")
    tui.add_argument("--dumps", nargs="+", action="extend", metavar="PATH", help="Flight Recorder dumps (a folder, files or a glob)")
    tui.add_argument("--kb", action="append", default=[], metavar="DIR")
    return parser


def _max_causes(text: str) -> int:
    """1-50, as the HTTP API accepts (0 causes would be a diagnosis with nothing in it)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number from 1 to 50, got {text!r}") from None
    if not 1 <= value <= 50:
        raise argparse.ArgumentTypeError(f"expected a whole number from 1 to 50, got {value}")
    return value


def main(argv: Sequence[str] | None = None, stdin: BinaryIO | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Run the CLI; streams are injectable so tests run it in-process."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    parser = build_parser()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):  # --help, usage errors
            args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        if args.command == "suggest":
            return _suggest(args, stdin, out, err)
        if args.command == "kb":
            return _kb(args, out, err, parser)
        if args.command in ("env", "preflight"):
            from advisor.cli_checks import run

            return run(args, out, err)
        if args.command == "serve":
            from advisor.api import serve

            return serve(args.host, args.port, args.workers, args.kb)
        if args.command == "tui":
            from advisor.tui.app import run_tui

            if args.dumps:
                return _tui_with_dumps(args, err)
            return run_tui(args.log, args.kb)
        parser.print_help(out)
        return EXIT_USAGE
    except KeyboardInterrupt:
        err.write("interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `advisor kb list | head`: the reader has what it wanted
        _quiet(out)
        return EXIT_OK
    except _kb_invalid() as exc:
        err.write(f"advisor: {exc}\n")
        return EXIT_KB


def _tui_with_dumps(args, err: TextIO) -> int:
    from advisor.fr_dumps import DumpError, read_dumps
    from advisor.tui.app import run_tui

    try:
        dumps = read_dumps(args.dumps)
    except DumpError as exc:
        err.write(f"advisor: {exc}\n")
        return EXIT_INPUT
    return run_tui(args.log, args.kb, dumps=dumps)


def _kb_invalid():
    from advisor.knowledge import KBInvalid

    return KBInvalid


# --- suggest ------------------------------------------------------------------------------------


def _suggest(args, stdin: BinaryIO | None, out: TextIO, err: TextIO) -> int:
    from advisor.answers import AnswerError
    from advisor.diagnose import conclude, read_log
    from advisor.knowledge import load_kb
    from advisor.models import DiagnoseRequest

    answers = {}
    for item in args.answer:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            err.write(f"advisor: --answer expects ID=VALUE, got {item!r} (e.g. --answer phase=save)\n")
            return EXIT_USAGE
        answers[key.strip()] = value.strip()
    tty = None
    if args.interactive:
        try:
            tty = _answer_stream(log_on_stdin=args.error is None and args.log is None and not (args.stdin is None and (args.describe or args.dumps)))
        except InputError as exc:
            err.write(f"advisor: {exc}\n")
            return EXIT_USAGE
    dumps = None
    if args.dumps:
        from advisor.fr_dumps import DumpError, read_dumps

        try:  # before the log: a bad dump is reported without reading a big log first
            dumps = read_dumps(args.dumps)
        except DumpError as exc:
            err.write(f"advisor: {exc}\n")
            return EXIT_INPUT
    try:
        snapshots = _load_snapshots(args.env)
        source, size = _open_input(args, stdin, err)
    except InputError as exc:
        err.write(f"advisor: {exc}\n")
        return EXIT_INPUT
    kb = load_kb(args.kb)
    _resume_gc()
    request = DiagnoseRequest(answers=answers, framework=args.framework, mask_hosts=args.mask_hosts,
                              description=args.describe, max_causes=max(1, min(args.max_causes, 50)), env=snapshots)
    progress = _progress(err, size)
    try:
        try:
            reading = read_log(kb, source, args.describe, progress)
        finally:
            if progress is not None:
                progress(-1)
            if hasattr(source, "close"):
                source.close()
    except InputError as exc:  # a stream that breaks off part-way (a truncated .gz)
        err.write(f"advisor: {exc}\n")
        return EXIT_INPUT
    if dumps is not None:
        from advisor.fr_join import attach_dumps

        attach_dumps(reading, *dumps)
    elif reading.stats.bytes == 0 and not args.describe:
        err.write("advisor: the input is empty: paste the error text, or give --log FILE (see advisor suggest --help)\n")
        return EXIT_INPUT
    if getattr(source, "blank", False) and not args.describe and dumps is None:
        err.write("advisor: the input is empty (only blank lines and spaces): paste the error text, or give --log FILE (see advisor suggest --help)\n")
        return EXIT_INPUT
    color = _use_color(args.color, out)
    try:
        if tty is not None:
            with tty as answers_in:
                diagnosis = _interactive(kb, reading, request, out, answers_in, color)
        else:
            diagnosis = conclude(kb, reading, request)
    except AnswerError as exc:
        err.write(f"advisor: {exc}\n")
        return EXIT_USAGE
    code = EXIT_OK if diagnosis.status == "diagnosed" else EXIT_UNSURE
    try:
        if args.json:
            json.dump(diagnosis.model_dump(mode="json"), out, ensure_ascii=False, indent=2)
            out.write("\n")
        else:
            from advisor.render import Style, render_text

            out.write(render_text(diagnosis, Style(color=color), verbose=args.verbose))
        out.flush()
    except BrokenPipeError:  # `advisor suggest ... | head`: the reader has what it wanted
        _quiet(out)
    return code


def _quiet(out: TextIO) -> None:
    """The reader of our output went away: send what is still buffered nowhere, so that exit does
    not print a traceback about it."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, out.fileno())
        os.close(devnull)
    except (AttributeError, OSError, ValueError):  # an in-memory stream (tests) has no descriptor
        pass


def _load_snapshots(paths: list[str]) -> list:
    """The `--env` snapshots; the env module is imported only when one is given (fast start)."""
    if not paths:
        return []
    from advisor.cli_checks import load_snapshots

    return load_snapshots(paths)


def _open_input(args, stdin: BinaryIO | None, err: TextIO) -> tuple[str | BinaryIO, int | None]:
    if args.error is not None:
        if len(args.error) > MAX_ERROR_ARG:
            raise InputError("--error text is over 10 MB: save it to a file and use --log FILE")
        if not args.error.strip() and not args.describe:
            raise InputError("--error is empty: paste the error text between quotes")
        return args.error, len(args.error)
    if args.log is not None:
        return open_log(args.log)
    if args.stdin not in (None, "-"):
        raise InputError(f"unexpected argument {args.stdin!r}: use --log FILE for a file, or - for standard input")
    if args.stdin is None and args.dumps:
        return "", 0  # the dumps alone: standard input is not read unless `-` asks for it
    stream = stdin or sys.stdin.buffer
    if args.stdin is None and args.describe is None and hasattr(stream, "isatty") and stream.isatty():
        raise InputError("no input: give --error TEXT, --log FILE, --dumps PATH, or pipe a log (e.g. `advisor suggest - < train.log`)")
    if args.stdin is None and args.describe is not None:
        return "", 0
    if hasattr(stream, "isatty") and stream.isatty():
        # typed or pasted in a terminal: say how to end, and stop at the first end-of-input (ctrl+D),
        # as `cat` does; every later read of a terminal would wait for another ctrl+D
        err.write("Paste the log (or type it), then press ctrl+D on a line of its own.\n")
        err.flush()
        return sniff(io.BytesIO(_read_until_eof(stream)), "standard input"), None
    return sniff(stream, "standard input"), None


def _read_until_eof(stream: BinaryIO) -> bytes:
    """Everything typed into a terminal up to the first end-of-input."""
    parts = []
    read = getattr(stream, "read1", stream.read)
    while True:
        data = read(65536)
        if not data:
            return b"".join(parts)
        parts.append(data)


def _progress(err: TextIO, size: int | None) -> Callable[[int], None] | None:
    """A percentage on stderr for big files, only when stderr is a terminal."""
    if not size or size < PROGRESS_MIN_BYTES or not (hasattr(err, "isatty") and err.isatty()):
        return None
    state = {"last": -1}

    def report(done: int) -> None:
        if done < 0:
            err.write("\r" + " " * 60 + "\r")
            err.flush()
            return
        pct = min(100, done * 100 // size)
        if pct != state["last"]:
            state["last"] = pct
            err.write(f"\rreading log: {pct:3d}% of {size / 2**20:,.0f} MiB")
            err.flush()

    return report


def _use_color(choice: str, out: TextIO) -> bool:
    if choice == "always":
        return True
    if choice == "never" or os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return hasattr(out, "isatty") and out.isatty() and os.environ.get("TERM") != "dumb"


def _interactive(kb, reading, request, out: TextIO, tty: TextIO, color: bool):
    """Ask the best question, re-rank, repeat, until nothing is worth asking."""
    from advisor.answers import AnswerError, parse_answer
    from advisor.diagnose import conclude
    from advisor.render import Style, standing

    style = Style(color=color)
    answers = dict(request.answers)
    while True:
        diagnosis = conclude(kb, reading, request.model_copy(update={"answers": answers}))
        out.write(style.dim(f"\n{standing(diagnosis)}\n"))
        if not diagnosis.questions:
            return diagnosis
        q = diagnosis.questions[0]
        out.write(style.bold(q.text) + "\n")
        if q.choices:
            for i, c in enumerate(q.choices, 1):
                out.write(f"  {i}. {c['label']}\n")
        elif q.kind == "number":
            out.write(style.dim(f"  a number{' in ' + q.unit if q.unit else ''}\n"))
        elif q.kind == "version":
            out.write(style.dim("  a version, e.g. 2.5.1\n"))
        out.write(style.dim("  ? = don't know, q = stop asking\n"))
        while True:
            out.write("> ")
            out.flush()
            line = tty.readline()
            if not line:
                return diagnosis
            text = line.strip()
            if not text:  # an empty Enter is not an answer: say what is
                out.write(style.dim("  type an answer (a number from the list, or ? for don't know, q to stop)\n"))
                continue
            if text.lower() in ("q", "quit", "exit"):
                return diagnosis
            if q.choices and text.isdigit() and 1 <= int(text) <= len(q.choices):
                text = q.choices[int(text) - 1]["value"]
            try:
                parse_answer(kb, kb.questions[q.id], text)
            except AnswerError as exc:
                out.write(f"  {exc.reason}\n")
                continue
            answers[q.id] = text
            break


TTY = "/dev/tty"


def _answer_stream(log_on_stdin: bool) -> contextlib.AbstractContextManager[TextIO]:
    """Where --interactive reads the answers: the terminal. Standard input when it is one and the
    log did not come through it; otherwise the terminal itself (/dev/tty), so that
    `cat train.log | advisor suggest - --interactive` works. No terminal at all is a usage error."""
    try:
        if not log_on_stdin and sys.stdin is not None and sys.stdin.isatty():
            return contextlib.nullcontext(sys.stdin)
    except (ValueError, OSError):  # a closed or detached standard input
        pass
    try:
        return open(TTY, encoding="utf-8", errors="replace")  # noqa: SIM115 - closed by the caller
    except OSError:
        where = "the log came through standard input and" if log_on_stdin else "standard input is not a terminal and"
        raise InputError(f"--interactive needs a terminal for the answers, but {where} there is none; "
                         "give them with --answer ID=VALUE instead") from None


# --- kb ---------------------------------------------------------------------------------------


def _kb(args, out: TextIO, err: TextIO, parser) -> int:
    from advisor.knowledge import load_kb

    if args.kb_command == "check":
        from advisor.kbcheck import check_kb

        report = check_kb(args.kb)
        if args.json:
            json.dump(report, out, indent=2)
            out.write("\n")
        else:
            out.write(_format_check(report))
        return EXIT_OK if report["ok"] else (EXIT_KB if report["errors"] else EXIT_UNSURE)
    kb = load_kb(args.kb)
    if args.kb_command == "list":
        rows = [{"id": c.id, "code": c.code, "title": c.title, "benign": c.benign, "signatures": len(c.signatures),
                 "file": str(kb.sources[c.id])} for c in sorted(kb.causes.values(), key=lambda c: (c.code, c.id))]
        if args.json:
            json.dump(rows, out, indent=2)
            out.write("\n")
        else:
            width = max(len(r["id"]) for r in rows)
            for r in rows:
                out.write(f"{r['id']:<{width}}  {r['code']:<28}  {r['title']}\n")
            out.write(f"\n{len(rows)} causes, {len(kb.codes)} codes, {len(kb.frameworks)} frameworks\n")
        return EXIT_OK
    if args.kb_command == "facts":
        from advisor.kbfacts import format_facts, versioned_facts

        rows = versioned_facts(kb)
        if args.json:
            json.dump(rows, out, indent=2, ensure_ascii=False)
            out.write("\n")
        else:
            out.write(format_facts(rows))
        return EXIT_OK
    if args.kb_command == "show":
        item = kb.causes.get(args.id) or kb.messages.get(args.id)
        if item is None:
            err.write(f"advisor: no cause or message {args.id!r}; see `advisor kb list` and `advisor kb coverage`\n")
            return EXIT_USAGE
        json.dump(item.model_dump(mode="json", exclude_none=True), out, indent=2, ensure_ascii=False)
        out.write("\n")
        return EXIT_OK
    if args.kb_command == "coverage":
        from advisor.catalogue import coverage

        report = coverage(kb.message_files, kb.messages)
        if args.json:
            json.dump(report, out, indent=2)
            out.write("\n")
        else:
            out.write(_format_coverage(report))
        return EXIT_OK
    parser.parse_args(["kb", "--help"])
    return EXIT_USAGE


def _format_coverage(report: dict) -> str:
    rows = report["components"]
    width = max([len(name) for name in rows] + [9])
    lines = [f"{'component':<{width}}  {'software':<12} {'messages':>8} {'mapped':>7} {'context':>8} {'benign':>7}"]
    for name, c in rows.items():
        lines.append(f"{name:<{width}}  {c['software']:<12} {c['messages']:>8} {c['mapped']:>7} {c['context']:>8} {c['benign']:>7}")
    share = report["mapped"] / report["messages"] if report["messages"] else 0.0
    lines.append(f"\n{report['messages']} messages in {len(rows)} components; {report['mapped']} mapped to a cause or marked "
                 f"harmless ({share:.0%}); the rest are context (they carry facts and explain a line).")
    return "\n".join(lines) + "\n"


def _format_check(report: dict) -> str:
    lines = []
    for e in report["errors"]:
        lines.append(f"error: {e}")
    for f in report["failures"]:
        lines.append(f"FAIL {f['cause']} {f['kind']} example {f['example']!r}: {f['problem']}")
    lines.append(
        f"{report['causes']} causes, {report['examples']} examples: {report['passed']} passed, {len(report['failures'])} failed"
        + (f", {len(report['errors'])} KB errors" if report["errors"] else "")
    )
    return "\n".join(lines) + "\n"


def entry() -> None:
    """The console script. `suggest` is a short-lived process, so it skips two costs only long-lived
    ones need: cyclic garbage collection while start-up allocates the modules and the KB (resumed,
    with those frozen, before the log is read, so a 1 GB log still runs in bounded memory), and the
    interpreter's tear-down of every object at exit (~30 ms; output is flushed first)."""
    short_lived = len(sys.argv) > 1 and sys.argv[1] == "suggest"
    if short_lived:
        gc.disable()
    code = main()
    if short_lived:
        _exit_now(code)
    sys.exit(code)


def _resume_gc() -> None:
    """Start-up is over: keep what it allocated out of every future collection, then collect again."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def _exit_now(code: int) -> None:
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (BrokenPipeError, ValueError):  # `advisor suggest ... | head`: the reader left, fine
        pass
    os._exit(code)
