"""Renders a chat template the way transformers' apply_chat_template does, for the export tests.

Input (stdin, JSON): {"template": str, "cases": [{"messages": [...], "add_generation_prompt": bool, "vars": {...}}]}
("vars", optional: further template variables such as bos_token, eos_token, tools).
Output (stdout, JSON): [{"text": str, "generation": [[start, end], ...]}] with UTF-16 offsets
(JavaScript string indices) of each {% generation %} block.

The environment mirrors transformers' _compile_jinja_template (src/transformers/utils/
chat_template_utils.py): ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks,
the loopcontrols extension, raise_exception, its tojson filter (json.dumps, no HTML escaping,
keys in order), and an AssistantTracker extension for the
{% generation %} tag that records where each block's output starts and ends in the
rendered text (what return_assistant_tokens_mask, and so TRL's assistant_only_loss, uses).
Needs jinja2 (Debian: python3-jinja2); exits 3 without it.
"""
import json
import sys

try:
    import jinja2
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    sys.stderr.write("jinja2 is not installed\n")
    sys.exit(3)


class AssistantTracker(Extension):
    tags = {"generation"}

    def __init__(self, environment):
        super().__init__(environment)
        self.rendered = None
        self.indices = None

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    @jinja2.pass_eval_context
    def _generation_support(self, context, caller):
        rv = caller()
        start = len("".join(self.rendered))
        self.indices.append((start, start + len(rv)))
        return rv


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # transformers replaces Jinja2's tojson, which escapes HTML characters and sorts keys.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def utf16(text, i):
    return len(text[:i].encode("utf-16-le")) // 2


def main():
    data = json.load(sys.stdin)
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[AssistantTracker, loopcontrols])
    env.globals["raise_exception"] = raise_exception
    env.filters["tojson"] = tojson
    template = env.from_string(data["template"])
    tracker = env.extensions[AssistantTracker.identifier]
    out = []
    for case in data["cases"]:
        tracker.rendered, tracker.indices = [], []
        for block in template.generate(**{**case.get("vars", {}), "messages": case["messages"], "add_generation_prompt": case["add_generation_prompt"]}):
            tracker.rendered.append(block)
        text = "".join(tracker.rendered)
        out.append({"text": text, "generation": [[utf16(text, s), utf16(text, e)] for s, e in tracker.indices]})
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
