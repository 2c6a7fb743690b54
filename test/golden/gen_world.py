#!/usr/bin/env python3
"""Golden data for core/world.ts and core/pyrandom.ts, from CPython 3.11 and the seed.

Regenerate (from the repository root, with the seed's reference beside it):

    PYTHONPATH=../shared/seeds/reference python3 test/golden/gen_world.py

It writes, next to this script:
  world_seed0.json  build_corpus() rows and make_task_pool() train/heldout rows (seed 0,
                    defaults), plus make_tasks() counts per kind
  pyrandom.json     random.Random sequences for several seeds: random(), getrandbits(k),
                    _randbelow(n), choice, sample (both of 3.11's branches), shuffle,
                    randrange/randint. Big integers are written as decimal strings.

Both are deterministic; rerunning must not change a byte (CPython 3.11 required, as the
sample()/shuffle() algorithms are version-specific).
"""
import json
import os
import random
import sys
from collections import Counter

from stacklm.agent.corpus import build_corpus, make_task_pool, make_tasks

HERE = os.path.dirname(os.path.abspath(__file__))


def task_row(t):
    return {"question": t.question, "gold": t.gold, "kind": t.kind, "hints": t.hints}


def world():
    corpus = build_corpus()
    train, heldout = make_task_pool()
    tasks = make_tasks()
    return {
        "seed": 0,
        "n_distractors": 120,
        "n_train": 200,
        "n_heldout": 50,
        "task_counts": dict(Counter(t.kind for t in tasks)),
        "corpus": [{"doc_id": p.doc_id, "text": p.text} for p in corpus],
        "train": [task_row(t) for t in train],
        "heldout": [task_row(t) for t in heldout],
    }


SEEDS = [0, 1, 42, 2**32 - 1, 2**32, 2**40 + 3, -7, -(2**70) + 5, 2**100 + 7]
BITS = [0, 1, 5, 31, 32, 33, 53, 64, 100, 257]
BELOW = [1, 2, 3, 7, 10, 100, 1000, 2**31, 2**31 + 1, 2**32, 2**32 + 1,
         2**53 - 1, 2**53, 2**64 + 13, 3**50]
SAMPLE_SMALL = [0, 1, 2, 5, 6, 21, 22, 30]           # every k in 0..n
SAMPLE_LARGE = {100: [0, 1, 5, 6, 21, 22, 50, 85, 86, 100],
                1000: [0, 1, 5, 6, 21, 22, 85, 86, 341, 342, 999, 1000],
                5000: [3, 6, 50, 400]}
SHUFFLE = [0, 1, 2, 3, 10, 50, 300]


def random_case(seed):
    case = {"seed": str(seed)}
    r = random.Random(seed)
    case["random"] = [r.random() for _ in range(12)]
    r = random.Random(seed)
    case["getrandbits"] = [[k, [str(r.getrandbits(k)) for _ in range(3)]] for k in BITS]
    r = random.Random(seed)
    case["randbelow"] = [[str(n), [str(r._randbelow(n)) for _ in range(4)]] for n in BELOW]
    r = random.Random(seed)
    case["choice"] = [r.choice(range(n)) for n in (1, 2, 3, 9, 10, 28, 1000) for _ in range(3)]
    r = random.Random(seed)
    samples = []
    for n in SAMPLE_SMALL:
        for k in range(n + 1):
            samples.append([n, k, r.sample(range(n), k)])
    for n, ks in SAMPLE_LARGE.items():
        for k in ks:
            samples.append([n, k, r.sample(range(n), k)])
    case["sample"] = samples
    r = random.Random(seed)
    shuffles = []
    for n in SHUFFLE:
        x = list(range(n))
        r.shuffle(x)
        shuffles.append(x)
    case["shuffle"] = shuffles
    r = random.Random(seed)
    case["randrange"] = [
        [[10], [r.randrange(10) for _ in range(3)]],
        [[-5, 5], [r.randrange(-5, 5) for _ in range(3)]],
        [[0, 100, 7], [r.randrange(0, 100, 7) for _ in range(3)]],
        [[50, -50, -3], [r.randrange(50, -50, -3) for _ in range(3)]],
    ]
    case["randint"] = [[[1, 6], [r.randint(1, 6) for _ in range(5)]]]
    # One long interleaved stream, to catch state carried wrongly between calls.
    r = random.Random(seed)
    mixed = []
    for i in range(40):
        mixed.append(r.random() if i % 3 == 0 else r._randbelow(1000 + i) if i % 3 == 1
                     else str(r.getrandbits(40 + i)))
    case["mixed"] = mixed
    return case


def _compact(v):
    return json.dumps(v, separators=(",", ":"), ensure_ascii=True)


def _lines(obj):
    """Compact JSON, but one list item per line (a corpus row, a task, a sample) so that
    diffs of the goldens are readable. A dict is opened up only when it holds lists."""
    if isinstance(obj, dict) and any(isinstance(v, list) for v in obj.values()):
        parts = [f"{_compact(k)}:{_lines(v)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(parts) + "\n}"
    if isinstance(obj, list):
        return "[\n" + ",\n".join(_lines(v) if isinstance(v, dict) else _compact(v)
                                    for v in obj) + "\n]"
    return _compact(obj)


def dump(name, obj):
    path = os.path.join(HERE, name)
    text = _lines(obj)
    assert json.loads(text) == json.loads(_compact(obj))  # tuples become lists in both
    with open(path, "w", encoding="utf-8") as f:
        f.write(text + "\n")
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


def main():
    if sys.version_info[:2] != (3, 11):
        sys.exit(f"CPython 3.11 is required, this is {sys.version.split()[0]}")
    dump("world_seed0.json", world())
    dump("pyrandom.json", {"python": sys.version.split()[0],
                           "cases": [random_case(s) for s in SEEDS]})


if __name__ == "__main__":
    main()
