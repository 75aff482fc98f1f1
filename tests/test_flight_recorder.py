"""Flight Recorder dumps: reading every format and shape, and what the analysis finds in them.

The gloo-2.13 fixtures are real dumps (tests/fixtures/flight_recorder/make_dumps.py, torch 2.13
on CPU under torchrun); the built-nccl-* ones are built from torch's writer for the fields a CPU
cannot record (build_nccl_dumps.py). See tests/fixtures/flight_recorder/README.md.
"""

from __future__ import annotations

import gzip
import json
import pickle
import shutil

import pytest

from advisor.flight_recorder import analyze
from advisor.fr_dumps import FORMAT_TORCH, DumpError, parse_dump_bytes, rank_from_name, read_dumps
from helpers import FIXTURES

FR = FIXTURES / "flight_recorder"
GLOO = FR / "gloo-2.13"
FORMATS = ("pickle", "json")


def summary(*specs, world=None):
    dumps, notes = read_dumps([str(s) for s in specs])
    return analyze(dumps, world, notes)


# --- reading -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name, rank", [
    ("nccl_trace_rank_3", 3), ("fr_trace_rank_12.json", 12), ("rank_0", 0), ("rank_7.json.gz", 7),
    ("comm_lib_trace_rank_5.pkl", 5), ("nccl_trace_rank_container-node02_5", 5), ("_dump_31", 31),
    ("torchrun.log", None), ("README", None), ("rank_0.log", None), ("x" + "9" * 12, None),
])
def test_the_rank_is_the_number_a_dump_file_name_ends_with(name, rank):
    assert rank_from_name(name) == rank


def test_json_and_pickle_of_the_same_job_read_alike():
    for scenario in ("straggler", "multi_pg", "dead_rank", "mismatch"):
        (p, _), (j, _) = (read_dumps([str(GLOO / scenario / f)]) for f in FORMATS)
        assert [d.rank for d in p] == [d.rank for d in j]
        for a, b in zip(p, j):
            assert (a.format, b.format) == ("pickle", "json")
            assert a.version == b.version == "2.10" and a.torch == b.torch == "2.9-2.13"
            assert [(e.pg, e.seq, e.op, e.input_sizes) for e in a.entries] == [(e.pg, e.seq, e.op, e.input_sizes) for e in b.entries]
            assert any(e.frames for e in a.entries) and not any(e.frames for e in b.entries)  # JSON has no stacks
            assert a.backend == "gloo"


def test_a_pickle_is_preferred_to_the_json_of_the_same_rank(tmp_path):
    for f in (GLOO / "straggler" / "json").iterdir():
        shutil.copy(f, tmp_path / f.name)
    shutil.copy(GLOO / "straggler" / "pickle" / "nccl_trace_rank_0", tmp_path)
    dumps, notes = read_dumps([str(tmp_path)])
    assert [d.format for d in dumps] == ["pickle", "json", "json", "json"]
    assert any("rank 0" in n for n in notes)


def test_folders_files_globs_and_gzip(tmp_path):
    for f in (GLOO / "dead_rank" / "pickle").iterdir():
        (tmp_path / (f.name + ".gz")).write_bytes(gzip.compress(f.read_bytes()))
    (tmp_path / "torchrun.log").write_text("not a dump")
    dumps, notes = read_dumps([str(tmp_path)])
    assert [d.rank for d in dumps] == [0, 1] and all(d.entries for d in dumps)
    assert any("torchrun.log" in n for n in notes)
    by_glob, _ = read_dumps([str(tmp_path / "*_rank_1.gz")])
    assert [d.rank for d in by_glob] == [1]
    by_files, _ = read_dumps([str(tmp_path / "nccl_trace_rank_0.gz"), str(tmp_path / "nccl_trace_rank_1.gz")])
    assert len(by_files) == 2


@pytest.mark.parametrize("spec, says", [
    ("no/such/folder", "no such file or folder"),
    ("no/such/*.json", "no file matches"),
])
def test_a_bad_path_is_an_error_naming_it(spec, says):
    with pytest.raises(DumpError, match=says):
        read_dumps([spec])


def test_a_file_named_without_a_rank_is_refused(tmp_path):
    path = tmp_path / "trace.pkl"
    path.write_bytes((GLOO / "dead_rank" / "pickle" / "nccl_trace_rank_0").read_bytes())
    with pytest.raises(DumpError, match="rank number"):
        read_dumps([str(path)])


def test_every_format_version_from_torch_2_5_is_read():
    seen = {}
    for folder in sorted(FR.glob("*/*")):
        for fmt in ("pickle", "json", ""):
            target = folder / fmt if fmt else folder
            if target.is_dir() and any(p.is_file() and rank_from_name(p.name) is not None for p in target.iterdir()):
                for d in read_dumps([str(target)])[0]:
                    seen.setdefault(d.version, set()).add(d.torch)
    assert seen == {"2.4": {"2.5-2.7"}, "2.9": {"2.8"}, "2.10": {"2.9-2.13"}}
    assert set(FORMAT_TORCH) == set(seen)


def test_nccl_fields_are_read():
    dumps, _ = read_dumps([str(FR / "built-nccl-2.10" / "eval_straggler" / "pickle")])
    states = {e.state for d in dumps for e in d.entries}
    assert states == {"scheduled", "started", "completed"}
    done = next(e for e in dumps[0].entries if e.state == "completed")
    assert done.duration_ms == 2.0 and done.started_ns and done.completed_ns and done.retired is True
    assert dumps[0].comm_lib_version == "2.27.3" and dumps[0].comm_state
    assert dumps[0].pg_status["0"].last_enqueued == 13 and dumps[0].pg_config["0"].ranks == [0, 1, 2, 3]
    old, _ = read_dumps([str(FR / "built-nccl-2.9" / "coalesced_dtype_mismatch" / "pickle")])
    assert old[0].comm_lib_version == "2.26.2"  # torch 2.8 calls it nccl_version


# --- near-empty, truncated, missing: findings, not errors --------------------------------------


def test_the_87_byte_dump_of_a_recorder_that_was_off_is_a_finding():
    path = FR / "built-nccl-2.4" / "near_empty" / "nccl_trace_rank_0"
    assert path.stat().st_size == 87
    s = summary(path)
    assert s.ranks_dumped == [] and s.ranks_missing == [0]
    assert "holds no collectives" in s.dumps[0].problem and "TORCH_FR_BUFFER_SIZE" in s.dumps[0].problem


def test_real_dumps_of_a_recorder_that_was_off():
    s = summary(GLOO / "empty" / "pickle")
    assert s.ranks_dumped == [] and all("no collectives" in d.problem for d in s.dumps)


@pytest.mark.parametrize("cut", [0, 1, 40, 400, -1])
def test_a_truncated_dump_is_a_finding(cut):
    raw = (GLOO / "straggler" / "pickle" / "nccl_trace_rank_1").read_bytes()
    dump = parse_dump_bytes(raw[:cut] if cut else b"", 1, "nccl_trace_rank_1")
    assert dump.problem and ("cut off" in dump.problem or "empty" in dump.problem)


def test_a_truncated_json_or_gzip_dump_is_a_finding():
    raw = (GLOO / "straggler" / "json" / "fr_trace_rank_1.json").read_bytes()
    assert "cut off" in parse_dump_bytes(raw[: len(raw) // 2], 1, "x_1.json").problem
    packed = gzip.compress((GLOO / "straggler" / "pickle" / "nccl_trace_rank_1").read_bytes())
    assert "breaks off" in parse_dump_bytes(packed[: len(packed) // 2], 1, "x_1.gz").problem


def test_a_truncated_dump_of_the_culprit_leaves_it_a_culprit(tmp_path):
    for f in (GLOO / "straggler" / "pickle").iterdir():
        data = f.read_bytes()
        (tmp_path / f.name).write_bytes(data[: len(data) // 3] if f.name.endswith("_0") else data)
    s = summary(tmp_path)
    assert s.culprits == [0] and s.ranks_missing == [0]
    assert "no usable dump" in s.why["0"] and "cut off" in s.why["0"]


# --- the analysis on the real dumps ------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_mismatch(fmt):
    s = summary(GLOO / "mismatch" / fmt)
    m = s.first_mismatch
    assert m is not None and (m.pg, m.seq, m.kind, m.desc) == ("0", 3, "sizes", "default_pg")
    assert m.by_rank["0"]["op"] == m.by_rank["1"]["op"] == "all_reduce"
    assert (m.by_rank["0"]["sizes"], m.by_rank["1"]["sizes"]) == ([[1]], [[1024]])
    # the odd one out: rank 0's all-reduce of a metric, a call this group never made before
    assert s.culprits == [0] and m.odd_ranks == [0]
    assert s.waiting_in.model_dump(include={"pg", "seq", "op"}) == {"pg": "0", "seq": 3, "op": "all_reduce"}
    if fmt == "pickle":
        assert m.by_rank["0"]["where"].startswith("log_metrics") and m.by_rank["1"]["where"].startswith("train_step")
        assert s.activity is None  # where a mismatched call was made is not what the rank was busy with


@pytest.mark.parametrize("fmt", FORMATS)
def test_straggler(fmt):
    s = summary(GLOO / "straggler" / fmt)
    assert s.first_mismatch is None and s.culprits == [0] and s.ranks_missing == []
    assert (s.waiting_in.pg, s.waiting_in.seq, s.waiting_in.op) == ("0", 4, "all_reduce")
    group = s.process_groups[0]
    assert group.behind == [0] and group.last_seq == {"0": 3, "1": 4, "2": 4, "3": 4}
    rows = {r.rank: r for r in s.ranks}
    assert rows[0].status == "behind" and rows[0].last.op == "all_gather"
    assert all(rows[r].status == "waiting" and rows[r].waits_for == [0] for r in (1, 2, 3))
    if fmt == "pickle":
        assert s.activity == "save" and [f.name for f in s.culprit_frames["0"][:2]] == ["gather_state_dict", "save_checkpoint"]
    else:
        assert s.activity is None and not s.culprit_frames


@pytest.mark.parametrize("fmt", FORMATS)
def test_dead_rank(fmt):
    s = summary(GLOO / "dead_rank" / fmt)
    # gloo files the default group's configuration under an empty name: it still names rank 2
    assert s.world_size == 3 and s.ranks_dumped == [0, 1] and s.ranks_missing == [2]
    assert s.culprits == [2] and "left no dump" in s.why["2"]
    assert (s.waiting_in.seq, s.waiting_in.op) == (3, "all_reduce")
    assert {r.rank: r.status for r in s.ranks} == {0: "waiting", 1: "waiting", 2: "no-dump"}


def test_a_missing_dump_is_found_from_the_logs_world_size_too():
    dumps, _ = read_dumps([str(GLOO / "straggler" / "pickle" / f"nccl_trace_rank_{r}") for r in (1, 2, 3)])
    s = analyze(dumps, world_size=4)
    assert s.ranks_missing == [0] and s.culprits == [0]
    assert analyze(dumps, world_size=8).ranks_missing == [0, 4, 5, 6, 7]


@pytest.mark.parametrize("fmt", FORMATS)
def test_several_process_groups(fmt):
    s = summary(GLOO / "multi_pg" / fmt)
    groups = {g.pg: g for g in s.process_groups}
    assert {g.desc for g in groups.values()} == {"default_pg", "tp", "dp"} and len(groups) == 5
    assert groups["2"].ranks == [2, 3] and groups["2"].behind == [3]
    # rank 0 waits for rank 2 (DP), which waits for rank 3 (TP); rank 1 waits for rank 3 (DP)
    assert {r.rank: r.waits_for for r in s.ranks} == {0: [2], 1: [3], 2: [3], 3: []}
    assert s.culprits == [3]
    assert (s.waiting_in.pg, s.waiting_in.desc, s.waiting_in.seq) == ("2", "tp", 6)
    assert "rank 0 waits for rank 2 in turn" in s.why["3"]
    assert s.activity == ("data" if fmt == "pickle" else None)


# --- the analysis on the built NCCL dumps ------------------------------------------------------


def test_nccl_states_find_the_eval_straggler():
    s = summary(FR / "built-nccl-2.10" / "eval_straggler" / "pickle")
    assert s.culprits == [2] and s.activity == "eval"
    rows = {r.rank: r for r in s.ranks}
    assert rows[0].state == "started" and rows[3].state == "scheduled" and rows[2].state == "completed"


def test_point_to_point_pairs_per_peer():
    s = summary(FR / "built-nccl-2.4" / "pipeline_p2p" / "pickle")
    assert s.culprits == [1] and s.waiting_in.op == "send 0->1" and s.waiting_in.seq == 7
    assert "never posted the send or receive" in s.why["1"]


def test_coalesced_collectives_and_a_dtype_mismatch():
    s = summary(FR / "built-nccl-2.9" / "coalesced_dtype_mismatch" / "pickle")
    m = s.first_mismatch
    assert (m.seq, m.kind, m.odd_ranks) == (6, "dtypes", [1]) and s.culprits == [1]
    assert m.by_rank["1"]["dtypes"] == ["BFloat16"] and len(m.by_rank["1"]["ops"]) == 3


def test_group_configuration_names_a_missing_member_of_a_subgroup():
    s = summary(FR / "built-nccl-2.10" / "mesh_missing_rank" / "pickle")
    groups = {g.pg: g for g in s.process_groups}
    assert groups["2"].ranks_from == "pg_config" and groups["2"].missing == [3]
    assert s.culprits == [3] and s.ranks_missing == [3]
    assert {r.rank: r.waits_for for r in s.ranks if r.waits_for} == {0: [2], 1: [3], 2: [3]}


# --- shapes no fixture has -------------------------------------------------------------------


def entry(record, pg, seq, op="all_reduce", sizes=((4,),), state="scheduled", dtype="Float", **extra):
    return {"record_id": record, "pg_id": int(pg[0]) if pg[0].isdigit() else 9, "process_group": pg,
            "collective_seq_id": seq, "p2p_seq_id": 0, "op_id": seq, "profiling_name": f"nccl:{op}",
            "input_sizes": [list(s) for s in sizes], "output_sizes": [list(s) for s in sizes],
            "input_dtypes": [dtype], "output_dtypes": [dtype], "state": state, "is_p2p": False, **extra}


def dump(rank, entries, ranks=None, groups=None):
    cfg = {"0": {"name": "0", "desc": "default_pg", "ranks": str(ranks)}} if ranks else {}
    cfg.update({name: {"name": name, "desc": "", "ranks": str(members)} for name, members in (groups or {}).items()})
    return parse_dump_bytes(pickle.dumps({"version": "2.10", "pg_config": cfg, "pg_status": {}, "entries": entries}, 2),
                            rank, f"rank_{rank}")


def test_a_wrapped_ring_buffer_is_compared_where_every_rank_still_has_it():
    pg = ("0", "default_pg")
    a = dump(0, [entry(100 + i, pg, 100 + i, state="completed") for i in range(50)] + [entry(150, pg, 150)], ranks=[0, 1])
    # rank 1's buffer starts later (it recorded more of something else): #130-#149 are compared
    b = dump(1, [entry(130 + i, pg, 130 + i, state="completed") for i in range(20)], ranks=[0, 1])
    s = analyze([a, b])
    assert s.first_mismatch is None and s.culprits == [1] and (s.waiting_in.seq, s.process_groups[0].behind) == (150, [1])
    assert any("wrapped" in n for n in s.notes)


def test_a_huge_gap_in_sequence_numbers_costs_nothing():
    pg = ("0", "default_pg")
    a = dump(0, [entry(0, pg, 1), entry(1, pg, 10**17)], ranks=[0, 1])
    b = dump(1, [entry(0, pg, 1), entry(1, pg, 10**17, sizes=((8,),))], ranks=[0, 1])
    s = analyze([a, b])
    assert (s.first_mismatch.seq, s.first_mismatch.kind) == (10**17, "sizes")


def test_ranks_waiting_for_each_other_in_two_groups_are_a_circle():
    # rank 0 entered group 1's second collective; rank 1 went on to group 2's first instead
    groups = {"1": [0, 1], "2": [0, 1]}
    a = dump(0, [entry(0, ("1", "a"), 1, state="completed"), entry(1, ("1", "a"), 2)], groups=groups)
    b = dump(1, [entry(0, ("1", "a"), 1, state="completed"), entry(1, ("2", "b"), 1)], groups=groups)
    s = analyze([a, b])
    assert s.culprits == [0, 1] and all("circle" in s.why[r] for r in ("0", "1"))
    assert {r.rank: r.waits_for for r in s.ranks} == {0: [1], 1: [0]}


def test_completed_nccl_collectives_wait_for_nobody():
    pg = ("0", "default_pg")
    a = dump(0, [entry(0, pg, 1, state="completed")], ranks=[0, 1, 2])
    b = dump(1, [entry(0, pg, 1, state="completed")], ranks=[0, 1, 2])
    s = analyze([a, b])
    assert s.ranks_missing == [2] and s.culprits == [] and s.waiting_in is None


def test_the_summary_is_the_contracts_object():
    data = summary(GLOO / "dead_rank" / "pickle").model_dump(mode="json")
    assert {"ranks_dumped", "ranks_missing", "process_groups", "first_mismatch", "culprits", "waiting_in"} <= set(data)
    assert data["first_mismatch"] is None and data["culprits"] == [2]
    assert set(data["waiting_in"]) >= {"pg", "seq", "op"} and isinstance(data["waiting_in"]["seq"], int)
    json.dumps(data)
    m = summary(GLOO / "mismatch" / "json").model_dump(mode="json")["first_mismatch"]
    assert {"pg", "seq", "by_rank"} <= set(m) and {"op", "sizes"} <= set(m["by_rank"]["0"])
