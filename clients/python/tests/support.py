"""A real ``cordon serve`` for the tests: the binary named by CORDON_BIN (required: the
tests fail without it), a temp CORDON_HOME (its SQLite store), a loopback ephemeral port;
its ready line ("cordon serve: listening on http://ADDR") is the synchronisation point."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Dict, List, Optional


def cordon_bin() -> str:
    """The cordon binary; raises (the test fails, never skips) when CORDON_BIN is unset."""
    binary = os.environ.get("CORDON_BIN")
    if not binary:
        raise RuntimeError("CORDON_BIN is not set: point it at a built cordon binary (scripts/test does)")
    if not os.access(binary, os.X_OK):
        raise RuntimeError(f"CORDON_BIN={binary} is not an executable file")
    return binary


class Server:
    def __init__(self, policy: str, args: Optional[List[str]] = None) -> None:
        self.bin = cordon_bin()
        self.dir = Path(tempfile.mkdtemp(prefix="cordon-client-py-"))
        self.home = self.dir / "home"
        config = self.dir / "cordon-server.toml"
        config.write_text(policy)
        self.stderr = open(self.dir / "serve.stderr", "w+b")
        self.process = subprocess.Popen(
            [self.bin, "serve", "--config", str(config), "--listen", "127.0.0.1:0",
             "--retry-backoff", "50ms", *(args or [])],
            env={**os.environ, "CORDON_HOME": str(self.home)},
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self.stderr,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().decode()
        match = re.fullmatch(r"cordon serve: listening on (http://\S+)", line.strip())
        if not match:
            self.stop()
            raise RuntimeError(f"no ready line from cordon serve: {line!r}: {self.log()}")
        self.url = match.group(1)

    def log(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")

    def token(self, project: str, scopes: str = "submit,read") -> str:
        """A token made by ``cordon token create``."""
        out = subprocess.run(
            [self.bin, "token", "create", "--project", project, "--scope", scopes],
            env={**os.environ, "CORDON_HOME": str(self.home)},
            capture_output=True, text=True, check=True,
        )
        return out.stdout.strip()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", *args],
        cwd=cwd, capture_output=True, text=True, check=True,
    ).stdout


def make_repo(parent: Path, files: Dict[str, str]) -> Path:
    """A repository on branch main with ``files`` in one commit."""
    repo = parent / "repo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "init")
    return repo


class CuttingProxy:
    """A loopback TCP proxy in front of ``target`` that records each request's head and,
    while ``cut_next_stream`` is set, breaks the next live-log connection right after it has
    passed on the first ``output`` event: a dropped connection, mid-stream."""

    def __init__(self, target: str) -> None:
        host, port = target.removeprefix("http://").rsplit(":", 1)
        self.target = (host, int(port))
        self.heads: List[str] = []
        self.cut_next_stream = False
        self.cuts = 0
        self.lock = threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.sockets: List[socket.socket] = []
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self.sockets += [client, upstream]
            cutting = threading.Event()
            threading.Thread(target=self._requests, args=(client, upstream, cutting), daemon=True).start()
            threading.Thread(target=self._answers, args=(upstream, client, cutting), daemon=True).start()

    def _requests(self, client: socket.socket, upstream: socket.socket, cutting: threading.Event) -> None:
        # The requests on this connection (keep-alive: one after another), parsed just
        # enough to find each head; bodies are skipped by their Content-Length.
        pending = b""
        body_left = 0
        try:
            while True:
                chunk = client.recv(65536)
                if not chunk:
                    break
                pending += chunk
                while True:
                    if body_left:
                        skip = min(body_left, len(pending))
                        pending, body_left = pending[skip:], body_left - skip
                        if body_left:
                            break
                    end = pending.find(b"\r\n\r\n")
                    if end < 0:
                        break
                    head = pending[:end].decode("latin-1")
                    pending = pending[end + 4:]
                    length = re.search(r"\r\ncontent-length: *(\d+)", head, re.I)
                    body_left = int(length.group(1)) if length else 0
                    with self.lock:
                        self.heads.append(head)
                        if re.match(r"GET /v1/jobs/[^/ ]+/events ", head) and self.cut_next_stream:
                            self.cut_next_stream = False
                            cutting.set()
                upstream.sendall(chunk)
        except OSError:
            pass
        finally:
            _close(client, upstream)

    def _answers(self, upstream: socket.socket, client: socket.socket, cutting: threading.Event) -> None:
        seen = b""
        try:
            while True:
                chunk = upstream.recv(65536)
                if not chunk:
                    break
                if cutting.is_set():
                    seen += chunk
                    if b"event: output" in seen:
                        client.sendall(chunk)
                        with self.lock:
                            self.cuts += 1
                        # The stream breaks off mid-body.
                        break
                client.sendall(chunk)
        except OSError:
            pass
        finally:
            _close(client, upstream)

    def stop(self) -> None:
        self.closed = True
        self.listener.close()
        for s in self.sockets:
            _close(s)


def _close(*sockets: socket.socket) -> None:
    for s in sockets:
        # shutdown first: it wakes the other thread's recv on it (a close alone would not,
        # and the connection would stay open until that recv returned).
        for end in (lambda: s.shutdown(socket.SHUT_RDWR), s.close):
            try:
                end()
            except OSError:
                pass
