"""The share of sequences trained on the server's own ids, per server id layout, on real vLLM.

The toy target (configs/toy.yaml) is served by real vLLM on loopback. The generate stage answers
``--prompts`` training prompts with ``return_token_ids`` three ways: straight from vLLM (its
layout), and through a loopback proxy that rewrites each answer into SGLang 0.5.23's layout
(``choices[i].prompt_token_ids``, ``choices[i].response_token_ids``, ``sglext.output_ids``) or
SGLang's earlier one (``choices[i].token_ids``), as issue 22's measurement did. Reconstruct then
rebuilds every record; the figure is how many sequences are ``source: server`` and equal the
server's prompt + completion ids (it must be 100% with ids on), beside the text path's match rate.
Then ``--conversations`` rows of ``--turns`` toy questions each (``toy/conversations.py``: every
answer but the last another model's) are generated straight from vLLM with ``generate.turns:
last`` and ``all``: the same share for each, and what ``all`` costs in requests and wall time per
conversation. Finally the pre-flight suite runs against the server.

    .venv/bin/python benchmarks/bench_server_ids.py [--prompts 60] [--conversations 20 --turns 3]
"""

from __future__ import annotations

import argparse
import fcntl
import json
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_text_path import generate, preflight_line, report  # noqa: E402

VLLM_LOCK = Path("/tmp/eagle3-vllm.lock")  # the machine-wide lock of tests/fixtures/vllm.py


def sglang_layout(body: dict, legacy: bool) -> dict:
    """vLLM's answer with its ids moved where SGLang puts them."""
    prompt = body.pop("prompt_token_ids", None)
    for choice in body.get("choices", []):
        ids = choice.pop("token_ids", None)
        choice["prompt_token_ids"] = prompt
        if legacy:
            choice["token_ids"] = ids
        else:
            choice["response_token_ids"] = ids
            choice["sglext"] = {"output_ids": ids}
    return body


def start_proxy(upstream: str, legacy: bool) -> tuple[ThreadingHTTPServer, str]:
    import httpx

    class Proxy(BaseHTTPRequestHandler):
        def _relay(self, method: str) -> None:
            data = self.rfile.read(int(self.headers.get("Content-Length") or 0)) if method == "POST" else None
            headers = {"Content-Type": "application/json"} if data is not None else {}
            reply = httpx.request(method, upstream + self.path, content=data, headers=headers, timeout=300)
            payload = reply.content
            if self.path.endswith("/chat/completions") and reply.status_code == 200:
                payload = json.dumps(sglang_layout(reply.json(), legacy)).encode()
            self.send_response(reply.status_code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self):  # noqa: N802 (http.server's name)
            self._relay("GET")

        def do_POST(self):  # noqa: N802
            self._relay("POST")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"


def turns_runs(recipe, toy: Path, url: str, work: Path, count: int, turns: int) -> dict[str, Path]:
    """The same conversations generated with ``turns: last`` and ``all``: requests and wall time
    per conversation printed for each; returns their folders."""
    import time

    from eagle3_core.prompts.source import PromptSource
    from eagle3_core.stages.generate.stage import run_generate
    from eagle3_core.toy.conversations import toy_conversations

    src = work / "conversations.jsonl"
    rows = toy_conversations(toy / "prompts_train.jsonl", count, turns)
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    folders = {}
    for mode in ("last", "all"):
        gen = recipe.generate.model_copy(
            update={"base_urls": [url], "prompts": PromptSource(input=str(src)), "turns": mode}
        )
        started = time.monotonic()
        manifest = run_generate(gen, work / f"gen-turns-{mode}")
        wall = time.monotonic() - started
        print(
            f"turns: {mode}: {manifest.counts['accepted']} of {count} conversations, "
            f"{manifest.counts['requests'] / count:.2f} requests and {wall / count:.3f} s wall per conversation "
            f"({wall:.1f} s, {manifest.timings.get('probe', 0):.1f} s of it the probe)"
        )
        folders[f"turns-{mode}"] = work / f"gen-turns-{mode}"
    return folders


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=60)
    parser.add_argument("--conversations", type=int, default=20)
    parser.add_argument("--turns", type=int, default=3)
    args = parser.parse_args()

    from eagle3_core.config import PipelineConfig
    from eagle3_core.prompts.source import PromptSource
    from eagle3_core.serve import VLLMServer
    from eagle3_core.toy.build import build_toy_target

    recipe = PipelineConfig.from_yaml(ROOT / "configs" / "toy.yaml")
    toy = build_toy_target(recipe.toy)
    target = recipe.target.model_copy(update={"path": str(toy)})
    work = Path(tempfile.mkdtemp(prefix="bench-server-ids-"))
    serve = recipe.serve.model_copy(update={"port": None, "log_dir": str(work / "vllm")})
    prompts = PromptSource(input=str(toy / "prompts_train.jsonl"), max_samples=args.prompts)
    with open(VLLM_LOCK, "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with VLLMServer.for_target(target, serve) as server:
            print(f"vLLM up in {server.startup_seconds:.0f} s at {server.base_url}")
            urls = {"vllm": server.base_url}
            proxies = [start_proxy(server.base_url.removesuffix("/v1"), legacy) for legacy in (False, True)]
            urls |= {"sglang-0.5.23": proxies[0][1], "sglang-legacy": proxies[1][1]}
            gens = {}
            for name, url in urls.items():
                gen = recipe.generate.model_copy(update={"base_urls": [url], "prompts": prompts})
                gens[name] = generate(gen, work / f"gen-{name}")
            gens |= turns_runs(recipe, toy, server.base_url, work, args.conversations, args.turns)
            preflight_line(target, gen.model_copy(update={"base_urls": [server.base_url]}), server.base_url)
            for proxy, _ in proxies:
                proxy.shutdown()
    for name, gen_dir in gens.items():
        print(f"[{name}]", end=" ")
        report(0.0, target, recipe, gen_dir, work / f"seq-{name}")


if __name__ == "__main__":
    main()
