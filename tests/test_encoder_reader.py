"""The encoder reader (``evaluate.backbone: encoder``): the packaged MiniLM scoring options against a context, its
trained head, the masked-format context and the refusal to evaluate a run the head was trained on."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from filegram_ray.errors import UserError
from filegram_ray.evaluate.reader_validity import mask_tier_words
from filegram_ray.llm import make_backbone
from filegram_ray.llm.encoder_reader import EncoderBackbone, clauses, passages
from filegram_ray.llm.reader_head import ReaderHead, check_overlap, profile_hashes, train_head

OPTIONS = {"A": "Adds guides, indexes and source citations around the main deliverable",
           "B": "Adds some supporting notes when they seem useful",
           "C": "Delivers the requested file alone, without supporting notes"}
ITEM = {"question_id": "AttrRec-00001", "question": "You are given 32 work sessions of one user. Which statement best "
        "describes how much extra material this user produces beyond what was asked?", "choices": OPTIONS}
FOS = """## Behavioral Memory Profile (32 sessions, 2 anomalous)

### Channel 1: Procedural Patterns
**A. Consumption — sequential_deep**: 12.3 reads/task, no search tools used, revisit 20%, browse 3%.
**B. Production — detailed**: avg 2,929 chars × 5.7 files/task, headings to H3.
Patterns:
- READING: never/rarely uses search (search ratio 0.000)
- OUTPUT: detailed outputs (3120 chars per file)
- CROSS-MODAL: text-only outputs

### Channel 2: Semantic Content
- OUTPUT: detailed outputs (kept: not the procedural channel)
"""


#: 60 lines of a context that answer nothing (the passages pre-selection must skip)
FILLER = [f"Session T-{i:02d} opened {i % 7 + 2} files in the inputs folder at {9 + i % 8}:{i % 6}0." for i in range(60)]


@pytest.fixture(scope="module")
def reader():
    return EncoderBackbone(seed=7)


def _rotate(item, shift):
    opts = [item["choices"][k] for k in sorted(item["choices"])]
    shown = [opts[(i - shift) % len(opts)] for i in range(len(opts))]
    return {**item, "choices": dict(zip("ABC", shown))}


def test_it_reads_the_option_a_context_states(reader):
    for letter, text in OPTIONS.items():
        ctx = f"Memory of this user (AttrRec) — What this user's sessions show about them: {text}"
        assert reader.answer(ITEM, ctx).choice == letter


def test_preselection_reads_a_few_passages_per_clause_and_keeps_the_statement_that_answers(reader):
    """``preselect: k`` — the k passages nearest each option clause and the question under the static model are
    read by MiniLM, not all of them; a short context is read whole."""
    pre, every = EncoderBackbone(seed=7, preselect=2), EncoderBackbone(seed=7, preselect=None)
    assert reader.preselect == 8 and "preselect" not in every.describe()  # the default pre-selects 8
    for letter, text in OPTIONS.items():
        lines = [*FILLER[:30], f"What this user's sessions show about them: {text}", *FILLER[30:]]
        ctx = "\n".join(lines)
        n_clauses = sum(len(clauses(o)) for o in OPTIONS.values())
        f = pre.features(ITEM["question"], list(OPTIONS.values()), ctx)
        assert len(f["P"]) <= 2 * (n_clauses + 1) < len(passages(ctx))
        assert pre.answer(ITEM, ctx).choice == letter == every.answer(ITEM, ctx).choice
    short = f"What this user's sessions show about them: {OPTIONS['B']}"
    assert len(pre.features(ITEM["question"], list(OPTIONS.values()), short)["P"]) == len(passages(short))
    assert pickle.loads(pickle.dumps(pre)).preselect == 2 and pre.describe()["preselect"] == 2
    with pytest.raises(ValueError, match="preselect"):
        EncoderBackbone(preselect=0)


def test_rotating_the_options_never_changes_the_option_chosen(reader):
    for ctx in ("", FOS, "The user writes a README, an index and a sources list next to every report."):
        chosen = {}
        for shift in range(3):
            item = _rotate(ITEM, shift)
            chosen[shift] = item["choices"][reader.answer(item, ctx).choice]
        assert len(set(chosen.values())) == 1, chosen


def test_an_empty_context_gives_every_option_the_same_score_and_a_seeded_pick(reader):
    assert np.all(reader.scores(ITEM["question"], list(OPTIONS.values()), "") == 0)
    picks = {EncoderBackbone(seed=s).answer(ITEM, "").choice for s in range(12)}
    assert len(picks) > 1  # the seed decides, not a fixed letter
    assert reader.answer(ITEM, "").choice == reader.answer(ITEM, "").choice


def test_open_ended_items_get_the_passage_nearest_the_question(reader):
    item = {"question_id": "ProfRec-00001", "question": "How long are this user's written outputs?", "choices": {}}
    ans = reader.answer(item, "Files are kept in one folder.\nOutputs average 2,900 characters per file, long "
                        "written reports.\nNo images.")
    assert ans.choice is None and "2,900 characters" in ans.text
    assert reader.answer(item, "").text == ""


def test_an_open_ended_answer_reads_only_the_passages_preselected_for_the_question(monkeypatch):
    """With ``preselect: k`` MiniLM reads the k passages nearest the question (static model), not all 61."""
    item = {"question_id": "ProfRec-00002", "question": "How long are this user's written outputs?", "choices": {}}
    ctx = "\n".join([*FILLER[:30], "Outputs average 2,900 characters per file, long written reports.", *FILLER[30:]])
    pre = EncoderBackbone(seed=7, preselect=4)
    read: list[int] = []
    encode = pre.encode
    monkeypatch.setattr(pre, "encode", lambda texts: read.append(len(texts)) or encode(texts))
    assert "2,900 characters" in pre.answer(item, ctx).text
    assert read == [1 + 4] and len(passages(ctx)) == 61
    assert "2,900 characters" in EncoderBackbone(seed=7, preselect=None).answer(item, ctx).text


def test_it_is_a_backbone_kind_that_pickles_and_is_validated_with_the_config():
    from filegram_ray.evaluate.config import EvaluateConfig

    bb = make_backbone({"kind": "encoder", "pool": "max"}, seed=3)
    assert isinstance(bb, EncoderBackbone) and bb.pool == "max" and bb.seed == 3 and not bb.is_llm
    again = pickle.loads(pickle.dumps(bb))
    assert again.describe() == bb.describe()
    assert EvaluateConfig(backbone="encoder").tag == "encoder"
    assert EvaluateConfig(backbone={"kind": "encoder", "pool": "max"}).tag.startswith("encoder-")
    with pytest.raises(Exception, match="pool"):
        EvaluateConfig(backbone={"kind": "encoder", "pool": "mean-ish"})
    with pytest.raises(Exception, match="no setting .pol."):
        EvaluateConfig(backbone={"kind": "encoder", "pol": "max"})
    # the passage encoder is a model-backed embedder kind; it survives the trip to an actor
    st = make_backbone({"kind": "encoder", "embedder": "minilm-static"}, seed=3)
    assert pickle.loads(pickle.dumps(st)).embedder_kind == "minilm-static"
    assert "embedder" not in bb.describe()  # the default's description (and so its answers' records) as before
    for bad in ("hashing", "nosuch"):
        with pytest.raises(Exception, match=f"embedder .{bad}. is not one of .*minilm-static"):
            EvaluateConfig(backbone={"kind": "encoder", "embedder": bad})


def test_passages_are_lines_without_markup_cut_to_the_window():
    ps = passages(FOS)
    assert "B. Production — detailed : avg 2,929 chars × 5.7 files/task, headings to H3" in ps
    assert not any(p.startswith(("#", "*")) for p in ps)
    long = "word " * 2000
    assert len(passages(long)) > 1 and passages(long, max_passages=2) == passages(long)[:2]


def test_masked_format_masks_only_the_procedural_channels_verdicts():
    m = mask_tier_words(FOS)
    assert "**B. Production — [masked]**: avg 2,929 chars × 5.7 files/task" in m
    assert "**A. Consumption — [masked]**: 12.3 reads/task" in m
    assert "- OUTPUT: [masked] (3120 chars per file)" in m and "- CROSS-MODAL: [masked]" in m
    assert "sequential_deep" not in m and "text-only" not in m
    assert "- OUTPUT: detailed outputs (kept: not the procedural channel)" in m  # Channel 2 untouched
    assert mask_tier_words("no FileGramOS here") == "no FileGramOS here"


def test_a_trained_head_learns_a_mapping_the_untrained_reader_lacks_and_round_trips(tmp_path):
    # synthetic features: the context vector points at option k's vector through a fixed rotation R (a mapping
    # between wordings no cosine sees); the head must learn it, the same seed must give the same bytes
    rng = np.random.default_rng(0)
    d, rows = 16, []
    R = np.linalg.qr(rng.normal(size=(d, d)))[0]
    for _ in range(300):
        opts = rng.normal(size=(3, d)).astype(np.float32)
        k = int(rng.integers(3))
        rows.append({"c": (R @ opts[k]).astype(np.float32), "O": opts, "att": np.zeros(3, np.float32),
                     "max": np.zeros(3, np.float32), "label": k})
    h1 = train_head(rows, seed=5, rank=8, epochs=150, lr=0.05)
    h2 = train_head(rows, seed=5, rank=8, epochs=150, lr=0.05)
    assert h1.card["training"]["train_accuracy"] > 80
    assert np.array_equal(h1.U, h2.U) and np.array_equal(h1.V, h2.V)
    p = h1.save(tmp_path / "head")
    back = ReaderHead.load(p)
    assert np.array_equal(back.U, h1.U) and back.card["weights_sha256"] == h1.card["weights_sha256"]
    (tmp_path / "head.npz").write_bytes(p.read_bytes()[:-8] + b"tampered")
    with pytest.raises(UserError, match="sha256"):
        ReaderHead.load(p)


def test_training_resumes_from_its_checkpoint(tmp_path):
    rng = np.random.default_rng(1)
    rows = [{"c": rng.normal(size=8).astype(np.float32), "O": rng.normal(size=(3, 8)).astype(np.float32),
             "att": np.zeros(3, np.float32), "max": np.zeros(3, np.float32), "label": int(rng.integers(3))}
            for _ in range(50)]
    ck = tmp_path / "ck.pt"
    full = train_head(rows, seed=2, rank=4, epochs=40)
    train_head(rows, seed=2, rank=4, epochs=20, checkpoint=ck)  # interrupted after 20 epochs
    resumed = train_head(rows, seed=2, rank=4, epochs=40, checkpoint=ck)
    assert np.allclose(resumed.U, full.U, atol=1e-6)


def test_evaluating_a_run_the_head_was_trained_on_is_refused_in_one_line():
    """Overlap refusal: a run sharing the head's training seed or any profile definition is refused."""
    from filegram_ray.profiles import load_profiles

    profs = load_profiles()
    mine = profile_hashes(profs[:4])
    card = {"training_runs": [{"seed": 101, "profile_sha256": mine, "n_items": 10}]}
    check_overlap(card, 7, profile_hashes(profs[4:]), "run x")  # other seed, other profiles: fine
    with pytest.raises(UserError, match=r"^run x: the encoder reader's head was trained on seed 101 of this run") as e:
        check_overlap(card, 101, profile_hashes(profs[4:]), "run x")
    assert "\n" not in str(e.value)
    with pytest.raises(UserError, match=rf"1 profile\(s\) \({profs[3].profile_id}\)"):
        check_overlap(card, 7, profile_hashes(profs[3:6]), "run x")


def test_the_evaluate_stage_refuses_a_run_its_head_was_trained_on(tmp_path):
    """The check the evaluate stage runs first (reader_head.check_run): a head trained on this run's seed is refused
    before anything is read; another kind of backbone, or no head, passes."""
    import json

    from filegram_ray.llm.reader_head import check_run
    from filegram_ray.profiles import load_profiles
    from filegram_ray.storage import RunDir

    rng = np.random.default_rng(0)
    head = ReaderHead(0.0, 10.0, rng.normal(size=(384, 2)), rng.normal(size=(384, 2)),
                      {"training_runs": [{"seed": 7, "profile_sha256": profile_hashes(load_profiles()[:2])}]})
    path = head.save(tmp_path / "head")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps({"seed": 7, "config": {"profiles": ["p5"]}}))
    run = RunDir(str(run_dir))
    with pytest.raises(UserError, match="trained on seed 7 of this run"):
        check_run({"kind": "encoder", "head": str(path)}, run)
    check_run({"kind": "encoder"}, run)
    check_run("lexical", run)
    (run_dir / "run.json").write_text(json.dumps({"seed": 8, "config": {"profiles": ["p5"]}}))
    check_run({"kind": "encoder", "head": str(path)}, run)  # other seed, a profile the head never saw
