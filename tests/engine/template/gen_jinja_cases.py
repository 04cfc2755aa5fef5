#!/usr/bin/env python3
"""Regenerates jinja_cases.json: expected renders produced by Python's jinja2 (dev-only).

The environment is configured exactly like transformers' apply_chat_template
(ImmutableSandboxedEnvironment, trim_blocks=True, lstrip_blocks=True, loopcontrols, the
{% generation %} tag, HF's tojson/raise_exception/strftime_now), so the expectations are what
Hugging Face itself would render. test_template.cpp renders every case with Ember's
interpreter and compares.

    pip install jinja2   # 3.1.x
    python3 tests/engine/template/gen_jinja_cases.py
"""
import json
import os

import jinja2

from hf_jinja import NOW, render

SYS = {"role": "system", "content": "You are a concise assistant."}
CONV = [
    {"role": "user", "content": "Hi there!"},
    {"role": "assistant", "content": "Hello! How can I help?"},
    {"role": "user", "content": "What's 2+2? Answer in one word."},
]
UNICODE = [{"role": "user", "content": "  Grüße, 世界! 🙂 \"quotes\" \\ back\tslash\n  "}]
THINK = [
    {"role": "user", "content": "Solve x+1=2"},
    {"role": "assistant", "content": "<think>\nx = 1\n</think>\n\nx is 1."},
    {"role": "user", "content": "And x+2=4?"},
]
TOOLCALL = [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "content": "18C, sunny"},
]
PARTS = [{"role": "user", "content": [{"type": "text", "text": " Describe this. "}, {"type": "image"}]}]
BAD_ORDER = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]

CONVERSATIONS = {
    "sys": [SYS] + CONV,
    "nosys": CONV,
    "unicode": UNICODE,
    "empty": [],
}


def variables(messages, agp=True, **extra):
    v = {"messages": messages, "add_generation_prompt": agp, "bos_token": "<s>", "eos_token": "</s>",
         "tools": None, "documents": None}
    v.update(extra)
    return v


def sorted_keys(v):
    # The C++ side reads vars with QJsonObject, which orders keys alphabetically; render
    # with the same order so dict iteration and tojson agree.
    if isinstance(v, dict):
        return {k: sorted_keys(v[k]) for k in sorted(v)}
    if isinstance(v, list):
        return [sorted_keys(x) for x in v]
    return v


# ---------------------------------------------------------------- constructs
# Each renders with the "sys" conversation.
CONSTRUCTS = {
    # whitespace control, trim_blocks, lstrip_blocks
    "ws_trim_lstrip": "  {% if true %}\n  x\n  {% endif %}\n  y\n",
    "ws_minus": "a {{- 'b' -}}  c\n {%- if true -%}  d  {%- endif -%} \n e",
    "ws_plus": "  {%+ if true %}x{% endif +%}\ny",
    "ws_comment": "a\n  {# c #}\nb\n  {#- c -#}  \nc",
    "ws_var_not_trimmed": "{{ 'a' }}\n{{ 'b' }}\n",
    "ws_lstrip_after_text": "x  {% if true %}y{% endif %}\n",
    "ws_crlf": "{% if true %}\r\nA\r\n{% endif %}\r\nB\r\n",
    "ws_raw": "  {% raw %}{{ x }}{% if %}{% endraw %}\nz",
    "ws_indented_loop": "{% for m in messages %}\n    {{ m.role }}\n{% endfor %}\n",
    "ws_two_trailing_newlines": "x\n\n",
    # literals and printing
    "lit_print": "{{ none }}|{{ True }}|{{ false }}|{{ 1.0 }}|{{ 1e20 }}|{{ 1e-5 }}|{{ 0.1 + 0.2 }}|{{ 1_000 }}|{{ -0.0 }}",
    "lit_containers": "{{ [1, 'a', none, {'k': \"it's\"}, [true]] }}|{{ {'a': 1, 'b': 'x'} }}|{{ (1, 2) }}|{{ (1,) }}|{{ () }}",
    "lit_strings": "{{ \"a\" 'b' }}|{{ 'tab\\there' }}|{{ '\\u00e9\\x41\\n' }}|{{ 'it\\'s' }}",
    # operators
    "op_arith": "{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 7 / 2 }} {{ 4 / 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 7.5 // 2 }} {{ 5.5 % 2 }}",
    "op_mixed": "{{ true + 1 }} {{ 1 + 2.5 }} {{ 3 * 'ab' }} {{ [1] * 3 }} {{ [1, 2] + [3] }} {{ 'a' ~ 1 ~ none ~ [1] }} {{ -(3) }} {{ +4 }}",
    "op_compare": "{{ 1 < 2 < 3 }} {{ 1 < 2 > 3 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 == 1.0 }} {{ none == none }} {{ 1 == '1' }} {{ 2 >= 2 }} {{ 'x' != 'y' }}",
    "op_in": "{{ 'a' in 'cab' }} {{ 1 not in [1] }} {{ 'k' in {'k': 1} }} {{ 3 in [1, 2] }} {{ not 'z' in 'abc' }}",
    "op_logic": "{{ 0 or 'x' }} {{ 1 and 'y' }} {{ none or [] }} {{ not none }} {{ '' and 1 }}|{{ 'a' if 0 else 'b' }}|{{ 'c' if 0 }}|",
    "op_precedence": "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ 'x' ~ 2 * 3 }} {{ -2 ** 2 }} {{ not 1 == 2 }} {{ [1,2,3] | length > 2 }}",
    # variables and scoping
    "scope_loop_iteration": "{% set x = 0 %}{% for i in [1, 2, 3] %}{{ x }}{% set x = x + i %}{{ x }},{% endfor %}{{ x }}",
    "scope_loop_no_carry": "{% for i in [1, 2, 3] %}{% if i > 1 %}[{{ y }}]{% endif %}{% set y = i %}{% endfor %}[{{ y }}]",
    "scope_if_leaks": "{% if true %}{% set z = 5 %}{% endif %}{{ z }}",
    "scope_namespace": "{% set ns = namespace(n=0, s='') %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% set ns.s = ns.s ~ m.role[0] %}{% endfor %}{{ ns.n }} {{ ns.s }}",
    "scope_namespace_dict": "{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}{{ ns.c is defined }}",
    "scope_set_tuple": "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = 3, 4 %}{{ t }}",
    "scope_set_block": "{% set x %}hi {{ messages | length }}\n{% endset %}[{{ x }}]",
    "scope_set_block_filter": "{% set x | trim | upper %}  hi {{ messages | length }}\n{% endset %}[{{ x }}]",
    "repeat_empty": "[{{ '' * 100000000000 }}][{{ [] * 100000000000 }}][{{ 'ab' * -2 }}][{{ (1,) * 2 }}]",
    "scope_reassign_global": "{% set messages = messages[1:] %}{{ messages | length }}{% for m in messages %}{{ m.role }},{% endfor %}",
    # loops
    "loop_vars": "{% for x in ['a', 'b', 'c'] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.cycle('o', 'e') }}|{% endfor %}",
    "loop_prev_next": "{% for x in [1, 2, 3] %}{{ loop.previtem }}<{{ x }}>{{ loop.nextitem }};{% endfor %}",
    "loop_else": "{% for x in [] %}x{% else %}empty{% endfor %}|{% for x in undefined_thing %}x{% else %}E{% endfor %}",
    "loop_filter": "{% for x in [1, 2, 3, 4, 5] if x is odd %}{{ x }}/{{ loop.index }}/{{ loop.length }} {% endfor %}",
    "loop_break_continue": "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x > 4 %}{% break %}{% endif %}{{ x }}{% endfor %}",
    "loop_dict": "{% for k in {'b': 1, 'a': 2} %}{{ k }}{% endfor %}|{% for k, v in {'b': 1, 'a': 2}.items() %}{{ k }}={{ v }};{% endfor %}|{% for k, v in {'x': 1} | items %}{{ k }}{{ v }}{% endfor %}",
    "loop_string": "{% for c in 'héllo' %}{{ c }}.{% endfor %}",
    "loop_nested": "{% for a in [1, 2] %}{% for b in 'xy' %}{{ a }}{{ b }}{{ loop.index }}{% endfor %}:{{ loop.index }} {% endfor %}",
    "loop_messages": "{% for m in messages %}{{ loop.index0 }}:{{ m['role'] }}={{ m.content | length }}{% if not loop.last %}, {% endif %}{% endfor %}",
    # macros
    "macro_basic": "{% macro f(a, b=2) %}{{ a }}-{{ b }}{% endmacro %}{{ f(1) }} {{ f(1, b=3) }} {{ f() }} {{ f(b=5) }} {{ f('x', 'y') }}",
    "macro_sees_globals": "{% macro m() %}{{ a }}{% endmacro %}{% set a = 1 %}{{ m() }}{% set a = 2 %}{{ m() }}",
    "macro_local_set": "{% set a = 1 %}{% macro m() %}{{ a }}{% set a = 3 %}{{ a }}{% endmacro %}{{ m() }}{{ a }}",
    "macro_recursive": "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1) | int }}{% endif %}{% endmacro %}{{ fact(5) }}",
    "macro_render_message": "{% macro render(m) -%}\n<{{ m.role }}>{{ m.content | trim }}</{{ m.role }}>\n{%- endmacro %}{% for m in messages %}{{ render(m) }}{% endfor %}",
    "macro_too_many_args": "{% macro f(a) %}x{% endmacro %}{{ f(1, 2) }}",
    "macro_bad_kwarg": "{% macro f(a) %}x{% endmacro %}{{ f(c=2) }}",
    "filter_block": "{% filter upper %}abc{{ 'd' }}{% endfilter %}|{% filter trim | title %}  hello world  {% endfilter %}",
    "generation_block": "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}{{ m.content }}{% endgeneration %}{% endif %}{% endfor %}",
    # filters
    "f_string_filters": "{{ '  a b  ' | trim }}|{{ 'xxaxx' | trim('x') }}|{{ 'abc' | upper }}|{{ 'ABC' | lower }}|{{ 'hello wORLD-foo(bar' | title }}|{{ 'aBC dEF' | capitalize }}|{{ 'aaa' | replace('a', 'b', 2) }}|{{ 'abc' | replace('', '-') }}",
    "f_unicode_case": "{{ 'héllo wörld ß' | upper }}|{{ 'ÀÉÎ ŸĀĆ' | lower }}|{{ 'αβγ ς' | upper }}|{{ 'ПРИВЕТ' | lower }}|{{ 'élan vital' | title }}|{{ 'élan'.title() }}|{{ 'éLAN' | capitalize }}|{{ 'éé' is lower }}|{{ 'ÉÉ1' is upper }}|{{ 'ıſ' | upper }}|{{ '日本 abc' | upper }}",
    "f_length": "{{ 'héllo' | length }} {{ [1, 2] | count }} {{ {'a': 1} | length }} {{ undefined_thing | length }}",
    "f_default": "{{ nope | default('d') }} {{ '' | default('d') }} {{ '' | default('d', true) }} {{ none | default('d') }} {{ nope | d('x') }} {{ 0 | d(5, boolean=true) }}",
    "f_tojson": "{{ {'a': 1, 'b': [1, 2.5, none, true], 'c': 'é\"\\n<'} | tojson }}|{{ 'x' | tojson }}|{{ [] | tojson }}",
    "f_tojson_options": "{{ {'b': {'x': [1, {}]}, 'a': []} | tojson(indent=2) }}|{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}|{{ [1, [2]] | tojson(separators=(',', ':')) }}|{{ 'é😀' | tojson(ensure_ascii=true) }}|{{ [1] | tojson(indent=0) }}",
    "f_join": "{{ [1, 'a', none] | join }}|{{ ['a', 'b'] | join(', ') }}|{{ messages | join(' ', attribute='role') }}|{{ 'abc' | join('-') }}",
    "f_first_last": "{{ [1, 2, 3] | first }}{{ [1, 2, 3] | last }}{{ 'abc' | first }}{{ 'abc' | last }}[{{ [] | first }}]",
    "f_items_dictsort": "{{ {'b': 1, 'A': 2, 'a': 3} | dictsort }}|{{ {'b': 1, 'a': 2} | dictsort(by='value', reverse=true) }}|{{ {'x': 1} | items | list }}",
    "f_conversions": "{{ '3' | int }} {{ 3.7 | int }} {{ -3.7 | int }} {{ 'x' | int }} {{ 'x' | int(7) }} {{ '0x1A' | int(0, 16) }} {{ '12' | int(base=8) }} {{ '3.5' | float }} {{ 3 | float }} {{ 3 | string }} {{ [1] | string }} {{ 'ab' | list }} {{ {'k': 1} | list }}",
    "f_numbers": "{{ -1 | abs }} {{ -1.5 | abs }} {{ 2.5 | round }} {{ 3.5 | round }} {{ 2.675 | round(2) }} {{ 2.5 | round(0, 'floor') }} {{ 2.1 | round(0, 'ceil') }} {{ 7 | round }} {{ [1, 2, 3] | sum }} {{ [1, 2] | sum(start=10) }} {{ [3, 1, 2] | min }} {{ [3, 1, 2] | max }}",
    "f_select": "{{ [1, 2, 3, 4] | select('odd') | list }} {{ [1, 2, 3, 4] | reject('even') | list }} {{ [0, 1, '', 'a'] | select | list }} {{ [1, 5, 10] | select('>', 3) | list }} {{ [1, 2, 3] | select('divisibleby', 3) | list }}",
    "f_selectattr": "{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | list }}|{{ messages | rejectattr('role', 'in', ['user', 'system']) | list | length }}|{{ [{'a': 1}, {'a': 0}, {}] | selectattr('a') | list }}",
    "f_map": "{{ ['a', 'B'] | map('upper') | list }} {{ messages | map(attribute='role') | join(',') }} {{ [{'x': 1}, {}] | map(attribute='x', default=0) | list }} {{ ['ab', 'c'] | map('length') | list }} {{ [' a ', 'b '] | map('trim') | join }}",
    "f_sort_unique": "{{ [3, 1, 2] | sort }} {{ ['b', 'A', 'a'] | sort }} {{ ['b', 'A', 'a'] | sort(case_sensitive=true) }} {{ [3, 1, 2] | sort(reverse=true) }} {{ messages | sort(attribute='role') | map(attribute='role') | list }} {{ ['b', 'A', 'a', 'b'] | unique | list }} {{ [1, 2, 1] | unique | list }}",
    "f_reverse": "{{ [1, 2, 3] | reverse | list }} {{ 'abc' | reverse }} {{ 'héllo' | reverse }}",
    "f_indent": "{{ 'x\\ny\\n\\nz' | indent(2) }}|{{ 'x\\ny' | indent(2, true) }}|{{ 'x\\n\\ny' | indent(width='> ', blank=true) }}",
    "f_misc": "{{ '<a href=\"x\">&\\'' | e }} {{ '<b>' | escape }} {{ '<i>' | safe }} {{ 'one two  three' | wordcount }} {{ messages[0] | attr('role') }}",
    # tests
    "tests_types": "{{ nope is defined }} {{ nope is undefined }} {{ none is none }} {{ 1 is number }} {{ true is number }} {{ true is integer }} {{ 1.0 is float }} {{ 1 is integer }} {{ 'a' is string }} {{ {} is mapping }} {{ [] is mapping }} {{ true is boolean }} {{ 1 is boolean }} {{ true is true }} {{ 0 is false }}",
    "tests_iter": "{{ 'a' is iterable }} {{ [] is iterable }} {{ {} is iterable }} {{ 5 is iterable }} {{ none is iterable }} {{ nope is iterable }} {{ [] is sequence }} {{ 'a' is sequence }} {{ 1 is sequence }} {{ range is callable }} {{ 'a' is callable }}",
    "tests_values": "{{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }} {{ 1 is eq 1 }} {{ 1 is equalto(2) }} {{ 1 is ne 2 }} {{ 1 is lt 2 }} {{ 2 is gt 1 }} {{ 2 is le 2 }} {{ 2 is ge 3 }} {{ 'a' is in 'abc' }} {{ 'abc' is lower }} {{ 'AB1' is upper }} {{ none is sameas none }} {{ 1 is not none }} {{ x is not defined }}",
    # methods
    "m_strip_split": "{{ '  a  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '  a '.lstrip() }}|{{ ' a  '.rstrip() }}|{{ 'a\\n\\n'.rstrip('\\n') }}|{{ '  a  b '.split() }}|{{ 'a,,b'.split(',') }}|{{ 'a b c'.split(' ', 1) }}|{{ 'a b c'.rsplit(' ', 1) }}|{{ 'a\\nb\\r\\nc\\n'.splitlines() }}",
    "m_affixes": "{{ 'hello'.startswith('he') }} {{ 'hello'.endswith('lo') }} {{ 'hello'.startswith(('x', 'h')) }} {{ 'abc'.startswith('b', 1) }} {{ 'hello'.endswith('x') }} {{ 'prefix-x'.removeprefix('prefix-') }} {{ 'x.txt'.removesuffix('.txt') }}",
    "m_case": "{{ 'hello world'.title() }} {{ \"they're bill's\".title() }} {{ 'aBC'.capitalize() }} {{ 'abc'.upper() }} {{ 'ABC'.lower() }} {{ 'a1'.isalnum() }} {{ '12'.isdigit() }} {{ 'ab'.isalpha() }} {{ ' \\t'.isspace() }} {{ 'ab'.islower() }} {{ 'AB'.isupper() }}",
    "m_find_replace": "{{ 'abcabc'.find('c') }} {{ 'abc'.find('z') }} {{ 'abcabc'.rfind('a') }} {{ 'a b c'.count(' ') }} {{ 'aaa'.replace('a', 'bb') }} {{ 'aaa'.replace('a', 'b', 1) }} {{ ', '.join(['x', 'y']) }}",
    "m_dict": "{{ {'a': 1}.get('a') }} {{ {'a': 1}.get('b') }} {{ {'a': 1}.get('b', 2) }} {{ {'a': 1, 'b': 2}.keys() | list }} {{ {'a': 1}.values() | list }} {{ {'a': 1}.items() | list }}",
    # indexing and slicing
    "index_slice": "{{ 'abc'[5] }}|{{ 'abc'[-1] }}|{{ [1, 2, 3][::2] }}|{{ [1, 2, 3][-2:] }}|{{ 'abcdef'[1:-1:2] }}|{{ [1, 2, 3][::-1] }}|{{ [1, 2, 3][5:1:-1] }}|{{ 'héllo'[1:3] }}|{{ 'abc'[::-1] }}|{{ messages[-1].role }}|{{ messages[0]['content'][:3] }}|{{ (1, 2, 3)[1:] }}",
    "attr_vs_item": "{{ messages[0].role }}|{{ messages[0]['role'] }}|{{ messages[0].nope }}|{{ messages[0].nope is defined }}|{{ 'abc'.nope }}|{{ none.foo }}|{{ [1, 2].0 }}",
    # globals
    "globals_range": "{{ range(3) | list }} {{ range(1, 10, 3) | list }} {{ range(5, 0, -2) | list }} {{ range(0) | list }}",
    "globals_dict": "{{ dict(a=1, b='x') }} {{ dict({'z': 1}, a=2) }}",
    "globals_strftime": "{{ strftime_now('%Y-%m-%d %H:%M') }} {{ strftime_now('%d %b %Y') }}",
    "globals_tools_none": "{{ tools is none }} {{ tools is defined }} {{ documents is none }} {{ add_generation_prompt }} {{ bos_token }}{{ eos_token }}",
    # errors that jinja2 reports at render time
    "err_raise": "{% if messages | length > 1 %}{{ raise_exception('Roles must alternate!') }}{% endif %}",
    "err_undefined_attr": "{{ nope.attr }}",
    "err_undefined_arith": "{{ nope + 1 }}",
    "err_type": "{{ 'a' + 1 }}",
    "err_div_zero": "{{ 1 / 0 }}",
    "err_int_mod_zero": "{{ 1 % 0 }}",
    "err_not_iterable": "{% for x in 5 %}{% endfor %}",
    "err_call_undefined": "{{ nope() }}",
    "err_set_attr_non_ns": "{% set d = {} %}{% set d.x = 1 %}",
    "err_len_none": "{{ none | length }}",
    "err_sort_mixed": "{{ [1, 'a'] | sort }}",
    # errors that jinja2 reports when compiling
    "syntax_unclosed_if": "{% if true %}x",
    "syntax_unknown_tag": "{% frobnicate %}",
    "syntax_bad_expr": "{{ 1 + }}",
    "syntax_unknown_filter": "{{ 1 | frobnicate }}",
    "syntax_unknown_test": "{{ 1 is frobnicated }}",
    "syntax_unclosed_string": "{{ 'abc }}",
    "syntax_unclosed_var": "{{ 1 ",
    "syntax_break_outside_loop": "{% break %}",
    "syntax_endfor_stray": "{% endfor %}",
    "syntax_include": "{% include 'other.j2' %}",
    "syntax_extends": "{% extends 'base.j2' %}",
    "syntax_import": "{% import 'm.j2' as m %}",
    # valid jinja2 that Ember rejects on purpose (expected: an "is not supported" error)
    "unsupported_call_block": "{% macro f() %}{{ caller() }}{% endmacro %}{% call f() %}x{% endcall %}",
    "unsupported_recursive": "{% for x in [1] recursive %}{{ x }}{% endfor %}",
    "unsupported_printf": "{{ '%s-%d' % ('a', 3) }}",
    "unsupported_star_args": "{{ range(*[3]) | list }}",
    "syntax_unclosed_comment": "{# never closed",
}

# ---------------------------------------------------------------- real templates
# Upstream chat templates (transcribed; tools paths included so the parser sees them).
REAL = {}

REAL["smollm2"] = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"

REAL["gemma2"] = "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}"

REAL["llama2"] = "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"

REAL["zephyr"] = """{% for message in messages %}
{% if message['role'] == 'user' %}
{{ '<|user|>
' + message['content'] + eos_token }}
{% elif message['role'] == 'system' %}
{{ '<|system|>
' + message['content'] + eos_token }}
{% elif message['role'] == 'assistant' %}
{{ '<|assistant|>
'  + message['content'] + eos_token }}
{% endif %}
{% if loop.last and add_generation_prompt %}
{{ '<|assistant|>' }}
{% endif %}
{% endfor %}"""

REAL["mistral_v03"] = """{%- if messages[0]["role"] == "system" %}
    {%- set system_message = messages[0]["content"] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}
{%- set user_messages = loop_messages | selectattr("role", "equalto", "user") | list %}

{#- This block checks for alternating user/assistant messages, skipping tool calling messages #}
{%- set ns = namespace() %}
{%- set ns.index = 0 %}
{%- for message in loop_messages %}
    {%- if not (message.role == "tool" or message.role == "tool_results" or (message.tool_calls is defined and message.tool_calls is not none)) %}
        {%- if (message["role"] == "user") != (ns.index % 2 == 0) %}
            {{- raise_exception("After the optional system message, conversation roles must alternate user/assistant/user/assistant/...") }}
        {%- endif %}
        {%- set ns.index = ns.index + 1 %}
    {%- endif %}
{%- endfor %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if message["role"] == "user" %}
        {%- if tools is not none and (message == user_messages[-1]) %}
            {{- "[AVAILABLE_TOOLS] [" }}
            {%- for tool in tools %}
                {%- set tool = tool.function %}
                {{- '{"type": "function", "function": {' }}
                {%- for key, val in tool.items() if key != "return" %}
                    {%- if val is string %}
                        {{- '"' + key + '": "' + val + '"' }}
                    {%- else %}
                        {{- '"' + key + '": ' + val|tojson }}
                    {%- endif %}
                    {%- if not loop.last %}
                        {{- ", " }}
                    {%- endif %}
                {%- endfor %}
                {{- "}}" }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- else %}
                    {{- "]" }}
                {%- endif %}
            {%- endfor %}
            {{- "[/AVAILABLE_TOOLS]" }}
            {%- endif %}
        {%- if loop.last and system_message is defined %}
            {{- "[INST] " + system_message + "\\n\\n" + message["content"] + "[/INST]" }}
        {%- else %}
            {{- "[INST] " + message["content"] + "[/INST]" }}
        {%- endif %}
    {%- elif message.tool_calls is defined and message.tool_calls is not none %}
        {{- "[TOOL_CALLS] [" }}
        {%- for tool_call in message.tool_calls %}
            {%- set out = tool_call.function|tojson %}
            {{- out[:-1] }}
            {%- if not tool_call.id is defined or tool_call.id|length != 9 %}
                {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
            {%- endif %}
            {{- ', "id": "' + tool_call.id + '"}' }}
            {%- if not loop.last %}
                {{- ", " }}
            {%- else %}
                {{- "]" + eos_token }}
            {%- endif %}
        {%- endfor %}
    {%- elif message["role"] == "assistant" %}
        {{- " " + message["content"]|trim + eos_token}}
    {%- elif message["role"] == "tool_results" or message["role"] == "tool" %}
        {%- if message.content is defined and message.content.content is defined %}
            {%- set content = message.content.content %}
        {%- else %}
            {%- set content = message.content %}
        {%- endif %}
        {{- '[TOOL_RESULTS] {"content": ' + content|string + ", " }}
        {%- if not message.tool_call_id is defined or message.tool_call_id|length != 9 %}
            {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
        {%- endif %}
        {{- '"call_id": "' + message.tool_call_id + '"}[/TOOL_RESULTS]' }}
    {%- else %}
        {{- raise_exception("Only user and assistant roles are supported, with the exception of an initial optional system message!") }}
    {%- endif %}
{%- endfor %}
"""

REAL["deepseek_r1_distill"] = "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}{% set ns = namespace(is_first=false, is_tool=false, is_output_first=true, system_prompt='') %}{%- for message in messages %}{%- if message['role'] == 'system' %}{% set ns.system_prompt = message['content'] %}{%- endif %}{%- endfor %}{{bos_token}}{{ns.system_prompt}}{%- for message in messages %}{%- if message['role'] == 'user' %}{%- set ns.is_tool = false -%}{{'<｜User｜>' + message['content']}}{%- endif %}{%- if message['role'] == 'assistant' and message['content'] is none %}{%- set ns.is_tool = false -%}{%- for tool in message['tool_calls']%}{%- if not ns.is_first %}{{'<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + tool['function']['name'] + '\\n' + '```json' + '\\n' + tool['function']['arguments'] | tojson + '\\n' + '```' + '<｜tool▁call▁end｜>'}}{%- set ns.is_first = true -%}{%- else %}{{'\\n' + '<｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + tool['function']['name'] + '\\n' + '```json' + '\\n' + tool['function']['arguments'] | tojson + '\\n' + '```' + '<｜tool▁call▁end｜>'}}{{'<｜tool▁calls▁end｜><｜end▁of▁sentence｜>'}}{%- endif %}{%- endfor %}{%- endif %}{%- if message['role'] == 'assistant' and message['content'] is not none %}{%- if ns.is_tool %}{{'<｜tool▁outputs▁end｜>' + message['content'] + '<｜end▁of▁sentence｜>'}}{%- set ns.is_tool = false -%}{%- else %}{% set content = message['content'] %}{% if '</think>' in content %}{% set content = content.split('</think>')[-1] %}{% endif %}{{'<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>'}}{%- endif %}{%- endif %}{%- if message['role'] == 'tool' %}{%- set ns.is_tool = true -%}{%- if ns.is_output_first %}{{'<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>'}}{%- set ns.is_output_first = false %}{%- else %}{{'\\n<｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>'}}{%- endif %}{%- endif %}{%- endfor -%}{% if ns.is_tool %}{{'<｜tool▁outputs▁end｜>'}}{% endif %}{% if add_generation_prompt and not ns.is_tool %}{{'<｜Assistant｜><think>\\n'}}{% endif %}"

REAL["qwen3_like"] = """{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\\n\\n' }}
    {%- endif %}
    {{- "# Tools\\n\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools><|im_end|>\\n" }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and message.content is string and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- else %}
        {%- set content = '' %}
    {%- endif %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in content %}
                {%- set reasoning_content = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}
                {%- set content = content.split('</think>')[-1].lstrip('\\n') %}
            {%- endif %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content.strip('\\n') + '\\n</think>\\n\\n' + content.lstrip('\\n') }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\\n' + content }}
            {%- endif %}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\\n' + content }}
        {%- endif %}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- if (loop.first and content) or (not loop.first) %}
                    {{- '\\n' }}
                {%- endif %}
                {%- if tool_call.function %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {{- '<tool_call>\\n{"name": "' }}
                {{- tool_call.name }}
                {{- '", "arguments": ' }}
                {%- if tool_call.arguments is string %}
                    {{- tool_call.arguments }}
                {%- else %}
                    {{- tool_call.arguments | tojson }}
                {%- endif %}
                {{- '}\\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- content }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\\n\\n</think>\\n\\n' }}
    {%- endif %}
{%- endif %}"""

# Gemma 3's template handles content given as a list of parts (text/image).
REAL["gemma3"] = """{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\\n\\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\\n'}}
{%- endif -%}
"""


def main():
    cases = []
    for name, tpl in CONSTRUCTS.items():
        var = sorted_keys(variables(CONVERSATIONS["sys"]))
        result = render(tpl, var)
        if name.startswith("unsupported_"):
            assert "expected" in result, name
            result = {"error": "unsupported", "message": "renders in jinja2: " + result["expected"]}
        cases.append({"name": name, "template": tpl, "vars": var, **result})
    extra_convs = {"think": THINK, "toolcall": TOOLCALL, "parts": PARTS, "bad_order": BAD_ORDER}
    for name, tpl in REAL.items():
        for conv_name, conv in list(CONVERSATIONS.items()) + list(extra_convs.items()):
            for agp in (True, False):
                var = sorted_keys(variables(conv, agp))
                cases.append({"name": f"{name}/{conv_name}/agp={agp}", "template": tpl, "vars": var, **render(tpl, var)})
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jinja_cases.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"generator": "gen_jinja_cases.py with jinja2 " + jinja2.__version__, "now": NOW, "cases": cases},
                  f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {len(cases)} cases to {out}")


if __name__ == "__main__":
    main()
