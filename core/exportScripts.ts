// The files `agent-lab export` writes beside the data: the reward function for TRL's
// GRPOTrainer, two example training scripts and the README. They are Python and Markdown
// kept as text here so the bundled CLI needs no files beside it. The TRL facts they rely on
// are cited where used; TRL cannot be installed where the lab is tested, so the tests run
// reward.py with python3, compile the scripts and check the documented fields.

/** grpo/reward.py: the lab's reward with TRL's reward-function signature. */
export const REWARD_PY = String.raw`"""Agent Lab's reward for TRL's GRPOTrainer (written by agent-lab export --format trl-grpo).

    reward = 1[normalize(answer) == normalize(gold)] - 0.05 * steps / 6

as the lab scores an episode (trainer/agent/eval.ts reward, the seed's trajectory_reward):
steps counts assistant turns; answer is the final answer of the last assistant turn, read
as the seed's parse_assistant_step reads it (a turn holding <|tool_call|> is a tool call,
not an answer; a turn without "Answer:" answers with its whole text).

TRL calls a reward function with keyword arguments: prompts, completions, completion_ids,
trainer_state and every dataset column but "prompt" (here gold and kind), and wants one
float per completion. Completions are strings (standard format) or lists of messages
(conversational format, which grpo/prompts.jsonl is).
Source: https://huggingface.co/docs/trl/grpo_trainer ("Using a custom reward function").

Single turn vs the lab's loop: GRPOTrainer samples one completion per prompt and stops at
eos (<|end|> in this export), so a completion is ONE assistant turn and nothing runs the
tools: a turn that calls search or calc ends the episode unanswered (-0.05/6). The lab's
episodes are multi-turn. To train on those, generate with a rollout_func
(https://huggingface.co/docs/trl/openenv, "environment_factory vs rollout_func") that runs
the tools between turns; TRL's own tool loop (tools= / environment_factory) parses calls
in the model's chat-template format, not the lab's <|tool_call|>{...}<|end|>. This
function scores multi-turn completions too: wire text (turns joined by
<|tool_result|>...<|end|><|assistant|>) or a message list with assistant and tool messages.
"""
import re

SYS = "<|system|>"
USER = "<|user|>"
ASST = "<|assistant|>"
END = "<|end|>"
TOOL_CALL = "<|tool_call|>"
TOOL_RESULT = "<|tool_result|>"
MAX_STEPS = 6
STEP_PENALTY = 0.05
ANSWER_RE = re.compile(r"Answer:\s*(.+?)\s*$", re.DOTALL)
_OPENERS = (SYS, USER, ASST, TOOL_RESULT)


def normalize(s):
    """Verifier-side normalisation so '4042', ' 4042 ', '4042.0' all match (the seed's, verbatim)."""
    if s is None:
        return ""
    s = s.strip().rstrip(".")
    try:
        f = float(s)
        return str(int(f)) if f.is_integer() else str(f)
    except ValueError:
        return " ".join(s.lower().split())


def final_answer(step):
    """The answer of one assistant turn (its text before <|end|>); None when it calls a tool."""
    if TOOL_CALL in step:
        return None
    m = ANSWER_RE.search(step)
    return m.group(1).strip() if m else step.strip()


def assistant_turns(completion):
    """The text of each assistant turn of a completion, without its <|end|>."""
    if isinstance(completion, str):
        # A completion continues the prompt's <|assistant|>; one that starts with a turn
        # marker is read as a whole transcript.
        text = completion if completion.startswith(_OPENERS) else ASST + completion
        turns = []
        i = text.find(ASST)
        while i >= 0:
            start = i + len(ASST)
            end = text.find(END, start)
            turns.append(text[start:] if end < 0 else text[start:end])
            i = -1 if end < 0 else text.find(ASST, end)
        return turns
    return [str(m.get("content") or "").split(END, 1)[0] for m in completion if m.get("role") == "assistant"]


def score(completion, gold, max_steps=MAX_STEPS):
    """One completion's reward; the same arithmetic, in the same order, as the lab's."""
    turns = assistant_turns(completion)
    answer = final_answer(turns[-1]) if turns else None
    solved = answer is not None and normalize(answer) == normalize(gold)
    return (1.0 if solved else 0.0) - (STEP_PENALTY * len(turns)) / max_steps


def reward(completions, gold, **kwargs):
    """The TRL reward function: one float per completion."""
    return [score(c, g) for c, g in zip(completions, gold)]
`;

/** train_sft.py: SFTTrainer on either exported form. */
export const TRAIN_SFT_PY = String.raw`"""Train a causal LM on the Agent Lab export with TRL's SFTTrainer (written by agent-lab export).

    accelerate launch --num_processes 8 train_sft.py                    # sft/prompt_completion.jsonl
    accelerate launch --num_processes 8 train_sft.py --data messages    # sft/messages.jsonl

Both supervise what the lab's loss mask supervises: each assistant turn's text (tool calls
included) and its closing <|end|>; never <|assistant|>, system, user or tool-result text.
- prompt_completion: SFTConfig(completion_only_loss=True) trains on "completion" only
  (https://huggingface.co/docs/trl/sft_trainer; dataset formats: prompt-completion).
- messages: SFTConfig(assistant_only_loss=True) trains on the {% generation %} spans of the
  chat template in tokenizer_config.json; TRL needs a template with those markers, and
  this one puts them around each assistant turn's content and its <|end|>.
Rows longer than the lab's max length (sft/manifest.json) are dropped, never truncated.
"""
import argparse
import json
import os

from datasets import load_dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig
from trl import SFTConfig, SFTTrainer

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", choices=["prompt_completion", "messages"], default="prompt_completion")
    parser.add_argument("--model", default=None, help="a causal LM to fine-tune (hub id or path); default: a small Llama from scratch")
    parser.add_argument("--output_dir", default=os.path.join(HERE, "sft-out"))
    parser.add_argument("--epochs", type=float, default=3.0)
    parser.add_argument("--learning_rate", type=float, default=3e-4)
    parser.add_argument("--batch_size", type=int, default=16, help="per device")
    args = parser.parse_args()

    with open(os.path.join(HERE, "sft", "manifest.json")) as f:
        max_len = json.load(f)["max_len"]
    tokenizer = AutoTokenizer.from_pretrained(HERE)
    dataset = load_dataset("json", data_files=os.path.join(HERE, "sft", args.data + ".jsonl"), split="train")

    def length(row):
        if args.data == "messages":
            text = tokenizer.apply_chat_template(row["messages"], tokenize=False)
        else:
            text = row["prompt"] + row["completion"]
        return len(tokenizer(text)["input_ids"])

    before = len(dataset)
    dataset = dataset.filter(lambda row: length(row) <= max_len)
    print(f"dropped {before - len(dataset)} of {before} rows longer than {max_len} tokens (never truncated)")

    if args.model:
        model = AutoModelForCausalLM.from_pretrained(args.model)
        # The lab's vocabulary is its own: these embeddings start from another one.
        model.resize_token_embeddings(len(tokenizer))
    else:
        model = AutoModelForCausalLM.from_config(
            LlamaConfig(
                vocab_size=len(tokenizer),
                hidden_size=256,
                intermediate_size=1024,
                num_hidden_layers=4,
                num_attention_heads=4,
                max_position_embeddings=max_len,
                bos_token_id=tokenizer.bos_token_id,
                eos_token_id=tokenizer.eos_token_id,
                pad_token_id=tokenizer.pad_token_id,
            )
        )

    config = SFTConfig(
        output_dir=args.output_dir,
        max_length=None,  # over-length rows were dropped above; never truncate
        completion_only_loss=True if args.data == "prompt_completion" else None,
        assistant_only_loss=args.data == "messages",
        num_train_epochs=args.epochs,
        learning_rate=args.learning_rate,
        per_device_train_batch_size=args.batch_size,
        report_to="none",
    )
    trainer = SFTTrainer(model=model, args=config, train_dataset=dataset, processing_class=tokenizer)
    trainer.train()
    trainer.save_model(args.output_dir)
    tokenizer.save_pretrained(args.output_dir)


if __name__ == "__main__":
    main()
`;

/** train_grpo.py: GRPOTrainer with the exported prompts and reward. */
export const TRAIN_GRPO_PY = String.raw`"""GRPO with TRL's GRPOTrainer on the Agent Lab export (written by agent-lab export).

    accelerate launch --num_processes 8 train_grpo.py --model sft-out

--model is the policy to improve: a model SFT-trained on the same wire format with this
tokenizer (train_sft.py's output). Each prompt of grpo/prompts.jsonl renders through the
chat template to exactly the prefix of the SFT data (system, user, then <|assistant|>), so
the policy starts in distribution.

Settings follow the lab's GRPO defaults where GRPOConfig has them: 8 samples per prompt,
temperature 0.8, clip 0.2, KL beta 0.02, a loss averaged over the generated tokens of the
whole batch (loss_type="dapo"). TRL scales advantages by the group's std (the lab uses the
population std). See https://huggingface.co/docs/trl/grpo_trainer.

Single turn: each completion is one assistant turn and tool calls are not run here; the
lab's multi-turn loop needs a rollout_func (see grpo/reward.py).
"""
import argparse
import os
import sys

from datasets import load_dataset
from transformers import AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "grpo"))
from reward import reward  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="the SFT policy (hub id or path), trained with this tokenizer")
    parser.add_argument("--output_dir", default=os.path.join(HERE, "grpo-out"))
    parser.add_argument("--max_steps", type=int, default=500)
    parser.add_argument("--learning_rate", type=float, default=1e-6)
    args = parser.parse_args()

    tokenizer = AutoTokenizer.from_pretrained(HERE)
    tokenizer.padding_side = "left"  # prompts are left-padded for generation
    dataset = load_dataset("json", data_files=os.path.join(HERE, "grpo", "prompts.jsonl"), split="train")
    config = GRPOConfig(
        output_dir=args.output_dir,
        num_generations=8,
        temperature=0.8,
        epsilon=0.2,
        beta=0.02,
        loss_type="dapo",
        max_completion_length=128,  # one turn: a thought and a call or an answer
        remove_unused_columns=False,  # keep gold and kind: they reach the reward as kwargs
        max_steps=args.max_steps,
        learning_rate=args.learning_rate,
        log_completions=True,
        report_to="none",
    )
    trainer = GRPOTrainer(
        model=args.model,
        reward_funcs=[reward],
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
    )
    trainer.train()
    trainer.save_model(args.output_dir)


if __name__ == "__main__":
    main()
`;

/** README.md of the export folder. */
export const README_MD = `# Agent Lab export for Hugging Face TRL

Written by \`agent-lab export\`. \`--format trl-sft\` writes the \`sft/\` files and
\`train_sft.py\`, \`--format trl-grpo\` the \`grpo/\` files and \`train_grpo.py\`; both write the
tokenizer files and this README (both formats may share one folder).

| file | what it is |
|---|---|
| \`tokenizer.json\`, \`tokenizer_config.json\`, \`special_tokens_map.json\` | the run's tokenizer for \`AutoTokenizer.from_pretrained(<this folder>)\`: the nine wire-format tokens are single ids; eos is \`<\\|end\\|>\` (a turn ends there); the chat template renders messages back to the lab's wire text byte for byte |
| \`sft/messages.jsonl\` | one conversation per transcript: \`{"messages": [{"role", "content"}, ...]}\` with roles \`system\`, \`user\`, \`assistant\` (the step as the lab renders it: \`Thought: ...\` then \`<\\|tool_call\\|>{"tool": ..., "args": {...}}\` or \`Answer: ...\`, without the closing \`<\\|end\\|>\`), \`tool\` (the observation) |
| \`sft/prompt_completion.jsonl\` | one row per assistant turn: \`{"prompt": <the transcript up to and including that turn's <\\|assistant\\|>>, "completion": <the turn's text + <\\|end\\|>>}\` |
| \`sft/manifest.json\` | source, counts, the max length the lab drops at |
| \`grpo/prompts.jsonl\` | \`{"prompt": [{"role": "system", ...}, {"role": "user", "content": <question>}], "gold": ..., "kind": ...}\`; the system prompt is the SFT data's |
| \`grpo/reward.py\` | \`reward(completions, gold, **kwargs)\`: exact match of the final \`Answer:\` after the lab's \`normalize\`, minus 0.05 * steps / 6 |
| \`grpo/manifest.json\` | source, counts, the system prompt |
| \`train_sft.py\`, \`train_grpo.py\` | small example scripts (SFTTrainer, GRPOTrainer) |

## Run

\`\`\`sh
pip install trl accelerate datasets
accelerate launch --num_processes 8 train_sft.py                       # prompt/completion, completion-only loss
accelerate launch --num_processes 8 train_sft.py --data messages       # conversations, assistant-only loss
accelerate launch --num_processes 8 train_grpo.py --model sft-out      # GRPO from the SFT model
\`\`\`
(\`--num_processes\` = GPUs per machine; \`accelerate config\` sets up several machines or DeepSpeed.)

## Same supervision as the lab

The lab's loss mask supervises each assistant turn's content (tool calls included) and the
\`<|end|>\` closing it; never \`<|assistant|>\`, system, user or tool-result text.
- prompt/completion rows: TRL tokenizes the prompt and prompt + completion and trains on
  the difference (\`completion_only_loss\`, the default for prompt-completion data). Every
  prompt ends with the single token \`<|assistant|>\`, so the split is a token boundary,
  and the completions of a transcript are exactly its supervised spans.
- messages: \`assistant_only_loss=True\` trains on what the chat template's
  \`{% generation %}\` blocks render (TRL requires such a template), which is each
  assistant turn's content and its \`<|end|>\`.
- eos is \`<|end|>\`, so SFTTrainer's end-of-sequence append adds nothing (every completion
  already ends with it) and generation stops at the end of a turn.
- \`<|system|> <|user|> <|assistant|> <|tool_call|> <|tool_result|>\` are added tokens but
  not "special": GRPOTrainer decodes completions with \`skip_special_tokens=True\`, and the
  reward must still see \`<|tool_call|>\`.

The lab drops transcripts longer than its max length instead of truncating them;
\`train_sft.py\` drops rows longer than \`sft/manifest.json\`'s \`max_len\` the same way.

## GRPO is single-turn here

GRPOTrainer samples one completion per prompt, stopping at eos: one assistant turn, with
no tool run after it. A turn that calls a tool therefore scores -0.05/6 (no answer). The
lab's episodes are multi-turn (search, read, calc, answer): to train on them, pass a
\`rollout_func\` that runs the lab's tools between turns and returns the whole episode
(TRL's OpenEnv guide, "environment_factory vs rollout_func"); \`reward.py\` scores
multi-turn completions too. TRL's built-in tool loop parses calls in the model's own
chat-template format, not the lab's \`<|tool_call|>{...}<|end|>\`.
`;
