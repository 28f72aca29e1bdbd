"""Host names a client can look up: DNS's length limits, checked where a URL is read.

Python's socket layer encodes a host name with the ``idna`` codec before resolving it, and
that raises ``UnicodeError`` ("label too long", "label empty or too long") for a name DNS
cannot hold. httpx passes the error through as it is (it is no ``httpx.HTTPError``), so a
300-character host in a fleet's ``agent_url``, ``bench run --url`` or ``--prometheus`` was a
traceback at the first request (file fuzzer, #38). Every reader of such a URL refuses it
with :func:`dns_name_problem` first.
"""

from __future__ import annotations

#: RFC 1035: a label is at most 63 octets, a name at most 253 characters written out.
MAX_LABEL = 63
MAX_NAME = 253


def dns_name_problem(host: str) -> str | None:
    """Why ``host`` (a URL's host, brackets removed) is no name a resolver takes, or None.

    An IP address (IPv6: it holds a ``:``) is not a DNS name and passes; a trailing dot (the
    root) is allowed; a non-ASCII name is also encoded as the resolver encodes it.
    """
    if ":" in host:
        return None
    name = host[:-1] if host.endswith(".") else host
    if len(name) > MAX_NAME:
        return f"the host name is {len(name)} characters, over DNS's {MAX_NAME}"
    for label in name.split("."):
        if not label:
            return "the host name has an empty label (two dots in a row, or a leading dot)"
        if len(label) > MAX_LABEL:
            return f"a label of the host name is {len(label)} characters, over DNS's {MAX_LABEL}"
    if not name.isascii():
        try:
            name.encode("idna")  # what the socket layer does: a long punycode label fails
        except UnicodeError:
            return "the host name's IDNA (punycode) form is no DNS name (a label over 63)"
    return None


__all__ = ["MAX_LABEL", "MAX_NAME", "dns_name_problem"]
