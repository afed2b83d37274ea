"""VLM captioner through ``ray.data.llm``.

No vision-language model can run on this CPU-only machine (no packaged VLM weights; vLLM needs a GPU worker), so:

* the request a model would receive is checked directly (:func:`video.vlm.vlm_preprocess`): OpenAI chat messages
  with the prompt and the keyframe as a decodable JPEG ``data:`` URL; the vLLM processor config is built from a
  local model path with its multimodal stage on (no engine is started);
* the whole HTTP path — keyframes → ``HttpRequestProcessorConfig`` processor on Ray Data → caption rows → events — runs
  against a local OpenAI-compatible *stub* endpoint that validates each request (model, prompt, image) and answers
  with a fixed JSON caption. The stub stands in for the model only; everything around it is the real code.
"""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from video_helpers import external_mp4

from video.reconstruct import reconstruct
from video.vlm import PROMPT, VlmConfig, vlm_postprocess, vlm_preprocess, vlm_processor_config


def _frame():
    img = np.full((720, 1280, 3), 250, np.uint8)
    img[:, :358] = 235
    return img


def _decode_data_url(url: str) -> np.ndarray:
    import cv2

    assert url.startswith("data:image/jpeg;base64,")
    buf = np.frombuffer(base64.b64decode(url.split(",", 1)[1]), np.uint8)
    img = cv2.imdecode(buf, cv2.IMREAD_COLOR)
    assert img is not None
    return img


def test_request_building_for_both_back_ends():
    from video.vlm import encode_keyframe

    row = {"recording_id": "r", "keyframe": 3, "t_s": 1.5, "jpeg": encode_keyframe(_frame(), width=640)}
    http = vlm_preprocess(row, VlmConfig(kind="http", url="http://127.0.0.1:9/v1", model="qwen-vl", max_tokens=200))
    assert "jpeg" not in http and http["keyframe"] == 3
    p = http["payload"]
    assert p["model"] == "qwen-vl" and p["max_tokens"] == 200 and p["temperature"] == 0.0
    parts = p["messages"][0]["content"]
    assert parts[0] == {"type": "text", "text": PROMPT} and "file operation" in PROMPT
    assert _decode_data_url(parts[1]["image_url"]["url"]).shape == (360, 640, 3)  # scaled to image_width
    vllm = vlm_preprocess(row, VlmConfig(kind="vllm", model_source="/models/vlm"))
    assert vllm["messages"] == p["messages"] and vllm["sampling_params"]["max_tokens"] == 384


def test_processor_configs_are_declarative():
    cfg = VlmConfig(kind="vllm", model_source="/models/qwen2-vl", accelerator_type="H100", concurrency=2,
                    engine_kwargs={"max_model_len": 8192})
    pc = vlm_processor_config(cfg)
    assert type(pc).__name__ == "vLLMEngineProcessorConfig"
    assert pc.model_source == "/models/qwen2-vl" and pc.accelerator_type == "H100" and pc.concurrency == 2
    assert pc.engine_kwargs["max_model_len"] == 8192
    assert pc.prepare_multimodal_stage["enabled"] and pc.should_continue_on_error
    over = vlm_processor_config(cfg.model_copy(update={"processor_kwargs": {  # merged last, not a duplicate kwarg
        "prepare_multimodal_stage": {"enabled": True, "chat_template_content_format": "string"},
        "max_concurrent_batches": 2}}))
    assert over.prepare_multimodal_stage["chat_template_content_format"] == "string"
    assert over.max_concurrent_batches == 2 and over.model_source == "/models/qwen2-vl"
    http = vlm_processor_config(VlmConfig(kind="http", url="http://h:8000/v1/"))
    assert http.url == "http://h:8000/v1/chat/completions"
    with pytest.raises(ValueError, match="model_source"):
        VlmConfig(kind="vllm")
    with pytest.raises(ValueError, match="url"):
        VlmConfig(kind="http")


def test_postprocess_parses_the_reply_and_reports_bad_ones():
    reply = {"action": "edit", "file": "a.md", "status_line": "Saved a.md, +1 -1 lines", "visible_text": "x"}
    ok = vlm_postprocess({"recording_id": "r", "payload": {}, "http_response": {
        "choices": [{"message": {"content": "```json\n" + json.dumps(reply) + "\n```"}}]}})
    assert ok["error"] == "" and json.loads(ok["operation"])["file"] == "a.md" and "payload" not in ok
    assert ok["text"].startswith("Saved a.md")
    bad = vlm_postprocess({"recording_id": "r", "generated_text": "I see a file manager."})
    assert bad["operation"] == "" and "not a JSON object" in bad["error"]


class _StubVlm(BaseHTTPRequestHandler):
    """An OpenAI-compatible chat endpoint that checks the request and answers with a fixed caption."""

    seen: list[tuple[int, int]] = []
    reply = {"action": "write", "file": "budget.xlsx", "target": "", "query": "",
             "status_line": "Saved new file budget.xlsx, 120 chars", "clock": "2026-01-08 11:12:49",
             "visible_text": "Quarterly report draft"}

    def do_POST(self):  # noqa: N802 - http.server API
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        assert self.path == "/v1/chat/completions" and body["model"] == "stub-vlm"
        text, image = body["messages"][0]["content"]
        assert text["type"] == "text" and image["type"] == "image_url"
        img = _decode_data_url(image["image_url"]["url"])
        type(self).seen.append(img.shape[:2])
        out = {"id": "x", "object": "chat.completion", "model": "stub-vlm", "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant",
                                                              "content": json.dumps(self.reply)}}]}
        data = json.dumps(out).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def stub_endpoint():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _StubVlm)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    _StubVlm.seen = []
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()
    srv.server_close()


def test_http_vlm_path_end_to_end_through_ray_data(tmp_path, stub_endpoint, ray_local):
    from video.caption_stage import caption_file

    mp4 = external_mp4(tmp_path / "clip.mp4")
    rows = caption_file(str(mp4), "vlm", vlm=VlmConfig(kind="http", url=stub_endpoint, model="stub-vlm",
                                                       image_width=320))
    assert rows and len(_StubVlm.seen) == len(rows)
    assert all(shape == (180, 320) for shape in _StubVlm.seen)
    assert all(r["captioner"] == "vlm" and r["error"] == "" and r["lines"] == "[]" for r in rows)
    assert json.loads(rows[0]["operation"])["action"] == "write"
    events = reconstruct(rows, "clip", captioner="vlm").events
    assert [e["event_type"] for e in events] == ["file_write"]  # the same operation on every keyframe: one event
    assert events[0]["file_path"] == "budget.xlsx" and events[0]["content_length"] == 120


def test_caption_stage_vlm_path_writes_tables_records_and_resumes(tmp_path, stub_endpoint, ray_local):
    """The caption stage with ``captioner: vlm`` (model calls on the model-call executor: keyframes prepared as
    items' requests → the ``ray.data.llm`` HTTP processor → one table per recording): caption table, index row, the
    completion record written after the table, events read back; a rerun skips the recording, and a broken file is
    an error row (``errors/caption.parquet``) like the OCR path's."""
    from filegram_ray.config import load_config
    from video.caption_stage import recording_id_of, run_caption

    mp4 = str(external_mp4(tmp_path / "clip.mp4"))
    broken = tmp_path / "broken.mp4"
    broken.write_text("not a video", encoding="utf-8")
    cfg = load_config(overrides={"run_dir": str(tmp_path / "run"), "caption": {
        "captioner": "vlm", "recordings": False, "inputs": [mp4, str(broken)],
        "vlm": {"kind": "http", "url": stub_endpoint, "model": "stub-vlm", "image_width": 320}}})
    rec = run_caption(cfg)
    run, rid = cfg.run(), recording_id_of(mp4)
    assert rec["captioned"] == 1 and rec["errors"] == 1
    assert rec["units"] == {"planned": 2, "done": 1, "skipped": 0, "failed": 1}
    idx = {r["recording_id"]: r for r in run.read_table("captions/index.parquet").to_dicts()}
    ok, bad = idx[rid], idx[recording_id_of(str(broken))]
    assert ok["status"] == "ok" and ok["captioner"] == "vlm" and ok["path"] == f"captions/vlm/{rid}.parquet"
    assert bad["status"] == "error" and "not a readable video" in bad["error"] and str(broken) in bad["error"]
    caps = run.read_table(ok["path"])
    assert caps.height == ok["keyframes"] == len(_StubVlm.seen) and set(caps["captioner"]) == {"vlm"}
    assert run.read_json(f"_done/caption/vlm__{rid.replace('/', '__')}.json")["keyframes"] == caps.height
    (err,) = run.error_rows("caption")
    assert err["unit"] == f"vlm/{recording_id_of(str(broken))}" and err["error_type"] == "UserError"
    events = run.read_json(f"realworld/{rid}/events.json")
    assert [e["event_type"] for e in events] == ["file_write"] and events[0]["file_path"] == "budget.xlsx"
    again = run_caption(cfg)
    assert again["already_done"] == 1 and again["captioned"] == 0 and again["errors"] == 1
    assert len(_StubVlm.seen) == caps.height  # the finished recording was not sent to the model again
