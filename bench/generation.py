"""Rollout generation: the Hugging Face path against vLLM on the same tiny model and prompts.

Both backends sample ``--samples`` completions of up to ``--tokens`` new tokens for each of
``--prompts`` chat prompts of a lab (its brief and first turn, with the lab's tools), at
temperature 1, which is what a GRPO step asks of them. Completions end at the model's
stop token, so the two backends' samples differ in length: compare tokens per second.
Each backend runs ``--repeats`` times after a warm-up; the table gives min / median /
max seconds, completions and tokens per second, and the ratio vLLM / HF, in one run.

vLLM needs its own environment (README, "vLLM"); run from that one:

    python bench/generation.py                # tiny Qwen2, hidden 256, 4 heads of 64
    python bench/generation.py --device cuda  # HF on the GPU; vLLM picks its own device
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import torch
from _report import add_markdown_option, markdown_section

import labtwin
from labtwin.agents.policy import HFPolicy, save_tiny
from labtwin.tools import ChatLabEnv


def prompts(lab: str, count: int, policy: HFPolicy) -> list[list[int]]:
    chat = ChatLabEnv(labtwin.load_task(lab, budget=2))
    conversations = chat.reset(list(range(count)))
    return policy.encode_chats(conversations, tools=chat.tools)


def timed(fn, repeats: int) -> tuple[list[float], list]:
    fn()  # warm-up (kernel selection, caches)
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return times, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lab", default="BatchReactor-v1")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--samples", type=int, default=8, help="completions per prompt")
    parser.add_argument("--tokens", type=int, default=96, help="new tokens at most")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu", help="device of the HF model")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, seconds")
    add_markdown_option(parser)
    args = parser.parse_args()
    if args.smoke:
        args.prompts, args.samples, args.tokens, args.repeats = 2, 2, 8, 1
    _run(args)


def _run(args: argparse.Namespace) -> None:
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    from labtwin.agents.policy.vllm_policy import VLLMPolicy

    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        # the trainer's vLLM-compatible tiny model: 4 heads of 64 (docs/training.md)
        path = save_tiny(
            f"{tmp}/tiny",
            hidden_size=256,
            intermediate_size=512,
            num_attention_heads=4,
            num_key_value_heads=4,
        )
        hf = HFPolicy.from_pretrained(path, device=args.device, dtype=torch.float32)
        ids = prompts(args.lab, args.prompts, hf)
        kw = dict(n=args.samples, max_new_tokens=args.tokens, temperature=1.0, seed=0)
        rows = {}
        with torch.no_grad():
            rows["HF transformers"] = timed(lambda: hf.generate(ids, **kw), args.repeats)
        engine = VLLMPolicy(str(path), seed=0, max_model_len=2048)
        rows["vLLM"] = timed(lambda: engine.generate(ids, **kw), args.repeats)

    n_prompt = sum(len(p) for p in ids) / len(ids)
    # the section holds the results, not vLLM's engine log (which goes to stdout)
    with markdown_section(args.markdown, TITLE):
        report(args, rows, n_prompt)


TITLE = "Rollout generation on the tiny model: Hugging Face transformers vs vLLM"


def report(args: argparse.Namespace, rows: dict, n_prompt: float) -> None:
    print(
        "Sampling the same lab briefs with the same tiny Qwen2 model (hidden 256, 4 heads of "
        "64) in float32 on the CPU: Hugging Face `generate` on the training model and an "
        "in-process vLLM engine (eager, 256 MiB KV cache), each timed over "
        f"{args.repeats} rounds after a warm-up in the same run; rates from the median round."
    )
    print(
        f"\n{args.lab}: {args.prompts} prompts (mean {n_prompt:.0f} tokens) x {args.samples} "
        f"samples, up to {args.tokens} new tokens, temperature 1; torch "
        f"{torch.__version__}, {torch.get_num_threads()} threads\n"
    )
    print("| backend | s min / median / max | completions/s | tokens/s | mean tokens |")
    print("| --- | --- | --- | --- | --- |")
    base = None
    for name, (times, out) in rows.items():
        tokens = sum(len(c.completion_ids) for c in out)
        median = statistics.median(times)
        per_s = tokens / median
        base = base or per_s
        print(
            f"| {name} | {min(times):.2f} / {median:.2f} / {max(times):.2f} | "
            f"{len(out) / median:.1f} | {per_s:.0f} ({per_s / base:.2f}x) | "
            f"{tokens / len(out):.1f} |"
        )
    print(f"\nReading. vLLM generates {per_s / base:.1f}x the tokens per second of the HF path.")


if __name__ == "__main__":
    main()
