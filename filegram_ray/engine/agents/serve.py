"""Model servers the generate stage starts for the LLM agent (``generate.llm.serve``) and stops at the end.

* ``kind: vllm`` — ``python -m vllm.entrypoints.openai.api_server --model <path> --served-model-name <name>
  --enable-auto-tool-choice --tool-call-parser <parser> [args…]`` (the ``vllm serve`` server) in a child process of
  a Ray actor that holds ``num_gpus`` GPUs, one actor per replica, so Ray places the replicas on the cluster's GPU
  workers. vLLM batches the concurrent sessions of every generate actor (continuous batching).
* ``kind: llama_cpp`` — llama-cpp-python's server (:class:`~filegram_ray.llm.server.LlamaCppServer`) on CPU, for
  laptops and tests.

Each replica listens on ``0.0.0.0`` and is reached at ``http://<node ip>:<port>/v1``; the stage probes every URL
(``GET /v1/models``) before generating. In serial mode (no Ray) the server runs as a child of this process.
Nothing is downloaded: ``model`` is a local path or mounted volume (vLLM) or a packaged model / GGUF (llama.cpp).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from filegram_ray.engine.agents.llm_agent import LLMServerUnavailable, ServeConfig

log = logging.getLogger(__name__)

__all__ = ["ManagedServer", "start_servers", "vllm_command"]


def _node_ip() -> str:
    try:
        import ray

        if ray.is_initialized():
            return ray.util.get_node_ip_address()
    except Exception:  # noqa: BLE001 - outside Ray: this machine
        pass
    return "127.0.0.1"


def vllm_command(spec: ServeConfig, host: str, port: int) -> list[str]:
    """The ``vllm serve`` command line of a ``kind: vllm`` replica. A replica holding ``num_gpus`` ≥ 2 GPUs shards the
    model over them (``--tensor-parallel-size int(num_gpus)``) unless ``args`` sets it; with one GPU or a fraction
    of one (several replicas per GPU) vLLM's default of 1 applies."""
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", spec.model,
           "--served-model-name", spec.served_model_name, "--host", host, "--port", str(port),
           "--enable-auto-tool-choice", "--tool-call-parser", spec.tool_parser, *spec.args]
    given = any(a in ("--tensor-parallel-size", "-tp") or a.startswith("--tensor-parallel-size=")
                for a in spec.args)
    if int(spec.num_gpus) >= 2 and not given:
        cmd += ["--tensor-parallel-size", str(int(spec.num_gpus))]
    return cmd


class ManagedServer:
    """One server process (a Ray actor body, or a plain object in serial mode).

    Args:
        spec: the :class:`ServeConfig`. local: listen on 127.0.0.1 (serial mode) instead of 0.0.0.0.

    Raises (from :meth:`start`):
        LLMServerUnavailable: the process exited or did not list its model within ``startup_timeout_s`` (message
            holds the log tail).
    """

    def __init__(self, spec: dict[str, Any] | ServeConfig, local: bool = False):
        self.spec = spec if isinstance(spec, ServeConfig) else ServeConfig.model_validate(spec)
        self.local = local
        self.proc: subprocess.Popen | None = None
        self._llama = None
        self._url: str | None = None

    def start(self) -> str:
        """Start the server and wait until it lists its model; returns its base URL (``…/v1``)."""
        from filegram_ray.llm.server import LlamaCppServer, free_port

        s = self.spec
        host = "127.0.0.1" if self.local else "0.0.0.0"
        if s.kind == "llama_cpp":
            self._llama = LlamaCppServer(s.model, port=s.port, host=host, alias=s.served_model_name,
                                         chat_format=s.chat_format, n_ctx=s.n_ctx,
                                         startup_timeout=s.startup_timeout_s)
            try:
                self._llama.start()
            except RuntimeError as exc:
                raise LLMServerUnavailable(f"llama.cpp server for {s.model} did not start: {exc}") from exc
            self._url = f"http://{'127.0.0.1' if self.local else _node_ip()}:{self._llama.port}/v1"
            return self._url
        port = s.port or free_port()
        cmd = vllm_command(s, host, port)
        self.log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"filegram_vllm_{port}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - lives as long as the process
        env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")  # never download (house rule)
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env)
        url = f"http://{'127.0.0.1' if self.local else _node_ip()}:{port}/v1"
        deadline = time.monotonic() + s.startup_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise LLMServerUnavailable(f"vLLM server for {s.model} exited with {self.proc.returncode}: "
                                           f"{self._tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as r:
                    if r.status == 200:
                        self._url = url
                        return url
            except OSError:
                time.sleep(2.0)
        self.stop()
        raise LLMServerUnavailable(f"vLLM server for {s.model} not ready after {s.startup_timeout_s:.0f}s: "
                                   f"{self._tail()}")

    def url(self) -> str | None:
        return self._url

    def _tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-2000:]
        except (OSError, AttributeError):
            return ""

    def stop(self) -> None:
        if self._llama is not None:
            self._llama.stop()
            self._llama = None
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if getattr(self, "_log", None):
            self._log.close()


class ServerGroup:
    """The started replicas: ``urls`` and :meth:`stop` (kills the actors / child processes)."""

    def __init__(self, urls: list[str], servers: list[Any], actors: bool):
        self.urls, self._servers, self._actors = urls, servers, actors

    def stop(self) -> None:
        if self._actors:
            import ray

            for a in self._servers:
                try:
                    ray.get(a.stop.remote(), timeout=60)
                except Exception:  # noqa: BLE001 - best effort; the kill below ends it anyway
                    pass
                ray.kill(a, no_restart=True)
        else:
            for s in self._servers:
                s.stop()


def start_servers(spec: ServeConfig, serial: bool) -> ServerGroup:
    """Start ``spec.replicas`` servers (Ray actors with ``num_gpus`` / ``num_cpus`` each, or one child process in
    serial mode) and wait for all of them.

    Raises:
        LLMServerUnavailable: a replica did not come up (the others are stopped first).
    """
    if serial:
        srv = ManagedServer(spec, local=True)
        try:
            return ServerGroup([srv.start()], [srv], actors=False)
        except BaseException:
            srv.stop()
            raise
    import ray

    opts: dict[str, Any] = {"num_gpus": spec.num_gpus, "num_cpus": spec.num_cpus, "max_restarts": 0}
    if spec.runtime_env:
        opts["runtime_env"] = spec.runtime_env
    actor_cls = ray.remote(ManagedServer)
    actors = [actor_cls.options(**opts).remote(spec.model_dump()) for _ in range(spec.replicas)]
    group = ServerGroup([], actors, actors=True)
    try:
        group.urls = ray.get([a.start.remote() for a in actors])
    except BaseException as exc:
        group.stop()
        if isinstance(exc, ray.exceptions.RayTaskError) and isinstance(exc.cause, LLMServerUnavailable):
            raise exc.cause from None
        raise
    log.info("generate: %d %s replica(s) serving %s at %s", len(actors), spec.kind, spec.model, group.urls)
    return group
