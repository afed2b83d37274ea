"""A scripted OpenAI-compatible chat server for the LLM agent's control-flow tests (the role of datatrove's
``dummy_server``): real HTTP on 127.0.0.1, real ``openai`` client on the other side, replies chosen by a Python
function of the request. The real-model test is ``tests/test_llm_agent_e2e.py`` (llama.cpp).

    with ScriptedChatServer(script) as srv:          # script(request_json, n) -> reply dict | (status, body)
        srv.base_url                                  # http://127.0.0.1:<port>/v1
        srv.requests                                  # every chat request body received, in order

A script may also return :class:`RawReply` (status, bytes, content type) to send a body that is not JSON (a
truncated body, an HTML page, a non-UTF-8 byte), or sleep before returning (a slow server; handler threads are
daemons, so the server still stops at once).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


@dataclass
class RawReply:
    """A reply sent byte for byte."""

    status: int
    body: bytes
    content_type: str = "application/json"


def completion(content: str | None = None, tool_calls: list[dict[str, Any]] | None = None,
               finish_reason: str | None = None, prompt_tokens: int = 100, completion_tokens: int = 20
               ) -> dict[str, Any]:
    """A ``chat.completion`` object with one choice."""
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        msg["tool_calls"] = tool_calls
    return {"id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": "scripted",
            "choices": [{"index": 0, "message": msg,
                         "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop")}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}


def native_call(name: str, arguments: dict[str, Any] | str, cid: str = "call_1") -> dict[str, Any]:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


class ScriptedChatServer:
    def __init__(self, script: Callable[[dict[str, Any], int], Any], model: str = "scripted",
                 delay_s: float = 0.0):
        self.script, self.model, self.delay_s = script, model, delay_s
        self.requests: list[dict[str, Any]] = []
        self.authorizations: list[str] = []  # the Authorization header of each chat request
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _send(self, status: int, body: Any, content_type: str = "application/json") -> None:
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                    pass

            def do_GET(self):
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": outer.model, "object": "model"}]})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with outer._lock:
                    outer.requests.append(body)
                    outer.authorizations.append(self.headers.get("Authorization", ""))
                    n = len(outer.requests)
                if outer.delay_s:
                    time.sleep(outer.delay_s)
                out = outer.script(body, n)
                if isinstance(out, RawReply):
                    self._send(out.status, out.body, out.content_type)
                elif isinstance(out, tuple):
                    self._send(*out)
                else:
                    self._send(200, out)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> ScriptedChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
