"""Python's jinja2 configured exactly as transformers' apply_chat_template renders chat templates.

ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with the loopcontrols
extension and HF's {% generation %} tag; HF's tojson filter (json.dumps, ensure_ascii off, its
indent/separators/sort_keys options) and the raise_exception/strftime_now globals. The clock
strftime_now reads is pinned (NOW, in UTC) so expectations are reproducible; the C++ tests pin
the same instant. Shared by gen_jinja_cases.py and render_jinja2.py.
"""
import datetime
import json
import os

import jinja2
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

NOW = 1700000000  # 14 Nov 2023 22:13:20 UTC
os.environ["TZ"] = "UTC"


class AssistantTracker(Extension):
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_gen"), [], [], body).set_lineno(lineno)

    def _gen(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.datetime.fromtimestamp(NOW, datetime.timezone.utc).strftime(fmt)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                    extensions=[AssistantTracker, jinja2.ext.loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = strftime_now


def render(template, var):
    """{"expected": text} or {"error": kind, "message": ...} (kind: syntax, raised, runtime)."""
    try:
        return {"expected": env.from_string(template).render(**var)}
    except jinja2.exceptions.TemplateSyntaxError as e:
        return {"error": "syntax", "message": str(e)}
    except jinja2.exceptions.TemplateError as e:
        kind = "raised" if type(e) is jinja2.exceptions.TemplateError else "runtime"
        return {"error": kind, "message": str(e)}
    except Exception as e:  # TypeError, ZeroDivisionError…: a runtime error for us too
        return {"error": "runtime", "message": f"{type(e).__name__}: {e}"}
