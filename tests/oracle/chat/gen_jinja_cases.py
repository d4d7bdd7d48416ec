#!/usr/bin/env python3
"""Generates tests/chat/jinja_cases.inc: one small template per Jinja2 construct the chat
interpreter supports, with the output Python jinja2 gives when configured as transformers
configures chat templates (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
loopcontrols, transformers' tojson and raise_exception). test_chat asserts our output equals
each; test_chat_oracle re-runs this script and checks the committed file is current.

Usage: gen_jinja_cases.py > tests/chat/jinja_cases.inc
"""
import json

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


e = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                  extensions=[jinja2.ext.loopcontrols])
e.filters["tojson"] = tojson
e.globals["raise_exception"] = raise_exception

# (name, template, variables)
cases = [
 ("literals", "{{ 1 }}|{{ 1.5 }}|{{ 'a' }}|{{ \"b\" }}|{{ true }}|{{ none }}|{{ [1, 'x', none] }}|{{ {'k': 1} }}", {}),
 ("arithmetic", "{{ 1 + 2 * 3 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 4 / 2 }} {{ 0.1 + 0.2 }} {{ 10 - 2.5 }}", {}),
 ("string_ops", "{{ 'a' + 'b' }} {{ 'a' ~ 1 ~ none }} {{ 'ab' * 3 }} {{ [1] + [2] }}", {}),
 ("comparisons", "{{ 1 < 2 }} {{ 2 <= 1 }} {{ 'a' < 'b' }} {{ 1 == 1.0 }} {{ 'a' != 'a' }} {{ 3 > 2 >= 2 }}", {}),
 ("logic", "{{ 0 or 'x' }} {{ 1 and 'y' }} {{ not [] }} {{ none or '' }}|{{ 'a' in 'cat' }} {{ 2 in [1, 2] }} {{ 'k' in d }} {{ 'z' not in d }}", {"d": {"k": 1}}),
 ("ternary", "{{ 'yes' if x else 'no' }} {{ 'only' if not x }}|", {"x": 0}),
 ("indexing", "{{ l[0] }} {{ l[-1] }} {{ l[1:] }} {{ l[::-1] }} {{ l[:-1] }} {{ s[1] }} {{ s[::-1] }} {{ s[1:3] }} {{ d['a'] }} {{ d.a }} {{ l[10] }}|", {"l": [1, 2, 3], "s": "héllo", "d": {"a": "A"}}),
 ("if_elif_else", "{% for x in [1, 2, 3] %}{% if x == 1 %}one{% elif x == 2 %}two{% else %}many{% endif %};{% endfor %}", {}),
 ("for_loop_vars", "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{{ loop.previtem }}/{% endfor %}", {}),
 ("for_items", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}", {"d": {"b": 1, "a": 2}}),
 ("for_else_filter", "{% for x in [] %}x{% else %}empty{% endfor %} {% for x in [1, 2, 3, 4] if x is even %}{{ x }}{{ loop.length }}{% endfor %}", {}),
 ("loop_controls", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
 ("set_scoping", "{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}{% if true %}{% set y = 3 %}{% endif %}{{ y }}", {}),
 ("namespace", "{% set ns = namespace(n=0, s='') %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.n }} {{ ns.s }}", {}),
 ("set_block_and_tuple", "{% set a, b = [1, 2] %}{% set blk %}[{{ a }}{{ b }}]{% endset %}{{ blk }}", {}),
 ("whitespace_control", "a  {{- ' b ' -}}  c\n{%- if true -%}\n  d\n{%- endif %}\ne", {}),
 ("trim_and_lstrip_blocks", "<\n  {% if true %}\n    x\n  {% endif %}\n  {# comment #}\ny\n  {%+ if true %}z{% endif %}\n", {}),
 ("trailing_newline", "line\n", {}),
 ("tests", "{{ x is defined }} {{ y is defined }} {{ y is undefined }} {{ n is none }} {{ s is string }} {{ d is mapping }} {{ l is iterable }} {{ 3 is number }} {{ f is false }} {{ t is true }} {{ 3 is odd }} {{ 4 is divisibleby 2 }} {{ s is not none }} {{ 1 is integer }} {{ 1.0 is float }}", {"x": 1, "n": None, "s": "s", "d": {}, "l": [], "f": False, "t": True}),
 ("filters_basic", "{{ '  hi  ' | trim }}|{{ 'abc' | length }}|{{ [1, 2] | length }}|{{ 'Ab' | upper }}{{ 'Ab' | lower }}|{{ [3, 4] | first }}{{ [3, 4] | last }}|{{ u | default('dflt') }}|{{ '' | default('e', true) }}|{{ ['a', 'b'] | join(', ') }}|{{ 'aXbX' | replace('X', '-') }}|{{ 12 | string }}|{{ '42' | int + 1 }}|{{ 'x' | int }}|{{ d | items | list }}", {"d": {"k": "v"}}),
 ("filters_select_map", "{{ users | selectattr('active') | map(attribute='name') | join(',') }}|{{ users | rejectattr('active') | map(attribute='name') | list }}|{{ [1, 2, 3, 4] | select('odd') | list }}|{{ users | selectattr('name', 'equalto', 'b') | list | length }}", {"users": [{"name": "a", "active": True}, {"name": "b", "active": False}, {"name": "c", "active": True}]}),
 ("tojson", "{{ v | tojson }}|{{ v | tojson(indent=2) }}|{{ v | tojson(sort_keys=true) }}|{{ 'é\"\\n\\u0001' | tojson }}|{{ v | tojson(separators=(',', ':')) }}", {"v": {"z": [1, 2.5, None, True, "ü"], "a": {}, "b": []}}),
 ("string_methods", "{{ s.startswith('he') }} {{ s.endswith('lo') }} {{ '  x  '.strip() }}|{{ 'xxaxx'.strip('x') }} {{ '\\n\\na'.lstrip('\\n') }} {{ 'a\\n\\n'.rstrip() }}|{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a b c'.split(' ', 1) }} {{ s.upper() }} {{ 'aaa'.replace('a', 'b', 2) }} {{ s.split('l')[-1] }} {{ d.get('k') }} {{ d.get('z', 'dz') }} {{ d.keys() | list }} {{ d.values() | list }}", {"s": "hello", "d": {"k": "v"}}),
 ("undefined_prints_empty", "[{{ missing }}][{{ d.missing }}][{{ missing | length }}][{% for x in missing %}x{% endfor %}][{{ missing ~ 'a' }}]", {"d": {}}),
 ("raise_in_branch_not_taken", "{% if false %}{{ raise_exception('no') }}{% endif %}ok", {}),
 ("unicode_length", "{{ s | length }} {{ s[0] }} {{ s[-1] }} {{ s | reverse }}", {"s": "日本語🎉"}),
 ("float_repr", "{{ 1e20 }} {{ 1.5e-7 }} {{ 100.0 }} {{ 1/3 }} {{ 2.0 * 3 }} {{ 123456789012345678.0 }}", {}),
 ("dict_literal_and_repr", "{{ {'a': 'it\\'s', 'b': [1.0, none, false]} }} {{ {'q': \"x\\\"y\"} }}", {}),
 ("nested_loops", "{% for a in [1, 2] %}{% for b in ['x', 'y'] %}{{ a }}{{ b }}{{ loop.index }}{% endfor %}{{ loop.index }};{% endfor %}", {}),
 ("macros", "{% set top = 'T' %}{% macro greet(name, punct='!') %}{{ top }}:hi {{ name }}{{ punct }}{% endmacro %}{{ greet('a') }} {{ greet('b', '?') }} {{ greet(punct='.', name='c') }}{% for i in [1] %}{% macro inner() %}{{ i }}{% endmacro %}{{ inner() }}{% endfor %}", {}),
 ("macro_tool_schema", "{%- macro render_params(props) -%}\n{%- for k, v in props.items() %}\n- {{ k }} ({{ v.type }}){% if v.description is defined %}: {{ v.description }}{% endif %}\n{%- endfor %}\n{%- endmacro -%}\n{{ render_params(tool.parameters.properties) }}", {"tool": {"parameters": {"properties": {"city": {"type": "string", "description": "City"}, "days": {"type": "integer"}}}}}),
 ("adjacent_strings", "{{ 'a' 'b' }} {{ ('x' ~ 'y') | upper }}", {}),
]


def raw(text):
    assert ')NIB"' not in text
    return 'R"NIB(' + text + ')NIB"'


print("// Generated by tests/oracle/chat/gen_jinja_cases.py from Python jinja2 " + jinja2.__version__ + "; do not edit.")
for name, template, variables in cases:
    expected = e.from_string(template).render(**variables)
    print("    {%s,\n     %s,\n     %s,\n     %s}," % (json.dumps(name), raw(template),
          raw(json.dumps(variables, ensure_ascii=False)), raw(expected)))
