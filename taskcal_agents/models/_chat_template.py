"""The chat template written into the default model's folder.

SmolLM2-135M-Instruct's own template (as shipped in its GGUF) is plain ChatML: it reads
``message['content']`` only, so it drops the ``tools`` of a request, fails on an assistant
turn whose content is ``None`` (a tool call) and has no notion of a ``tool`` turn. This one
keeps SmolLM2's ChatML framing and default system prompt and adds the Hermes convention that
vLLM's ``hermes`` tool parser reads back: tool signatures inside ``<tools></tools>`` in the
system turn, calls as ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, results as
``<tool_response>`` inside a user turn. Every piece of output is an explicit string, so the
result does not depend on the Jinja whitespace options of whoever renders it.
"""

from __future__ import annotations

DEFAULT_SYSTEM_PROMPT = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"

TOOL_CHAT_TEMPLATE = r"""
{%- if messages and messages[0]['role'] == 'system' %}
  {%- set system_text = messages[0]['content'] if messages[0]['content'] is string else '' %}
  {%- set loop_messages = messages[1:] %}
{%- else %}
  {%- set system_text = '@DEFAULT_SYSTEM_PROMPT@' %}
  {%- set loop_messages = messages %}
{%- endif %}
{{- '<|im_start|>system\n' + system_text }}
{%- if tools %}
  {{- '\n\nYou may call one or more functions to assist with the user query. '
      ~ 'You are provided with function signatures within <tools></tools> XML tags:\n<tools>' }}
  {%- for tool in tools %}
    {{- '\n' + (tool['function'] if tool['function'] is defined else tool) | tojson }}
  {%- endfor %}
  {{- '\n</tools>\n\nFor each function call, return a json object with function name '
      ~ 'and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n'
      ~ '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>' }}
{%- endif %}
{{- '<|im_end|>\n' }}
{%- for message in loop_messages %}
  {%- set content = message['content'] if message['content'] is string else '' %}
  {%- if message['role'] == 'assistant' %}
    {{- '<|im_start|>assistant\n' + content }}
    {%- if message['tool_calls'] is defined and message['tool_calls'] %}
      {%- for call in message['tool_calls'] %}
        {%- set fn = call['function'] if call['function'] is defined else call %}
        {%- if content or not loop.first %}
          {{- '\n' }}
        {%- endif %}
        {%- set args = fn['arguments'] if fn['arguments'] is string else fn['arguments'] | tojson %}
        {{- '<tool_call>\n{"name": "' + fn['name'] + '", "arguments": ' + args
            + '}\n</tool_call>' }}
      {%- endfor %}
    {%- endif %}
    {{- '<|im_end|>\n' }}
  {%- elif message['role'] == 'tool' %}
    {%- if loop.first or loop.previtem['role'] != 'tool' %}
      {{- '<|im_start|>user' }}
    {%- endif %}
    {{- '\n<tool_response>\n' + content + '\n</tool_response>' }}
    {%- if loop.last or loop.nextitem['role'] != 'tool' %}
      {{- '<|im_end|>\n' }}
    {%- endif %}
  {%- else %}
    {{- '<|im_start|>' + message['role'] + '\n' + content + '<|im_end|>\n' }}
  {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
  {{- '<|im_start|>assistant\n' }}
{%- endif %}
""".strip().replace("@DEFAULT_SYSTEM_PROMPT@", DEFAULT_SYSTEM_PROMPT)
"""Jinja chat template: SmolLM2's ChatML plus Hermes-style tool calling."""
