"""Secrets in a pasted log never come back out: CLI text and JSON, the HTTP reply and its markdown, the TUI.

Each case puts one secret on a line the advisor *does* echo (an exception message it reports as a
fact), next to a harmless marker: the marker must reach the output (so the test can fail) and the
secret must not. Fake secrets are assembled from pieces so no scanner mistakes this file for a leak.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.redact import ATOMS, HOST_PATTERNS, MASK, SECRET_PATTERNS, Redactor
from advisor.regex import required_atoms
from helpers import run_cli

WATCHDOG = ("[rank1]:[E101 01:00:00.100 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600081 milliseconds "
            "before timing out.")

ALNUM = "aB3dE5fG7hJ9kL2mN4pQ6rS8tU0vW1xY3zA5bC7dE9"
# (kind, line text around the secret, the secret itself)
CASES = [
    ("huggingface-token", "export HF_TOKEN={s}", "hf_" + ALNUM[:34]),
    ("huggingface-token-bare", "login with {s} failed", "hf_" + ALNUM[2:36]),
    ("wandb-login", "wandb login {s}", "0123456789abcdef" * 2 + "01234567"),
    ("wandb-env", "WANDB_API_KEY={s}", "fedcba9876543210" * 2 + "76543210"),
    ("aws-access-key", "aws_access_key_id {s}", "AKIA" + "QX7TZ4KD2MWP9LHN"),
    ("aws-secret", "AWS_SECRET_ACCESS_KEY={s}", "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"),
    ("github-classic", "git clone using {s}", "ghp_" + ALNUM[:36]),
    ("github-fine-grained", "GIT_ASKPASS gave {s}", "github_pat_" + "11ABCDEFG0" + "_" + ALNUM[:40]),
    ("openai-style", "OPENAI key {s} rejected", "sk-proj-" + ALNUM[:32]),
    ("bearer", "Authorization: Bearer {s}", "Zm9vYmFyYmF6" + "cXV4cXV1eA.abcdefXYZ"),
    ("url-password", "https://trainer:{s}@hub.example.com/api/models", "hunter2-" + "Pa55word"),
    ("private-key", "key material {s}", "-----BEGIN OPENSSH PRIVATE KEY----- " + "b3BlbnNzaC1rZXktdjEAAAAA" + "BG5vbmU="),
    ("slack-token", "posting with {s}", "xoxb-" + "1234567890-" + ALNUM[:24]),
    ("google-api-key", "maps key {s}", "AIza" + ALNUM[:35]),
    ("jwt", "session {s}", "eyJhbGciOiJIUzI1NiJ9" + ".eyJzdWIiOiIxMjM0NTY3ODkwIn0" + ".SflKxwRJSMeKKF2QT4fwpM"),
    ("password-assignment", "db password: {s}", "correct-" + "horse-battery"),
]


@pytest.fixture(scope="module")
def api_client(kb):
    from fastapi.testclient import TestClient

    from advisor.api import Settings, create_app

    return TestClient(create_app(kb, Settings()), raise_server_exceptions=False)


def log_with(kind: str, template: str, secret: str) -> tuple[str, str]:
    marker = f"MARKER{abs(hash(kind)) % 10_000:04d}"
    line = template.format(s=secret)
    log = ("[rank0]: Traceback (most recent call last):\n"
           '[rank0]:   File "/work/train.py", line 88, in <module>\n'
           f"[rank0]: RuntimeError: {marker} {line}\n" + WATCHDOG + "\n")
    return log, marker


@pytest.mark.parametrize(("kind", "template", "secret"), CASES, ids=[c[0] for c in CASES])
def test_secret_is_masked_in_cli_text_and_json(kind, template, secret):
    log, marker = log_with(kind, template, secret)
    as_json = run_cli("suggest", "--error", log, "--json", "--verbose")
    as_text = run_cli("suggest", "--error", log, "--verbose", "--color", "never")
    for out in (as_json.out, as_text.out):
        assert marker in out, "the line must reach the output, or this test proves nothing"
        assert secret not in out
        assert MASK in out
    assert as_json.json["redactions"] >= 1


@pytest.mark.parametrize(("kind", "template", "secret"), CASES, ids=[c[0] for c in CASES])
def test_secret_is_masked_in_http_json_and_markdown(api_client, kind, template, secret):
    log, marker = log_with(kind, template, secret)
    reply = api_client.post("/v1/diagnose", json={"log": log})
    assert reply.status_code == 200
    body = reply.json()
    assert marker in json.dumps(body["facts"]) and MASK in body["markdown"] + json.dumps(body["facts"])
    assert secret not in reply.text


def test_every_secret_kind_has_a_case():
    covered = set()
    for kind, template, secret in CASES:
        found = Redactor()
        found.redact(template.format(s=secret))
        covered |= found.kinds
    assert covered >= {name for name, _, _ in SECRET_PATTERNS}


def test_atoms_match_what_each_pattern_requires():
    """The literal prefilter lists exactly the literals the regex parser proves every match needs."""
    for name, pattern, _ in SECRET_PATTERNS + HOST_PATTERNS:
        derived = required_atoms(pattern)
        if derived is not None or ATOMS[name] is None:
            assert ATOMS[name] == derived, name


@pytest.mark.parametrize(("name", "pattern"), [(n, p) for n, p, _ in SECRET_PATTERNS + HOST_PATTERNS if ATOMS[n] is not None])
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_every_match_contains_one_of_its_atoms(name, pattern, data):
    """Soundness where the parser cannot derive the list (`ghp_|gho_` folds to `gh[pousr]_`)."""
    sample = data.draw(st.from_regex(pattern, fullmatch=True))
    assert any(atom in sample.lower() for atom in ATOMS[name]), sample


def test_private_key_block_over_many_lines_is_masked_whole():
    body = "\n".join(["-----BEGIN RSA PRIVATE KEY-----", "MIIEow" + "IBAAKCAQEA" * 5, "x" * 64, "-----END RSA PRIVATE KEY-----"])
    out = Redactor().redact(f"before\n{body}\nafter")
    assert out == f"before\n{MASK}\nafter"


def test_text_without_secrets_is_returned_unchanged():
    text = "NCCL WARN Timeout waiting for connect; token bucket at 0; see https://pytorch.org/docs"
    redactor = Redactor()
    assert redactor.redact(text) == text and redactor.count == 0


def test_hosts_are_masked_only_on_request():
    log = ("gpu-node-17:2048:2101 [3] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.24.8.17<0>\n"
           "[W socket.cpp:464] [c10d] The server socket has failed to connect to gpu-node-03.cluster.example.com:29500 "
           "(errno: 111 - Connection refused).\n" + WATCHDOG + "\n")
    plain = run_cli("suggest", "--error", log, "--json", "--verbose").out
    masked = run_cli("suggest", "--error", log, "--json", "--verbose", "--mask-hosts").out
    assert "10.24.8.17" in plain or "gpu-node-03.cluster.example.com" in plain, "hosts reach the output unmasked"
    for host in ("10.24.8.17", "gpu-node-03.cluster.example.com", "gpu-node-17:2048"):
        assert host not in masked
    assert "[HOST]" in masked


def test_api_masks_hosts_on_request(api_client):
    log = ("[c10d] The client socket has failed to connect to [trainer-a.internal]:29500 (errno: 110 - Connection timed out).\n"
           "[c10d] The client socket has failed to connect to [gpu07]:29400 (errno: 111 - Connection refused).\n"
           "torchrun --nnodes=2 --rdzv-endpoint gpu07:29400 train.py\n")
    plain = api_client.post("/v1/diagnose", json={"log": log}).text
    body = api_client.post("/v1/diagnose", json={"log": log, "mask_hosts": True}).text
    assert "trainer-a.internal" in plain and "gpu07" in plain
    assert "trainer-a.internal" not in body and "gpu07" not in body


@pytest.mark.parametrize(
    ("text", "hidden"),
    [
        ("export MASTER_ADDR=10.0.0.7", "10.0.0.7"),
        ("MASTER_ADDR: head-node", "head-node"),
        ("--rdzv_endpoint=trainer-0:29400", "trainer-0"),
        ("--master-addr login01", "login01"),
        ("connect to [node12]:29500 failed", "node12"),
        ("host gpu-3.corp failed", "gpu-3.corp"),
        ("fe80:0:0:0:202:b3ff:fe1e:8329 unreachable", "fe80:0:0:0:202:b3ff:fe1e:8329"),
    ],
)
def test_host_forms(text, hidden):
    masked = Redactor(mask_hosts=True).redact(text)
    assert hidden not in masked and "[HOST]" in masked
    assert Redactor().redact(text) == text


def test_host_masking_leaves_advice_text_alone():
    advice = "Set MASTER_ADDR and MASTER_PORT to the head node; MASTER_ADDR=<host> in the job script."
    assert Redactor(mask_hosts=True).redact(advice) == advice


async def test_secret_is_masked_in_the_tui(kb, tmp_path):
    from advisor.tui.app import AdvisorApp

    kind, template, secret = CASES[0]
    log, marker = log_with(kind, template, secret)
    app = AdvisorApp(kb, save_dir=tmp_path)
    async with app.run_test(size=(160, 60)) as pilot:
        app.query_one("#paste").text = log
        await pilot.press("ctrl+g")
        await app.workers.wait_for_complete()
        await pilot.pause()
        shown = app.export_screenshot()
        answer = app.diagnosis.model_dump_json()
    assert marker in answer and secret not in answer
    assert secret not in shown
