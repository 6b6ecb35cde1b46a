"""The Host names the REST API answers to, so that no web page reaches it by DNS rebinding.

A page on another site cannot call the REST API: the browser marks its requests
cross-site (Origin), and the guard refuses those. DNS rebinding takes that away: a
page at `http://evil.example:8081`, whose name the attacker then points at 127.0.0.1,
sends its requests to the JobManager on the victim's own machine, and to the browser
(and to an Origin check that compares Origin with Host) they are same-origin. On a
loopback cluster without a token (a MiniCluster, the Airflow connection's embedded
cluster) that is running code on the victim's machine. What the page cannot change is
the Host header: it names the attacker's domain. So the REST server answers only the
names it is reachable as:

- an IP address, any (`127.0.0.1`, `[::1]`, `10.0.0.5`): rebinding needs a name whose
  address the attacker controls; a page whose origin is an address was loaded from
  that address, that is from this server;
- `localhost`. Names under `.localhost` are not: browsers resolve them to loopback
  themselves (RFC 6761), but some resolvers ask DNS, where a hostile network's server
  may answer. List one in `rest.allowed-hosts` to use it;
- `rest.address` and `rest.bind-address` when they are names; with `rest.bind-address`
  a wildcard (`0.0.0.0`, `::`), also this machine's host name and fully qualified name
  (a container reached by its name: `jobmanager:8081` in docker/docker-compose.yaml);
- each entry of `rest.allowed-hosts` (a YAML list, or separated by `,`): `name` (any
  port), `name:port` (that port only), `*.example.com` (any name under example.com), or
  `*`, which turns the check off: then any page a browser with access to the port loads
  can use the API through rebinding, so only behind a proxy that checks Host itself.

The port of a built-in name is not checked: a load balancer or a port mapping may
change it, and a page on another port of the same name is another origin anyway.
A request without a Host header (HTTP/1.0) is answered: browsers always send one, so
it cannot come from a rebound page.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass

from flink_runtime import configuration as cfg
from flink_runtime.configuration import Configuration, ConfigurationError

WILDCARD_ADDRESSES = frozenset({"0.0.0.0", "::", "[::]", ""})
# A Host header (RFC 9110 7.2): a bracketed IPv6 address or a name/IPv4, then maybe a port.
_HOST = re.compile(r"^(?:\[(?P<ipv6>[0-9A-Za-z:.%_-]+)\]|(?P<name>[^\s:\[\]/@?#]+))(?::(?P<port>\d{1,5}))?$")
_NAME = re.compile(r"^[a-z0-9_-]+(?:\.[a-z0-9_-]+)*$")


def split_host(value: str) -> tuple[str, int | None] | None:
    """(lower-case name or address without brackets or trailing dot, port) of a Host
    header value; None when it is not one."""
    match = _HOST.match(value.strip())
    if match is None:
        return None
    name = (match.group("ipv6") or match.group("name")).lower()
    if name.endswith(".") and len(name) > 1:
        name = name[:-1]  # "localhost." is localhost
    port = match.group("port")
    return name, int(port) if port is not None else None


def is_ip_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class AllowedHosts:
    """Which Host headers the REST API answers; IP addresses and `localhost` always."""

    names: frozenset[str] = frozenset()  # any port
    names_with_port: frozenset[tuple[str, int]] = frozenset()
    domains: tuple[str, ...] = ()  # ".example.com" for "*.example.com"
    any_host: bool = False

    @classmethod
    def of(cls, entries: Iterable[str], where: str = cfg.REST_ALLOWED_HOSTS.key) -> AllowedHosts:
        """From `rest.allowed-hosts` entries (see the module's doc); a malformed one raises,
        naming `where`."""
        names: set[str] = set()
        with_port: set[tuple[str, int]] = set()
        domains: list[str] = []
        any_host = False
        for raw in entries:
            entry = raw.strip()
            if entry == "*":
                any_host = True
                continue
            wildcard = entry.startswith("*.")
            parsed = split_host(entry[2:] if wildcard else entry)
            if parsed is None or not (_NAME.match(parsed[0]) or is_ip_address(parsed[0])):
                raise ConfigurationError(
                    f"{where}: {entry!r} is not a host name. Give names as a client's URL has them: "
                    "'lb.example.com' (any port), 'lb.example.com:443', '*.example.com', or '*' for any "
                    "name (no protection against DNS rebinding)."
                )
            name, port = parsed
            if wildcard:
                domains.append("." + name)
            elif port is None:
                names.add(name)
            else:
                with_port.add((name, port))
        return cls(frozenset(names), frozenset(with_port), tuple(domains), any_host)

    @classmethod
    def from_config(cls, config: Configuration) -> AllowedHosts:
        """The names a JobManager configured so is reachable as (see the module's doc)."""
        own = [config.get(cfg.REST_ADDRESS), config.get(cfg.REST_BIND_ADDRESS)]
        if config.get(cfg.REST_BIND_ADDRESS).strip() in WILDCARD_ADDRESSES:
            # Reached from other machines or containers by whatever name they know it by.
            own += [socket.gethostname(), socket.getfqdn()]
        allowed = cls.of(config.get(cfg.REST_ALLOWED_HOSTS))
        own_names = {parsed[0] for name in own if name.strip() and (parsed := split_host(name)) is not None}
        return cls(allowed.names | own_names, allowed.names_with_port, allowed.domains, allowed.any_host)

    def allows(self, host: str | None) -> bool:
        if self.any_host or not host:
            return True  # not a browser (which always sends a Host) when there is none
        parsed = split_host(host)
        if parsed is None:
            return False
        name, port = parsed
        return (
            name == "localhost"
            or is_ip_address(name)
            or name in self.names
            or (port is not None and (name, port) in self.names_with_port)
            or name.endswith(self.domains)
        )

    def refusal(self, host: str) -> str:
        """The 403 message for a request whose Host this server does not answer to."""
        return (
            f"Host {host[:200]!r} is not a name this JobManager answers to. If clients reach it by that "
            f"name (a load balancer, a DNS alias), add the name to {cfg.REST_ALLOWED_HOSTS.key} (or set "
            f"{cfg.REST_ADDRESS.key} to it); other names are refused so that no web page can reach the "
            "REST API through DNS rebinding."
        )
