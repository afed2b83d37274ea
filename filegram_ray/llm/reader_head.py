"""A trained head for the encoder reader (:mod:`filegram_ray.llm.encoder_reader`): it learns how the retrieved
context's passages support an option, from items of *other* profile sets than the run it answers.

Score of option i (``f`` = the reader's :meth:`~filegram_ray.llm.encoder_reader.EncoderBackbone.features`):

    score_i = a * attend_i + b * max_i + l * lex_i + (U^T c) . (V^T o_i)

``attend_i`` / ``max_i`` are the reader's untrained supports (question-attended mean and best passage cosine, each
averaged over the option's clauses), ``lex_i`` the option's word overlap with the context,
``c`` the question-attended context vector, ``o_i`` the option vector, ``U``, ``V`` (384 × rank) a low-rank bilinear
map that can tie a context's wording ("2,929 chars × 5.7 files/task") to an option's ("writes long, heavily
sectioned deliverables spread over several files"). With an empty context every term is 0: the head adds no prior
of its own, so No Context stays at the reader's seeded tie-break. Trained by softmax cross-entropy over each item's
options (conditional logit), Adam, L2 on ``U`` and ``V``, one thread and a seeded generator: same data and seed,
same bytes.

The **card** (``<head>.json`` beside ``<head>.npz``) records what the head was trained on — every training run's
seed, the sha256 of each of its profiles (:func:`profile_hashes`), its item and row counts and the methods whose
contexts it read — and :func:`check_overlap` refuses to evaluate a run that shares its seed or a profile with them.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from filegram_ray.errors import UserError

log = logging.getLogger(__name__)

__all__ = ["HEAD_RANK", "ReaderHead", "check_overlap", "check_run", "profile_hashes", "run_profile_hashes", "train_head"]

#: rank of the bilinear map (ours: enough to tie a handful of figure words to option words, small enough to train in
#: seconds on one core)
HEAD_RANK = 16


class ReaderHead:
    """The trained head: ``a``, ``b`` (scalars), ``U``, ``V`` (d × rank) and its card (a dict)."""

    def __init__(self, a: float, b: float, U: np.ndarray, V: np.ndarray, card: dict[str, Any] | None = None,
                 l: float = 0.0):  # noqa: E741 - the lexical weight of the module docstring's formula
        self.a, self.b, self.l = float(a), float(b), float(l)
        self.U, self.V = np.asarray(U, dtype=np.float32), np.asarray(V, dtype=np.float32)
        self.card = dict(card or {})

    def score(self, f: Mapping[str, np.ndarray]) -> np.ndarray:
        """Scores of the options from the reader's features (module docstring)."""
        bil = (f["O"] @ self.V) @ (self.U.T @ f["c"])
        return (self.a * f["att"] + self.b * f["max"] + self.l * f["lex"] + bil).astype(np.float64)

    def save(self, path: str | Path) -> Path:
        """Write ``<path>.npz`` (weights) and ``<path>.json`` (the card, with the weights' sha256); temp name, then
        rename. Returns the ``.npz`` path."""
        import io

        from filegram_ray.storage import atomic_write_local

        base = Path(str(path).removesuffix(".npz"))
        buf = io.BytesIO()
        np.savez(buf, a=np.float32(self.a), b=np.float32(self.b), l=np.float32(self.l), U=self.U, V=self.V)
        data = buf.getvalue()
        card = {**self.card, "weights_sha256": hashlib.sha256(data).hexdigest()}
        atomic_write_local(base.with_suffix(".npz"), data)
        atomic_write_local(base.with_suffix(".json"), json.dumps(card, indent=2, sort_keys=True).encode())
        self.card = card
        return base.with_suffix(".npz")

    @classmethod
    def load(cls, path: str | Path) -> ReaderHead:
        """Read a head and its card; the weights must match the card's sha256.

        Raises:
            UserError: a missing file, a missing card or weights that do not match it (names the file).
        """
        base = Path(str(path).removesuffix(".npz"))
        npz, js = base.with_suffix(".npz"), base.with_suffix(".json")
        for p in (npz, js):
            if not p.is_file():
                raise UserError(f"encoder reader head {p}: file not found (train one: `filegram reader train`)")
        data = npz.read_bytes()
        card = json.loads(js.read_text())
        if card.get("weights_sha256") != hashlib.sha256(data).hexdigest():
            raise UserError(f"encoder reader head {npz}: its sha256 does not match weights_sha256 of {js}")
        z = np.load(npz)
        return cls(float(z["a"]), float(z["b"]), z["U"], z["V"], card, l=float(z["l"]) if "l" in z else 0.0)


def profile_hashes(profiles: Sequence[Any]) -> dict[str, str]:
    """``{profile_id: sha256}`` of each profile's full definition (tiers, attributes, identity; the
    :class:`~filegram_ray.profiles.Profile` as JSON with sorted keys): two sets share a profile only when a
    definition is the same."""
    out = {}
    for p in profiles:
        d = p.model_dump(mode="json") if hasattr(p, "model_dump") else dict(p)
        out[str(d.get("profile_id") or d.get("id"))] = hashlib.sha256(
            json.dumps(d, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()
    return out


def run_profile_hashes(run) -> tuple[int, dict[str, str]]:
    """``(seed, {profile_id: sha256})`` of a run directory: its ``run.json`` seed and the profiles of its config's
    ``profiles_dir`` (None: the packaged FileGram set) named by ``profiles`` (None: all)."""
    from filegram_ray.profiles import load_profiles

    meta = run.read_json("run.json")
    cfg = meta.get("config") or {}
    profiles = load_profiles(cfg.get("profiles_dir")) if cfg.get("profiles_dir") else load_profiles()
    wanted = cfg.get("profiles")
    hashes = profile_hashes(profiles)
    if wanted:
        hashes = {k: v for k, v in hashes.items() if k in set(map(str, wanted))}
    return int(meta.get("seed", cfg.get("seed", 0))), hashes


def check_overlap(card: Mapping[str, Any], seed: int, hashes: Mapping[str, str], where: str) -> None:
    """Refuse to evaluate a run whose seed or any profile was in the head's training data.

    Raises:
        UserError: one line naming the run, the head and what overlaps.
    """
    runs = card.get("training_runs") or []
    seeds = {int(r["seed"]) for r in runs}
    trained = {h for r in runs for h in (r.get("profile_sha256") or {}).values()}
    shared = sorted(p for p, h in hashes.items() if h in trained)
    if seed in seeds or shared:
        what = (f"seed {seed}" if seed in seeds else "") + (" and " if seed in seeds and shared else "") + \
            (f"{len(shared)} profile(s) ({', '.join(shared[:5])}{'…' if len(shared) > 5 else ''})" if shared else "")
        raise UserError(f"{where}: the encoder reader's head was trained on {what} of this run "
                        f"(head card: training seeds {sorted(seeds)}); evaluate with a head trained on other profile "
                        "sets and seeds, or without a head")


def check_run(backbone: Any, run) -> None:
    """Refuse (:func:`check_overlap`) when ``backbone`` is the encoder reader with a head whose training data share
    the seed or a profile with ``run`` (a :class:`~filegram_ray.storage.RunDir`); any other backbone passes.

    Raises:
        UserError: the overlap, or a head that cannot be read (names the file).
    """
    if not (isinstance(backbone, Mapping) and str(backbone.get("kind", "")).lower() == "encoder"
            and backbone.get("head")):
        return
    head = ReaderHead.load(backbone["head"])
    seed, hashes = run_profile_hashes(run)
    check_overlap(head.card, seed, hashes, f"evaluate {run.url('')}".rstrip("/"))


def train_head(rows: Sequence[Mapping[str, Any]], *, seed: int = 0, rank: int = HEAD_RANK, epochs: int = 60,
               lr: float = 0.01, l2: float = 1e-3, card: dict[str, Any] | None = None,
               checkpoint: str | Path | None = None) -> ReaderHead:
    """Fit a head on feature rows ``{c (d,), O (n, d), att (n,), max (n,), lex (n,), label (int)}`` (rows without a context
    are skipped). Full-batch Adam for ``epochs`` steps from a seeded start, on one thread (same rows and seed,
    same bytes). ``checkpoint``: a ``.pt`` file written every 10 epochs and resumed from.

    Raises:
        ValueError: no usable row.
    """
    import torch

    torch.set_num_threads(1)
    rows = [r for r in rows if np.any(r["c"])]
    if not rows:
        raise ValueError("train_head: no row with a context to learn from")
    d = len(rows[0]["c"])
    n_max = max(len(r["att"]) for r in rows)
    N = len(rows)
    C = torch.tensor(np.stack([r["c"] for r in rows]), dtype=torch.float32)
    O = torch.zeros(N, n_max, d)
    A = torch.zeros(N, n_max)
    M = torch.zeros(N, n_max)
    L = torch.zeros(N, n_max)
    mask = torch.full((N, n_max), float("-inf"))
    y = torch.tensor([int(r["label"]) for r in rows])
    for i, r in enumerate(rows):
        k = len(r["att"])
        O[i, :k] = torch.tensor(np.asarray(r["O"]), dtype=torch.float32)
        A[i, :k] = torch.tensor(np.asarray(r["att"]), dtype=torch.float32)
        M[i, :k] = torch.tensor(np.asarray(r["max"]), dtype=torch.float32)
        L[i, :k] = torch.tensor(np.asarray(r.get("lex", np.zeros(k))), dtype=torch.float32)
        mask[i, :k] = 0.0
    g = torch.Generator().manual_seed(int(seed))
    U = (torch.randn(d, rank, generator=g) * 0.01).requires_grad_()
    V = (torch.randn(d, rank, generator=g) * 0.01).requires_grad_()
    ab = torch.tensor([0.0, 10.0, 0.0], requires_grad=True)
    opt = torch.optim.Adam([U, V, ab], lr=lr)
    start = 0
    ck = Path(checkpoint) if checkpoint else None
    if ck is not None and ck.is_file():
        state = torch.load(ck, weights_only=False)
        with torch.no_grad():
            U.copy_(state["U"]), V.copy_(state["V"]), ab.copy_(state["ab"])
        opt.load_state_dict(state["opt"])
        start = int(state["epoch"])
    for epoch in range(start, epochs):
        opt.zero_grad()
        bil = torch.einsum("nkd,dr,ne,er->nk", O, V, C, U)
        logits = ab[0] * A + ab[1] * M + ab[2] * L + bil + mask
        loss = torch.nn.functional.cross_entropy(logits, y) + l2 * (U.pow(2).sum() + V.pow(2).sum())
        loss.backward()
        opt.step()
        if ck is not None and (epoch + 1) % 10 == 0:
            tmp = ck.with_suffix(".tmp")
            torch.save({"U": U.detach(), "V": V.detach(), "ab": ab.detach(), "opt": opt.state_dict(),
                        "epoch": epoch + 1}, tmp)
            tmp.replace(ck)
    with torch.no_grad():
        bil = torch.einsum("nkd,dr,ne,er->nk", O, V, C, U)
        acc = float(((ab[0] * A + ab[1] * M + ab[2] * L + bil + mask).argmax(1) == y).float().mean())
    info = {"train_rows": N, "train_accuracy": round(100 * acc, 2), "rank": rank, "epochs": epochs, "lr": lr,
            "l2": l2, "seed": int(seed), "final_loss": round(float(loss.detach()), 6)}
    log.info("reader head: %s", info)
    ab = ab.detach()
    return ReaderHead(float(ab[0]), float(ab[1]), U.detach().numpy(), V.detach().numpy(),
                      {**(card or {}), "training": info}, l=float(ab[2]))
