"""``python -m ferrograd.serve_bundle``: 127.0.0.1 only, and the MIME types
browsers require (an ES module served as anything but JavaScript is refused)."""

from __future__ import annotations

import threading
import urllib.request

from ferrograd import serve_bundle


def test_serves_bundle_files_with_their_mime_types(tmp_path):
    files = {
        "model.js": "text/javascript",
        "manifest.json": "application/json",
        "shaders/000.wgsl": "text/wgsl",
        "data.bin": "application/octet-stream",
        "index.html": "text/html",
    }
    for name in files:
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(b"x")
    srv = serve_bundle.server(tmp_path)
    assert srv.server_address[0] == "127.0.0.1"
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        for name, mime in files.items():
            with urllib.request.urlopen(f"http://127.0.0.1:{srv.server_address[1]}/{name}", timeout=10) as r:
                assert r.headers["Content-Type"].split(";")[0] == mime, name
                assert r.read() == b"x"
    finally:
        srv.shutdown()
        srv.server_close()
