"""A stand-in vLLM for evaluate's flow around the server: what evaluate keeps when a later pass cannot run.

A ``vllm.entrypoints.openai.api_server`` module on PYTHONPATH, started by the stage's own
``VLLMServer`` like the real one, in a fraction of a second and without loading a model. It answers
what evaluate reads: ``/health``, ``/version``, ``/v1/models``, ``/metrics`` (the speculative-decoding
counters: every chat adds one draft of k tokens fully accepted and one wholly rejected, so the
acceptance length is 1 + k/2) and ``/v1/chat/completions`` with ``return_token_ids`` (the prompt ids:
the last user message's UTF-8 bytes folded into the target's vocabulary, as a server's own render;
the completion: its first ids again). Without ``per_request_steps`` it is a vLLM older than the flag (its
engine arguments do not name it), which eagle3 starts without it. A request whose ``chat_template_kwargs`` turn thinking off (a value
false or ``disabled``) is drafted wholly wrong (no draft kept, acceptance length 1.0), as a drafter trained on
thinking traces can be without them; ``STANDIN_REQUESTS`` names a file each request's switches go to. By default it answers as a server without
``--per-request-spec-decode-metrics`` (SGLang, a vLLM started without it): ``metrics`` is null.
``per_request_steps=True`` has it honour the flag as vLLM 0.32 does: each answer then carries the same
two steps in ``metrics.speculative_decoding`` (the shape of ``RequestSpecDecodeMetrics.to_dict``,
``vllm/v1/metrics/stats.py``) and is exactly as long as they make it (the prefill's token, then k + 1
and 1). It tests eagle3's flow, never vLLM: the real server's figures are tests/stages/evaluate/test_vllm.py's.
"""

from __future__ import annotations

import sys
from pathlib import Path

from eagle3_core.serve.config import ServeConfig

API_SERVER = r"""
import argparse, http.server, json, os, threading
p = argparse.ArgumentParser()
p.add_argument("--model"); p.add_argument("--host"); p.add_argument("--port", type=int)
p.add_argument("--speculative-config", default=None)
p.add_argument("--per-request-spec-decode-metrics", default="none")
args, _ = p.parse_known_args()
honoured = os.environ.get("STANDIN_PER_REQUEST_STEPS") == "1"  # else a server without the flag
detailed = honoured and args.per_request_spec_decode_metrics == "detailed"
config = json.load(open(args.model + "/config.json"))
vocab = (config.get("text_config") or config)["vocab_size"]
k = json.loads(args.speculative_config)["num_speculative_tokens"] if args.speculative_config else 0
counts = {"drafts": 0, "draft_tokens": 0, "accepted": 0, "generated": 0, "kept_whole": 0}
lock = threading.Lock()
print("INFO [api_utils.py:347]  version 0.32.0 (eagle3 test stand-in)", flush=True)

def metrics():
    lines = [f"vllm:spec_decode_num_drafts_total {counts['drafts']}",
             f"vllm:spec_decode_num_draft_tokens_total {counts['draft_tokens']}",
             f"vllm:spec_decode_num_accepted_tokens_total {counts['accepted']}",
             f"vllm:generation_tokens_total {counts['generated']}"]
    lines += [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{position="{i}"}} {counts["kept_whole"]}'
              for i in range(k)]
    return "\n".join(lines) + "\n"

def steps(kept):  # the two drafts /metrics counts for each chat: `kept` (k, or 0 with thinking off), then none
    return {"mean_acceptance_length": 1 + kept / 2, "draft_acceptance_rate": kept / (2 * k),
            "acceptance_histogram": [1 + (kept == 0)] + [0] * (k - 1) + [int(kept == k)], "num_spec_steps": 2,
            "num_accepted_draft_tokens": kept, "num_draft_tokens": 2 * k, "num_spec_tokens": k,
            "per_step_accepted": [kept, 0], "per_step_drafted": [k, k]}

class H(http.server.BaseHTTPRequestHandler):
    def reply(self, body, kind="application/json"):
        data = (body if isinstance(body, str) else json.dumps(body)).encode()
        self.send_response(200); self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data))); self.end_headers(); self.wfile.write(data)
    def do_GET(self):
        if self.path == "/health": return self.reply("")
        if self.path == "/version": return self.reply({"version": "0.32.0"})
        if self.path == "/v1/models":
            return self.reply({"data": [{"id": args.model, "root": args.model, "max_model_len": 4096}]})
        if self.path == "/metrics": return self.reply(metrics(), "text/plain")
        self.send_response(404); self.end_headers()
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        text = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
        switches = body.get("chat_template_kwargs") or {}
        thinking_off = any(v is False or v == "disabled" for v in switches.values())
        kept = 0 if thinking_off else k  # a drafter trained on thinking that drafts nothing right without it
        prompt = [1 + b % (vocab - 1) for b in text.encode()]
        completion = prompt[: min(body.get("max_tokens") or 8, kept + 3 if detailed else 8)]
        if os.environ.get("STANDIN_REQUESTS"):
            with lock, open(os.environ["STANDIN_REQUESTS"], "a") as log:
                log.write(json.dumps({"speculative": bool(k), "chat_template_kwargs": switches}) + "\n")
        with lock:
            counts["generated"] += len(completion)
            if k:
                counts["drafts"] += 2; counts["draft_tokens"] += 2 * k; counts["accepted"] += kept
                counts["kept_whole"] += kept == k
        self.reply({
            "id": "chat-1", "object": "chat.completion", "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "length", "token_ids": completion,
                         "message": {"role": "assistant", "content": "fine", "reasoning": None}}],
            "prompt_token_ids": prompt if body.get("return_token_ids") else None,
            "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(completion)},
            "metrics": {"speculative_decoding": steps(kept)} if detailed and k else None,
        })
    def log_message(self, *a):
        pass

http.server.ThreadingHTTPServer((args.host, args.port), H).serve_forever()
"""


def standin_vllm(tmp_path: Path, monkeypatch, per_request_steps: bool = False) -> ServeConfig:
    """A ``ServeConfig`` that starts the stand-in (this Python, the stand-in package on PYTHONPATH); with
    ``per_request_steps``, a stand-in that honours ``--per-request-spec-decode-metrics detailed``."""
    monkeypatch.setenv("STANDIN_PER_REQUEST_STEPS", "1" if per_request_steps else "0")
    site = tmp_path / "standin-site"
    package = site / "vllm" / "entrypoints" / "openai"
    package.mkdir(parents=True)
    for folder in (package, package.parent, package.parent.parent):
        (folder / "__init__.py").write_text("")
    (package / "api_server.py").write_text(API_SERVER)
    if per_request_steps:  # a vLLM that knows the flag names it among its engine arguments, as 0.32 does
        (package.parent.parent / "engine").mkdir()
        (package.parent.parent / "engine" / "arg_utils.py").write_text("per_request_spec_decode_metrics = None\n")
    monkeypatch.setenv("PYTHONPATH", str(site))
    return ServeConfig(python=sys.executable, device="cpu", startup_timeout=30, log_dir=str(tmp_path / "logs"))
