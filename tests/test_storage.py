"""The storage seam on a local path and on fsspec's in-memory filesystem."""

from __future__ import annotations

import uuid

import polars as pl
import pytest

from filegram_ray.storage import RunDir, StorageError


@pytest.fixture(params=["local", "memory", "s3"])
def run(request, tmp_path):
    if request.param == "local":
        return RunDir(tmp_path / "run")
    if request.param == "s3":  # a real S3-compatible server on loopback (moto), reached through s3fs
        opts = request.getfixturevalue("s3_endpoint")
        return RunDir(f"s3://filegram/test-{uuid.uuid4().hex[:8]}", opts)
    return RunDir(f"memory://filegram-test-{uuid.uuid4().hex[:8]}")


def test_bytes_text_json_round_trip(run):
    run.write_bytes("a/b/c.bin", b"\x00\x01")
    run.write_text("a/t.txt", "héllo 你好")
    run.write_json("a/j.json", {"b": 1, "a": [1, 2], "z": "中文"})
    assert run.read_bytes("a/b/c.bin") == b"\x00\x01"
    assert run.read_text("a/t.txt") == "héllo 你好"
    assert run.read_json("a/j.json") == {"a": [1, 2], "b": 1, "z": "中文"}
    # deterministic JSON: sorted keys, no ASCII escaping
    assert run.read_text("a/j.json").index('"a"') < run.read_text("a/j.json").index('"b"')
    assert "中文" in run.read_text("a/j.json")
    assert run.listdir("a") == ["b", "j.json", "t.txt"]
    assert run.walk_files("a") == ["a/b/c.bin", "a/j.json", "a/t.txt"]


def test_atomic_write_leaves_no_temporaries(run):
    for i in range(3):
        run.write_text("x/file.txt", f"v{i}")
    assert run.read_text("x/file.txt") == "v2"
    assert run.listdir("x") == ["file.txt"]


def test_completion_records(run):
    assert not run.is_done("generate", "p1/T-01")
    run.mark_done("generate", "p1/T-01", {"events": 3})
    run.mark_done("generate", "p2/T-02")
    assert run.is_done("generate", "p1/T-01")
    recs = run.done_records("generate")
    assert [r["unit"] for r in recs] == ["p1/T-01", "p2/T-02"]
    assert recs[0]["events"] == 3


def test_tables(run):
    df = pl.DataFrame({"task_id": ["T-01", "T-02"], "bytes": [10, 20]})
    run.write_table("workspaces/index.parquet", df)
    back = run.read_table("workspaces/index.parquet")
    assert back.equals(df)


def test_trees(run, tmp_path):
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "d" / "f.md").write_text("# hi")
    (src / "g.txt").write_text("g")
    written = run.put_tree(src, "trajectories/p1/T-01")
    assert written == ["trajectories/p1/T-01/d/f.md", "trajectories/p1/T-01/g.txt"]
    out = run.get_tree("trajectories/p1/T-01", tmp_path / "back")
    assert sorted(p.relative_to(tmp_path / "back").as_posix() for p in out) == ["d/f.md", "g.txt"]


def test_errors_name_the_path(run):
    with pytest.raises(StorageError, match="nope.json"):
        run.read_json("nope.json")
    run.write_text("bad.json", "{not json")
    with pytest.raises(StorageError, match="bad.json"):
        run.read_json("bad.json")
    with pytest.raises(StorageError, match="escapes"):
        run.write_text("../outside.txt", "x")


def test_pickles_for_ray(run):
    import pickle

    run.write_text("p.txt", "x")
    clone = pickle.loads(pickle.dumps(run))
    if run.protocol != "memory":  # memory:// is per process by design
        assert clone.read_text("p.txt") == "x"
    assert clone.uri == run.uri
