"""VLM description of imported media through the evaluate backbone's Ray Data processors (issue 21 deliverable 3).

No vision-language model ships in a PyPI package we could find, and none may be downloaded, so this test checks
the wiring against a local OpenAI-compatible endpoint that records each request and answers with a fixed
sentence: the image reaches the endpoint as an OpenAI ``image_url`` data URL together with the prompt, the reply
becomes a ``Description (VLM, …)`` section of the annotation with ``vlm:<backbone>`` in ``described_by``, and a
failing request is named in the file's ``description_skipped`` while its other sections stand. The model's own
description quality is not tested here.
"""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from import_helpers import bundle_meta, folder_of

from filegram_ray.workspace.bundle import import_bundle

pytestmark = [pytest.mark.ray]


class _Recorder(BaseHTTPRequestHandler):
    requests: list[dict] = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(body)
        parts = body["messages"][0]["content"]
        images = [p for p in parts if p.get("type") == "image_url"]
        if not images:
            reply = {"error": {"message": "no image in the request"}}
        else:
            reply = {"choices": [{"message": {"content": f"A picture ({len(images)} image(s) received)."},
                                  "finish_reason": "stop"}], "usage": {"prompt_tokens": 10, "completion_tokens": 6}}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture()
def endpoint():
    _Recorder.requests = []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()
    srv.server_close()


def test_vlm_description_goes_through_the_backbone_processor(tmp_path, endpoint, ray_local):
    src = folder_of(tmp_path, ["surfer-240-200.jpg", "t-rex-roar.mp3"])
    out = tmp_path / "b"
    spec = {"kind": "openai", "base_url": endpoint, "model": "vlm-test", "name": "test-vlm", "max_retries": 0}
    info = import_bundle(src, "T-07", out, describe={"ocr": False, "asr": False, "vlm": spec})
    # one request, for the image only (audio has no picture), with the prompt and the JPEG as a data URL
    assert len(_Recorder.requests) == 1
    req = _Recorder.requests[0]
    assert req["model"] == "vlm-test"
    parts = req["messages"][0]["content"]
    assert parts[0]["type"] == "text" and "Describe this image" in parts[0]["text"]
    url = parts[1]["image_url"]["url"]
    assert url.startswith("data:image/jpeg;base64,") and base64.b64decode(url.split(",", 1)[1])[:2] == b"\xff\xd8"
    ann = {f["path"]: f["annotation"] for f in bundle_meta(out)["files"]}
    img = ann["surfer-240-200.jpg"]
    assert img["described_by"] == ["properties", "vlm:test-vlm"]
    assert img["content"].splitlines()[1:] == ["Description (VLM, test-vlm):", "A picture (1 image(s) received)."]
    assert ann["t-rex-roar.mp3"]["described_by"] == ["properties"]
    assert {d["path"]: d["described_by"] for d in info.described}["surfer-240-200.jpg"][-1] == "vlm:test-vlm"


def test_a_failing_vlm_request_is_named_and_the_rest_stands(tmp_path, ray_local):
    src = folder_of(tmp_path, ["surfer-240-200.jpg"])
    out = tmp_path / "b"
    spec = {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "none", "max_retries": 0}
    info = import_bundle(src, "T-07", out, describe={"ocr": False, "asr": False, "vlm": spec})
    row = {f["path"]: f for f in bundle_meta(out)["files"]}["surfer-240-200.jpg"]
    assert row["annotation"]["content"].startswith("Image file surfer-240-200.jpg: JPEG, 240×200 pixels")
    skipped = {w: why for w, why in row["description_skipped"]}
    assert "vlm" in skipped and skipped["ocr"] == "switched off (--no-ocr)"
    assert [w for w, _ in info.described[0]["skipped"]] == ["ocr", "vlm"]
