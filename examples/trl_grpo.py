"""Train a language model with TRL's GRPOTrainer, with a labtwin lab as the reward function.

    python examples/trl_grpo.py --model path/to/local/instruct-model --warmstart-steps 0
    python examples/trl_grpo.py                     # tiny local model, ~5 minutes on 2 CPU cores
    python examples/trl_grpo.py --smoke             # seconds, as CI runs it

Each prompt is the lab's brief and asks for one experiment as a
``propose_experiment`` tool call; ``labtwin.agents.interop.lab_reward_function``
measures every completion of a batch in one simulator call and returns the
lab's score (the reactor: measured yield of B), or a penalty for a completion
without a valid call. Prints the mean reward and share of valid calls before
training, after the optional warm start and after GRPO.

By default the model is labtwin's tiny local model (``save_tiny`` into a
temporary folder; nothing is downloaded), first warm-started with a few
supervised steps of TRL's ``SFTTrainer`` on random valid calls. That shows
the plumbing, not learning: in minutes of CPU the 0.1 M-parameter model does
not learn to write a whole valid call at temperature 1, so every completion
gets the penalty, groups have zero reward variance and GRPO has no signal
(labtwin's own trainer, ``labtwin.agents.train``, constrains decoding to the
tool schema for that reason). A real instruct model that can write tool calls
gets a reward signal from the first step. Needs ``trl`` (``pip install trl``);
without it the example says so and exits.
"""

from __future__ import annotations

import argparse
import tempfile
import warnings
from pathlib import Path

import numpy as np
import torch


def random_proposals(task, n: int, seed: int) -> list[str]:
    """Valid ``propose_experiment`` calls for random experiments (warm-start targets)."""
    from labtwin.tools import PROPOSE, format_tool_call

    rng = np.random.default_rng(seed)
    calls = []
    for _ in range(n):
        experiment = task.numeric_view.to_experiment(
            rng.uniform(-1, 1, task.numeric_view.space.shape)
        )
        arguments = {k: float(f"{v:.3g}") for k, v in experiment.model_dump().items()}
        calls.append(format_tool_call(PROPOSE, arguments))
    return calls


def evaluate(
    model, tokenizer, prompt, reward, samples: int, max_tokens: int
) -> tuple[float, float]:
    """Mean reward and share of valid proposals of ``samples`` sampled completions."""
    from labtwin.agents.policy import HFPolicy

    policy = HFPolicy(model, tokenizer, device="cpu")
    completions = policy.sample([prompt], n=samples, max_new_tokens=max_tokens, seed=0)
    scores = reward([c.text for c in completions])
    valid = np.mean([m.status != "invalid" for m in reward.last_measurements])
    model.train()
    return float(np.mean(scores)), float(valid)


def _last(trainer, key: str) -> str:
    values = [log[key] for log in trainer.state.log_history if key in log]
    return f"{values[-1]:.3f}" if values else "n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="BatchReactor-v1")
    parser.add_argument("--model", default="tiny", help="'tiny' or a local model folder")
    parser.add_argument("--warmstart-steps", type=int, default=100, help="SFT steps (0: none)")
    parser.add_argument("--steps", type=int, default=20, help="GRPO steps")
    parser.add_argument("--group-size", type=int, default=8, help="completions per prompt")
    parser.add_argument("--prompts-per-step", type=int, default=2)
    parser.add_argument("--max-completion-length", type=int, default=96)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--eval-samples", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs/trl_grpo"))
    parser.add_argument("--smoke", action="store_true", help="seconds: 2 tiny steps of each")
    args = parser.parse_args()
    if args.smoke:
        args.warmstart_steps, args.steps, args.group_size, args.prompts_per_step = 2, 2, 4, 1
        args.max_completion_length, args.eval_samples = 8, 4
    try:
        import datasets
        import transformers
        from datasets import Dataset
        from transformers import AutoModelForCausalLM, AutoTokenizer, PrinterCallback
        from trl import GRPOConfig, GRPOTrainer, SFTConfig, SFTTrainer
    except ImportError as err:
        print(f"skipped: this example needs TRL ({err}); pip install trl")
        return

    import labtwin
    from labtwin.agents.interop import lab_prompt, lab_reward_function
    from labtwin.agents.policy import save_tiny

    torch.set_num_threads(1)  # the tiny model's matrices are too small for a second thread
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    datasets.disable_progress_bars()
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    task = labtwin.load_task(args.task)
    prompt = lab_prompt(task)
    reward = lab_reward_function(task, seed=args.seed)
    evaluation = lab_reward_function(task, seed=10_000)  # its own noise, apart from training's
    args.out.mkdir(parents=True, exist_ok=True)
    common = dict(use_cpu=True, report_to="none", save_strategy="no", seed=args.seed)
    common.update(logging_steps=1, disable_tqdm=True, bf16=False)

    with tempfile.TemporaryDirectory() as tmp:
        path = save_tiny(Path(tmp) / "tiny", seed=args.seed) if args.model == "tiny" else args.model
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(
            path, local_files_only=True, dtype=torch.float32
        )
        rows = []
        for label in ("untrained", "warm start", "GRPO"):
            if label == "warm start" and args.warmstart_steps:
                calls = random_proposals(task, 8 * args.warmstart_steps, args.seed)
                data = Dataset.from_list(
                    [
                        {"prompt": prompt, "completion": [{"role": "assistant", "content": c}]}
                        for c in calls
                    ]
                )
                sft = SFTConfig(
                    output_dir=str(args.out / "sft"),
                    max_steps=args.warmstart_steps,
                    per_device_train_batch_size=8,
                    learning_rate=3e-3,
                    **common,
                )
                trainer = SFTTrainer(
                    model=model, args=sft, train_dataset=data, processing_class=tokenizer
                )
                trainer.remove_callback(PrinterCallback)
                trainer.train()
                print(
                    f"warm start: {args.warmstart_steps} SFT steps, last loss {_last(trainer, 'loss')}"
                )
            if label == "GRPO":
                batch = args.group_size * args.prompts_per_step
                grpo = GRPOConfig(
                    output_dir=str(args.out / "grpo"),
                    max_steps=args.steps,
                    per_device_train_batch_size=batch,
                    num_generations=args.group_size,
                    max_completion_length=args.max_completion_length,
                    learning_rate=args.learning_rate,
                    beta=0.0,  # no reference model
                    temperature=1.0,
                    **common,
                )
                data = Dataset.from_list([{"prompt": prompt}] * (batch * args.steps))
                trainer = GRPOTrainer(
                    model=model,
                    reward_funcs=reward,
                    args=grpo,
                    train_dataset=data,
                    processing_class=tokenizer,
                )
                trainer.remove_callback(PrinterCallback)
                trainer.train()
                model = trainer.model
                for log in trainer.state.log_history:
                    if "reward" in log:
                        print(
                            f"GRPO step {log['step']:>3}: reward {log['reward']:+.4f} "
                            f"(std {log['reward_std']:.3f}), valid calls "
                            f"{log.get(reward.__name__ + '/valid_fraction', float('nan')):.0%}"
                        )
            if label == "warm start" and not args.warmstart_steps:
                continue
            mean, valid = evaluate(
                model, tokenizer, prompt, evaluation, args.eval_samples, args.max_completion_length
            )
            rows.append((label, mean, valid))
        trainer.save_model(str(args.out / "model"))

    print(f"{task.id}: one proposed experiment per completion, scored by the lab")
    print(f"  {'policy':<11} {'mean reward':>11}  {'valid calls':>11}")
    for label, mean, valid in rows:
        print(f"  {label:<11} {mean:>+11.4f}  {valid:>11.0%}")
    print(f"model: {args.out / 'model'}")


if __name__ == "__main__":
    main()
