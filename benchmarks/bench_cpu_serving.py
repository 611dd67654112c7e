"""vLLM-CPU serving against this machine's limits, in each dtype, side by side.

For each dtype (float32 and bfloat16 by default) the table shows:

- **GEMM peak**: GFLOP/s of the served model's linear layers (q/k/v, o, gate/up, down) at
  the prompt batch, through the same dispatch vLLM-CPU's linear layers use
  (``dispatch_cpu_unquantized_gemm``: oneDNN, or the torch fallback where oneDNN cannot
  make the layer) and, for comparison, ``torch.nn.functional.linear``;
- **prompt tokens/s**: the demo's STS-B one-pass beliefs (its own sampling function, four
  items in flight), counting only the tokens computed (vLLM's ``prompt_tokens`` less
  ``prompt_tokens_cached``), against the roofline ``GEMM peak / (2 x non-embedding
  parameters)`` FLOPs per token;
- **generation tokens/s** at batch 1, 8 and 32 (one request with ``n`` = batch,
  ``ignore_eos``), against the lower of the FLOP bound ``GEMM peak / (2 x parameters incl.
  the LM head)`` and the bandwidth bound ``batch x bandwidth / weight
  bytes per step`` (memory bandwidth measured here, reading a 1 GiB tensor);
- the server's start time and resident memory.

Attention FLOPs are left out of the bounds (prompts of about 100 tokens). Run it with the
AVX2 path forced too, on a machine with AVX-512::

    python benchmarks/bench_cpu_serving.py
    bash benchmarks/force_avx2.sh .venv/bin/python benchmarks/bench_cpu_serving.py

Needs the ``cpu`` extra and the shared data folder (STS-B dev).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

from taskcal_agents._dtype import choose_dtype, cpu_flags
from taskcal_agents.models import prepare_model
from taskcal_agents.serving import VLLMServer

DTYPES = ("float32", "bfloat16")
FORCING = ("ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY")
"""The variables ``force_avx2.sh`` sets (shown when set)."""
PROMPT_M = 256
"""Rows of the GEMM peak's input: prompt tokens computed in one engine step."""


def param_counts(folder: Path) -> dict[str, int]:
    """Parameters of a safetensors folder: embedding, LM head, and the rest."""
    counts = {"embedding": 0, "lm_head": 0, "body": 0}
    for file in folder.glob("*.safetensors"):
        with file.open("rb") as handle:
            size = int.from_bytes(handle.read(8), "little")
            header = json.loads(handle.read(size))
        for name, meta in header.items():
            if name == "__metadata__":
                continue
            n = 1
            for dim in meta["shape"]:
                n *= dim
            if "embed_tokens" in name:
                counts["embedding"] += n
            else:
                counts["lm_head" if "lm_head" in name else "body"] += n
    if not counts["lm_head"]:  # tied embeddings: the head is the embedding matrix
        counts["lm_head"] = counts["embedding"]
    return counts


def layer_shapes(folder: Path) -> list[tuple[int, int]]:
    """``(out, in)`` of one decoder layer's linear layers (q/k/v fused, gate/up fused)."""
    config = json.loads((folder / "config.json").read_text())
    h, inter = config["hidden_size"], config["intermediate_size"]
    heads = config["num_attention_heads"]
    kv = config.get("num_key_value_heads", heads)
    head_dim = config.get("head_dim", h // heads)
    return [(h + 2 * kv * head_dim, h), (h, heads * head_dim), (2 * inter, h), (h, inter)]


def gemm_rate(dtype_name: str, shapes: list[tuple[int, int]], m: int, path: str) -> float:
    """GFLOP/s over *shapes* at *m* rows, through vLLM's dispatch or plain torch."""
    import torch

    dtype = getattr(torch, dtype_name)
    flops = seconds = 0.0
    for n_out, k in shapes:
        layer = torch.nn.Linear(k, n_out, bias=False).to(dtype)
        x = torch.randn(m, k).to(dtype)
        if path == "vllm":
            from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

            dispatch_cpu_unquantized_gemm(layer, remove_weight=False)
            linear = layer.cpu_linear
        else:
            linear = torch.nn.functional.linear
        linear(x, layer.weight, None)
        times = []
        for _ in range(7):
            start = time.perf_counter()
            linear(x, layer.weight, None)
            times.append(time.perf_counter() - start)
        flops += 2.0 * m * k * n_out
        seconds += statistics.median(times)
    return flops / seconds / 1e9


def bandwidth_gbs() -> float:
    """Read bandwidth, GB/s: the best of five sums over a 1 GiB float32 tensor."""
    import torch

    data = torch.ones(1 << 28)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        data.sum()
        best = min(best, time.perf_counter() - start)
    return data.numel() * 4 / best / 1e9


def metrics(root: str) -> dict[str, float]:
    """vLLM's token counters (summed over label sets)."""
    text = httpx.get(f"{root}/metrics", timeout=30).text
    out: dict[str, float] = {}
    for name in ("prompt_tokens", "prompt_tokens_cached", "generation_tokens"):
        pattern = rf"^vllm:{name}_total(?:\{{[^}}]*\}})? ([0-9.e+]+)$"
        out[name] = sum(float(v) for v in re.findall(pattern, text, flags=re.M))
    return out


def group_rss_gb(pid: int) -> float:
    """Peak resident memory (VmHWM) of the largest process of the server's group, GB."""
    largest = 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if os.getpgid(int(proc.name)) != pid:
                continue
            status = (proc / "status").read_text()
        except (OSError, ProcessLookupError):
            continue
        found = re.search(r"VmHWM:\s+(\d+) kB", status)
        largest = max(largest, int(found.group(1)) if found else 0)
    return largest * 1024 / 1e9


def prompt_phase(server: VLLMServer, items: int, out_dir: Path) -> dict[str, float]:
    """The demo's STS-B one-pass beliefs on *items* items: computed prompt tokens/s."""
    from taskcal_agents.sampling import OpenAISampler
    from taskcal_agents.workflow._demo import PSEUDO_SAMPLES, stsb_items, stsb_task
    from taskcal_agents.workflow._demo_parts import sample_part
    from taskcal_agents.workflow._runner import SampleSettings

    settings = SampleSettings(
        n=PSEUDO_SAMPLES, greedy=False, model=server.model_name, belief="one_pass"
    )
    data = stsb_items(items, seed=99)
    path = out_dir / f"stsb.{server.dtype_choice.dtype}.samples.jsonl"
    path.unlink(missing_ok=True)  # a reused --out-dir must not resume: every item is timed
    with OpenAISampler(server.base_url, server.model_name, timeout=600) as sampler:

        def sample(items: list[Any]) -> None:
            sample_part(
                "stsb",
                stsb_task(),
                items,
                sampler,
                path,
                settings,
                "stsb",
                concurrency=4,
                observe=lambda *a: lambda k: None,
            )

        sample(data[:4])  # warm-up: four items, not counted
        before, start = metrics(server.root_url), time.perf_counter()
        sample(data)  # resumes: the other items
        seconds = time.perf_counter() - start
    after = metrics(server.root_url)
    prompt = after["prompt_tokens"] - before["prompt_tokens"]
    cached = after["prompt_tokens_cached"] - before["prompt_tokens_cached"]
    return {
        "seconds": seconds,
        "items": len(data) - 4,
        "prompt_tokens": prompt,
        "cached_tokens": cached,
        "computed_per_s": (prompt - cached) / seconds,
        "s_per_item": seconds / (len(data) - 4),
    }


def generation_phase(server: VLLMServer, batch: int, tokens: int) -> dict[str, float]:
    """One request with ``n=batch`` and ``ignore_eos``: generated tokens/s."""
    body = {
        "model": server.model_name,
        "messages": [{"role": "user", "content": "Write a long story about a lighthouse."}],
        "n": batch,
        "max_tokens": tokens,
        "temperature": 0.7,
        "ignore_eos": True,
    }
    url = f"{server.base_url}/chat/completions"
    httpx.post(url, json=body | {"n": 1, "max_tokens": 4}, timeout=600).raise_for_status()
    before, start = metrics(server.root_url), time.perf_counter()
    httpx.post(url, json=body, timeout=600).raise_for_status()
    seconds = time.perf_counter() - start
    generated = metrics(server.root_url)["generation_tokens"] - before["generation_tokens"]
    return {"seconds": seconds, "tokens": generated, "per_s": generated / seconds}


def measure(args: argparse.Namespace) -> dict[str, Any]:
    folder = prepare_model(args.model)
    params = param_counts(folder)
    shapes = layer_shapes(folder)
    flags = cpu_flags()
    machine = {
        "cpu": next(
            (
                line.split(":", 1)[1].strip()
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")
            ),
            "?",
        ),
        "cpus": len(os.sched_getaffinity(0)),
        "avx512f": "avx512f" in flags,
        "avx512_bf16": "avx512_bf16" in flags,
        "amx_bf16": "amx_bf16" in flags,
        "forced": {k: os.environ[k] for k in FORCING if k in os.environ},
        "default_dtype": str(choose_dtype(python=sys.executable)),
        "bandwidth_gbs": bandwidth_gbs(),
    }
    rows: dict[str, Any] = {}
    for dtype in args.dtypes:
        rows[dtype] = {
            "gemm_vllm": gemm_rate(dtype, shapes, PROMPT_M, "vllm"),
            "gemm_torch": gemm_rate(dtype, shapes, PROMPT_M, "torch"),
        }
    for dtype in args.dtypes:
        row = rows[dtype]
        log = Path(args.out_dir) / f"vllm.{dtype}.log"
        start = time.perf_counter()
        server = VLLMServer(
            args.model, dtype=dtype, log_path=log, extra_args=args.vllm_args, env=args.env
        )
        with server:
            row["start_s"] = time.perf_counter() - start
            row["log_fallback"] = "Failed to create oneDNN linear" in log.read_text()
            row["prompt"] = prompt_phase(server, args.items, Path(args.out_dir))
            row["generation"] = {b: generation_phase(server, b, args.tokens) for b in args.batches}
            row["rss_gb"] = group_rss_gb(server.pid or 0)
    bytes_per = {"float32": 4, "bfloat16": 2, "float16": 2}
    for dtype, row in rows.items():
        prompt_flops = 2.0 * params["body"]
        row["prompt_roofline"] = row["gemm_vllm"] * 1e9 / prompt_flops
        row["prompt_share"] = row["prompt"]["computed_per_s"] / row["prompt_roofline"]
        step_bytes = (params["body"] + params["lm_head"]) * bytes_per[dtype]
        gen_flops = 2.0 * (params["body"] + params["lm_head"])
        for b, gen in row["generation"].items():
            flop_bound = row["gemm_vllm"] * 1e9 / gen_flops
            bw_bound = b * machine["bandwidth_gbs"] * 1e9 / step_bytes
            gen["roofline"] = min(flop_bound, bw_bound)
            gen["bound"] = "FLOPs" if flop_bound < bw_bound else "bandwidth"
            gen["share"] = gen["per_s"] / gen["roofline"]
    return {"model": args.model, "params": params, "machine": machine, "dtypes": rows}


def show(result: dict[str, Any], console: Console) -> None:
    m = result["machine"]
    forced = ", ".join(f"{k}={v}" for k, v in m["forced"].items()) or "none"
    console.print(
        f"{m['cpu']}, {m['cpus']} CPUs; avx512f {m['avx512f']}, avx512_bf16 "
        f"{m['avx512_bf16']}, amx_bf16 {m['amx_bf16']}; forced: {forced}; read bandwidth "
        f"{m['bandwidth_gbs']:.1f} GB/s\ndefault dtype: {m['default_dtype']}"
    )
    dtypes = list(result["dtypes"])
    table = Table(title=f"vLLM-CPU serving, {result['model']}", title_justify="left")
    table.add_column("measure")
    for dtype in dtypes:
        table.add_column(dtype, justify="right")

    def row(label: str, fmt: Any) -> None:
        table.add_row(label, *(fmt(result["dtypes"][d]) for d in dtypes))

    row("GEMM, vLLM's linear (GFLOP/s)", lambda r: f"{r['gemm_vllm']:.0f}")
    row("GEMM, torch linear (GFLOP/s)", lambda r: f"{r['gemm_torch']:.0f}")
    row("oneDNN fallback in log", lambda r: "yes" if r["log_fallback"] else "no")
    row("server start (s)", lambda r: f"{r['start_s']:.0f}")
    row("server peak RSS (GB)", lambda r: f"{r['rss_gb']:.1f}")
    row("STS-B one-pass (s/item)", lambda r: f"{r['prompt']['s_per_item']:.2f}")
    row(
        "prompt cached (share)",
        lambda r: f"{r['prompt']['cached_tokens'] / max(r['prompt']['prompt_tokens'], 1):.0%}",
    )
    row(
        "prompt tok/s (roofline, share)",
        lambda r: (
            f"{r['prompt']['computed_per_s']:.0f} "
            f"({r['prompt_roofline']:.0f}, {r['prompt_share']:.0%})"
        ),
    )
    for b in next(iter(result["dtypes"].values()))["generation"]:
        row(
            f"gen tok/s, batch {b} (roofline, share)",
            lambda r, b=b: (
                f"{r['generation'][b]['per_s']:.0f} "
                f"({r['generation'][b]['roofline']:.0f} {r['generation'][b]['bound']}, "
                f"{r['generation'][b]['share']:.0%})"
            ),
        )
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    parser.add_argument("--dtypes", type=lambda s: s.split(","), default=list(DTYPES))
    parser.add_argument("--items", type=int, default=64, help="STS-B items, the first 4 a warm-up")
    parser.add_argument(
        "--batches", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8, 32]
    )
    parser.add_argument("--tokens", type=int, default=64, help="tokens generated per sequence")
    parser.add_argument("--out-dir", default=None, help="logs and samples (default: a temp dir)")
    parser.add_argument("--json", default=None, help="write the result here")
    parser.add_argument(
        "--env",
        type=lambda s: dict([s.split("=", 1)]),
        action="append",
        default=[],
        help="KEY=VALUE for the server's environment (repeatable)",
    )
    parser.add_argument("vllm_args", nargs="*", help="more vLLM arguments (after --)")
    args = parser.parse_args()
    args.env = {k: v for pair in args.env for k, v in pair.items()}
    args.out_dir = args.out_dir or tempfile.mkdtemp(prefix="bench-cpu-serving-")
    Path(args.out_dir).mkdir(parents=True, exist_ok=True)
    result = measure(args)
    show(result, Console(width=120))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, default=str))


if __name__ == "__main__":
    main()
