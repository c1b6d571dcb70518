"""The web app of ``ai-scientist serve``: Starlette routes over :mod:`.data`, steering as files.

Access: every request needs the token printed with the URL (``?token=`` or the ``X-Token``
header): none gives 401, a wrong one 403. The Host header must name the loopback address the
server is bound to (a page on another site cannot reach it through DNS rebinding). Responses
carry a Content-Security-Policy that allows only the page's own script and style (no inline
script, nothing from another origin) and images inlined as data URLs; the page renders run
content with ``textContent`` only, so node ids, file names, prompts and model output that hold
HTML stay text. Files are served only by a name found in a listing (the shipped static files,
a node's prompt logs), never by a path taken from the URL: traversal finds nothing.

Live updates are server-sent events: the server looks at the run's file sizes and times a few
times a second and tells the page when they changed; the run itself does nothing for the page.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ..base.errors import UsageError
from ..runloop.steering import make_request, write_request
from .data import RunSource, find_runs, is_run_dir

STATIC = Path(__file__).with_name("static")
STATIC_FILES = {"app.js": "text/javascript", "app.css": "text/css"}
POLL_S = 0.25  # how often an open event stream looks at the run's files
NODE_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",  # the token is in the URL: never sent to another site
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


class TokenGate:
    """ASGI middleware: the token and the Host header, checked before any route runs."""

    def __init__(self, app: ASGIApp, token: str, hosts: set[str]):
        self.app = app
        self.token = token
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        req = Request(scope)
        host = (req.headers.get("host") or "").rsplit(":", 1)[0].strip("[]").lower()
        given = req.query_params.get("token") or req.headers.get("x-token")
        if host not in self.hosts:
            resp: Response = PlainTextResponse("forbidden host", 403)
        elif not given:
            resp = PlainTextResponse("access token required (the URL `ai-scientist serve` printed)", 401)
        elif not secrets.compare_digest(given.encode(), self.token.encode()):
            resp = PlainTextResponse("wrong access token", 403)
        else:
            await self.app(scope, receive, _with_headers(send))
            return
        await resp(scope, receive, _with_headers(send))


def _with_headers(send: Send) -> Send:
    async def wrapped(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers") or [])
            have = {k.lower() for k, _ in headers}
            for k, v in HEADERS.items():
                if k.lower().encode() not in have:
                    headers.append((k.lower().encode(), v.encode()))
            message = {**message, "headers": headers}
        await send(message)

    return wrapped  # type: ignore[return-value]


class Runs:
    """The runs the server shows, each with its :class:`RunSource`; a lock serialises reads."""

    def __init__(self, root: Path):
        self.root = root
        self._sources: dict[str, RunSource] = {}
        self.lock = threading.Lock()

    def names(self) -> dict[str, Path]:
        return find_runs(self.root)

    def get(self, name: str) -> RunSource | None:
        runs = self.names()
        if name not in runs:
            return None
        src = self._sources.get(name)
        if src is None or src.run_dir != runs[name]:
            src = self._sources[name] = RunSource(runs[name])
        return src


def create_app(root: Path, token: str, hosts: set[str] | None = None) -> ASGIApp:
    """The ASGI app serving the run ``root`` (or the runs under it) to holders of ``token``."""
    runs = Runs(Path(root))

    def source(request: Request) -> RunSource:
        src = runs.get(request.path_params["run"])
        if src is None:
            raise _NotFound("no such run")
        return src

    def node_id(request: Request, src: RunSource) -> str:
        nid = request.path_params["node"]
        if not NODE_ID.match(nid) or not src.has_node(nid):
            raise _NotFound("no such node")
        return nid

    async def locked(fn: Any, *args: Any) -> Any:
        def call() -> Any:
            with runs.lock:
                return fn(*args)

        return await asyncio.to_thread(call)

    async def index(request: Request) -> Response:
        # the page's own script and style are fetched with the token too (it is URL-safe text)
        page = (STATIC / "index.html").read_text(encoding="utf-8").replace("__TOKEN__", token)
        return Response(page, media_type="text/html; charset=utf-8")

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC_FILES:  # only the shipped files, by name
            raise _NotFound("no such file")
        return Response((STATIC / name).read_bytes(), media_type=STATIC_FILES[name])

    async def run_list(request: Request) -> Response:
        names = await locked(runs.names)
        return JSONResponse({"runs": list(names), "single": is_run_dir(Path(root))})

    async def tree(request: Request) -> Response:
        return JSONResponse(await locked(lambda: source(request).tree()))

    async def overview(request: Request) -> Response:
        return JSONResponse(await locked(lambda: source(request).overview()))

    async def node(request: Request) -> Response:
        def get() -> dict[str, Any]:
            src = source(request)
            return src.node(node_id(request, src))

        return JSONResponse(await locked(get))

    async def prompt_log(request: Request) -> Response:
        def get() -> str | None:
            src = source(request)
            return src.prompt_log(node_id(request, src), request.path_params["name"])

        text = await locked(get)
        if text is None:
            raise _NotFound("no such prompt log")
        return PlainTextResponse(text)

    async def steer(request: Request) -> Response:
        src = await locked(lambda: source(request))
        try:
            body = json.loads(await request.body() or b"{}")
            if not isinstance(body, dict):
                raise UsageError("the request body must be a JSON object")
            req = make_request(
                str(body.get("action")),
                text=body.get("text"),
                node=body.get("node"),
                note=body.get("note"),
                gate=body.get("gate"),
                source="web",
            )
            write_request(src.run_dir, req)
        except (UsageError, ValueError) as exc:
            return JSONResponse({"error": str(exc)}, 400)
        return JSONResponse(req)

    async def stream(request: Request) -> Response:
        src = await locked(lambda: source(request))

        async def events() -> AsyncIterator[str]:
            last = None
            yield "retry: 1000\n\n"
            while not await request.is_disconnected():
                sig = await asyncio.to_thread(src.signature)
                if sig != last:
                    last = sig
                    yield f"event: change\ndata: {json.dumps(sig)}\n\n"
                await asyncio.sleep(POLL_S)

        return StreamingResponse(events(), media_type="text/event-stream")

    async def not_found(request: Request, exc: Exception) -> Response:
        return PlainTextResponse(str(exc), 404)

    routes = [
        Route("/", index),
        Route("/static/{name}", static),
        Route("/api/runs", run_list),
        Route("/api/run/{run}/tree", tree),
        Route("/api/run/{run}/overview", overview),
        Route("/api/run/{run}/node/{node}", node),
        Route("/api/run/{run}/node/{node}/prompt/{name}", prompt_log),
        Route("/api/run/{run}/steer", steer, methods=["POST"]),
        Route("/api/run/{run}/events", stream),
    ]
    allowed = hosts or {"127.0.0.1", "localhost", "::1"}
    return Starlette(
        routes=routes,
        middleware=[Middleware(TokenGate, token=token, hosts=allowed)],
        exception_handlers={_NotFound: not_found},
    )


class _NotFound(Exception):
    pass
