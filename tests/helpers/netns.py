"""Linux network namespaces as stand-in hosts: one private network, one address each.

    root namespace (the test)          "switch" namespace               host namespaces
    fr<pid>r 10.231.N.254/24 ---veth--- bridge frb<pid> ---veth--- eth0 10.231.N.1  (jm)
                                                       ---veth--- eth0 10.231.N.2  (tm1)
                                                       ---veth--- eth0 10.231.N.3  (tm2)

The bridge lives in a namespace of its own, not in the root one: with `br_netfilter`
loaded (Docker loads it) bridged frames pass the root namespace's iptables FORWARD
chain, whose policy Docker sets to DROP, so hosts on a root bridge could not talk to
each other. A fresh namespace has no rules.

Names carry the creating process's id, so two runs never collide, and a run killed
before it cleaned up is recognised (its process is gone) and cleaned up by the next.
Processes run in a host with `ip netns exec <ns> <command>`, which execs the command
in place: the Popen pid is the command's own.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field

_NETNS = re.compile(r"^frt-(\d+)-\w+$")
_LINK = re.compile(r"^fr(\d+)r$")  # the root leg; the rest live (and die) in the switch


class NamespacesUnavailable(RuntimeError):
    """This machine does not let the test create network namespaces (not root)."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}")
    return result


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def check_available() -> None:
    """Raise NamespacesUnavailable with the reason when namespaces cannot be made here."""
    if os.geteuid() != 0:
        raise NamespacesUnavailable("network namespaces need root (ip netns add); this test runs as a user")
    probe = f"frt-{os.getpid()}-probe"
    try:
        added = _ip("netns", "add", probe, check=False)
    except FileNotFoundError as exc:
        raise NamespacesUnavailable("the `ip` command (iproute2) is not installed") from exc
    if added.returncode != 0:
        raise NamespacesUnavailable(f"ip netns add is not permitted here: {added.stderr.strip()}")
    _ip("netns", "delete", probe, check=False)


def clean_stale() -> list[str]:
    """Delete namespaces and links that a run which no longer exists left behind."""
    removed = []
    for line in _ip("netns", "list").stdout.splitlines():
        name = line.split()[0] if line.strip() else ""
        match = _NETNS.match(name)
        if match and not _alive(int(match.group(1))):
            _ip("netns", "delete", name, check=False)
            removed.append(name)
    for line in _ip("-o", "link", "show").stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0] if ":" in line else ""
        match = _LINK.match(name)
        if match and not _alive(int(match.group(1))):
            _ip("link", "delete", name, check=False)
            removed.append(name)
    return removed


@dataclass
class Network:
    """A private /24 with one namespace per host; `root_address` is the test's side."""

    hosts: tuple[str, ...] = ("jm", "tm1", "tm2")
    tag: str = field(default_factory=lambda: str(os.getpid()))
    addresses: dict[str, str] = field(default_factory=dict)
    namespaces: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # 10.231.0.0/16 is unlikely to be routed anywhere here; the third byte keeps
        # concurrent runs of different processes apart.
        self.subnet = f"10.231.{int(self.tag) % 250}"
        self.root_address = f"{self.subnet}.254"
        self.switch = f"frt-{self.tag}-switch"
        self.bridge = f"frb{self.tag}"

    def prefix(self, host: str) -> list[str]:
        """The command prefix that runs a program inside `host`."""
        return ["ip", "netns", "exec", self.namespaces[host]]

    def up(self) -> Network:
        check_available()
        clean_stale()
        try:
            self._build()
        except BaseException:
            self.down()
            raise
        return self

    def _build(self) -> None:
        _ip("netns", "add", self.switch)
        _ip("-n", self.switch, "link", "set", "lo", "up")
        _ip("-n", self.switch, "link", "add", self.bridge, "type", "bridge")
        _ip("-n", self.switch, "link", "set", self.bridge, "up")
        # The test's own leg: a veth from the root namespace into the switch.
        root_leg, root_peer = f"fr{self.tag}r", f"frv{self.tag}r"
        _ip("link", "add", root_leg, "type", "veth", "peer", "name", root_peer, "netns", self.switch)
        _ip("addr", "add", f"{self.root_address}/24", "dev", root_leg)
        _ip("link", "set", root_leg, "up")
        _ip("-n", self.switch, "link", "set", root_peer, "master", self.bridge, "up")
        for index, host in enumerate(self.hosts, start=1):
            namespace = self.namespaces[host] = f"frt-{self.tag}-{host}"
            address = self.addresses[host] = f"{self.subnet}.{index}"
            leg = f"frv{self.tag}h{index}"
            _ip("netns", "add", namespace)
            _ip("-n", namespace, "link", "set", "lo", "up")
            _ip("-n", self.switch, "link", "add", leg, "type", "veth", "peer", "name", "eth0", "netns", namespace)
            _ip("-n", self.switch, "link", "set", leg, "master", self.bridge, "up")
            _ip("-n", namespace, "addr", "add", f"{address}/24", "dev", "eth0")
            _ip("-n", namespace, "link", "set", "eth0", "up")

    def down(self) -> None:
        """Remove everything this network made; safe to call twice or after a half build.
        Deleting a namespace deletes the veth ends in it, and with them their peers."""
        for namespace in [*self.namespaces.values(), self.switch]:
            _ip("netns", "delete", namespace, check=False)
        _ip("link", "delete", f"fr{self.tag}r", check=False)


@contextlib.contextmanager
def network(hosts: tuple[str, ...] = ("jm", "tm1", "tm2")) -> Iterator[Network]:
    net = Network(hosts).up()
    try:
        yield net
    finally:
        net.down()
