"""``ai-scientist serve RUN|DIR [--port N]``: the live web view (ai_scientist/serve), on loopback.

Prints the URL with a fresh random access token on its first line, then serves until Ctrl-C.
The run needs none of this: it keeps going when the server stops or the page is closed.
"""

from __future__ import annotations

import argparse
import os
import secrets
import socket
import sys
from pathlib import Path

from ..base.errors import UsageError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", help="a run directory, or a directory of runs (e.g. experiments/)")
    p.add_argument("--port", type=int, default=0, help="TCP port (default: a free one)")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default 127.0.0.1; another address exposes the page, token still required)",
    )


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from ..serve.app import create_app
    from ..serve.data import find_runs

    root = Path(args.path)
    if not root.is_dir():
        raise UsageError(
            f"{root}: not a directory (a run directory, or a directory of runs such as experiments/)"
        )
    if not find_runs(root):  # runs started later show up in the list
        print(f"{root}: no run in it yet", file=sys.stderr)
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port: must be 0-65535, got {args.port}")
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host, args.port))
    except OSError as exc:
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {exc.strerror}") from None
    sock.listen(64)
    port = sock.getsockname()[1]
    token = secrets.token_urlsafe(24)
    try:  # the run comes first: on a busy machine the server takes what CPU the run leaves
        os.nice(10)
    except OSError:
        pass
    hosts = {"127.0.0.1", "localhost", "::1", args.host.lower()}
    shown = f"[{args.host}]" if family == socket.AF_INET6 else args.host
    print(f"http://{shown}:{port}/?token={token}", flush=True)
    print("serving (Ctrl-C stops the server; the run is not affected)", file=sys.stderr, flush=True)
    config = uvicorn.Config(
        create_app(root, token, hosts),
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=1,
        lifespan="off",
    )
    uvicorn.Server(config).run(sockets=[sock])
    return 0
