"""The knowledge base as code: its contract, its rule tests, and its error messages."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from advisor.kbcheck import check_example
from advisor.knowledge import KBInvalid, builtin_kb_dir, load_kb
from helpers import SHARED, run_cli

KB = load_kb()
EXAMPLES = [
    pytest.param(cause.id, kind, i, id=f"{cause.id}:{kind}:{ex.name}")
    for cause in KB.causes.values()
    for kind in ("positive", "negative")
    for i, ex in enumerate(getattr(cause.examples, kind))
]


def test_codes_are_the_shared_contract():
    shared = SHARED / "causes.yaml"
    if not shared.is_file():
        pytest.skip("shared/causes.yaml not available")
    assert yaml.safe_load(shared.read_text())["causes"] == KB.codes


def test_every_code_has_a_cause():
    covered = {c.code for c in KB.causes.values()}
    assert set(KB.codes) <= covered


@pytest.mark.parametrize(("cause_id", "kind", "index"), EXAMPLES)
def test_example_ranks_as_declared(cause_id, kind, index):
    example = getattr(KB.causes[cause_id].examples, kind)[index]
    assert check_example(KB, cause_id, kind, example) is None


def test_every_cause_has_positive_and_negative_examples():
    for cause in KB.causes.values():
        assert cause.examples.positive and cause.examples.negative, cause.id


def test_mitigations_carry_caveats_and_every_fix_a_reference():
    for cause in KB.causes.values():
        for fix in cause.fixes:
            assert fix.references
            if fix.mitigation or fix.kind == "env":
                assert fix.caveat, f"{cause.id}:{fix.id}"


def test_fixed_question_ids_exist():
    for qid in ("framework", "framework_version", "torch_version", "nodes", "gpus_per_node", "model_size_b", "phase"):
        assert qid in KB.questions


def test_builtin_kb_ships_with_the_package():
    root = builtin_kb_dir()
    assert (root / "codes.yaml").is_file()
    assert len(list((root / "causes").glob("*.yaml"))) == len([p for p in KB.sources if not p.startswith(("framework:", "releases:"))
                                                               and p not in ("codes", "phases", "questions", "signatures", "timers")])
    assert (root / "releases" / "nccl.yaml").is_file() and KB.release_notes["nccl"].releases


def test_kb_check_command_passes():
    result = run_cli("kb", "check")
    assert result.code == 0, result.out + result.err
    assert "0 failed" in result.out


def test_kb_list_json_lists_every_cause():
    result = run_cli("kb", "list", "--json")
    assert result.code == 0
    ids = {row["id"] for row in __import__("json").loads(result.out)}
    assert ids == set(KB.causes)


# --- team KBs and broken files ------------------------------------------------------------------

GOOD_CAUSE = textwrap.dedent(
    """\
    id: team-nfs-quota
    code: checkpoint-save-straggler
    title: Our NFS quota stops checkpoint writes
    summary: The team NFS share hit its quota while a checkpoint was written.
    explanation: Our cluster's /shared NFS export has a per-project quota; when a save hits it the writer stalls.
    signatures:
      - id: quota
        regex: 'Disk quota exceeded'
        weight: 9
        event: hardware
    fixes:
      - id: clean-quota
        kind: infra
        title: Clean old checkpoints
        steps: Delete old checkpoints from /shared before long runs.
        references: [https://example.com/wiki/nfs-quota]
    references: [https://example.com/wiki/nfs-quota]
    examples:
      positive:
        - name: quota message
          log: "OSError: [Errno 122] Disk quota exceeded: '/shared/ckpt/model.safetensors'"
      negative:
        - name: other message
          log: "all good here"
    """
)


def write_team_kb(tmp_path: Path, text: str, name: str = "team-cause.yaml") -> Path:
    (tmp_path / "causes").mkdir(exist_ok=True)
    (tmp_path / "causes" / name).write_text(text, encoding="utf-8")
    return tmp_path


def test_team_kb_adds_a_cause(tmp_path, monkeypatch):
    team = write_team_kb(tmp_path, GOOD_CAUSE)
    result = run_cli("suggest", "--error", "OSError: [Errno 122] Disk quota exceeded: '/shared/x'", "--json", "--kb", str(team))
    assert result.json["causes"][0]["id"] == "team-nfs-quota"
    monkeypatch.setenv("ADVISOR_KB_PATH", str(team))
    assert run_cli("kb", "check").code == 0
    assert "team-nfs-quota" in run_cli("kb", "list").out


BROKEN = {
    "unknown key": (GOOD_CAUSE.replace("title: Our", "titel: x\ntitle: Our"), "titel", "unknown key"),
    "bad code": (GOOD_CAUSE.replace("code: checkpoint-save-straggler", "code: no-such-code"), "code", "not a code"),
    "bad regex": (GOOD_CAUSE.replace("'Disk quota exceeded'", "'(?<=Disk) quota'"), "signatures[0].regex", "RE2 cannot compile"),
    "unknown fact": (GOOD_CAUSE.replace("fixes:", "rules:\n  - when: {bogus_fact: 1}\n    weight: 1\n    why: testing an unknown fact\nfixes:"),
                     "rules[0].when.bogus_fact", "unknown fact"),
    "mitigation without caveat": (GOOD_CAUSE.replace("kind: infra", "kind: env"), "fixes[0]", "caveat"),
    "yaml syntax": (GOOD_CAUSE.replace("title: Our", "title: [Our"), "line", "invalid YAML"),
    "alias bomb": ("a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n", ".yaml: ", "anchors and aliases are not allowed"),
    "not a mapping": ("- just\n- a list\n", "(top level)", "expected a mapping"),
    "missing recorded run": (GOOD_CAUSE.replace("""log: "OSError: [Errno 122] Disk quota exceeded: '/shared/ckpt/model.safetensors'\"""",
                                                "recorded: no-such--run"),
                             "examples.positive[0].recorded", "no recorded run"),
    "not https": (GOOD_CAUSE.replace("references: [https://example.com/wiki/nfs-quota]\nexamples", "references: [http://example.com]\nexamples"),
                  "references", "https"),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_kb_file_is_reported_with_file_and_field(tmp_path, name):
    text, field, message = BROKEN[name]
    team = write_team_kb(tmp_path, text, f"{name.replace(' ', '-')}.yaml")
    result = run_cli("kb", "check", "--kb", str(team))
    assert result.code == 4, result.out + result.err
    report = result.out + result.err
    assert f"{name.replace(' ', '-')}.yaml" in report
    assert field in report and message in report
    # and the same error stops `suggest` with exit code 4, not a traceback
    suggest = run_cli("suggest", "--error", "x", "--kb", str(team))
    assert suggest.code == 4 and "Traceback" not in suggest.err


def test_oversize_kb_file_is_refused(tmp_path):
    team = write_team_kb(tmp_path, GOOD_CAUSE + "#" * (1 << 20))
    with pytest.raises(KBInvalid, match="over the"):
        load_kb([team])


def test_missing_team_dir_is_an_error(tmp_path):
    with pytest.raises(KBInvalid, match="no such KB directory"):
        load_kb([tmp_path / "nope"])


def test_a_file_given_as_kb_dir_is_named_a_file(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("not a KB\n")
    result = run_cli("kb", "check", "--kb", str(log))
    assert result.code == 4
    assert "is a file, not a KB directory" in result.out and "no such" not in result.out
    assert "no such KB directory" in run_cli("kb", "check", "--kb", str(tmp_path / "nope")).out


def test_an_unclosed_quote_is_reported_where_it_opens(tmp_path):
    team = write_team_kb(tmp_path, 'id: team-x\ncode: nccl-timeout-generic\ntitle: "never closed\nsummary: s\nbenign: false\n')
    with pytest.raises(KBInvalid) as info:
        load_kb([team])
    error = info.value.errors[0]
    assert error.field.startswith("line 3, column 8") and "quote" in error.message


def test_edited_kb_file_is_not_served_stale(tmp_path):
    team = write_team_kb(tmp_path, GOOD_CAUSE)
    assert load_kb([team]).causes["team-nfs-quota"].title == "Our NFS quota stops checkpoint writes"
    path = team / "causes" / "team-cause.yaml"
    path.write_text(GOOD_CAUSE.replace("Our NFS quota stops checkpoint writes", "Renamed title for the quota"))
    import os

    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10_000_000))
    assert load_kb([team]).causes["team-nfs-quota"].title == "Renamed title for the quota"


def test_summaries_read_well_without_any_fact():
    """A description alone gives no op type or timeout: no summary may then show "?" or a gap."""
    from advisor.matcher import render_summary
    from advisor.models import Facts

    for cause in KB.causes.values():
        text = render_summary(cause.summary, Facts())
        assert "?" not in text and "{" not in text and "  " not in text and " ." not in text, (cause.id, text)


def _prose_cut_by_a_comment(text: str) -> list[tuple[int, str]]:
    """Plain (unquoted) prose scalars followed on their line by ` #...`: YAML reads the rest as a
    comment, so "fixed by PR #123" silently becomes "fixed by PR"."""
    lines = text.splitlines()
    cut: list[tuple[int, str]] = []

    def walk(node) -> None:
        if isinstance(node, yaml.ScalarNode):
            if node.style is None and " " in node.value and len(node.value) > 15:
                if lines[node.end_mark.line][node.end_mark.column:].lstrip().startswith("#"):
                    cut.append((node.end_mark.line + 1, node.value))
        elif isinstance(node, yaml.SequenceNode):
            for item in node.value:
                walk(item)
        elif isinstance(node, yaml.MappingNode):
            for _, value in node.value:
                walk(value)

    walk(yaml.compose(text))
    return cut


def test_no_prose_in_the_kb_is_cut_short_by_a_comment():
    found = {str(p.relative_to(builtin_kb_dir())): _prose_cut_by_a_comment(p.read_text(encoding="utf-8"))
             for p in sorted(builtin_kb_dir().rglob("*.yaml"))}
    assert {name: hits for name, hits in found.items() if hits} == {}


def test_the_comment_check_sees_a_cut_and_leaves_quoted_text_alone():
    assert _prose_cut_by_a_comment("why: fixed in 4.57.0 by PR #40923\n") == [(1, "fixed in 4.57.0 by PR")]
    assert _prose_cut_by_a_comment('why: "fixed in 4.57.0 by PR #40923"\nneeds_wait: true  # a note\n') == []


# A cause's own regex stays only where no single catalogue message stands for it, or where the
# catalogue's pattern is narrower than what real logs print (an older wording the catalogue, which
# starts at torch 2.1, does not hold). Each kept duplicate says why.
OWN_REGEX_KEPT = {
    ("master-unreachable", "dns"): "also the elastic backend's 'host not found' wording",
    ("mismatched-collectives", "detail-mismatch"): "also torch 1.x's 'is running inconsistent collective' wording",
    ("python-exception-on-rank", "traceback"): "any Python traceback, not one message",
    ("vllm-server-unreachable", "cant-be-reached"): "older TRL wordings with '0.0.0.0:8000 after N seconds'",
    ("vllm-server-unreachable", "not-up-yet"): "the vllm_client logger's prefix variants",
    ("world-size-mismatch", "invalid-device-ordinal"): "also THCudaCheck's wording (torch < 1.10)",
    ("wrong-socket-interface", "socket-creation"): "also NCCL's include/socket.h wording before ncclSocketInit",
    ("ib-rdma-fault", "wc-status-name"): "work-completion status names inside many NCCL IB lines, not one message",
    ("wrong-socket-interface", "virtual-interface-chosen"): "only the 'Using' lines that name a virtual interface",
    ("rank-killed", "exitcode-9"): "only exit code -9 of the agent's failure line",
    ("rank-killed", "external-sigterm"): "several launchers' wordings of an external SIGTERM/SIGHUP",
    ("wrong-socket-interface", "gloo-loopback-fallback"): "also gloo's connect to 127.0.1.1",
    ("inference-engine-collective-hang", "engine-log-line"): "the prefix and log format of any vLLM worker line, not one message",
}


def test_no_cause_repeats_the_regex_of_one_catalogue_message(kb):
    """Causes reason over catalogued messages: a signature whose regex matches the wording of
    exactly one catalogue message must `use` that message, unless OWN_REGEX_KEPT says why not."""
    import re

    from advisor.catalogue import render

    texts = {m.id: [m.sample or render(m.text), *(m.examples or [])] for m in kb.messages.values()}
    duplicates = []
    for cause in kb.causes.values():
        for sig in cause.signatures:
            if sig.from_message or sig.use or (cause.id, sig.id) in OWN_REGEX_KEPT:
                continue
            rx = re.compile(sig.regex, 0 if sig.case_sensitive else re.IGNORECASE)
            hits = [mid for mid, ts in texts.items() if any(t and rx.search(t) for t in ts)]
            if len(hits) == 1:
                duplicates.append(f"{cause.id}:{sig.id} -> use: {hits[0]}")
    assert not duplicates, "signatures that repeat one catalogue message:\n" + "\n".join(duplicates)
    stale = [k for k in OWN_REGEX_KEPT if not any(c.id == k[0] and any(s.id == k[1] and not s.from_message
                                                                         for s in c.signatures) for c in kb.causes.values())]
    assert not stale, f"OWN_REGEX_KEPT names signatures that use a message now: {stale}"


def test_a_fixs_fabrics_are_the_interconnect_facts_values():
    """`applies.interconnect` (schema) and the interconnect fact (facts) name the same fabrics: a
    fabric added to one and not the other would make a fix unreachable or a KB file invalid."""
    import typing

    from advisor.facts import FACTS
    from advisor.schema import Applies

    (inner,) = typing.get_args(Applies.model_fields["interconnect"].annotation)
    assert set(typing.get_args(inner)) == set(FACTS["interconnect"].domain)
