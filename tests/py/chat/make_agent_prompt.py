"""Writes tests/data/chat/agent_10k.json: a coding-agent conversation of about 10k tokens (system
prompt, 8 tools, 24 tool-call rounds with file contents) for measuring template render time:
  tempo9 template --template qwen3-coder.jinja --messages agent_10k.json --repeat 1000 >/dev/null"""

import json
import pathlib

OUT = pathlib.Path(__file__).resolve().parents[2] / "data/chat/agent_10k.json"


def tool(name, desc, props, required):
    return {"type": "function", "function": {"name": name, "description": desc, "parameters": {
        "type": "object", "properties": props, "required": required}}}


S = {"type": "string"}
TOOLS = [
    tool("read_file", "Read a file from the workspace.", {"path": {**S, "description": "Path relative to the repo root"},
         "start_line": {"type": "integer", "description": "First line (1-based)"}, "end_line": {"type": "integer"}}, ["path"]),
    tool("write_file", "Create or overwrite a file.", {"path": S, "content": {**S, "description": "Full new content"}}, ["path", "content"]),
    tool("edit_file", "Replace an exact string in a file.", {"path": S, "old": S, "new": S, "count": {"type": "integer", "default": 1}}, ["path", "old", "new"]),
    tool("run_command", "Run a shell command in the sandbox and return stdout/stderr.", {"command": S, "timeout_s": {"type": "number", "minimum": 1, "maximum": 600}}, ["command"]),
    tool("search", "Search the repository with a regular expression.", {"pattern": S, "glob": {**S, "description": "e.g. src/**/*.cpp"}, "max_results": {"type": "integer"}}, ["pattern"]),
    tool("list_dir", "List a directory.", {"path": S, "depth": {"type": "integer", "enum": [1, 2, 3]}}, ["path"]),
    tool("git_diff", "Show the working tree diff.", {"paths": {"type": "array", "items": S}}, []),
    tool("finish", "Report that the task is complete.", {"summary": S}, ["summary"]),
]

CODE = "\n".join(f"{i:4d}  int f{i}(int x) {{ return x * {i} + (x >> {i % 7}); }}  // helper {i}" for i in range(1, 12))


def build():
    msgs = [{"role": "system", "content": "You are an expert C++ engineer working in a large repository. "
             "Follow the style guide, keep functions short, write tests, and explain briefly.\n" * 6},
            {"role": "user", "content": "The build fails in src/util/math.cpp; find the cause, fix it and run the tests."}]
    for r in range(24):
        path = f"src/util/part{r}.cpp"
        msgs.append({"role": "assistant", "content": f"Step {r}: reading {path}.", "tool_calls": [
            {"id": f"call_{r}", "type": "function", "function": {"name": "read_file", "arguments": {"path": path, "start_line": 1, "end_line": 40}}}]})
        msgs.append({"role": "tool", "tool_call_id": f"call_{r}", "content": CODE})
    msgs.append({"role": "assistant", "content": "Running the tests.", "tool_calls": [
        {"id": "call_t", "type": "function", "function": {"name": "run_command", "arguments": {"command": "ctest -R util --output-on-failure", "timeout_s": 120}}}]})
    msgs.append({"role": "tool", "tool_call_id": "call_t", "content": "100% tests passed, 0 tests failed out of 12"})
    return {"messages": msgs, "tools": TOOLS}


if __name__ == "__main__":
    data = build()
    OUT.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {OUT}")
