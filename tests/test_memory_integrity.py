"""Memory and index integrity (issue 13, deliverable 6): indices record their embedder and refuse a foreign query
(BR-11), an incomplete model folder is refused (BR-12), duplicate chunks fill one top-k slot (BR-30), and index bytes
do not depend on how texts were batched (REL-faiss-episodes-index-nondeterministic)."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import numpy as np
import pytest
from test_memory_stage import make_run

from filegram_ray.config import load_config
from filegram_ray.engine import EngineSession
from filegram_ray.memory.api import FileGramMemory, build_store_from_trajectory_dirs
from filegram_ray.memory.embed import (
    Embedder,
    HashingEmbedder,
    ModelFolderError,
    check_model_folder,
    default_model_path,
)
from filegram_ray.memory.index import EmbedderMismatchError, load_indices, save_indices
from filegram_ray.memory.stage import run_encode
from filegram_ray.storage import RunDir


def _trajectories(base: Path, notes: list[tuple[str, str]], same_readme: str | None = None) -> list[Path]:
    bundle = base / "bundle"
    bundle.mkdir(parents=True, exist_ok=True)
    (bundle / "input.txt").write_text("quarterly numbers\n")
    dirs = []
    for i, (name, text) in enumerate(notes):
        task = f"T-{i + 1:02d}"
        s = EngineSession(bundle, base / f"w{i}", "p1_x", task, seed=i, start_ms=1.76e12)
        s.start()
        if same_readme is not None:
            s.call("write", file_path="README.md", content=same_readme)
        s.call("write", file_path=name, content=text)
        s.finish()
        d = base / "traj" / task
        s.write_trajectory(d)
        s.close()
        dirs.append(d)
    return dirs


class _Other384:
    """A different model of the same width."""

    def encode(self, texts):
        return np.random.default_rng(0).random((len(texts), 384)).astype("float32")

    def encode_query(self, t):
        return self.encode([t])


class _Other768(_Other384):
    def encode(self, texts):
        return np.random.default_rng(0).random((len(texts), 768)).astype("float32")


def test_br11_index_records_embedder_and_refuses_foreign_query(tmp_path):
    """BR-11: saved indices carry the embedder's identity; a same-width foreign encoder and a wider one are both
    refused with one error naming both sides, before any search; the right embedder still retrieves."""
    dirs = _trajectories(tmp_path, [("notes.md", "# Notes\n\nDrafts live in the drafts folder; finals get a date "
                                                 "prefix in their name.\n")])
    mem = build_store_from_trajectory_dirs(dirs, embedder=HashingEmbedder())
    run = RunDir(tmp_path / "run")
    written = save_indices(run, "p1_x", mem.indices)
    assert "indices/p1_x/embedder.json" in written
    ident = run.read_json("indices/p1_x/embedder.json")
    assert ident == HashingEmbedder().identity()
    assert {"model", "dim", "pooling", "max_length", "normalize"} <= set(ident)
    ix = load_indices(run, "p1_x")
    for foreign in (_Other384(), _Other768()):
        with pytest.raises(EmbedderMismatchError) as err:
            FileGramMemory(mem.store, ix, foreign).retrieve("where do drafts go")
        msg = str(err.value)
        assert "hashing" in msg and type(foreign).__name__ in msg
    # the packaged MiniLM against a hashing index: refused from the folder's identity, no model load needed
    with pytest.raises(EmbedderMismatchError, match="all-MiniLM-L6-v2"):
        load_indices(run, "p1_x", Embedder())
    ctx = FileGramMemory(mem.store, ix, HashingEmbedder()).retrieve("where do drafts go").text
    assert "Relevant content" in ctx and "notes.md" in ctx


def test_br11_cli_memory_show_with_other_embedder_is_one_line_error(tmp_path, capsys):
    """BR-11 (CLI form): a hashing-encoded run queried with --embedder minilm ends with one line, exit 2."""
    from filegram_ray.cli import main

    root = make_run(tmp_path / "run", bad=None)
    run_encode(load_config(None, [f"run_dir={root}", "encode.embedder=hashing"]), executor="serial")
    rc = main(["memory", "show", str(root), "pa_reader", "--query", "budget", "--embedder", "minilm"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "error:" in err and "hashing" in err and "all-MiniLM-L6-v2" in err and "Traceback" not in err
    assert main(["memory", "show", str(root), "pa_reader", "--query", "budget", "--embedder", "hashing"]) == 0
    assert main(["memory", "show", str(root), "pa_reader", "--query", "budget"]) == 0  # default: the recorded one
    assert "Relevant content" in capsys.readouterr().out


def _copy_model(dst: Path, drop: str) -> Path:
    """The packaged model folder, linked file by file (no 90 MB copy), without ``drop``."""
    src = default_model_path()
    for p in src.rglob("*"):
        rel = p.relative_to(src)
        if p.is_dir() or rel.as_posix() == drop:
            continue
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(p, dst / rel)
    return dst


@pytest.mark.parametrize("drop", ["modules.json", "1_Pooling/config.json", "sentence_bert_config.json",
                                  "config.json"])
def test_br12_incomplete_model_folder_is_refused(tmp_path, drop):
    """BR-12: a model folder missing modules.json (or a module's config) is refused with an error naming the folder
    and the file — never loaded as Transformer + mean pooling at 512 tokens."""
    damaged = _copy_model(tmp_path / "model", drop)
    with pytest.raises(ModelFolderError, match=re.escape(drop)):
        check_model_folder(damaged)
    e = Embedder(model_path=damaged, cache_size=0)
    with pytest.raises(ModelFolderError, match=str(tmp_path / "model")):
        e.encode(["a text"])


def test_br12_intact_folder_identity():
    """BR-12 (sub-case 1): the packaged folder passes the check; its identity is what the model folder says."""
    info = check_model_folder(default_model_path())
    assert (info["pooling"], info["max_length"], info["dim"], info["normalize"]) == ("mean_tokens", 256, 384, True)
    ident = Embedder().identity()
    assert ident["model"] == "sentence-transformers/all-MiniLM-L6-v2" and ident["weights"] == info["weights"]


def test_br30_duplicate_chunks_fill_one_top_k_slot(tmp_path):
    """BR-30: the same README re-created in three sessions is one 'Relevant content' hit (with its copy count), so
    the top 5 holds five distinct texts; upstream_quirks keeps the original's one slot per copy."""
    same = "# Project notes\n\nKeep drafts in the drafts folder and rename finals with a date prefix.\n"
    notes = [(f"report_{i}.md", f"# Report {i}\n\nNumbers for quarter {i} went up because the drafts were reviewed "
                                f"early by the whole team.\n") for i in range(5)]
    dirs = _trajectories(tmp_path, notes, same_readme=same)

    def hits(upstream: bool) -> list[str]:
        mem = build_store_from_trajectory_dirs(dirs, embedder=HashingEmbedder(), upstream_quirks=upstream)
        ctx = mem.retrieve("where do drafts go and how are finals named").text
        block = ctx.split("Relevant content:")[1].split("###")[0]
        return [re.sub(r"sim=[0-9.]+", "", h) for h in block.splitlines() if h.startswith("- [")]

    fixed = hits(False)
    assert len(fixed) == 5 and len(set(fixed)) == 5
    assert sum("README.md" in h for h in fixed) == 1
    assert any("README.md" in h and "5 copies" in h for h in fixed)
    quirky = hits(True)
    assert sum("README.md" in h for h in quirky) > 1


def _sha(root: Path, sub: str) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((root / sub).rglob("*")) if p.is_file()}


def test_rel_faiss_episodes_index_nondeterministic_batch_invariant(tmp_path):
    """REL-faiss-episodes-index-nondeterministic: the same trajectories encoded with different embedding batch
    compositions (batches of 1 vs 64, as Ray Data may form them) give byte-identical FAISS indices."""
    roots = []
    for bs in (64, 3):
        root = make_run(tmp_path / f"run{bs}", bad=None)
        run_encode(load_config(None, [f"run_dir={root}", "encode.embedder=minilm", "profiles=[pa_reader]",
                                      "tasks=[T-01,T-02]", f"encode.embed_batch_size={bs}"]), executor="serial")
        roots.append(root)
    a, b = (_sha(r, "indices") for r in roots)
    assert len(a) == 5 and a == b  # {chunks,episodes}.{faiss,json} + embedder.json
    # the property behind it: a text's vector does not depend on its batch mates
    e = Embedder(cache_size=0)
    texts = ["short note", "a much longer paragraph about the quarterly budget of the river project " * 6,
             "mid-length text on travel costs and equipment"]
    together = e.encode(texts)
    alone = np.concatenate([e.encode([t]) for t in texts])
    assert together.tobytes() == alone.tobytes()


def test_br11_encode_rerun_with_other_settings_redoes_profiles(tmp_path):
    """BR-11 / one plan per run: a rerun of encode with other settings (upstream_quirks) redoes the Engrams and the
    profiles instead of keeping stores and indices made under the earlier settings; the same settings skip all."""
    from filegram_ray.memory.api import load_store

    root = make_run(tmp_path / "run", bad=None)
    base = [f"run_dir={root}", "encode.embedder=hashing"]
    s1 = run_encode(load_config(None, base), executor="serial")
    assert s1["encoded_now"] == 8 and s1["profiles_consolidated_now"] == 2
    again = run_encode(load_config(None, base), executor="serial")
    assert again["encoded_now"] == 0 and again["profiles_consolidated_now"] == 0
    s2 = run_encode(load_config(None, [*base, "encode.upstream_quirks=true"]), executor="serial")
    assert s2["encoded_now"] == 8 and s2["profiles_consolidated_now"] == 2
    assert load_store(RunDir(root), "pa_reader").upstream_quirks is True
    rec = RunDir(root).read_json("_done/encode.profiles/pa_reader.json")
    assert rec["embedder"]["model"] == "hashing" and rec["consolidate"]["upstream_quirks"] is True


def test_cli_memory_show_takes_short_profile_ids_and_encode_has_common_options(tmp_path, capsys):
    """REL-short-profile-ids-empty-encode-bench (memory show): `memory show RUN pa` names pa_reader like every other
    command; an id that names no profile's memory is one line, exit 2. `memory encode` takes the common job
    options (with help, including --seed)."""
    from filegram_ray.cli import build_parser, main

    root = make_run(tmp_path / "run", bad=None)
    assert main(["memory", "encode", "--run-dir", str(root), "--serial", "--set", "encode.embedder=hashing"]) == 0
    capsys.readouterr()
    assert main(["memory", "show", str(root), "pa"]) == 0
    assert capsys.readouterr().out == (main(["memory", "show", str(root), "pa_reader"]), capsys.readouterr().out)[1]
    assert main(["memory", "show", str(root), "zz"]) == 2
    err = capsys.readouterr().err
    # named as the command's argument, not as a config field (a fresh-eyes finding)
    assert err.startswith("error: argument PROFILE_ID: unknown id 'zz'") and "pa_reader" in err
    helps = build_parser()._subparsers._group_actions[0].choices["memory"]._subparsers._group_actions[0] \
        .choices["encode"].format_help()
    assert "--seed" in helps and "the seed the run directory was made" in " ".join(helps.split())
