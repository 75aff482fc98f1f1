"""The calculators behind tuned fixes: the arithmetic, its floors and caps, and how it is shown."""

from __future__ import annotations

import pytest

from advisor import tuning
from advisor.models import Facts, FactValue


def facts(**values) -> Facts:
    return Facts(values={k: FactValue(value=v, origin="answer") for k, v in values.items()})


def test_save_timeout_scales_with_model_size_storage_and_optimizer():
    big = tuning.checkpoint_save_timeout(facts(model_size_b=70.0, storage="network-fs", saves_optimizer=True))
    # 70 B x 14 B/param = 980 GB at 0.4 GB/s = 2450 s; x 3 + 300 s = 7650 -> rounded up to 7680
    assert big.value == 7680 and big.missing == []
    weights_only = tuning.checkpoint_save_timeout(facts(model_size_b=70.0, storage="network-fs", saves_optimizer=False))
    assert weights_only.value < big.value  # 140 GB: 350 s x 3 + 300 = 1350 s, then the 3600 s floor
    assert weights_only.value == 3600
    nvme = tuning.checkpoint_save_timeout(facts(model_size_b=70.0, storage="local-nvme", saves_optimizer=True))
    assert nvme.value < big.value


def test_save_timeout_never_below_what_already_expired():
    calc = tuning.checkpoint_save_timeout(facts(model_size_b=1.5, storage="tmpfs", saves_optimizer=False, timeout_ms=1800000))
    assert calc.value == 3600 and "1800 s that already expired" in calc.derivation


def test_save_timeout_names_the_missing_facts_and_is_capped():
    unknown = tuning.checkpoint_save_timeout(facts())
    assert set(unknown.missing) == {"model_size_b", "storage", "saves_optimizer"}
    huge = tuning.checkpoint_save_timeout(facts(model_size_b=100000.0, storage="object-store", saves_optimizer=True))
    assert huge.value == tuning.MAX_TIMEOUT_S and huge.note and "capped" in huge.derivation


@pytest.mark.parametrize(
    "calc, given",
    [
        (tuning.checkpoint_save_timeout, facts(model_size_b=70.0, storage="network-fs", saves_optimizer=True)),
        (tuning.checkpoint_save_timeout, facts(model_size_b=0.5, timeout_ms=600000)),
        (tuning.heartbeat_timeout, facts(torch_version="2.6.0", startup_skew_s=900)),
        (tuning.heartbeat_timeout, facts(torch_version="2.3.1")),
        (tuning.startup_timeout, facts(startup_skew_s=3000, timeout_ms=600000)),
        (tuning.startup_timeout, facts()),
        (tuning.eval_timeout, facts(timeout_ms=1800000)),
        (tuning.train_timeout_stopgap, facts(timeout_ms=100000)),
    ],
)
def test_the_arithmetic_ends_in_the_value_used_said_once(calc, given):
    result = calc(given)
    assert result.derivation.endswith(f" {result.value} s")
    assert result.derivation.count(f"{result.value} s") >= 1
    assert f"= {result.value} s -> {result.value} s" not in result.derivation  # no echo of the same number


def test_heartbeat_default_follows_the_torch_version():
    assert tuning.default_heartbeat_s("2.2.0") == 120  # off by default in 2.2; 120 s once turned on
    assert tuning.default_heartbeat_s("2.3.0") == 600
    assert tuning.default_heartbeat_s("2.4.1") == 600
    assert tuning.default_heartbeat_s("2.5.0") == 480
    assert tuning.heartbeat_timeout(facts(torch_version="2.6.0", startup_skew_s=900)).value == 2100  # 2 x 900 + 300
