"""Conversations for chat-template parity tests: every shape of message an agent server sends."""

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "  Get the current weather for a city.\n",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. \"Paris\""},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Unit"},
                "days": {"type": "integer", "minimum": 1, "maximum": 7, "default": 1},
            },
            "required": ["city"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search_files",
        "description": "Search the repository for a regex. Returns matching lines.",
        "parameters": {
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Regex (PCRE) like \\bfoo\\d+"},
                "paths": {"type": "array", "items": {"type": "string"}, "description": "Globs"},
                "options": {
                    "type": "object",
                    "properties": {"case": {"type": "boolean"}, "max-results": {"type": "number"}},
                },
                "$ref-like key": {"type": ["string", "null"], "nullable": True},
            },
            "required": ["pattern", "paths"],
        },
        "return": {"type": "array", "items": {"type": "string"}},
    },
}
TOOLS = [WEATHER_TOOL, SEARCH_TOOL]

SYSTEM = {"role": "system", "content": "You are a careful coding assistant. Answer briefly."}
USER1 = {"role": "user", "content": "What's the weather in Paris?"}
UNICODE_USER = {
    "role": "user",
    "content": "Grüße! 你好，世界 🌍🚀 — naïve café ½ \u200b zero-width, tab\there, \"quotes\" and \\backslash\\",
}


def call(name, args, as_string, call_id="call_1"):
    import json

    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args) if as_string else args},
    }


def tool_turns(as_string):
    return [
        SYSTEM,
        USER1,
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [call("get_weather", {"city": "Paris", "unit": "celsius", "days": 2}, as_string)],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 18.5, \"sky\": \"cloudy\"}"},
        {"role": "assistant", "content": "It is 18.5 °C and cloudy in Paris."},
        {"role": "user", "content": "And find TODOs in src/ please."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                call("search_files", {"pattern": "TODO\\b", "paths": ["src/**/*.cpp", "src/*.h"],
                                      "options": {"case": False, "max-results": 10.0}}, as_string, "c2"),
                call("get_weather", {"city": "Zürich"}, as_string, "c3"),
            ],
        },
        {"role": "tool", "tool_call_id": "c2", "content": "src/a.cpp:12: // TODO fix\nsrc/b.h:3: TODO"},
        {"role": "tool", "tool_call_id": "c3", "content": "sunny"},
    ]


def reasoning_turns():
    return [
        SYSTEM,
        {"role": "user", "content": "Is 91 prime?"},
        {"role": "assistant", "reasoning_content": "91 = 7 * 13.", "content": "No: 91 = 7 × 13."},
        {"role": "user", "content": "And 97?"},
        {"role": "assistant", "content": "<think>\nTry 2, 3, 5, 7: none divide.\n</think>\n\nYes, 97 is prime."},
        {"role": "user", "content": "Thanks. Now call the weather tool for Oslo."},
        {
            "role": "assistant",
            "reasoning_content": "User wants weather; call the tool.",
            "content": "",
            "tool_calls": [call("get_weather", {"city": "Oslo"}, False)],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "-3 °C"},
    ]


def conversations():
    """(name, messages, tools) triples."""
    return [
        ("single_user", [USER1], None),
        ("system_user", [SYSTEM, USER1], None),
        ("multi_turn", [SYSTEM, USER1, {"role": "assistant", "content": "Sunny, 21 °C."},
                        {"role": "user", "content": "Tomorrow?"}], None),
        ("no_system_multi", [USER1, {"role": "assistant", "content": "Sunny."}, UNICODE_USER], None),
        ("unicode", [SYSTEM, UNICODE_USER], None),
        ("tools_user", [SYSTEM, USER1], TOOLS),
        ("tools_no_system", [USER1], TOOLS),
        ("tool_calls_dict_args", tool_turns(False), TOOLS),
        ("tool_calls_string_args", tool_turns(True), TOOLS),
        ("tool_calls_no_tools_given", tool_turns(False), None),
        ("reasoning", reasoning_turns(), TOOLS),
        ("reasoning_no_tools", reasoning_turns()[:5], None),
        ("trailing_assistant", [USER1, {"role": "assistant", "content": "Partial answer"}], None),
        ("empty_content", [SYSTEM, {"role": "user", "content": ""}], None),
    ]


KWARGS_VARIANTS = [
    ("default", {}),
    ("thinking_on", {"enable_thinking": True}),
    ("thinking_off", {"enable_thinking": False}),
]
