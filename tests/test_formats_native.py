"""Stage B of issue 8: request formats (openai with the legacy function role, anthropic,
responses) compacted natively, written back in their own format and restored exactly.

The tier-2 cut (``summarize.choose_cut_point``) asks ``formats.adjust_cut`` and
``formats.forced_user`` where it may fall; for OpenAI dumps that is the cut as it was before."""

from __future__ import annotations

import copy

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from native_dumps import ANTHROPIC, RESPONSES

from compactor_cli import formats
from compactor_cli.formats.anthropic import check_messages, rule_problems
from compactor_cli.formats.responses import check_items, pairing_problems
from compactor_cli.model.conversation import estimated_message_length
from compactor_cli.model.tokens import TokenCounter
from compactor_cli.tiers.compact import Policy, compact_dump
from compactor_cli.tiers.restore import restore_details
from compactor_cli.tiers.summarize import summarize_dump
from compactor_cli.tiers.toolcall import reclaim_tool_results

TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
LONG = st.builds(lambda t, n: t + "z" * n, TEXT, st.integers(0, 500))
SHORT = st.text(alphabet="abcdefghij_0123456789", min_size=1, max_size=6)
SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _cut_before_formats(messages, keep_recent=16, keep_task=False):
    """summarize.choose_cut_point as it was before the formats (c35441a), for OpenAI dumps, with
    issue 27's two changes: a harness's repeated or injected user messages are not the user speaking
    (the last *real* user message is force-kept when the kept part has none), and the task (the first
    real user message) is kept first when the head holds it and something besides."""
    from compactor_cli.evidence.harness import real_user_indices
    from compactor_cli.tiers.cut import Cut

    system = 0 if messages and messages[0].get("role") == "system" else None
    start = 1 if system == 0 else 0
    n = len(messages)
    cut = max(start, n - max(keep_recent, 0))
    while start < cut < n and messages[cut].get("role") == "tool":
        cut -= 1
    head = list(range(start, cut))
    kept = list(range(cut, n))
    real = real_user_indices(messages)
    forced = None
    if head and not any(i in real for i in kept):
        users = [i for i in head if i in real]
        if not users and not any(messages[i].get("role") == "user" for i in kept):
            users = [i for i in head if messages[i].get("role") == "user"]
        if users:
            forced = users[-1]
            head.remove(forced)
            kept.insert(0, forced)
    task = None
    if keep_task and real and real[0] in head and len(head) > 1 \
            and len(str(messages[real[0]].get("content") or "")) <= 40_000:
        task = real[0]
        head.remove(task)
        kept.insert(0, task)
    return Cut(system, head, kept, forced, task, (task,) if task is not None else ())


# ---------------------------------------------------------------- strategies: Anthropic

@st.composite
def anthropic_requests(draw):
    ids = iter(f"toolu_{k}" for k in range(1000))
    messages: list[dict] = []
    pending: list[str] = []
    for turn in range(draw(st.integers(1, 9))):
        # user turn: answers the pending tool_uses (results first), maybe with text
        blocks: list[dict] = []
        for cid in draw(st.permutations(pending)) if pending else ():
            kind = draw(st.sampled_from(["str", "str", "blocks", "none", "error"]))
            b: dict = {"type": "tool_result", "tool_use_id": cid}
            if kind in ("str", "error"):
                b["content"] = draw(LONG)
            elif kind == "blocks":
                b["content"] = [{"type": "text", "text": draw(LONG)}]
            if kind == "error":
                b["is_error"] = True
            if draw(st.integers(0, 6)) == 0:
                b["cache_control"] = {"type": "ephemeral"}
            blocks.append(b)
        pending = []
        if not blocks or draw(st.booleans()):
            if draw(st.booleans()) and not blocks:
                messages.append({"role": "user", "content": draw(TEXT)})
            else:
                blocks.append({"type": "text", "text": draw(TEXT)})
                if draw(st.integers(0, 5)) == 0:
                    blocks.append({"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                               "data": "iVBORw0KGgo="}})
                messages.append({"role": "user", "content": blocks})
        else:
            messages.append({"role": "user", "content": blocks})
        # assistant turn
        if turn == 0 or draw(st.integers(0, 7)) > 0:
            a: list[dict] = []
            if draw(st.booleans()):
                a.append({"type": "thinking", "thinking": draw(TEXT), "signature": "sig" + draw(SHORT)})
            if draw(st.integers(0, 5)) == 0:
                a.append({"type": "redacted_thinking", "data": "ENC" + draw(SHORT)})
            if draw(st.booleans()):
                a.append({"type": "text", "text": draw(TEXT)})
            if draw(st.integers(0, 6)) == 0:
                sid = f"srvtoolu_{turn}"
                a.append({"type": "server_tool_use", "id": sid, "name": "web_search", "input": {"query": draw(TEXT)}})
                a.append({"type": "web_search_tool_result", "tool_use_id": sid,
                          "content": [{"type": "web_search_result", "title": draw(TEXT), "url": "https://x.invalid",
                                       "encrypted_content": "E"}]})
            for _ in range(draw(st.sampled_from([0, 1, 1, 2, 3]))):
                cid = next(ids)
                a.append({"type": "tool_use", "id": cid, "name": draw(SHORT), "input": {"q": draw(TEXT)}})
                pending.append(cid)
            if not a:
                a = [{"type": "text", "text": "ok"}]
            content = a if draw(st.integers(0, 5)) or len(a) != 1 or a[0]["type"] != "text" else a[0]["text"]
            messages.append({"role": "assistant", "content": content})
        else:
            break
    if pending:  # the last assistant's calls are answered
        messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": c, "content": draw(LONG)}
                                                     for c in pending]})
    if draw(st.integers(0, 4)) == 0:
        return messages  # a bare list of messages
    req: dict = {"model": "claude-sonnet-4-5", "max_tokens": 1024}
    sys_kind = draw(st.sampled_from(["none", "str", "blocks"]))
    if sys_kind == "str":
        req["system"] = draw(TEXT)
    elif sys_kind == "blocks":
        req["system"] = [{"type": "text", "text": draw(TEXT), "cache_control": {"type": "ephemeral"}}]
    req["messages"] = messages
    if draw(st.booleans()):
        req["tools"] = [{"name": "lookup", "description": "d", "input_schema": {"type": "object"}}]
    return req


def anthropic_messages(obj):
    return obj if isinstance(obj, list) else obj["messages"]


def assert_valid_anthropic(obj, original):
    """Accepted by the Messages request rules: no system-role message, user first, roles
    alternate, every tool_use answered in the next message (no new problem of the input's)."""
    msgs = anthropic_messages(obj)
    base = "" if isinstance(obj, list) else "/messages"
    assert check_messages(msgs, base) == []
    assert all(m["role"] in ("user", "assistant") for m in msgs)
    before = {p.message for p in rule_problems(anthropic_messages(original), base)}
    after = [p.message for p in rule_problems(msgs, base) if p.message not in before]
    assert after == [], after
    if msgs:
        assert msgs[0]["role"] == "user"
    if isinstance(obj, dict) and "system" in obj:
        assert isinstance(obj["system"], (str, list)) or obj["system"] is None


# ---------------------------------------------------------------- strategies: Responses

@st.composite
def responses_requests(draw):
    ids = iter(f"call_{k}" for k in range(1000))
    items: list[dict] = []
    for turn in range(draw(st.integers(1, 9))):
        kind = draw(st.sampled_from(["user", "assistant", "calls", "calls", "developer", "other"]))
        if draw(st.integers(0, 3)) == 0:
            r = {"type": "reasoning", "id": f"rs_{turn}", "summary": [{"type": "summary_text", "text": draw(TEXT)}]}
            if draw(st.booleans()):
                r["encrypted_content"] = "gAAA" + draw(SHORT)
            items.append(r)
        if kind in ("user", "developer"):
            if draw(st.booleans()):
                items.append({"role": kind, "content": draw(TEXT)})
            else:
                items.append({"type": "message", "role": kind, "content": [{"type": "input_text", "text": draw(TEXT)}]})
        elif kind == "assistant":
            items.append({"type": "message", "id": f"msg_{turn}", "role": "assistant", "status": "completed",
                          "content": [{"type": "output_text", "text": draw(TEXT), "annotations": []}]})
        elif kind == "calls":
            calls = []
            for _ in range(draw(st.integers(1, 3))):
                cid = next(ids)
                if draw(st.integers(0, 4)) == 0:
                    items.append({"type": "custom_tool_call", "call_id": cid, "name": "apply_patch",
                                  "input": draw(TEXT)})
                    calls.append((cid, "custom_tool_call_output"))
                else:
                    items.append({"type": "function_call", "id": f"fc_{cid}", "call_id": cid, "name": draw(SHORT),
                                  "arguments": "{}"})
                    calls.append((cid, "function_call_output"))
            if draw(st.integers(0, 4)) == 0:  # outputs need not follow directly in Responses input
                items.append({"type": "message", "role": "user", "content": draw(TEXT)})
            for cid, t in draw(st.permutations(calls)):
                out = draw(st.one_of(LONG, st.builds(lambda x: [{"type": "input_text", "text": x}], LONG)))
                items.append({"type": t, "call_id": cid, "output": out})
        else:
            items.append(draw(st.sampled_from([{"type": "item_reference", "id": "msg_old"},
                                               {"type": "compaction", "encrypted_content": "ENCRYPTED"}])))
    if draw(st.integers(0, 4)) == 0:
        return items
    req: dict = {"model": "gpt-5"}
    if draw(st.booleans()):
        req["instructions"] = draw(st.one_of(TEXT, st.none()))
    req["input"] = items
    if draw(st.booleans()):
        req["tools"] = [{"type": "function", "name": "f", "parameters": {"type": "object"}}]
    req["store"] = False
    return req


def response_items(obj):
    return obj if isinstance(obj, list) else obj["input"]


def assert_valid_responses(obj, original):
    items = response_items(obj)
    if isinstance(items, str):
        return
    base = "" if isinstance(obj, list) else "/input"
    assert check_items(items, base) == []
    before = {p.message for p in pairing_problems(response_items(original), base)} \
        if isinstance(response_items(original), list) else set()
    after = [p.message for p in pairing_problems(items, base) if p.message not in before]
    assert after == [], after
    follows = {}  # reasoning item id -> the item it preceded in the input
    orig = response_items(original)
    for k, item in enumerate(orig if isinstance(orig, list) else ()):
        if item.get("type") == "reasoning" and k + 1 < len(orig):
            follows[item["id"]] = orig[k + 1]
    for k, item in enumerate(items):  # a reasoning item still precedes the item it preceded
        if item.get("type") == "reasoning" and item["id"] in follows:
            assert items[k + 1] == follows[item["id"]] or items[k + 1].get("call_id") == follows[item["id"]].get(
                "call_id")


# ---------------------------------------------------------------- strategies: OpenAI legacy

@st.composite
def legacy_openai(draw):
    msgs: list[dict] = []
    if draw(st.booleans()):
        msgs.append({"role": "system", "content": draw(TEXT)})
    for _ in range(draw(st.integers(1, 7))):
        msgs.append({"role": "user", "content": draw(TEXT)})
        if draw(st.booleans()):
            name = draw(SHORT)
            msgs.append({"role": "assistant", "content": None,
                         "function_call": {"name": name, "arguments": "{\"x\": 1}"}})
            msgs.append({"role": "function", "name": name, "content": draw(LONG)})
        msgs.append({"role": "assistant", "content": draw(TEXT)})
    return msgs if draw(st.booleans()) else {"messages": msgs, "model": "gpt-3.5-turbo-0613"}


# ---------------------------------------------------------------- the round trips

def read_as(obj, fmt):
    dump, codec = formats.read(copy.deepcopy(obj), fmt)
    assert codec.format == fmt
    return dump, codec


def cycle(obj, fmt):
    """Write the dump natively and read it back (as a later run would)."""
    return read_as(obj, fmt)


def restore_exact(native, fmt, original):
    dump, codec = cycle(native, fmt)
    back = codec.to_native(restore_details(dump).dump)
    assert back == original
    assert orjson.dumps(back) == orjson.dumps(original)  # keys in their order too
    again, codec2 = cycle(back, fmt)  # restoring a restored record changes nothing
    details = restore_details(again)
    assert details.restored == 0 and codec2.to_native(details.dump) == original


def tier1(native, fmt, keep):
    dump, codec = cycle(native, fmt)
    new, res = reclaim_tool_results(dump, keep=keep)
    return codec.to_native(new), res


def tier2(native, fmt, keep_recent):
    dump, codec = cycle(native, fmt)
    new, status, _ = summarize_dump(dump, keep_recent=keep_recent)
    return codec.to_native(new), status


FORMATS = {"anthropic": (anthropic_requests, assert_valid_anthropic),
           "responses": (responses_requests, assert_valid_responses),
           "openai": (legacy_openai, None)}


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_read_and_write_back_is_identity(fmt):
    strategy, _ = FORMATS[fmt]

    @SETTINGS
    @given(strategy())
    def check(obj):
        dump, codec = read_as(obj, fmt)
        assert codec.to_native(dump) == obj
        assert orjson.dumps(codec.to_native(dump)) == orjson.dumps(obj)
        if fmt != "openai":
            assert formats.detect_format(obj) in (fmt, "openai")  # no mark of its format: read as OpenAI, the same

    check()


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_tier1_restores_exactly_and_is_idempotent(fmt):
    strategy, valid = FORMATS[fmt]

    @SETTINGS
    @given(strategy(), st.integers(0, 4))
    def check(obj, keep):
        out, res = tier1(obj, fmt, keep)
        if valid:
            valid(out, obj)
        again, res2 = tier1(out, fmt, keep)
        assert res2.reclaimed_count == 0 and again == out  # idempotent
        restore_exact(out, fmt, obj)

    check()


def _long_arguments(obj, n: int):
    """The request with every function call's arguments padded to at least ``n`` characters, so
    --clear-tool-inputs has inputs worth clearing."""
    obj = copy.deepcopy(obj)
    items = obj if isinstance(obj, list) else obj.get("messages", obj.get("input"))
    for it in items if isinstance(items, list) else ():
        if it.get("type") == "function_call":
            it["arguments"] = orjson.dumps({"q": "a" * n}).decode()
        for b in it.get("content") if isinstance(it.get("content"), list) else ():
            if isinstance(b, dict) and b.get("type") == "tool_use":
                b["input"] = {**b["input"], "pad": "p" * n}
        if "function_call" in it:
            it["function_call"] = {**it["function_call"], "arguments": orjson.dumps({"x": "b" * n}).decode()}
    return obj


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_cleared_inputs_and_own_placeholders_are_written_natively_and_restore_exactly(fmt):
    strategy, valid = FORMATS[fmt]

    @SETTINGS
    @given(strategy(), st.integers(0, 3), st.integers(0, 120))
    def check(obj, keep, pad):
        obj = _long_arguments(obj, pad)
        dump, codec = cycle(obj, fmt)
        options = dict(keep=keep, clear_tool_inputs=True, placeholder="Old output ({lines} lines, {tool}) {id}")
        new, res = reclaim_tool_results(dump, **options)
        out = codec.to_native(new)
        if valid:
            valid(out, obj)
        if res.inputs_cleared:  # the cleared calls are still valid calls of their format, read back cleared
            text = orjson.dumps(out).decode()
            assert "Arguments compacted, ID: " in text
        again, codec2 = cycle(out, fmt)
        new2, res2 = reclaim_tool_results(again, **options)
        assert res2.reclaimed_count == 0 and codec2.to_native(new2) == out  # idempotent
        restore_exact(out, fmt, obj)

    check()


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_tier2_output_is_valid_and_restores_exactly(fmt):
    strategy, valid = FORMATS[fmt]

    @SETTINGS
    @given(strategy(), st.integers(0, 6))
    def check(obj, keep_recent):
        out, status = tier2(obj, fmt, keep_recent)
        if status.value == "SUMMARIZED":
            if valid:
                valid(out, obj)
            if fmt == "anthropic":  # the prompt kept as it was (a string or blocks), the summary after it
                assert isinstance(out, dict) and isinstance(out["system"], (str, list))
                assert "summary round 1" in _text(out["system"])
            if fmt == "responses":
                instr = isinstance(obj, dict) and "instructions" in obj
                summary = out["instructions"] if instr else response_items(out)[0]["content"]
                assert "summary round 1" in _text(summary)
        restore_exact(out, fmt, obj)

    check()


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_any_mix_of_tiers_restores_exactly(fmt):
    strategy, valid = FORMATS[fmt]

    @SETTINGS
    @given(strategy(), st.lists(st.tuples(st.sampled_from(["t1", "t2", "compact"]), st.integers(0, 5)), max_size=4))
    def check(obj, plan):
        native = obj
        for step, k in plan:
            if step == "t1":
                native, _ = tier1(native, fmt, k)
            elif step == "t2":
                native, _ = tier2(native, fmt, k)
            else:
                dump, codec = cycle(native, fmt)
                new, _, _ = compact_dump(dump, Policy(token_threshold=1, keep=k, keep_recent=k, max_retries=1))
                native = codec.to_native(new)
            if valid:
                valid(native, obj)
        restore_exact(native, fmt, obj)

    check()


def test_the_format_aware_cut_is_the_old_cut_for_openai_dumps():
    from strategies import conversations

    from compactor_cli.tiers.cut import choose_cut_point

    @SETTINGS
    @given(conversations(), st.integers(0, 10), st.booleans())
    def check(dump, keep_recent, keep_task):
        assert _cut_before_formats(dump["messages"], keep_recent, keep_task) == choose_cut_point(
            dump["messages"], keep_recent, keep_task)

    check()


# ---------------------------------------------------------------- examples

def test_anthropic_tier1_replaces_tool_result_content_only():
    out, res = tier1(ANTHROPIC, "anthropic", 0)
    assert res.reclaimed_count == 3
    msgs = out["messages"]
    first = msgs[2]["content"][0]
    assert first == {"type": "tool_result", "tool_use_id": "toolu_01",
                     "content": formats.MSG_KEY and first["content"]}
    assert first["content"].startswith("[Compacted, ID: toolu_01.")
    assert msgs[2]["content"][1] == {"type": "text", "text": "That is the whole log."}
    assert msgs[4]["content"][1]["is_error"] is True and msgs[4]["content"][1]["content"].startswith("[Compacted")
    assert msgs[1] == ANTHROPIC["messages"][1]  # the signed thinking block is untouched
    assert out["compacted_tool_results"]["toolu_03"] == [{"type": "text", "text": "y" * 500}]
    assert formats.MSG_KEY not in orjson.dumps(out["messages"]).decode()
    restore_exact(out, "anthropic", ANTHROPIC)


def _text(value) -> str:
    """The text of a string, or of a list of text blocks / input_text parts."""
    if isinstance(value, str):
        return value
    return "\n".join(p.get("text", "") for p in value if isinstance(p, dict))


def test_anthropic_summary_goes_to_system():
    out, status = tier2(ANTHROPIC, "anthropic", 2)
    assert status.value == "SUMMARIZED"
    assert list(out)[:4] == ["model", "max_tokens", "system", "messages"]
    # the system blocks stay as they were; the summary is one more text block after them
    assert out["system"][:len(ANTHROPIC["system"])] == ANTHROPIC["system"]
    (added,) = out["system"][len(ANTHROPIC["system"]):]
    assert added["type"] == "text" and added["text"].startswith("## system_context") and "summary round 1" in added["text"]
    assert out["messages"] == ANTHROPIC["messages"][6:]  # cut before the user message "Fix it."
    assert_valid_anthropic(out, ANTHROPIC)
    restore_exact(out, "anthropic", ANTHROPIC)


def test_anthropic_cut_never_starts_with_results_or_assistant():
    for k in range(0, 9):
        out, status = tier2(ANTHROPIC, "anthropic", k)
        if status.value == "SUMMARIZED":
            assert out["messages"][0]["role"] == "user"
            assert not any(isinstance(b, dict) and b.get("type") == "tool_result"
                           for b in out["messages"][0]["content"] if isinstance(out["messages"][0]["content"], list))


def test_responses_tier1_and_summary():
    out, res = tier1(RESPONSES, "responses", 0)
    assert res.reclaimed_count == 2
    assert out["input"][3]["output"].startswith("[Compacted, ID: call_1.")
    assert out["input"][5]["output"].startswith("[Compacted, ID: call_2.")
    assert out["input"][1] == RESPONSES["input"][1]  # reasoning kept with its call
    restore_exact(out, "responses", RESPONSES)
    out, status = tier2(RESPONSES, "responses", 2)
    assert status.value == "SUMMARIZED"
    assert "summary round 1" in out["instructions"]
    assert out["input"] == RESPONSES["input"][:1] + RESPONSES["input"][7:]  # the task stays, verbatim, first
    restore_exact(out, "responses", RESPONSES)


def test_responses_without_instructions_gets_a_developer_message():
    items = RESPONSES["input"]
    out, status = tier2(items, "responses", 2)
    assert status.value == "SUMMARIZED"
    lead = out["input"][0]
    assert lead["type"] == "message" and lead["role"] == "developer" and "summary round 1" in lead["content"]
    assert out["xcompact"]["input_form"] == "list"
    restore_exact(out, "responses", items)


def test_responses_reasoning_stays_with_the_item_it_precedes():
    obj = {"input": [{"role": "user", "content": "a" * 300}, {"role": "user", "content": "b" * 300},
                     {"type": "reasoning", "id": "rs", "summary": []},
                     {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
                     {"type": "function_call_output", "call_id": "c", "output": "o" * 300},
                     {"role": "user", "content": "next"}]}
    for k in range(6):
        out, status = tier2(obj, "responses", k)
        items = response_items(out)
        for i, item in enumerate(items):
            if item.get("type") == "reasoning":
                assert items[i + 1]["type"] == "function_call"
        restore_exact(out, "responses", obj)


def test_legacy_function_role_is_compacted_natively():
    legacy = {"messages": [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "function_call": {"name": "get_weather", "arguments": "{}"}},
        {"role": "function", "name": "get_weather", "content": "sunny " * 100},
        {"role": "assistant", "content": "Sunny."},
        {"role": "user", "content": "and tomorrow?"},
        {"role": "assistant", "content": None, "function_call": {"name": "get_weather", "arguments": "{\"d\":1}"}},
        {"role": "function", "name": "get_weather", "content": "rain " * 100}]}
    dump, codec = read_as(legacy, "openai")
    assert [m["role"] for m in dump["messages"]][2] == "tool"
    assert formats.detect_format(legacy) == "openai"
    out, res = tier1(legacy, "openai", 1)
    assert res.reclaimed_count == 1
    assert out["messages"][2] == {"role": "function", "name": "get_weather",
                                  "content": "[Compacted, ID: function_call_0. If this content is still needed, call "
                                             "extract_compacted_tool_result with this ID or re-run the tool.]"}
    assert out["compacted_tool_results"] == {"function_call_0": "sunny " * 100}
    restore_exact(out, "openai", legacy)


def test_legacy_ids_survive_a_summary():
    legacy = [{"role": "user", "content": "q"}]
    for k in range(4):
        legacy += [{"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": str(k)}},
                   {"role": "function", "name": "f", "content": f"{k} " * 200},
                   {"role": "user", "content": f"more {k}"}]
    out, _ = tier1(legacy, "openai", 3)
    out, status = tier2(out, "openai", 4)
    assert status.value == "SUMMARIZED"
    out, _ = tier1(out, "openai", 0)
    ids = [m["content"] for m in response_items({"input": out["messages"]}) if m.get("role") == "function"]
    assert all("function_call_" in c for c in ids)
    restore_exact(out, "openai", legacy)


def test_validate_knows_each_format_pairing():
    bad = copy.deepcopy(ANTHROPIC)
    bad["messages"][4]["content"].pop(0)  # toolu_03 left unanswered
    dump, codec = read_as(bad, "anthropic")
    problems = [str(p) for p in codec.problems(dump)]
    assert "at /messages/3/content/1: tool_use 'toolu_03' is not answered by a tool_result in the next message" \
        in problems
    bad = copy.deepcopy(RESPONSES)
    del bad["input"][3]
    dump, codec = read_as(bad, "responses")
    assert [str(p) for p in codec.problems(dump)] == ["at /input/2: call 'call_1' has no output"]
    bad = {"system": "s", "messages": [{"role": "system", "content": "x"}]}
    with pytest.raises(Exception, match="a system prompt goes in the top-level 'system'"):
        formats.read(bad, "anthropic")


def test_counts_include_every_text_of_the_format():
    dump, _ = read_as(ANTHROPIC, "anthropic")
    msgs = dump["messages"]
    assert msgs[0]["content"][0]["text"] == "You are a careful coding agent."  # system
    assert msgs[2]["reasoning_content"] == "Check the log first."  # thinking
    assert msgs[2]["tool_calls"][0]["function"]["arguments"] == '{"path":"build.log"}'  # tool input
    assert msgs[3]["content"] == "error: " + "x" * 600  # tool result
    assert msgs[4]["content"] == [{"type": "text", "text": "That is the whole log."}]
    counter = TokenCounter()
    total = counter.conversation(msgs)
    for i, key in ((2, "reasoning_content"), (3, "content"), (0, "content")):
        stripped = copy.deepcopy(msgs)
        stripped[i].pop(key)
        assert counter.conversation(stripped) < total, key
    stripped = copy.deepcopy(msgs)
    stripped[2]["tool_calls"][0]["function"]["arguments"] = ""
    assert counter.conversation(stripped) < total  # tool inputs are counted
    assert estimated_message_length(msgs) >= 600 + 500 + 500 + len("Check the log first.")
    dump, _ = read_as(RESPONSES, "responses")
    msgs = dump["messages"]
    assert msgs[0]["content"] == "You are a careful coding agent."  # instructions
    assert msgs[2]["reasoning_content"] == "Check the log."  # reasoning summary
    assert msgs[4]["tool_calls"][0]["function"]["arguments"] == "*** Begin Patch"  # custom tool input
    assert msgs[5]["content"] == [{"type": "input_text", "text": "y" * 500}]
    assert counter.content(msgs[5]["content"]) > 0


def test_internal_memory_is_never_counted_twice():
    dump, _ = read_as(ANTHROPIC, "anthropic")
    plain = [{k: v for k, v in m.items() if k != formats.MSG_KEY} for m in dump["messages"]]
    assert estimated_message_length(dump["messages"]) == estimated_message_length(plain)
    counter = TokenCounter()
    assert counter.conversation(dump["messages"]) == counter.conversation(plain)


def test_convert_between_request_formats_keeps_calls_and_says_what_is_lost():
    from compactor_cli.formats.convert import convert

    dump, codec = read_as(ANTHROPIC, "anthropic")
    to_openai, notes = convert(dump, codec, "openai")
    assert "1 signed thinking blocks: text kept as reasoning_content, signature dropped" in notes
    assert "1 redacted_thinking blocks dropped (no text to carry)" in notes
    assert to_openai["tools"] == [{"type": "function", "function": {"name": "read_file", "description": "Read a file",
                                                                      "parameters": {"type": "object"}}}]
    to_resp, notes = convert(*read_as(to_openai, "openai"), "responses")
    d2, c2 = read_as(to_resp, "responses")
    back, notes = convert(d2, c2, "anthropic")
    ids = [b["id"] for m in back["messages"] if isinstance(m["content"], list) for b in m["content"]
           if b["type"] == "tool_use"]
    assert ids == ["toolu_01", "toolu_02", "toolu_03"]
    assert back["system"] == "You are a careful coding agent."
    assert_valid_anthropic(back, back)
    assert convert(dump, codec, "anthropic")[0] == ANTHROPIC  # same format: exact


# ---------------------------------------------------------------- real conversations

from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data" / "raw"


def claude_code_as_anthropic(path: Path) -> dict:
    from compactor_cli.formats.claude_code import read_claude_code_anthropic

    events = [(n, orjson.loads(x)) for n, x in enumerate(path.read_bytes().split(b"\n"), 1) if x.strip()]
    req, _ = read_claude_code_anthropic(events, str(path))
    return req


def check_real_anthropic(req: dict) -> dict:
    dump, codec = read_as(req, "anthropic")
    assert [p for p in codec.problems(dump)] == []
    stats = {"messages": len(req["messages"])}
    out, res = tier1(req, "anthropic", 4)
    stats["reclaimed"] = res.reclaimed_count
    assert_valid_anthropic(out, req)
    restore_exact(out, "anthropic", req)
    for keep_recent in (2, 16, 40):
        summ, status = tier2(out, "anthropic", keep_recent)
        if status.value == "SUMMARIZED":
            stats.setdefault("summarized", []).append(keep_recent)
            assert_valid_anthropic(summ, req)
            assert summ["messages"][0]["role"] == "user"
            restore_exact(summ, "anthropic", req)
            again, _ = tier1(summ, "anthropic", 0)
            assert_valid_anthropic(again, req)
            restore_exact(again, "anthropic", req)
    return stats


def test_anthropic_real_session_fixture():
    req = claude_code_as_anthropic(ROOT / "fixtures" / "formats" / "claude_code_tool_heavy.jsonl")
    stats = check_real_anthropic(req)
    assert stats["messages"] == 9 and stats["reclaimed"] >= 1


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data/raw is not here")
def test_anthropic_real_sessions():
    summarised = 0
    for path in sorted((SHARED / "claude-code").glob("*.jsonl")):
        stats = check_real_anthropic(claude_code_as_anthropic(path))
        summarised += bool(stats.get("summarized"))
    assert summarised >= 5


def test_anthropic_tool_loop_after_one_prompt_can_be_cut():
    """One prompt, then only tool turns: the cut falls between turns and the prompt goes first."""
    messages = [{"role": "user", "content": "Refactor the parser."}]
    for k in range(8):
        messages.append({"role": "assistant", "content": [
            {"type": "text", "text": f"step {k}"},
            {"type": "tool_use", "id": f"toolu_{k}", "name": "bash", "input": {"cmd": f"run {k}"}}]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{k}", "content": f"output {k} " * 80}]})
    messages.append({"role": "assistant", "content": "Done."})
    req = {"model": "claude-sonnet-4-5", "max_tokens": 512, "messages": messages}
    out, status = tier2(req, "anthropic", 5)
    assert status.value == "SUMMARIZED"
    assert out["messages"][0] == messages[0]  # the prompt, force-kept, first
    assert out["messages"][1]["role"] == "assistant"
    assert_valid_anthropic(out, req)
    restore_exact(out, "anthropic", req)


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data/raw is not here")
def test_real_openai_conversations_round_trip_through_responses_and_anthropic():
    """The real tau-bench and SWE-agent conversations, converted to Responses and Anthropic,
    compact natively and restore exactly."""
    from compactor_cli.formats.convert import convert

    lines = (SHARED.parent / "taubench_gpt-4o-airline.jsonl").read_bytes().splitlines()[:20]
    lines += (SHARED.parent / "swe-agent.jsonl").read_bytes().splitlines()[:6]
    for raw in lines:
        dump, codec = formats.parse_record(raw)
        for to, valid in (("responses", assert_valid_responses), ("anthropic", assert_valid_anthropic)):
            native, _ = convert(dump, codec, to)
            d2, c2 = read_as(native, to)
            assert not [p for p in c2.problems(d2) if "used again" not in p.message]
            out, res = tier1(native, to, 3)
            valid(out, native)
            summ, status = tier2(out, to, 6)
            valid(summ, native)
            restore_exact(summ, to, native)


def test_a_responses_developer_item_first_keeps_its_text_and_gets_the_summary():
    """The prompt is a developer item (no instructions key): the summary is written with the
    prompt's text kept first, never dropped for the item as read (restore gives the item back)."""
    items = [{"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Be terse. Cite files."}]}]
    for i in range(8):
        items += [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": f"Question {i} " * 40}]},
                  {"type": "message", "role": "assistant", "id": f"msg_{i}", "status": "completed",
                   "content": [{"type": "output_text", "text": f"Answer {i} " * 40, "annotations": []}]}]
    out, status = tier2(items, "responses", 4)
    assert status.value == "SUMMARIZED"
    first = response_items(out)[0]
    text = _text(first["content"])
    assert first["role"] == "developer" and text.startswith("Be terse. Cite files.\n\n## system_context")
    assert "summary round 1" in text and response_items(out)[1:] == items[-4:]
    assert_valid_responses(out, items)
    restore_exact(out, "responses", items)
