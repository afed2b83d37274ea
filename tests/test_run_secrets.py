"""Secrets given on the command line reach the service and never the run directory (attack pass, secret leaks)."""

from __future__ import annotations

from pathlib import Path

import pytest
from evaluate_fixtures import make_run
from scripted_chat_server import ScriptedChatServer, completion

from filegram_ray.cli import main
from filegram_ray.schema.meta import REDACTED, redact_settings
from filegram_ray.storage import RunDir


@pytest.mark.slow  # the ray.data.llm processor starts a local Ray (~3 min on 2 cores)
def test_an_api_key_given_with_set_is_used_and_not_written_into_the_run(tmp_path, capsys):
    """Attack pass: ``evaluate.backbone.api_key`` given with ``--set`` was written in clear into run.json's config
    snapshot. The key is sent to the server (every request's Authorization header) and no file of the run
    directory holds it: run.json shows ``<redacted>`` where it was, the rest of the backbone as given."""
    secret = "sk-proj-h52bTESTKEY0123456789abcdefXYZ"
    make_run(tmp_path)
    with ScriptedChatServer(lambda body, n: completion("B")) as srv:
        spec = f"{{kind: openai, base_url: '{srv.base_url}', model: scripted, api_key: '{secret}', retries: 0}}"
        rc = main(["run", "evaluate", "--run-dir", str(tmp_path), "--serial", "--set",
                   "evaluate.methods=[no_context]", "--set", "evaluate.plots=false", "--set",
                   f"evaluate.backbone={spec}"])
        assert rc == 0, capsys.readouterr().err
    assert srv.authorizations and set(srv.authorizations) == {f"Bearer {secret}"}
    leaked = [str(p.relative_to(tmp_path)) for p in sorted(tmp_path.rglob("*"))
              if p.is_file() and secret.encode() in p.read_bytes()]
    assert not leaked, leaked
    run = RunDir(str(tmp_path)).read_json("run.json")
    bb = run["config"]["evaluate"]["backbone"]
    assert bb["api_key"] == REDACTED and bb["base_url"] == srv.base_url and bb["model"] == "scripted"
    assert run["stages"]["evaluate"]


def test_secret_settings_are_redacted_in_any_snapshot():
    """The kind: any setting named like a secret, an object store's credentials and a URL's password, at any depth;
    names of environment variables and placeholder keys stay (they say how the key is given, not the key)."""
    cfg = {"evaluate": {"backbone": {"api_key": "k1", "api_key_env": "OPENAI_API_KEY"},
                        "judge_backbone": {"api_key": "EMPTY"}, "methods": ["a"], "max_tokens": 512},
           "caption": {"vlm": {"url": "https://user:pw123@vlm.example/v1", "auth_token": "t1"}},
           "storage_options": {"key": "AKIA1", "secret": "s1", "anon": False, "client_kwargs": {"token": "t2"}},
           "password": "p1", "list": [{"hf_token": "t3"}]}
    out = redact_settings(cfg)
    flat = repr(out)
    for s in ("k1", "AKIA1", "s1", "t1", "t2", "t3", "p1", "pw123"):
        assert f"'{s}'" not in flat and f":{s}@" not in flat, (s, flat)
    assert out["evaluate"]["backbone"]["api_key_env"] == "OPENAI_API_KEY"
    assert out["evaluate"]["judge_backbone"]["api_key"] == "EMPTY" and out["evaluate"]["max_tokens"] == 512
    assert out["caption"]["vlm"]["url"] == f"https://user:{REDACTED}@vlm.example/v1"
    assert out["storage_options"]["anon"] is False and Path  # the structure is kept
