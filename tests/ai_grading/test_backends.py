"""Backends: the OpenAI-compatible URL backend against a local stub server (no network), the callable
backend, the chat-template fallback and the JSON stop rule."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from hf_ext.ai_grading.backends import CallableBackend, OpenAICompatibleBackend, json_complete, plain_layout


class _Stub(BaseHTTPRequestHandler):
    seen: list = []

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Stub.seen.append((self.path, self.headers.get("Authorization"), body))
        content = '{"items": []}' if body["messages"][-1]["role"] != "assistant" else ' "x"}'
        payload = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = HTTPServer(("127.0.0.1", 0), _Stub)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_port}/v1"
    httpd.shutdown()
    httpd.server_close()


def test_openai_compatible_backend_against_local_stub(server):
    _Stub.seen.clear()
    backend = OpenAICompatibleBackend(server, "grader-model", api_key="k", max_tokens=32)
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    assert backend(messages, seed=7, temperature=0.7) == '{"items": []}'
    path, auth, body = _Stub.seen[0]
    assert path == "/v1/chat/completions" and auth == "Bearer k"
    assert body == {
        "model": "grader-model",
        "messages": messages,
        "temperature": 0.7,
        "seed": 7,
        "max_tokens": 32,
    }
    prefilled = [*messages, {"role": "assistant", "content": '{"a":'}]
    assert backend(prefilled, seed=0, temperature=0.0) == '{"a": "x"}'


def test_openai_backend_with_injected_opener_and_bad_payload():
    class Response:
        def __init__(self, payload):
            self.payload = payload

        def read(self):
            return json.dumps(self.payload).encode()

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    backend = OpenAICompatibleBackend("https://api.example/v1", "m", opener=lambda req, timeout: Response({}))
    with pytest.raises(ValueError, match="choices"):
        backend([{"role": "user", "content": "u"}], seed=0, temperature=0.0)
    with pytest.raises(ValueError, match="`url`"):
        OpenAICompatibleBackend("localhost:8000", "m")
    with pytest.raises(ValueError, match="`timeout`"):
        OpenAICompatibleBackend("http://h", "m", timeout=0)


def test_callable_backend_and_plain_layout():
    backend = CallableBackend(lambda messages, seed, temperature: f"{seed}:{temperature}")
    assert backend([], seed=3, temperature=0.5) == "3:0.5"
    with pytest.raises(TypeError, match="`fn`"):
        CallableBackend(42)
    text = plain_layout([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])
    assert text == "System: S\n\nUser: U\n\nAssistant:"
    opened = plain_layout([{"role": "user", "content": "U"}, {"role": "assistant", "content": "{"}])
    assert opened.endswith("Assistant: {")


def test_json_complete():
    assert json_complete('x {"a": [1, {"b": "}"}]} tail')
    assert not json_complete('{"a": "}"')
    assert json_complete('{"a": "\\"}"}')
    assert not json_complete("") and not json_complete("[1]")


def test_transformers_backend_without_template_warns_and_stops_at_json(caplog):
    pytest.importorskip("transformers")
    from hf_ext.ai_grading.backends import TransformersBackend
    from hf_ext.testing import tiny_llama, word_tokenizer

    tok = word_tokenizer()
    tok.chat_template = None
    backend = TransformersBackend(tiny_llama(vocab_size=len(tok)), tok, max_new_tokens=4)
    with caplog.at_level("WARNING"):
        out = backend([{"role": "user", "content": "the"}], seed=0, temperature=0.0)
    assert isinstance(out, str) and "no chat template" in caplog.text
    closed = [{"role": "user", "content": "the"}, {"role": "assistant", "content": '{"a": 1}'}]
    reply = backend(closed, seed=0, temperature=0.0)
    assert reply.startswith('{"a": 1}') and len(reply[8:].split()) <= 1  # complete: stops after one token
    with pytest.raises(ValueError, match="`tokenizer`"):
        TransformersBackend(object())


def test_transformers_backend_accepts_a_text_generation_pipeline():
    pytest.importorskip("transformers")
    from transformers import pipeline

    from hf_ext.ai_grading.backends import TransformersBackend
    from hf_ext.testing import tiny_llama, word_tokenizer

    tok = word_tokenizer()
    model = tiny_llama(vocab_size=len(tok))
    backend = TransformersBackend(pipeline("text-generation", model=model, tokenizer=tok), max_new_tokens=3)
    assert backend.model is model and backend.tokenizer is tok
    direct = TransformersBackend(model, tok, max_new_tokens=3)
    messages = [{"role": "user", "content": "the city"}]
    assert backend(messages, seed=0, temperature=0.0) == direct(messages, seed=0, temperature=0.0)
