"""One request dump in each native format (anthropic, responses), with thinking blocks, parallel
calls, errors and custom tool calls: shared by test_formats_native.py, test_values_kept.py,
test_odd_values.py and test_api_ready.py."""

ANTHROPIC = {
    "model": "claude-sonnet-4-5", "max_tokens": 2048,
    "system": [{"type": "text", "text": "You are a careful coding agent.", "cache_control": {"type": "ephemeral"}}],
    "messages": [
        {"role": "user", "content": "Why does the build fail?"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Check the log first.", "signature": "EqQBCkgIARABGAIiQL"},
            {"type": "text", "text": "Reading the build log."},
            {"type": "tool_use", "id": "toolu_01", "name": "read_file", "input": {"path": "build.log"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01", "content": "error: " + "x" * 600},
            {"type": "text", "text": "That is the whole log."}]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_02", "name": "grep", "input": {"pattern": "undefined"}},
            {"type": "tool_use", "id": "toolu_03", "name": "grep", "input": {"pattern": "missing"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_03", "content": [{"type": "text", "text": "y" * 500}]},
            {"type": "tool_result", "tool_use_id": "toolu_02", "content": "z" * 500, "is_error": True}]},
        {"role": "assistant", "content": [{"type": "redacted_thinking", "data": "EmwKAhgB"},
                                          {"type": "text", "text": "A symbol is undefined in util.c."}]},
        {"role": "user", "content": "Fix it."},
        {"role": "assistant", "content": "Done: util.c now declares it."}],
    "tools": [{"name": "read_file", "description": "Read a file", "input_schema": {"type": "object"}}],
}

RESPONSES = {
    "model": "gpt-5", "instructions": "You are a careful coding agent.",
    "input": [
        {"role": "user", "content": "Why does the build fail?"},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Check the log."}],
         "encrypted_content": "gAAAA"},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "read_file",
         "arguments": "{\"path\":\"build.log\"}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "error: " + "x" * 600},
        {"type": "custom_tool_call", "call_id": "call_2", "name": "apply_patch", "input": "*** Begin Patch"},
        {"type": "custom_tool_call_output", "call_id": "call_2",
         "output": [{"type": "input_text", "text": "y" * 500}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Fixed util.c."}]},
        {"role": "user", "content": "Thanks. Anything else?"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "No."}]}],
    "store": False,
}
