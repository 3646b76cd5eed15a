"""A second container engine reachable only over TCP+TLS, for the remote-engine tests (no tests
here): a private dockerd listening on 127.0.0.1 with `--tlsverify`, its CA, server and client
certificates made by openssl, and a small sandbox image made from this machine's Debian python
(stdlib only: all the entrypoint needs), so the test does not copy the 500 MB sandbox image.

The test talks to the engine through its own admin unix socket (to load the image and list
containers); the bridge gets only the TLS address, `DOCKER_TLS_VERIFY=1` and `DOCKER_CERT_PATH`.
"""

from __future__ import annotations

import io
import os
import shutil
import signal
import socket
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

IMAGE = "mcb-remote-test:host-python"
# Debian's python (not a pyenv or venv one on PATH): /usr/bin/python3 -> python3.X, whose standard
# library is /usr/lib/python3.X.
HOST_PYTHON = os.path.realpath("/usr/bin/python3")
TOOLS = ("dockerd", "docker", "openssl")
START_WAIT = 60  # seconds dockerd gets to answer on its admin socket


def missing_tools() -> list[str]:
    """The programs this engine needs that are not on PATH (and Debian's python)."""
    gone = [t for t in TOOLS if shutil.which(t) is None]
    if not os.access(HOST_PYTHON, os.X_OK):
        gone.append(HOST_PYTHON)
    return gone


def _openssl(*args: str, cwd: Path) -> None:
    p = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, f"openssl {' '.join(args)} failed: {p.stderr}"


def make_ca(d: Path, name: str) -> None:
    """`d/ca-key.pem` and `d/ca.pem`: a CA called `name`."""
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "ca-key.pem", cwd=d)
    _openssl("req", "-x509", "-new", "-key", "ca-key.pem", "-subj", f"/CN={name}", "-days", "2",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign",
             "-out", "ca.pem", cwd=d)


def issue(ca: Path, out: Path, stem: str, cn: str, ext: str) -> None:
    """`out/<stem>-key.pem` and `out/<stem>.pem`, signed by the CA in `ca`, with extensions `ext`."""
    ext_file = out / f"{stem}.ext"
    ext_file.write_text(ext)
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", f"{stem}-key.pem", cwd=out)
    _openssl("req", "-new", "-key", f"{stem}-key.pem", "-subj", f"/CN={cn}", "-out", f"{stem}.csr", cwd=out)
    _openssl("x509", "-req", "-in", f"{stem}.csr", "-CA", str(ca / "ca.pem"), "-CAkey", str(ca / "ca-key.pem"),
             "-CAcreateserial", "-days", "2", "-extfile", str(ext_file), "-out", f"{stem}.pem", cwd=out)


def client_dir(ca: Path, out: Path) -> Path:
    """A DOCKER_CERT_PATH folder: `ca.pem` (the CA that signed the server), `cert.pem`, `key.pem`."""
    out.mkdir()
    issue(ca, out, "client", "mcp-code-bridge test client", "extendedKeyUsage=clientAuth\n")
    (out / "cert.pem").write_bytes((out / "client.pem").read_bytes())
    (out / "key.pem").write_bytes((out / "client-key.pem").read_bytes())
    shutil.copy(ca / "ca.pem", out / "ca.pem")
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _libraries(binaries: list[str]) -> set[str]:
    """Every shared library `ldd` names for `binaries`, the loader included."""
    libs: set[str] = set()
    for b in binaries:
        out = subprocess.run(["ldd", b], capture_output=True, text=True, timeout=30).stdout
        for line in out.splitlines():
            parts = line.split()
            path = parts[2] if "=>" in parts and len(parts) > 2 else parts[0] if parts else ""
            if path.startswith("/"):
                libs.add(path)
    return libs


def host_python_tar() -> bytes:
    """A root filesystem tar holding Debian's python3, its standard library and the libraries
    they load."""
    stdlib = Path("/usr/lib") / os.path.basename(HOST_PYTHON)
    dynload = sorted(str(p) for p in (stdlib / "lib-dynload").glob("*.so"))
    skip = {"dist-packages", "site-packages", "test", "idlelib", "tkinter", "turtledemo", "ensurepip"}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        def add(path: str, name: str | None = None) -> None:
            info = tar.gettarinfo(os.path.realpath(path), arcname=(name or path).lstrip("/"))
            with open(os.path.realpath(path), "rb") as f:
                tar.addfile(info, f)

        add(HOST_PYTHON)
        link = tarfile.TarInfo("usr/bin/python3")
        link.type, link.linkname = tarfile.SYMTYPE, os.path.basename(HOST_PYTHON)
        tar.addfile(link)
        for lib in sorted(_libraries([HOST_PYTHON, *dynload])):
            add(lib)
        for root, dirs, files in os.walk(stdlib):
            dirs[:] = [d for d in dirs if d not in skip]
            for f in files:
                p = os.path.join(root, f)
                if os.path.exists(p):
                    add(p)
    return buf.getvalue()


class TlsEngine:
    """A private dockerd: admin unix socket for the test, TCP+TLS on 127.0.0.1 for the bridge."""

    def __init__(self) -> None:
        # Short: dockerd's containerd puts unix sockets under the exec root.
        self.dir = Path(tempfile.mkdtemp(prefix="mcbtls-"))
        self.ca = self.dir / "ca"
        self.ca.mkdir()
        make_ca(self.ca, "mcp-code-bridge test CA")
        issue(self.ca, self.ca, "server", "localhost",
              "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
        self.certs = client_dir(self.ca, self.dir / "client")
        self.port = _free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.admin = f"unix://{self.dir}/admin.sock"
        self.log = self.dir / "dockerd.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> TlsEngine:
        cmd = [
            "dockerd", "--host", self.admin, "--host", self.address,
            "--tlsverify", "--tlscacert", str(self.ca / "ca.pem"),
            "--tlscert", str(self.ca / "server.pem"), "--tlskey", str(self.ca / "server-key.pem"),
            "--data-root", str(self.dir / "data"), "--exec-root", str(self.dir / "exec"),
            "--pidfile", str(self.dir / "docker.pid"),
            "--iptables=false", "--ip6tables=false", "--bridge=none",
        ]
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + START_WAIT
        while self.docker("version", check=False).returncode != 0:
            assert self.proc.poll() is None, f"dockerd exited {self.proc.returncode}\n{self.log_tail()}"
            assert time.monotonic() < deadline, f"dockerd did not answer\n{self.log_tail()}"
            time.sleep(0.5)
        p = subprocess.run(["docker", "-H", self.admin, "import", "-", IMAGE], input=host_python_tar(),
                           capture_output=True, timeout=300)
        assert p.returncode == 0, f"docker import failed: {p.stderr.decode(errors='replace')}"
        return self

    def docker(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """The docker CLI on the admin socket."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("DOCKER_")}
        p = subprocess.run(["docker", "-H", self.admin, *args], capture_output=True, text=True, timeout=120, env=env)
        if check:
            assert p.returncode == 0, f"docker {' '.join(args)} failed: {p.stderr}"
        return p

    def containers(self, label: str) -> list[str]:
        """Full ids of this engine's containers (any state) carrying `label` (`key=value`)."""
        out = self.docker("ps", "-a", "-q", "--no-trunc", "--filter", f"label={label}").stdout
        return [line for line in out.split() if line]

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no dockerd log)"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            for cid in self.containers("mcp-code-bridge"):
                self.docker("rm", "-f", cid, check=False)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)
