"""A headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``).

No client library: the protocol's messages are JSON, NUL-terminated, on the browser's fds 3 (in)
and 4 (out). Enough for the serve tests and bench/serve.py: open a page, evaluate JavaScript in it, wait for a
condition, take a screenshot.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class Browser:
    def __init__(self, profile: Path, width: int = 1300, height: int = 1000):
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def fds() -> None:  # in the child: the pipe ends become fds 3 and 4
            os.dup2(to_child_r, 3)
            os.dup2(from_child_w, 4)

        flags = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--remote-debugging-pipe",
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            "--proxy-server=http://127.0.0.1:9",
        ]  # fmt: skip  (loopback bypasses a proxy: nothing else is reachable)
        self.proc = subprocess.Popen(
            [str(CHROMIUM), *flags, "about:blank"],
            preexec_fn=fds,
            close_fds=False,  # (close_fds would close 3 and 4 after preexec_fn; ours are non-inheritable)
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._id = 0
        self._buf = b""
        self._lock = threading.Lock()
        self.session: str | None = None

    # ---------------------------------------------------------- protocol --
    def send(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = 30) -> dict[str, Any]:  # fmt: skip
        with self._lock:
            self._id += 1
            mid = self._id
            msg: dict[str, Any] = {"id": mid, "method": method, "params": params or {}}
            if session:
                msg["sessionId"] = session
            os.write(self._to_child, json.dumps(msg).encode() + b"\0")
            deadline = time.monotonic() + timeout
            while True:
                while b"\0" not in self._buf:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"no answer to {method} in {timeout} s")
                    chunk = os.read(self._from_child, 1 << 20)
                    if not chunk:
                        raise RuntimeError("chromium closed the pipe")
                    self._buf += chunk
                raw, self._buf = self._buf.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == mid:
                    if "error" in reply:
                        raise RuntimeError(f"{method}: {reply['error']}")
                    return reply.get("result", {})

    def open(self, url: str) -> None:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.send("Page.enable", session=self.session)
        self.send("Page.navigate", {"url": url}, session=self.session)

    def js(self, expression: str, timeout: float = 30) -> Any:
        """The value of ``expression`` in the page (awaited when it is a promise)."""
        res = self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            session=self.session,
            timeout=timeout,
        )
        if res.get("exceptionDetails"):
            raise RuntimeError(f"{expression[:80]}: {res['exceptionDetails']}")
        return res.get("result", {}).get("value")

    def wait(self, expression: str, timeout: float = 60, every: float = 0.1) -> Any:
        """Poll ``expression`` until it is truthy; returns its value."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = self.js(expression)
            except RuntimeError:
                value = None
            if value:
                return value
            if time.monotonic() > deadline:
                shown = self.js("document.body ? document.body.innerText.slice(0, 1500) : ''")
                raise TimeoutError(f"{expression!r} still false after {timeout} s; the page shows: {shown}")
            time.sleep(every)

    def screenshot(self, path: Path) -> Path:
        data = self.send("Page.captureScreenshot", {"format": "png"}, session=self.session)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=5)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_child)
        os.close(self._from_child)
