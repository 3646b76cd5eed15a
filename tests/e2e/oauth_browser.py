#!/usr/bin/env python3
"""A `$BROWSER` for the sign-in tests: opens the URL (its one argument) and follows the redirects,
as a person's browser would once the sign-in page approves at once. With OAUTH_BROWSER_LOG set,
appends the URL it was given and how it ended to that file. With OAUTH_BROWSER_FORGE=1 it
changes the `state` it was given, as a forged callback would carry another."""

import os
import sys
import urllib.error
import urllib.parse
import urllib.request


def main() -> None:
    url = sys.argv[1]
    if os.environ.get("OAUTH_BROWSER_FORGE") == "1":
        parts = urllib.parse.urlsplit(url)
        query = [(k, "forged-state" if k == "state" else v) for k, v in urllib.parse.parse_qsl(parts.query)]
        url = urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))
    log = os.environ.get("OAUTH_BROWSER_LOG")
    try:
        with urllib.request.urlopen(url, timeout=20) as r:
            outcome = f"{r.status} {r.geturl()}"
    except urllib.error.HTTPError as e:
        outcome = f"{e.code} {e.geturl()}"
    except Exception as e:  # noqa: BLE001 - any failure is the outcome
        outcome = f"failed {type(e).__name__}"
    if log:
        with open(log, "a") as f:
            f.write(f"{len(sys.argv) - 1} {url}\n{outcome}\n")


if __name__ == "__main__":
    main()
