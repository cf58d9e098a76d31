"""The spool protocol over HTTP: a standing engine named by URL instead of a shared folder.

The engine keeps writing its own spool folder (``eagle3_core.spool.folder``); ``serve_http``
puts that folder behind a stdlib ``ThreadingHTTPServer``, and the trainer's ``UnitFetcher``
copies each unit into the trainer's own local spool, so the trainer reads a folder either way.

    GET  /status                   the engine's producer.json, plus its target and layers (JSON)
    POST /requests                 the trainer's requests.json; 409 + {"error"} for another
                                   target or other layers, else the engine serves this run
    GET  /units/<run_id>/<index>   the unit's safetensors bytes, deleted on the engine side once
                                   sent whole; 202 + status JSON while it is not written yet
                                   (the server holds the request up to WAIT_S first); 410 when a
                                   newer run replaced this one

Budgets: the engine's spool never holds more than the requests' budget (units go as they are
fetched, pinned ones too: the trainer keeps its copies); the fetcher waits for room in the
local spool under the same budget before it fetches a unit, so both sides stay bounded.
The engine reads the requested samples from ``sequences_dir`` itself: that path must be
visible to the engine (the same host, or shared storage).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from eagle3_core.errors import ConfigError, EndpointError
from eagle3_core.run.fsio import atomic_path
from eagle3_core.spool.folder import Requests, Spool, SpoolFeeder, StatusFile, Stopped, unit_name, wait_for_room
from eagle3_core.spool.producer import refuse_other_target

WAIT_S = 2.0  # a unit request is held this long before "not yet" (a long poll)
CHUNK = 1 << 20
START = "python -m eagle3_core.stages.train.online_engine serve --spool DIR --target PATH --layers a,b,c --max-tokens N"


def is_url(endpoint: str | None) -> bool:
    return endpoint is not None and endpoint.startswith(("http://", "https://"))


# ---- the engine side ---------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    server: _SpoolServer

    def log_message(self, *args) -> None:  # one line per unit fetched would drown the engine's log
        pass

    def _json(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        parts = self.path.strip("/").split("/")
        if parts == ["status"]:
            return self._json(200, self.server.status())
        if len(parts) == 3 and parts[0] == "units" and parts[2].isdigit():
            return self._unit(parts[1], int(parts[2]))
        return self._json(404, {"error": f"no such path {self.path}"})

    def do_POST(self) -> None:
        if self.path.strip("/") != "requests":
            return self._json(404, {"error": f"no such path {self.path}"})
        try:
            requests = Requests.model_validate_json(self.rfile.read(int(self.headers["Content-Length"])))
            self.server.refuse(requests)
        except (ConfigError, ValueError) as exc:
            return self._json(409, {"error": str(exc)})
        self.server.spool.clear()  # the newest run is the only reader left (as in the folder protocol)
        self.server.spool.write_requests(requests)
        return self._json(200, {"run_id": requests.run_id})

    def _unit(self, run_id: str, index: int) -> None:
        from eagle3_core.contracts.hidden import read_metadata

        spool, deadline = self.server.spool, time.monotonic() + WAIT_S
        path = spool.unit_path(index)
        while time.monotonic() < deadline:
            current = spool.read_requests()
            if current is not None and current.run_id != run_id:
                return self._json(410, {"error": f"a newer run ({current.run_id}) replaced run {run_id}"})
            meta = read_metadata(path) if path.exists() else None
            if meta is not None and meta.get("run_id") == run_id:
                return self._send_file(path)
            time.sleep(0.05)
        return self._json(202, self.server.status())

    def _send_file(self, path: Path) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(path.stat().st_size))
        self.end_headers()
        with open(path, "rb") as fh:
            while chunk := fh.read(CHUNK):
                self.wfile.write(chunk)
        self.wfile.flush()
        path.unlink(missing_ok=True)  # sent whole: the trainer holds it now (a broken send raised above)


class _SpoolServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], spool: Spool, target_path: str, layers: list[int]) -> None:
        super().__init__(address, _Handler)
        self.spool, self.target_path, self.layers = spool, target_path, layers

    def status(self) -> dict:
        return {**self.spool.status(), "target": self.target_path, "layers": self.layers}

    def refuse(self, requests: Requests) -> None:
        refuse_other_target(requests, self.target_path, self.layers)


def serve_http(spool: Spool, address: str, target_path: str, layers: list[int]) -> _SpoolServer:
    """Start serving ``spool`` on ``HOST:PORT`` (port 0: any free one) in a daemon thread."""
    host, _, port = address.rpartition(":")
    server = _SpoolServer((host or "127.0.0.1", int(port)), spool, target_path, layers)
    threading.Thread(target=server.serve_forever, name="eagle3-spool-http", daemon=True).start()
    return server


# ---- the trainer side --------------------------------------------------------------------------


def engine_status(url: str, timeout_s: float = 10.0) -> dict:
    """The engine's /status, or one line naming the URL and the command that starts an engine."""
    import httpx

    try:
        response = httpx.get(f"{url.rstrip('/')}/status", timeout=timeout_s)
        response.raise_for_status()
        return response.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise EndpointError(
            f"no hidden-state engine answers at {url} ({type(exc).__name__})",
            fix=f"start one there with `{START} --http HOST:PORT`, or leave "
            "train.online_vllm.endpoint unset to let the stage start the engine",
        ) from None


class UnitFetcher(SpoolFeeder):
    """Copies the run's units from the engine's URL into the local spool, in order, under its budget.

    Waits for the trainer's requests (``run_id``) in the local spool, posts them, then fetches unit
    after unit. It writes the local producer.json the reader watches: a heartbeat on each answer
    from the engine, the engine's own failure, or "unreachable" after ``timeout_s`` without one.
    """

    def __init__(self, url: str, spool_dir: str | Path, run_id: str, timeout_s: float) -> None:
        super().__init__(spool_dir, "eagle3-spool-fetch")
        self.url, self.run_id, self.timeout_s, self.engine = url.rstrip("/"), run_id, timeout_s, {}
        self.answered = time.monotonic()
        self.status = StatusFile(self.spool, run_id)

    def _run(self) -> None:
        import httpx

        try:
            with httpx.Client(timeout=WAIT_S + 30) as client:
                requests = self._requests()
                posted = self._call(lambda: client.post(f"{self.url}/requests", content=requests.model_dump_json()))
                if posted.status_code != 200:
                    raise EndpointError(f"the engine at {self.url} refused the run: {posted.json().get('error')}")
                self.status.update(state="running")
                for index in range(len(requests.units)):
                    wait_for_room(self.spool, requests.unit_size(index), requests.budget_bytes, self.stop)
                    while not self._fetch(client, index):
                        pass
                    self.status.update(units=index + 1)
            self.status.update(state="done")
        except Stopped:
            return
        except Exception as exc:  # noqa: BLE001 - the reader sees it in producer.json, the stage here
            self.error = exc
            self.status.update(state="failed", error=str(exc))

    def _requests(self) -> Requests:
        while not self.stop.wait(0.05):
            try:
                requests = self.spool.read_requests()
            except (OSError, ValueError):
                continue
            if requests is not None and requests.run_id == self.run_id:
                return requests
        raise Stopped()

    def _call(self, send):
        """One request, retried while the engine is unreachable, up to ``timeout_s`` without an answer."""
        import httpx

        while True:
            if self.stop.is_set():
                raise Stopped()
            try:
                response = send()
            except httpx.TransportError as exc:
                if time.monotonic() - self.answered > self.timeout_s:
                    raise EndpointError(
                        f"the hidden-state engine at {self.url} is unreachable ({type(exc).__name__})",
                        fix=f"restart it with `{START} --http HOST:PORT`",
                    ) from None
                self.stop.wait(1.0)
                continue
            self.answered = time.monotonic()
            self.status.update()  # the engine answered: the reader's heartbeat
            return response

    def _fetch(self, client, index: int) -> bool:
        """Copy unit ``index`` into the local spool; False while the engine has not written it yet."""
        response = self._call(
            lambda: client.send(client.build_request("GET", f"{self.url}/units/{self.run_id}/{index}"), stream=True)
        )
        try:
            if response.status_code == 202:
                self.engine = json.loads(response.read())
                if self.engine.get("run_id") == self.run_id and self.engine.get("state") == "failed":
                    raise EndpointError(f"{self.engine.get('error')}")
                return False
            if response.status_code != 200:
                raise EndpointError(
                    f"the engine at {self.url} refused unit {index}: {json.loads(response.read()).get('error')}"
                )
            with atomic_path(self.spool.root / unit_name(index)) as tmp, open(tmp, "wb") as fh:
                for chunk in response.iter_bytes(CHUNK):
                    fh.write(chunk)
        finally:
            response.close()
        return True
