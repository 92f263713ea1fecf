"""A mock model server on 127.0.0.1 for the real Claude Code and Codex CLIs.

It speaks just enough of two streamed APIs for a one-turn, no-tool session:

- the Anthropic Messages API, ``POST /v1/messages`` with ``stream: true`` (Claude
  Code), answered as server-sent events: ``message_start``, a ``thinking`` block
  and a ``text`` block (so the transcript has two lines for one message id, as a
  real answer often has), ``message_delta`` with the final usage, ``message_stop``;
- the OpenAI Responses API, ``POST /v1/responses`` with ``stream: true`` (Codex),
  answered as ``response.created`` … ``response.completed`` with the usage.

Every answer's usage is recorded in :attr:`MockModel.reported`, so a test can
compare what flowdrop read from a transcript with what the "model" said.

The prompt steers a request: a prompt containing ``MOCK:stall`` gets the
response headers and a first event, then nothing until the server stops (a
session to interrupt); ``MOCK:fail`` gets an HTTP 400 with the API's error body
(an error that no client retries); ``MOCK:say-limit`` gets an answer that *talks
about* a usage limit (:data:`LIMIT_TALK`) — a good answer, not a limit. Anything
else is a request nobody expected: a 404 that names it, recorded in
:attr:`MockModel.unexpected`.

Usage limits (SPEC §19): :meth:`MockModel.close_window` closes the account for the
next ``seconds`` (or for the next ``calls`` model calls). While it is closed every
model call is refused as the services refuse it at a limit — Anthropic: ``429``,
``{"type": "error", "error": {"type": "rate_limit_error", …}}`` with
``anthropic-ratelimit-unified-status: rejected``,
``anthropic-ratelimit-unified-reset: <epoch>`` and ``retry-after``; OpenAI
Responses: ``429``, ``{"error": {"type": "usage_limit_reached", "resets_at": <epoch>,
"resets_in_seconds": N}}`` — and counted in :attr:`MockModel.refused` (with the
time it came, so "calls inside the window" is a figure a test can check).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANSWER = "All tidy: the README now says what the tool does."
STALL = "MOCK:stall"
FAIL = "MOCK:fail"
FAIL_MESSAGE = "mock model: this request was refused on purpose"
SAY_LIMIT = "MOCK:say-limit"
# An answer that talks about limits in the CLIs' own words: never a limit itself.
LIMIT_TALK = (
    'I checked the docs: at a rate limit Claude Code says "API Error: Request rejected '
    "(429) · This request would exceed your account's rate limit\" and Codex says "
    '"You\'ve hit your usage limit. Try again at 6:55 PM." Nothing here is rate limited.'
)
ANTHROPIC_LIMIT_MESSAGE = (
    "This request would exceed your account's rate limit. Please try again later."
)
OPENAI_LIMIT_MESSAGE = "The usage limit has been reached"


@dataclass
class Window:
    """A closed window: every model call is refused until ``until`` (epoch seconds), or
    for ``calls`` more calls when that is given (then ``until`` is the reset announced)."""

    until: float
    calls: int | None = None
    retry_after: bool = True  # send retry-after (Claude Code honours a short one itself)
    announce: float | None = None  # the reset said (epoch), when not ``until``

    @property
    def reset(self) -> float:
        return self.announce if self.announce is not None else self.until

    def closed(self, now: float) -> bool:
        if self.calls is not None:
            return self.calls > 0
        return now < self.until


@dataclass
class Usage:
    """One answer's usage as the API reports it (Anthropic's split; Codex's input
    total is ``input + cache_read``)."""

    input: int
    output: int
    cache_read: int
    cache_write: int


@dataclass
class Request:
    method: str
    path: str
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


class MockModel:
    """The server; ``start()`` returns its base URL (``http://127.0.0.1:PORT``)."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.reported: list[tuple[str, Usage]] = []  # (api, usage) per answer given
        self.unexpected: list[Request] = []
        self.window: Window | None = None
        self.refused: list[tuple[str, float]] = []  # (api, epoch) per call refused at a limit
        self.answered: list[tuple[str, float]] = []  # (api, epoch) per model call answered
        self.stalled = threading.Event()  # set when a stalled answer is hanging
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._count = itertools.count(1)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> str:
        model = self

        class Handler(_Handler):
            mock = model

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)
        self._thread.start()
        return self.url

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def close(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # -- usage limits -----------------------------------------------------------------

    def close_window(
        self,
        seconds: float = 60.0,
        *,
        calls: int | None = None,
        retry_after: bool = True,
        announce: float | None = None,
    ) -> Window:
        """Close the account: refuse every model call for ``seconds`` from now, or (with
        ``calls``) for that many calls, announcing a reset ``seconds`` from now — or
        ``announce`` seconds from now (a service saying more than it means: Claude Code
        waits out a ``retry-after`` of a minute or less itself, and gives up on more)."""
        now = time.time()
        said = now + announce if announce is not None else None
        window = Window(now + seconds, calls, retry_after, said)
        with self._lock:
            self.window = window
        return window

    def limited(self) -> Window | None:
        """The window, when it is closed now; counts the call refused."""
        with self._lock:
            window = self.window
            if window is None or not window.closed(time.time()):
                return None
            if window.calls is not None:
                window.calls -= 1
            return window

    def refuse(self, api: str) -> None:
        with self._lock:
            self.refused.append((api, time.time()))

    def calls(self, api: str | None = None) -> int:
        """Model calls received (refused or answered), of ``api`` or of both."""
        with self._lock:
            every = self.refused + self.answered
        return sum(1 for a, _ in every if api is None or a == api)

    # -- answers -------------------------------------------------------------------

    def next_usage(self, api: str) -> Usage:
        """A different, realistic usage for each answer (so a sum or a dedup that is
        wrong shows): thousands in, cache reads, a few dozen out."""
        with self._lock:
            n = next(self._count)
            usage = Usage(
                input=1200 + 17 * n, output=40 + 3 * n, cache_read=5000 + 11 * n, cache_write=0
            )
            if api == "anthropic":
                usage.cache_write = 300 + 7 * n
            self.reported.append((api, usage))
            self.answered.append((api, time.time()))
            return usage

    def total(self, api: str) -> dict[str, int]:
        """What the answers of ``api`` reported, in flowdrop's usage shape: ``input`` is
        every token in, cache reads and writes included."""
        with self._lock:
            used = [u for a, u in self.reported if a == api]
        return {
            "input": sum(u.input + u.cache_read + u.cache_write for u in used),
            "output": sum(u.output for u in used),
            "cache_read": sum(u.cache_read for u in used),
            "cache_write": sum(u.cache_write for u in used),
        }

    def hang(self) -> None:
        self.stalled.set()
        self._stop.wait()


def _answer(prompt: str) -> str:
    return LIMIT_TALK if SAY_LIMIT in prompt else ANSWER


def _prompt_of(body: Any) -> str:
    """Every piece of text in the request (system prompt, messages, input items)."""
    return json.dumps(body)


class _Handler(BaseHTTPRequestHandler):
    mock: MockModel
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _record(self, body: Any) -> Request:
        request = Request(self.command, self.path, body, dict(self.headers.items()))
        with self.mock._lock:
            self.mock.requests.append(request)
        return request

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return raw.decode(errors="replace")

    def _json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _events_start(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def _event(self, name: str, data: dict[str, Any]) -> None:
        self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()

    def _not_expected(self, request: Request) -> None:
        with self.mock._lock:
            self.mock.unexpected.append(request)
        self._json(404, {"error": f"the mock model does not serve {self.command} {self.path}"})

    def do_HEAD(self) -> None:
        self._record(None)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        request = self._record(None)
        path = self.path.split("?")[0]
        if path.endswith("/models"):  # Codex lists models; an empty list is fine
            self._json(200, {"object": "list", "data": [], "models": []})
            return
        self._not_expected(request)

    def do_POST(self) -> None:
        body = self._body()
        request = self._record(body)
        path = self.path.split("?")[0]
        try:
            if path.endswith("/v1/messages"):
                self._anthropic(body)
            elif path.endswith("/v1/messages/count_tokens"):
                self._json(200, {"input_tokens": 1000})
            elif path.endswith("/responses"):
                self._openai(body)
            else:
                self._not_expected(request)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away (an interrupted session)

    # -- Anthropic Messages API --------------------------------------------------

    def _limit_headers(self, window: Window) -> list[tuple[str, str]]:
        left = max(0, int(window.reset - time.time() + 0.999))
        headers = [("x-should-retry", "true")]
        if window.retry_after:
            headers.append(("retry-after", str(left)))
        return headers

    def _refused(self, status: int, payload: Any, headers: list[tuple[str, str]]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _anthropic(self, body: Any) -> None:
        text = _prompt_of(body)
        window = self.mock.limited()
        if window is not None:
            self.mock.refuse("anthropic")
            headers = [
                *self._limit_headers(window),
                ("anthropic-ratelimit-unified-status", "rejected"),
                ("anthropic-ratelimit-unified-reset", str(int(window.reset))),
                ("anthropic-ratelimit-unified-representative-claim", "five_hour"),
                ("request-id", f"req_{uuid.uuid4().hex[:24]}"),
            ]
            self._refused(
                429,
                {
                    "type": "error",
                    "error": {"type": "rate_limit_error", "message": ANTHROPIC_LIMIT_MESSAGE},
                },
                headers,
            )
            return
        if FAIL in text:
            self._json(
                400,
                {
                    "type": "error",
                    "error": {"type": "invalid_request_error", "message": FAIL_MESSAGE},
                },
            )
            return
        model = body.get("model", "claude-mock") if isinstance(body, dict) else "claude-mock"
        if not (isinstance(body, dict) and body.get("stream")):
            usage = self.mock.next_usage("anthropic")
            self._json(200, _anthropic_message(model, usage, _answer(text), usage.output))
            return
        self._events_start()
        usage = Usage(0, 0, 0, 0) if STALL in text else self.mock.next_usage("anthropic")
        message = _anthropic_message(model, usage, None, 1)
        self._event("message_start", {"type": "message_start", "message": message})
        if STALL in text:
            self._event("ping", {"type": "ping"})
            self.mock.hang()
            return
        self._event(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""},
            },
        )
        self._event(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "thinking_delta", "thinking": "The README needs a summary."},
            },
        )
        self._event(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "signature_delta", "signature": "bW9jaw=="},
            },
        )
        self._event("content_block_stop", {"type": "content_block_stop", "index": 0})
        self._event(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {"type": "text", "text": ""},
            },
        )
        answer = _answer(text)
        half = len(answer) // 2
        for piece in (answer[:half], answer[half:]):
            self._event(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 1,
                    "delta": {"type": "text_delta", "text": piece},
                },
            )
        self._event("content_block_stop", {"type": "content_block_stop", "index": 1})
        self._event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {
                    "input_tokens": usage.input,
                    "cache_creation_input_tokens": usage.cache_write,
                    "cache_read_input_tokens": usage.cache_read,
                    "output_tokens": usage.output,
                },
            },
        )
        self._event("message_stop", {"type": "message_stop"})

    # -- OpenAI Responses API ----------------------------------------------------

    def _openai(self, body: Any) -> None:
        text = _prompt_of(body)
        window = self.mock.limited()
        if window is not None:
            self.mock.refuse("openai")
            left = max(0, int(window.reset - time.time() + 0.999))
            self._refused(
                429,
                {
                    "error": {
                        "type": "usage_limit_reached",
                        "message": OPENAI_LIMIT_MESSAGE,
                        "plan_type": "plus",
                        "resets_at": int(window.reset),
                        "resets_in_seconds": left,
                    }
                },
                [
                    *self._limit_headers(window),
                    ("x-codex-primary-used-percent", "100.0"),
                    ("x-codex-primary-window-minutes", "300"),
                    ("x-codex-primary-reset-at", str(int(window.reset))),
                    ("x-codex-primary-reset-after-seconds", str(left)),
                ],
            )
            return
        if FAIL in text:
            self._json(
                400,
                {
                    "error": {
                        "message": FAIL_MESSAGE,
                        "type": "invalid_request_error",
                        "param": None,
                        "code": "mock_refused",
                    }
                },
            )
            return
        model = body.get("model", "gpt-mock") if isinstance(body, dict) else "gpt-mock"
        response_id = f"resp_{uuid.uuid4().hex}"
        created = int(time.time())
        base = {"id": response_id, "object": "response", "created_at": created, "model": model}
        self._events_start()
        seq = itertools.count()
        self._event(
            "response.created",
            {
                "type": "response.created",
                "sequence_number": next(seq),
                "response": {**base, "status": "in_progress", "output": []},
            },
        )
        if STALL in text:
            self.mock.hang()
            return
        usage = self.mock.next_usage("openai")
        item_id = f"msg_{uuid.uuid4().hex}"
        item = {
            "id": item_id,
            "type": "message",
            "role": "assistant",
            "status": "in_progress",
            "content": [],
        }
        self._event(
            "response.output_item.added",
            {
                "type": "response.output_item.added",
                "sequence_number": next(seq),
                "output_index": 0,
                "item": item,
            },
        )
        answer = _answer(text)
        half = len(answer) // 2
        for piece in (answer[:half], answer[half:]):
            self._event(
                "response.output_text.delta",
                {
                    "type": "response.output_text.delta",
                    "sequence_number": next(seq),
                    "item_id": item_id,
                    "output_index": 0,
                    "content_index": 0,
                    "delta": piece,
                },
            )
        done = {
            **item,
            "status": "completed",
            "content": [{"type": "output_text", "text": answer, "annotations": []}],
        }
        self._event(
            "response.output_item.done",
            {
                "type": "response.output_item.done",
                "sequence_number": next(seq),
                "output_index": 0,
                "item": done,
            },
        )
        self._event(
            "response.completed",
            {
                "type": "response.completed",
                "sequence_number": next(seq),
                "response": {
                    **base,
                    "status": "completed",
                    "output": [done],
                    "usage": {
                        "input_tokens": usage.input + usage.cache_read,
                        "input_tokens_details": {"cached_tokens": usage.cache_read},
                        "output_tokens": usage.output,
                        "output_tokens_details": {"reasoning_tokens": 0},
                        "total_tokens": usage.input + usage.cache_read + usage.output,
                    },
                },
            },
        )


def _anthropic_message(model: str, usage: Usage, text: str | None, output: int) -> dict[str, Any]:
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [] if text is None else [{"type": "text", "text": text}],
        "stop_reason": None if text is None else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage.input,
            "cache_creation_input_tokens": usage.cache_write,
            "cache_read_input_tokens": usage.cache_read,
            "output_tokens": output,
        },
    }


def main() -> None:  # python -m tests.agents_mock.server: a server to try the CLIs by hand
    mock = MockModel()
    print(mock.start(), flush=True)
    try:
        while True:
            time.sleep(1)
            for r in mock.requests[len(getattr(main, "seen", [])) :]:
                print(r.method, r.path, flush=True)
            main.seen = list(mock.requests)  # type: ignore[attr-defined]
    except KeyboardInterrupt:
        mock.close()


if __name__ == "__main__":
    main()
