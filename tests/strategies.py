"""Hypothesis strategies: agent conversations with parallel tool calls, list-of-parts content,
reasoning fields, non-ASCII text, reused tool-call IDs and already-compacted results; and
adversarial ones: IDs that look like other results' keys, stores with stale keys."""

from __future__ import annotations

from hypothesis import strategies as st

from compactor_cli import placeholder_for

TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=300)
SHORT = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_0123456789", min_size=1, max_size=8)


def content(draw) -> object:
    kind = draw(st.sampled_from(["str", "str", "parts", "none"]))
    if kind == "str":
        return draw(TEXT)
    if kind == "none":
        return None
    parts = draw(st.lists(st.one_of(
        st.builds(lambda t: {"type": "text", "text": t}, TEXT),
        st.just({"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}})), max_size=3))
    return parts


@st.composite
def conversations(draw, reuse_ids: bool = True, allow_compacted: bool = True, max_turns: int = 8,
                  ids=None) -> dict:
    """A valid conversation (tool pairing holds); IDs may repeat across rounds (drawn from
    ``ids`` when given)."""
    messages: list[dict] = []
    if draw(st.booleans()):
        messages.append({"role": "system", "content": draw(TEXT)})
    id_pool = draw(st.lists(ids if ids is not None else SHORT, min_size=1, max_size=6, unique=True))
    counter = 0
    for _ in range(draw(st.integers(0, max_turns))):
        kind = draw(st.sampled_from(["user", "assistant", "tools", "tools", "developer"]))
        if kind in ("user", "developer"):
            messages.append({"role": kind, "content": content(draw)})
        elif kind == "assistant":
            m = {"role": "assistant", "content": content(draw)}
            if draw(st.booleans()):
                m["reasoning_content"] = draw(TEXT)
            messages.append(m)
        else:
            n = draw(st.integers(1, 3))  # parallel calls
            ids = []
            for _ in range(n):
                if reuse_ids and draw(st.booleans()):
                    cid = draw(st.sampled_from(id_pool))
                else:
                    cid = f"call_{counter}"
                    counter += 1
                if cid in ids:
                    cid = f"call_{counter}"
                    counter += 1
                ids.append(cid)
            call_msg = {"role": "assistant", "content": None, "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": draw(SHORT), "arguments": "{}"}} for cid in ids]}
            if draw(st.booleans()):
                call_msg["reasoning"] = draw(TEXT)
            messages.append(call_msg)
            for cid in draw(st.permutations(ids)):
                if allow_compacted and draw(st.integers(0, 9)) == 0:
                    body = placeholder_for(cid)
                else:
                    body = content(draw) if draw(st.integers(0, 4)) == 0 else draw(TEXT) + "y" * draw(st.integers(0, 400))
                msg = {"role": "tool", "tool_call_id": cid, "content": body}
                if draw(st.integers(0, 5)) == 0:
                    msg["extra_key"] = draw(SHORT)  # unknown keys pass through
                messages.append(msg)
    dump: dict = {"messages": messages}
    if draw(st.booleans()):
        dump["tokens_used"] = draw(st.integers(0, 10**6))
        dump["zz_custom"] = draw(SHORT)
    return dump


#: IDs chosen to collide with other results' keys: reused, '#k' suffixes, '#' inside, empty,
#: and the shapes of fresh keys ('~n').
ADVERSARIAL_IDS = st.one_of(
    st.sampled_from(["a", "a#2", "a#3", "a#2#2", "#2", "", "#", "a~1", "a#2~1", "b", "b#1", "call_0", "call_0#2"]),
    st.text(alphabet="ab#~2", max_size=5))


@st.composite
def adversarial_dumps(draw, max_turns: int = 8, allow_compacted: bool = True) -> dict:
    """A conversation over ADVERSARIAL_IDS whose store may already hold keys: stale ones, ones
    equal to results' keys, originals of placeholders the conversation holds."""
    dump = draw(conversations(max_turns=max_turns, ids=ADVERSARIAL_IDS, allow_compacted=allow_compacted))
    if draw(st.booleans()):
        ids = [m["tool_call_id"] for m in dump["messages"] if m["role"] == "tool"]
        candidates = ids + [f"{i}#2" for i in ids] + [f"{i}~1" for i in ids] + ["a", "a#2", "", "zz"]
        keys = draw(st.lists(st.sampled_from(candidates), max_size=5, unique=True))
        dump["compacted_tool_results"] = {k: draw(st.one_of(TEXT, st.just(f"stale {k}"))) for k in keys}
    return dump
