"""A loopback HTTP server standing in for the Hugging Face hub, answering as the hub answers a client that may not
read a repository: a gated one (401, `X-Error-Code: GatedRepo`, "Access to model ... is restricted") and one that
does not exist or is private (401, `X-Error-Code: RepoNotFound`, "Repository not found"). huggingface_hub's own
code turns those answers into `GatedRepoError` and `RepositoryNotFoundError`.

huggingface_hub reads its endpoint once, at import (`HF_ENDPOINT`); `FakeHub.serve(monkeypatch)` points the
imported module at the server for one test (`constants.ENDPOINT` and the download URL template made from it), with
downloads on and an empty cache."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


@dataclass
class FakeHub:
    """Repositories by id (`gated`); every other id is missing. `paths` records every request the server got."""

    gated: tuple[str, ...] = ()
    paths: list[str] = field(default_factory=list)

    def __enter__(self) -> FakeHub:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                hub.paths.append(self.path)
                repo = next((r for r in hub.gated if f"/{r}/" in self.path), None)
                if repo is not None:
                    self._refuse("GatedRepo", f"Access to model {repo} is restricted. You must have access to it "
                                              "and be authenticated to access it. Please log in.")
                else:
                    self._refuse("RepoNotFound", "Repository not found")

            do_HEAD = do_GET  # noqa: N815

            def _refuse(self, code: str, message: str) -> None:
                body = json.dumps({"error": message}).encode()
                self.send_response(401)
                self.send_header("Content-Type", "application/json")
                self.send_header("X-Error-Code", code)
                self.send_header("X-Error-Message", message)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def log_message(self, *args) -> None:  # quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def serve(self, monkeypatch, cache: Path) -> None:
        """Point the imported huggingface_hub at this server, online, with `cache` as its (empty) cache."""
        from huggingface_hub import constants

        monkeypatch.setattr(constants, "ENDPOINT", self.url)
        monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", self.url + "/{repo_id}/resolve/{revision}/{filename}")
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
