#!/usr/bin/env python3
"""Reference renderings of chat templates for tests/native/chat/test_jinja.cpp: Jinja2 set up as
Hugging Face's apply_chat_template sets it up (trim_blocks, lstrip_blocks, loop controls,
the {% generation %} block, raise_exception, strftime_now, its tojson). Reads JSON cases from stdin:
  [{"template": str, "messages": [{"role", "content", ...other fields}], "add_generation_prompt": bool,
    "bos_token": str, "eos_token": str, "vars": {further template variables}}, ...]
and writes, per case, "OK <bytes>\\n<rendered UTF-8>" or "ERR\\n"."""
import json
import sys
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment


class Generation(Extension):
    # transformers' AssistantTracker: {% generation %}...{% endgeneration %} renders its body as a
    # call block does (it only records where the assistant's text is, for training masks).
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # Hugging Face's: json.dumps, not Jinja2's HTML-safe one
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, "jinja2.ext.loopcontrols"])
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = strftime_now
env.filters["tojson"] = tojson
out = sys.stdout.buffer
for case in json.load(sys.stdin):
    try:
        text = env.from_string(case["template"]).render(
            messages=case["messages"], add_generation_prompt=case["add_generation_prompt"],
            bos_token=case["bos_token"], eos_token=case["eos_token"], **case.get("vars", {}))
        data = text.encode("utf-8")
        out.write(b"OK %d\n" % len(data) + data)
    except Exception:  # the template refused (raise_exception) or is malformed
        out.write(b"ERR\n")
out.flush()
