"""The CLI front end: inputs, outputs, the JSON contract and exit codes."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import pytest

from helpers import run_cli

LINE = ("[rank3]:[E217 14:55:02.441 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=38, OpType=_ALLGATHER_BASE, NumelIn=9510912, NumelOut=38043648, Timeout(ms)=1800000) "
        "ran for 1800033 milliseconds before timing out.")
SAVE_LOG = "Saving model checkpoint to out/checkpoint-100\n" + LINE + "\n"


def test_error_text_gives_a_diagnosis_first():
    r = run_cli("suggest", "--error", SAVE_LOG)
    assert r.code == 0
    first = r.out.splitlines()[0]
    assert first.startswith("Diagnosis:") and "checkpoint-save-straggler" in first
    assert r.out.index("Fix") < r.out.index("Why") < r.out.index("Evidence")


def test_json_contract_keys():
    data = run_cli("suggest", "--error", SAVE_LOG, "--json").json
    assert {"status", "headline", "causes", "facts", "questions", "fix", "notices", "ranks", "version"} <= set(data)
    cause = data["causes"][0]
    assert {"code", "id", "title", "score", "evidence"} <= set(cause)
    assert {"lines", "facts", "symptoms"} <= set(cause["evidence"])
    for q in data["questions"]:
        assert {"id", "text", "kind"} <= set(q)
    assert {"summary", "actions", "snippets", "references"} <= set(data["fix"])
    for snippet in data["fix"]["snippets"]:
        assert {"framework", "format", "language", "content"} <= set(snippet)


def test_log_file_stdin_and_gzip_give_the_same_answer(tmp_path):
    plain = tmp_path / "train.log"
    plain.write_text(SAVE_LOG)
    packed = tmp_path / "train.log.gz"
    packed.write_bytes(gzip.compress(SAVE_LOG.encode()))
    a = run_cli("suggest", "--log", str(plain), "--json").json
    b = run_cli("suggest", "-", "--json", stdin=SAVE_LOG.encode()).json
    c = run_cli("suggest", "--log", str(packed), "--json").json
    assert a["causes"][0]["id"] == b["causes"][0]["id"] == c["causes"][0]["id"] == "save-checkpoint-timeout"
    assert a["facts"] == b["facts"] == c["facts"]


def test_answers_and_framework_flag():
    r = run_cli("suggest", "--error", LINE, "--json", "--framework", "LLaMA-Factory", "--answer", "phase=save",
                "--answer", "model_size_b=7", "--answer", "storage=unknown")
    data = r.json
    assert data["facts"]["framework"] == "llama-factory" and data["facts"]["phase"] == "save"
    assert data["causes"][0]["code"] == "checkpoint-save-straggler"
    yaml_snippet = next(s for s in data["fix"]["snippets"] if s["format"] == "llamafactory-yaml" and "ddp_timeout" in s["content"])
    assert "ddp_timeout: 3600" in yaml_snippet["content"]
    assert "storage" not in [q["id"] for q in data["questions"]]


@pytest.mark.parametrize(("argv", "code", "message"), [
    (["suggest", "--log", "/no/such/file.log"], 3, "no such file"),
    (["suggest", "--error", "   "], 3, "empty"),
    (["suggest", "--error", LINE, "--answer", "phase"], 2, "ID=VALUE"),
    (["suggest", "--error", LINE, "--answer", "phase=lunch"], 2, "choose one of"),
    (["suggest", "--error", LINE, "--answer", "bogus=1"], 2, "no such question"),
    (["suggest", "--bogus-flag"], 2, ""),
])
def test_bad_input_gets_a_clear_message_and_exit_code(argv, code, message):
    r = run_cli(*argv)
    assert r.code == code
    assert message in r.err
    assert "Traceback" not in r.err + r.out


def test_directory_empty_file_and_binary_file(tmp_path):
    assert run_cli("suggest", "--log", str(tmp_path)).code == 3
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    r = run_cli("suggest", "--log", str(empty))
    assert r.code == 3 and "empty" in r.err
    binary = tmp_path / "core"
    binary.write_bytes(bytes(range(256)) * 400)
    r = run_cli("suggest", "--log", str(binary))
    assert r.code == 3 and "binary" in r.err


def test_unreadable_file(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root can read anything")
    f = tmp_path / "secret.log"
    f.write_text(LINE)
    f.chmod(0)
    r = run_cli("suggest", "--log", str(f))
    assert r.code == 3 and "permission" in r.err


def test_no_confident_match_exits_1_and_says_what_to_turn_on():
    r = run_cli("suggest", "--error", "epoch 3 done, saving nothing, all fine")
    assert r.code == 1
    assert "No confident match" in r.out and "NCCL_DEBUG=INFO" in r.out


def test_no_colour_unless_a_terminal_or_forced(monkeypatch):
    assert "\x1b[" not in run_cli("suggest", "--error", LINE).out
    assert "\x1b[" in run_cli("suggest", "--error", LINE, "--color", "always").out
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert "\x1b[" in run_cli("suggest", "--error", LINE).out
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\x1b[" not in run_cli("suggest", "--error", LINE).out


def test_help_has_examples_and_exit_codes():
    r = run_cli("suggest", "--help")
    assert r.code == 0
    assert "examples:" in r.out and "exit codes:" in r.out and "--answer" in r.out


def test_secrets_are_redacted_from_the_output():
    token = "hf_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7"
    log = f"export HF_TOKEN={token}\nwandb login {'f' * 40}\n{LINE}\n"
    r = run_cli("suggest", "--error", log, "--json", "--verbose")
    assert token not in r.out and "f" * 40 not in r.out


def test_console_script_and_python_m_run(tmp_path):
    exe = os.path.join(os.path.dirname(sys.executable), "advisor")
    for cmd in ([exe], [sys.executable, "-m", "advisor"]):
        done = subprocess.run(cmd + ["suggest", "--error", LINE, "--json"], capture_output=True, text=True, cwd=tmp_path, timeout=60)
        assert done.returncode in (0, 1), done.stderr
        assert json.loads(done.stdout)["facts"]["op_type"] == "_ALLGATHER_BASE"


def test_kb_show_prints_one_cause():
    r = run_cli("kb", "show", "nccl-heartbeat-monitor")
    assert r.code == 0 and json.loads(r.out)["code"] == "heartbeat-monitor-kill"
    assert run_cli("kb", "show", "nope").code == 2


def test_one_line_answer_loads_only_what_it_needs(tmp_path):
    """Start-up cost is mostly imports: the warm CLI path must not pull in the web stack, the TUI,
    the YAML parser (the KB comes from its cache) or packaging's specifier machinery."""
    probe = (
        "import io, json, sys\n"
        "from advisor.cli import main\n"
        f"main(['suggest', '--error', {LINE!r}], stdout=io.StringIO(), stderr=io.StringIO())\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    env = dict(os.environ, ADVISOR_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("ADVISOR_NO_CACHE", None)
    runs = [subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120) for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[-1].stderr
    cold, warm = (set(json.loads(r.stdout.splitlines()[-1])) for r in runs)
    assert "yaml" in cold, "the first run builds the cache from YAML (else this test proves nothing)"
    heavy = {"yaml", "fastapi", "starlette", "uvicorn", "textual", "rich", "rapidfuzz", "httpx", "packaging.specifiers"}
    assert not heavy & warm, sorted(heavy & warm)


def test_the_readme_first_command_diagnoses():
    """The README opens with install-and-run: its `advisor suggest ...` names the save as the likely
    cause, not yet a diagnosis (an answered phase alone is not specific evidence), as the README says."""
    import shlex

    from helpers import REPO

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    first = readme.split("```bash\n", 1)[1].split("\n```", 1)[0]
    words = shlex.split(first)
    argv = words[words.index(".venv/bin/advisor") + 1:]
    assert argv[0] == "suggest"
    result = run_cli(*argv)
    assert result.code == 1, result.out
    assert result.out.startswith("Likely: ") and "[checkpoint-save-straggler]" in result.out.splitlines()[0]
    assert "Give collectives enough time to outlast the save" in result.out and "3600" in result.out
    assert '"Likely" (exit status 1)' in readme


PLUGIN = ("gpu-a01:4410:4410 [0] NCCL INFO NET/Plugin : dlerror=libnccl-net.so: cannot open shared object file: "
          "No such file or directory No plugin found (libnccl-net.so), using internal implementation")


def test_only_harmless_lines_is_no_diagnosis():
    """The harmless lines say the failure is elsewhere: status no-match, exit 1, one "harmless"."""
    r = run_cli("suggest", "--error", PLUGIN, "--json")
    assert r.code == 1
    data = r.json
    assert data["status"] == "no-match" and data["causes"][0]["benign"]
    assert data["headline"].lower().count("harmless") == 1 and "not in this text" not in data["headline"]
    assert "elsewhere" in data["headline"]
    text = run_cli("suggest", "--error", PLUGIN)
    assert text.code == 1 and "confidence" not in text.out.splitlines()[1]


def test_the_readme_description_example_reads_well_and_is_no_certainty():
    r = run_cli("suggest", "--describe", "保存模型时NCCL超时", "--framework", "llama-factory", "--json")
    data = r.json
    assert data["causes"][0]["code"] == "checkpoint-save-straggler"
    assert "?" not in data["headline"] and "?" not in data["causes"][0]["summary"]
    assert data["status"] == "uncertain" and r.code == 1  # eight characters, no log: a lead, not a diagnosis
    assert data["causes"][0]["score"] < 0.9
    assert data["headline"].startswith(("Likely:", "Possibly:"))


def test_a_long_description_outweighs_a_short_one():
    short = run_cli("suggest", "--describe", "保存模型时NCCL超时", "--json").json["causes"][0]
    long = run_cli("suggest", "--describe", "保存模型时NCCL超时。每次保存checkpoint的时候，其他卡都在等待，然后30分钟后watchdog报超时退出", "--json").json["causes"][0]
    assert short["id"] == long["id"] and long["score"] > short["score"]


def test_redaction_counts_the_secrets_in_the_input():
    """One token, quoted by several output fields (evidence, facts, summary), is one secret."""
    token = "hf_" + "Zq7" * 12
    log = ("[rank2]: Traceback (most recent call last):\n[rank2]:   File \"/w/train.py\", line 3, in <module>\n"
           f"[rank2]: OSError: 401 Unauthorized for https://hub.example.com/x with token {token}\n" + LINE)
    r = run_cli("suggest", "--error", log, "--json", "--verbose")
    assert token not in r.out and r.out.count("[REDACTED]") > 1
    assert r.json["redactions"] == 1
    text = run_cli("suggest", "--error", log, "--verbose").out
    assert token not in text and "1 secret(s) in the input" in text


@pytest.mark.parametrize("value", ["0", "-1", "51", "many"])
def test_max_causes_out_of_range_is_a_usage_error_as_in_the_api(value):
    r = run_cli("suggest", "--error", LINE, "--max-causes", value)
    assert r.code == 2 and "--max-causes" in r.err and "1 to 50" in r.err
    assert run_cli("suggest", "--error", LINE, "--max-causes", "1", "--json").code in (0, 1)


def test_questions_name_the_framework_and_carry_no_jargon():
    data = run_cli("suggest", "--error", LINE, "--answer", "phase=save", "--answer", "trl_trainer=sft", "--framework", "trl",
                   "--json").json
    version = next(q for q in data["questions"] if q["kind"] == "version")  # framework_version, or trl_version under TRL
    assert "TRL" in version["text"] and "that framework" not in version["text"]
    assert all("bits" not in q["reason"] for q in data["questions"])
    for q in data["questions"]:
        if q["kind"] == "yes_no":
            assert [c["value"] for c in q["choices"]] == ["yes", "no"]
    assert any(q["kind"] == "yes_no" for q in data["questions"])
    generic = run_cli("suggest", "--error", LINE, "--answer", "phase=save", "--json").json["questions"]
    assert all("{" not in q["text"] for q in generic)


def test_evidence_shows_the_message_not_only_the_time_stamp():
    out = run_cli("suggest", "--error", SAVE_LOG).out
    evidence = out[out.index("Evidence"):]
    assert "Watchdog caught collective operation timeout" in evidence
    assert "[E217 14:55:02.441" not in evidence  # the time stamp gives way to the message


def test_an_upgrade_comes_with_a_pip_command_to_copy():
    from helpers import scenario

    data = run_cli("suggest", "--error", scenario("trl-packing-false")["log"], "--answer", "framework=trl",
                   "--answer", "framework_version=0.15.0", "--json").json
    shell = [s["content"] for s in data["fix"]["snippets"] if s["format"] == "shell"]
    assert 'pip install -U "trl>=0.15.1"\n' in shell


def test_without_a_diagnosis_the_leading_cause_is_still_listed_as_a_candidate():
    """No-match names no cause in the headline, so the causes the log does point to are listed."""
    out = run_cli("suggest", "--error", "RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
                  "--color", "never").out
    assert out.startswith("Cause not yet known")
    candidates = out[out.index("\nCandidates\n"):]
    assert "[version-mismatch]" in candidates.split("\n\n")[0]


def test_the_markdown_reply_lists_candidates_and_marks_resemblance():
    from advisor.diagnose import diagnose
    from advisor.knowledge import load_kb
    from advisor.models import DiagnoseRequest
    from advisor.render import render_markdown

    d = diagnose(DiagnoseRequest(log="RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)"), load_kb())
    md = render_markdown(d)
    section = md[md.index("### Candidates"):].split("\n\n")[0]
    assert "(`version-mismatch`)" in section
    assert all("similar wording only" in line for line in section.splitlines() if any(
        c.basis == "similar-text" and f"(`{c.code}`)" in line for c in d.causes))
    assert "<summary>Evidence</summary>" not in md  # no evidence for a cause the reply does not name
