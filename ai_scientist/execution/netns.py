"""A node's empty network namespace, made once and reused by the node's commands (bwrap, root).

With the network off, ``bwrap --unshare-all`` makes a network namespace for every command,
brings its loopback up and, at the exit, leaves the kernel to tear it down: a few
milliseconds of a trivial command's start (about a fifth of a bare interpreter start). The
commands of one node run one after another under one uid (:class:`~.subprocess_backend.
WorkspaceOwners`), so they can share one namespace instead: the orchestrator makes it the
first time (its loopback up, as bwrap does; no other interface, so nothing outside is
reachable), holds it by a descriptor, and the thread that forks a command (the fork server's,
which receives the descriptor with the request, see :mod:`.forkserver`) enters it just for
the fork (a child is born in its creator thread's namespaces; the thread goes back at once),
with bwrap told ``--share-net``. The namespace belongs to the host's user namespace, so the
command, in bwrap's user namespace, holds no capability over it (cannot add an interface or a
route). What commands of one node can leave each other through it is what they can already
leave through their shared uid and workspace (a socket in TIME_WAIT at most: no process
outlives its command). A command whose workspace is in use gets a fresh uid, hence a fresh
namespace. Needs CAP_SYS_ADMIN (a root orchestrator); otherwise bwrap makes its own.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import struct
import threading
from collections import OrderedDict
from collections.abc import Iterator

from .isolation import CLONE_NEWNET, _check, _libc

SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
_IFREQ = "16sH14x"  # struct ifreq: the name, then ifr_flags


def _loopback_up() -> None:
    """Bring ``lo`` up in the calling thread's network namespace (what bwrap does in its own)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack(_IFREQ, b"lo", 0)
        flags = struct.unpack(_IFREQ, fcntl.ioctl(s.fileno(), SIOCGIFFLAGS, req))[1]
        fcntl.ioctl(s.fileno(), SIOCSIFFLAGS, struct.pack(_IFREQ, b"lo", flags | IFF_UP))


class NodeNetworks:
    """One network namespace per key (a node's uid), at most ``keep`` held at a time (the least
    recently used is let go: its node's next command gets a new one). Thread-safe."""

    def __init__(self, keep: int = 64):
        self.keep = keep
        self._lock = threading.Lock()
        self._held: OrderedDict[int, int] = OrderedDict()  # key -> namespace descriptor
        # the namespace the orchestrator's threads live in (checked when a thread goes back)
        self._host = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)

    def _make(self) -> int:
        """A new namespace with its loopback up, made in this thread, which then goes back."""
        _check(_libc.unshare(CLONE_NEWNET), "unshare(net)")
        try:
            fd = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
            try:
                _loopback_up()
            except OSError:
                os.close(fd)
                raise
        finally:
            self._back()
        return fd

    def _back(self) -> None:
        # a thread left in a command's namespace would lose the network (LLM calls): never ignored
        _check(_libc.setns(self._host, CLONE_NEWNET), "setns(net) back to the orchestrator's namespace")

    @contextlib.contextmanager
    def held(self, key: int) -> Iterator[int]:
        """A descriptor of ``key``'s namespace (made if needed), open inside the block: a
        command started with it (:class:`~.forkserver.ChildSpec` ``netns_fd``) is born in it."""
        with self._lock:
            fd = self._held.get(key)
            if fd is None:
                fd = self._held[key] = self._make()
                while len(self._held) > self.keep:
                    os.close(self._held.popitem(last=False)[1])
            self._held.move_to_end(key)
            own = os.dup(fd)  # another thread may let ``fd`` go meanwhile
        try:
            yield own
        finally:
            os.close(own)

    @contextlib.contextmanager
    def entered(self, key: int) -> Iterator[None]:
        """The calling thread is in ``key``'s namespace (made if needed) inside the block: a
        process it forks there is born in it."""
        with self.held(key) as own:
            _check(_libc.setns(own, CLONE_NEWNET), "setns(net) into the node's namespace")
        try:
            yield
        finally:
            self._back()

    @classmethod
    def if_allowed(cls, keep: int = 64) -> NodeNetworks | None:
        """A pool, or None when this host refuses the orchestrator a network namespace (a
        seccomp profile, a missing capability): bwrap then makes its own per command."""
        try:
            nets = cls(keep)
            os.close(nets._make())
        except OSError:
            return None
        return nets

    def close(self) -> None:
        """Let every held namespace go (the kernel frees one once no process is in it)."""
        with self._lock:
            while self._held:
                os.close(self._held.popitem()[1])
