"""Golden data for the pipeline port (wire format, grammar, loss mask, retrieval,
distillation, normalisation), produced by running the seed's Python reference.

Regenerate from the repository root:
    PYTHONPATH=../shared/seeds/reference python3 test/golden/gen_pipeline.py
It writes test/golden/pipeline.json. Deterministic: two runs give identical bytes.
"""
import json, random, sys
from stacklm.agent.corpus import build_corpus, make_task_pool
from stacklm.agent.distill import ToolEnv, distill, normalize
from stacklm.agent.stub_teacher import make_stub_teacher
from stacklm.agent.sft_format import _segment
from stacklm.agent.react import parse_assistant_step, render_call, TOOL_CALL, END
from stacklm.agent.tools import BM25Retriever, HashEmbedRetriever
from stacklm.agent import grammar as G

assert sys.version_info[:2] == (3, 11), "golden data is defined by CPython 3.11"

corpus = build_corpus()
train, held = make_task_pool()
env = ToolEnv(corpus)

# Every distilled transcript of both splits, default settings (4 samples per task).
traces = {}
for name, tasks in (("train", train), ("heldout", held)):
    traces[name] = distill(tasks, make_stub_teacher(tasks), env, samples_per_task=4)

segments = [[[s, sup] for s, sup in _segment(r["text"])] for r in traces["train"][:60]]
# Hand-made transcripts: trailing text, no markers, nested markers, whitespace between turns.
odd = ["", "plain text", "<|assistant|>abc", "<|assistant|>abc<|end|>tail", "<|end|><|end|>",
       "<|user|>q<|end|>\n<|assistant|>Thought: x\n<|tool_call|>{}<|end|>\n<|tool_result|>r<|end|>",
       "<|assistant|><|assistant|>x<|user|>y<|end|>z", "<|bos|><|assistant|>a<|eos|>b<|pad|><|end|>"]
odd_segments = [[t, [[s, sup] for s, sup in _segment(t)]] for t in odd]

# Grammar: the universe of characters tried for `expected`.
UNIVERSE = [chr(c) for c in range(32, 127)] + ["\n", "\t", "é", "—", "<"]

def verdict(text):
    st = G.start_states()
    for i, ch in enumerate(text):
        nxt = G.step(st, ch)
        if not nxt:
            return {"accepted": False, "complete": False, "rejectedAt": i,
                    "expected": sorted(c for c in UNIVERSE if G.step(st, c))}
        st = nxt
    done = G.accepts(st)
    return {"accepted": True, "complete": done, "rejectedAt": None,
            "expected": [] if done else sorted(c for c in UNIVERSE if G.step(st, c))}

rng = random.Random(1234)
bodies = [render_call("search", {"query": q, "k": 2})[len(TOOL_CALL):-len(END)]
          for t in train for q in t.hints["queries"]]
bodies += [render_call("calc", {"expr": e})[len(TOOL_CALL):-len(END)]
           for e in ["2021*2", "2019+10000", "512-30", "1+2*(3-4)/5", "9" * 40, "9" * 41]]
bodies += [render_call("search", {"query": "a" * n, "k": k})[len(TOOL_CALL):-len(END)]
           for n in (1, 63, 64, 65) for k in (1, 9)]
grammar_cases = []
for b in sorted(set(bodies))[:40]:
    for cut in sorted(set([0, 1, 5, 10, len(b) // 2, len(b) - 1, len(b)])):
        grammar_cases.append(b[:cut])
for _ in range(300):
    b = rng.choice(bodies)
    i = rng.randrange(len(b))
    op = rng.choice(["del", "ins", "sub", "dup"])
    c = rng.choice(UNIVERSE)
    if op == "del": m = b[:i] + b[i+1:]
    elif op == "ins": m = b[:i] + c + b[i:]
    elif op == "sub": m = b[:i] + c + b[i+1:]
    else: m = b[:i] + b[i] + b[i:]
    grammar_cases.append(m)
grammar_cases += ['{"tool": search', '{"tool": "search", "args": {"query": "x", "k": 0}}',
                  '{"tool": "search", "args": {"query": "", "k": 2}}', '{"tool": "calc", "args": {"expr": ""}}',
                  '{"tool": "calc", "args": {"expr": "1"}}x', ' {"tool"', '{"tool": "c']
grammar = [[t, verdict(t)] for t in grammar_cases]

queries = ["", "zzz unknownword", "Stack-100M layer count", "hidden size", "the of is", "RoPE base",
           "ablation run R-007 hidden size", "LoRA publication year", "HIDDEN SIZE 512", "2021 2022 2023",
           "Chinchilla", "a", "grouped-query attention publication year", "R-119", "value"]
bm = BM25Retriever(corpus)
he = HashEmbedRetriever(corpus)
bm25 = [[q, k, [[p.doc_id, s] for p, s in bm.search(q, k)]] for q in queries for k in (0, 1, 2, 3, 10, 300, -1)]
hashed = [[q, k, [[p.doc_id, s] for p, s in he.search(q, k)]] for q in queries for k in (2, 5)]

steps = ["Thought: x\nAnswer: 42", "Thought:   spaced  \nmore\nAnswer:\n\n 7 \n", "no markers at all ",
         'Thought: s\n<|tool_call|>{"tool": "calc", "args": {"expr": "1+1"}}',
         'Thought: s\n<|tool_call|> {"tool": "search", "args": {"query": "q", "k": 3}} <|end|>junk',
         "<|tool_call|>{\"tool\": \"calc\"", "<|tool_call|>[1, 2]", "<|tool_call|>{\"args\": {}}",
         "<|tool_call|>{\"tool\": \"calc\"}", "Answer: a\nAnswer: b", "Answer:   ", "Answer: x.\n",
         "Thought:\n\nfoo\nAnswer: y", "Thought: a\x85b\nAnswer: c", "Answer: 1e3", "Thought: only thought",
         "<|tool_call|>{\"tool\": \"search\", \"args\": {\"query\": \"\\u00e9\", \"k\": -3}}",
         "Answer: \u00a0padded\u00a0"]
def act_json(a):
    return {"kind": a.kind, "thought": a.thought, "tool": a.tool, "args": a.args, "answer": a.answer}
parsed = [[s, act_json(parse_assistant_step(s))] for s in steps]

calls = [["search", {"query": "caf\u00e9 \U0001F600 \"q\" \\ /\x7f\n", "k": 2}], ["calc", {"expr": "1+1"}],
         ["x", {}], ["search", {"nested": {"a": [1, 2.5, None, True, 0.1]}}]]
rendered = [[t, a, render_call(t, a)] for t, a in calls]

norms = ["4042", " 4042 ", "4042.0", "4042.", "Stack-100M", "  Mixed   Case\tWords ", "1e3", "1e16", "1e400",
         "-0", "0.1", "nan", "inf", "-Infinity", "1_000", "", "...", "3.14159", "12345678901234567890.0", "1/2"]
normalized = [[s, normalize(s)] for s in norms]

out = {
    "traces": traces, "segments": segments, "odd_segments": odd_segments, "grammar": grammar,
    "bm25": bm25, "hashed": hashed, "parsed": parsed, "rendered": rendered, "normalized": normalized,
}
with open("test/golden/pipeline.json", "w") as f:
    json.dump(out, f, ensure_ascii=True, separators=(",", ":"))
    f.write("\n")
print("traces", {k: len(v) for k, v in traces.items()}, "grammar cases", len(grammar))
