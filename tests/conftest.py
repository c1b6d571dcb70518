"""Shared pytest set-up: Hypothesis profiles and the required-components switch.

``HYPOTHESIS_PROFILE=mutation`` (set by scripts/mutation.sh) makes every property test
deterministic — derandomized, no example database, no deadline — so a mutant is killed
or survives the same way on every run.

``AI_SCI_REQUIRE=docker,slurm,...`` (``all``; scripts/test.sh sets it when ``CI=true``) turns
the skip of a test whose real component is missing into a failure naming the component
(tests/components.py). The ``needs_component`` marker (``components.needs``) is checked here
before each test; the session's summary lists how many tests found each component.

A test that fails (a timeout included) stops what it started: the processes its body started
that are still alive then are killed with their children (``pytest_runtest_call``), so a
``drive_run.py --hang`` of a timed-out test does not run on after the suite.

``scripted_run`` is a finished run the pipeline really wrote (pipeline_support.start_run, report
off), made once per session; ``run_copy(root)`` copies it to ``root/run`` for a test to change, so
a reporting test starts from the files the pipeline writes, not a hand-made layout.

No test reaches past this machine: ``_no_internet`` (autouse) makes a connection or a name lookup
to anything but loopback or a Unix socket fail at once with ``OSError`` in the test's process, as
an offline machine would — a code path that would call a public service (a literature source, a
network probe) then takes its offline branch. Subprocesses are not covered; the sandboxes run
with the network off.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import socket
from collections.abc import Callable
from pathlib import Path

import components
import psutil
import pytest
from hypothesis import settings

settings.register_profile("mutation", derandomize=True, database=None, deadline=None, print_blob=False)
if os.environ.get("HYPOTHESIS_PROFILE"):
    settings.load_profile(os.environ["HYPOTHESIS_PROFILE"])


def _local(host: object) -> bool:
    if not isinstance(host, str) or host in ("", "localhost"):
        return host in ("", "localhost")
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return host.endswith(".localhost")


class _Offline(OSError):
    pass


@pytest.fixture(autouse=True)
def _no_internet(monkeypatch: pytest.MonkeyPatch) -> None:
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo

    def allowed(sock: socket.socket, address: object) -> bool:
        if sock.family == getattr(socket, "AF_UNIX", None):
            return True
        return isinstance(address, tuple) and _local(address[0])

    def connect(sock: socket.socket, address: object) -> None:
        if not allowed(sock, address):
            raise _Offline(f"tests do not reach the internet (connect to {address!r})")
        real_connect(sock, address)  # type: ignore[arg-type]

    def connect_ex(sock: socket.socket, address: object) -> int:
        if not allowed(sock, address):
            raise _Offline(f"tests do not reach the internet (connect to {address!r})")
        return real_connect_ex(sock, address)  # type: ignore[arg-type]

    def getaddrinfo(host: object, *args: object, **kwargs: object) -> list:
        if host is not None and not _local(host if not isinstance(host, bytes) else host.decode()):
            raise socket.gaierror(socket.EAI_NONAME, f"tests do not reach the internet (lookup of {host!r})")
        return real_getaddrinfo(host, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def pytest_configure(config: pytest.Config) -> None:
    if components.required() and not config.pluginmanager.hasplugin("timeout"):
        # CI: a hung test must fail on its own, not hold the job until the runner's limit
        raise pytest.UsageError("pytest-timeout is not installed (scripts/setup.sh installs the dev extra)")
    config.addinivalue_line(
        "markers", "needs_component(name, missing, reason): skip (or fail under AI_SCI_REQUIRE) when missing"
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("needs_component"):
        if mark.kwargs["missing"]:
            components.require_or_skip(mark.args[0], mark.kwargs["reason"])
        # by node id: this hook runs before pytest names the test in PYTEST_CURRENT_TEST, so a
        # module of marked tests was counted as the one test before it
        components.present(mark.args[0], item.nodeid)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):  # noqa: ANN201 - pytest's hook
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    outcome = yield
    if outcome.excinfo is None:
        return
    started = [p for p in me.children(recursive=True) if p.pid not in before]
    for proc in started:
        try:
            proc.kill()  # SIGKILL: a process under test may ignore SIGTERM/SIGINT
        except psutil.Error:
            pass
    psutil.wait_procs(started, timeout=10)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # noqa: ANN001 - pytest's hook
    need = components.required()
    if not need and not components.USED:
        return
    tr = terminalreporter
    tr.section("real components")
    for name in components.COMPONENTS:
        n = len(components.USED.get(name, ()))
        tag = "required" if name in need else "optional"
        tr.write_line(f"{name:<10} {tag:<8} found by {n} test(s)")


@pytest.fixture(scope="session")
def scripted_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished scripted run of the bundled example (all four stages, report off); read-only."""
    from pipeline_support import start_run  # here: the conftest is also copied alone (test_timeout_cleanup)

    code, run_dir, _ = start_run(tmp_path_factory.mktemp("scripted_run"))
    assert code == 0, f"the shared scripted run ended with exit {code}: {run_dir}"
    return run_dir


@pytest.fixture
def run_copy(scripted_run: Path) -> Callable[[Path], Path]:
    """``run_copy(root)``: a private copy of ``scripted_run`` at ``root/run`` (no run lock)."""

    def copy(root: Path) -> Path:
        return Path(shutil.copytree(scripted_run, root / "run", ignore=shutil.ignore_patterns("run.lock")))

    return copy
