"""Serve a folder (a WebGPU bundle written by ``Graph.export_webgpu``, or a
page that loads one) over HTTP on 127.0.0.1, for a browser on this machine:

    python -m ferrograd.serve_bundle DIR [--port PORT]

ES modules and ``fetch`` do not work from ``file://``; WebGPU needs a secure
context, which ``http://127.0.0.1`` is. Files are served with the MIME types
browsers require (``text/javascript`` for ``.js``, ``application/json``,
``text/wgsl``, ``application/octet-stream`` for ``.bin``).
"""

from __future__ import annotations

import argparse
import functools
import http.server
from pathlib import Path
from typing import Any

MIME = {
    ".js": "text/javascript",
    ".mjs": "text/javascript",
    ".json": "application/json",
    ".wgsl": "text/wgsl",
    ".bin": "application/octet-stream",
    ".html": "text/html",
    ".css": "text/css",
}


class Handler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, **MIME}

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


def server(directory: str | Path, port: int = 0) -> http.server.ThreadingHTTPServer:
    """An HTTP server for ``directory`` on 127.0.0.1 (``port`` 0: any free port); call ``serve_forever``."""
    handler = functools.partial(Handler, directory=str(directory))
    return http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m ferrograd.serve_bundle", description=__doc__.split("\n\n")[0])
    p.add_argument("dir", help="the folder to serve")
    p.add_argument("--port", type=int, default=8000)
    a = p.parse_args(argv)
    if not Path(a.dir).is_dir():
        raise SystemExit(f"{a.dir} is not a folder")
    srv = server(a.dir, a.port)
    print(f"serving {a.dir} at http://127.0.0.1:{srv.server_address[1]}/ (Ctrl-C stops)", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
