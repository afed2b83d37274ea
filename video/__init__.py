"""Guidance videos, screen-recording captions and the Real-World setting (FILEGRAM_REFERENCE §9.1 T4, §11).

* :mod:`video.timeline` — a trajectory's kept events → GUI operation sequence (gestures → screen states);
* :mod:`video.frames` — screens drawn with OpenCV (a desktop file-manager look);
* :mod:`video.encode` — H.264 MP4 through the imageio-ffmpeg binary (ffmpeg-python pipe), read-back probe;
* :mod:`video.record` — one trajectory → one guidance video;
* :mod:`video.keyframes` — keyframes of any video by scene change;
* :mod:`video.ocr` / :mod:`video.vlm` — the OCR captioner (RapidOCR, CPU) and the VLM captioner (``ray.data.llm``);
* :mod:`video.reconstruct` — captions → events (``events.json`` format) and their recovery score;
* :mod:`video.realworld` — reconstructed events as the views memory methods ingest (Real-World setting, VisGrd);
* :mod:`video.record_stage` / :mod:`video.caption_stage` — the ``record`` and ``caption`` pipeline stages
  (:mod:`video.tables`: their tables); :mod:`video.cli` — ``filegram video record|caption|events``.
"""
