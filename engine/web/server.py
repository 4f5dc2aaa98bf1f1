"""Serving the page with uvicorn: in the foreground (``reportflow ui``) or in a thread beside
``serve``'s loops (``serve --ui-port``)."""

from __future__ import annotations

import logging
import threading

import uvicorn

from engine.core import clock, logs
from engine.runtime import Runtime
from engine.web import auth
from engine.web.app import create_app

log = logging.getLogger(__name__)


def _server(rt: Runtime, host: str, port: int) -> uvicorn.Server:
    token = auth.read_token(rt.config.ui.token_env)
    auth.check_bind(host, token, rt.config.ui.token_env)
    app = create_app(rt, token=token, host=host)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False, lifespan="off")
    return uvicorn.Server(config)


def bound_port(server: uvicorn.Server) -> int:
    """The port a started server listens on (the one the OS chose for port 0)."""
    for listener in server.servers:
        for sock in listener.sockets:
            return int(sock.getsockname()[1])
    raise RuntimeError("the server is not listening")


def run(rt: Runtime, host: str, port: int) -> None:
    """Serve in the foreground until SIGINT/SIGTERM (uvicorn's own handlers)."""
    server = _server(rt, host, port)
    mode = "read-write with a token" if auth.read_token(rt.config.ui.token_env) else "read-only (no token set)"
    logs.event(log, logging.INFO, "ui_listening", host=host, port=port, mode=mode)
    server.run()


class Background:
    """The page in a daemon thread; ``stop()`` asks uvicorn to finish and waits for it."""

    def __init__(self, rt: Runtime, host: str, port: int) -> None:
        self.server = _server(rt, host, port)
        self.thread = threading.Thread(target=self.server.run, name="ui", daemon=True)

    def start(self, timeout_s: float = 10.0) -> int:
        """Start and wait until the socket listens; returns the bound port (useful with port 0)."""
        self.thread.start()
        deadline = clock.REAL.monotonic() + timeout_s  # real time, whatever clock the runtime simulates
        while not self.server.started:
            if not self.thread.is_alive() or clock.REAL.monotonic() > deadline:
                raise RuntimeError("the web page did not start (is the port in use?)")
            self.thread.join(0.02)
        port = bound_port(self.server)
        logs.event(log, logging.INFO, "ui_listening", port=port)
        return port

    def stop(self) -> None:
        """Ask uvicorn to finish and wait for its thread (at most 10 s)."""
        self.server.should_exit = True
        self.thread.join(10)
