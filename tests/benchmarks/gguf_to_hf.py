"""Convert a packaged GGUF model into the Hugging Face folder vLLM reads (``config.json``, tokenizer files,
``model.safetensors``), for the vLLM engine test (``tests/test_vllm_engine.py``) and ``bench_vllm.py --cpu``.

vLLM 0.29 (the release Ray 2.60 pins) needs a Hugging Face folder; the project's language models ship as GGUF
(``filegram models list``). transformers reads a GGUF file (``from_pretrained(folder, gguf_file=name)``: the weights
dequantized to ``dtype``, the tokenizer and its chat template rebuilt from the GGUF metadata); this script writes
that model out as one safetensors file and a ``config.json`` without the GGUF ``quantization_config``. Nothing is
downloaded. Needs ``transformers`` ≥ 5, ``gguf``, ``accelerate`` and ``safetensors`` (the vLLM venv of
``build_vllm_venv.sh`` has them).

Output: ``<cache>/hf/<gguf stem>-<first 12 hex of the GGUF's sha256>/`` where ``<cache>`` is ``FILEGRAM_CACHE_DIR``
or ``~/.cache/filegram-ray`` (the project's cache folder, :mod:`filegram_ray.weights`). The folder is written under
a temporary name and renamed, so a folder that exists is complete; a second call returns it without work. The
conversion is deterministic (the same GGUF gives the same tensors). SmolLM2-135M-Instruct Q4_1 (98 MB) becomes a
269 MB bf16 ``model.safetensors`` in 4 min on the loaded 2-core machine (docs/measurements/2026-12-02-vllm-cpu.md).

Usage: python tests/benchmarks/gguf_to_hf.py GGUF_FILE [--out DIR] [--dtype bfloat16|float32]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

#: files vLLM needs in the folder (besides the tokenizer's)
REQUIRED = ("config.json", "model.safetensors", "tokenizer_config.json")


def cache_root() -> Path:
    """The project's cache folder (``FILEGRAM_CACHE_DIR``, else ``$XDG_CACHE_HOME`` or ``~/.cache`` /filegram-ray),
    the parent of :mod:`filegram_ray.weights`' stamp folder."""
    from filegram_ray.weights import _stamp_dir

    return _stamp_dir().parent


def _sha256(path: Path) -> str:
    from filegram_ray.weights import _sha256 as file_sha256

    return file_sha256(path)


def default_out(gguf: Path) -> Path:
    """``<cache>/hf/<stem>-<sha256[:12]>`` of a GGUF file (the folder :func:`convert` writes by default)."""
    return cache_root() / "hf" / f"{gguf.stem}-{_sha256(gguf)[:12]}"


def convert(gguf: str | os.PathLike, out: str | os.PathLike | None = None, dtype: str = "bfloat16") -> Path:
    """Write the Hugging Face folder of a GGUF model (module docstring); return its path.

    Args:
        gguf: the ``.gguf`` file.
        out: the folder to write (default :func:`default_out`); returned as is when it already holds
            :data:`REQUIRED`.
        dtype: torch dtype of the dequantized weights (``bfloat16``: what vLLM's CPU backend runs on AVX-512 BF16;
            ``float32`` elsewhere).
    Raises:
        FileNotFoundError: the GGUF file does not exist.
        ValueError: transformers cannot read it, or it carries no chat template (vLLM's chat stage needs one).
    """
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src = Path(gguf)
    if not src.is_file():
        raise FileNotFoundError(f"{src}: no such GGUF file")
    dest = Path(out) if out else default_out(src)
    if all((dest / f).is_file() for f in REQUIRED):
        return dest
    tmp = dest.with_name(dest.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        tok = AutoTokenizer.from_pretrained(str(src.parent), gguf_file=src.name)
        if not getattr(tok, "chat_template", None):
            raise ValueError(f"{src}: the GGUF metadata has no tokenizer.chat_template (vLLM's chat stage needs one)")
        model = AutoModelForCausalLM.from_pretrained(str(src.parent), gguf_file=src.name,
                                                     dtype=getattr(torch, dtype))
        model.eval()
        config = model.config
        # The state dict is dense (transformers dequantizes the GGUF blocks: the 4-bit Q4_1 / 8-bit Q8_0 tensors come
        # out as bf16 matrices of the model's shapes). Tied weights (lm_head = embed_tokens in SmolLM2): vLLM loads
        # embed_tokens and skips lm_head, so lm_head is the copy left out. Each tensor is cloned: safetensors
        # refuses tensors that share memory.
        tied = bool(getattr(config, "tie_word_embeddings", False))
        state = {k: v.detach().to(getattr(torch, dtype)).contiguous().clone()
                 for k, v in model.state_dict().items() if not (tied and k == "lm_head.weight")}
        save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        cfg = config.to_dict()
        # the folder holds plain weights: no GGUF quantization for vLLM to apply
        cfg.pop("quantization_config", None)
        cfg.pop("_name_or_path", None)  # the source's install path: not part of the model
        # vLLM picks its model class from `architectures`; without it it serves the folder as an embedding model.
        cfg["architectures"] = [type(model).__name__]
        cfg["dtype"] = dtype
        (tmp / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        if getattr(model, "generation_config", None) is not None:
            model.generation_config.save_pretrained(str(tmp))
        tok.save_pretrained(str(tmp))
        (tmp / "filegram_source.json").write_text(json.dumps(
            {"gguf": src.name, "sha256": _sha256(src), "dtype": dtype}, indent=1) + "\n", encoding="utf-8")
        missing = [f for f in REQUIRED if not (tmp / f).is_file()]
        if missing:
            raise ValueError(f"{src}: conversion wrote no {missing}")
        if dest.exists():  # a partial folder from an older layout
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gguf")
    ap.add_argument("--out")
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    args = ap.parse_args(argv)
    try:
        print(convert(args.gguf, args.out, args.dtype))
    except (FileNotFoundError, ValueError) as exc:
        print(f"gguf_to_hf: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
