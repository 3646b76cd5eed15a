"""The socket frame channel (ARCHITECTURE.md, "Frame channels"). When the boot frame offers one,
the entrypoint connects to the bridge's Unix socket (bind-mounted into the sandbox), sends the
session token, and moves every frame there: conmon and the engine leave the path of each frame.
Any failure leaves frames on stdio; the reason is reported in the `ready` frame."""
import json
import socket

from .protocol import hello_frame

CONNECT_TIMEOUT = 2.0  # seconds; the host waits for the connection or a stdio `ready`


def connect(offer):
    """Returns (fd, None) for a connected, authenticated socket, or (None, reason)."""
    return connect_with(offer, "channel",
                        lambda token: json.dumps(hello_frame(token)).encode("ascii") + b"\n")


def connect_with(offer, what, greeting):
    """(fd, None) for a Unix socket connected to the offer's `path` that was sent
    `greeting(token)` first, or (None, reason); `what` names the offer in a reason. The frame
    channel's and the egress proxy's (egress.py) connections are made this way."""
    if not isinstance(offer, dict):
        return None, "malformed %s offer" % what
    path, token = offer.get("path"), offer.get("token")
    if not isinstance(path, str) or not isinstance(token, str):
        return None, "malformed %s offer" % what
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT)
        sock.connect(path)
        sock.sendall(greeting(token))
        sock.settimeout(None)
        return sock.detach(), None
    except (OSError, ValueError) as exc:
        sock.close()
        return None, "%s: %s" % (path, exc)
