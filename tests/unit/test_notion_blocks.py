"""Markdown -> Notion blocks: structure, inline formatting and the API's size limits."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from steps import notion_blocks


def types(blocks: list[dict[str, Any]]) -> list[str]:
    return [b["type"] for b in blocks]


def assert_within_limits(blocks: list[dict[str, Any]]) -> None:
    for block in blocks:
        items = block.get(block["type"], {}).get("rich_text", [])
        assert len(items) <= notion_blocks.MAX_RICH_TEXT_ITEMS
        for item in items:
            assert notion_blocks.utf16_len(item["text"]["content"]) <= notion_blocks.MAX_TEXT_LENGTH


def test_headings_map_to_three_levels() -> None:
    blocks = notion_blocks.markdown_to_blocks("# One\n## Two\n### Three\n#### Four ###\n# Use C#")
    assert types(blocks) == ["heading_1", "heading_2", "heading_3", "heading_3", "heading_1"]
    assert [notion_blocks.block_text(b) for b in blocks] == ["One", "Two", "Three", "Four", "Use C#"]


def test_lists_quotes_dividers_and_paragraphs() -> None:
    md = ("Intro line one\nline two\n\n- apple\n* banana\n  + nested\n1. first\n2) second\n"
          "- [ ] open task\n- [x] done task\n\n> quoted\n> more\n\n---\n***\nlast")
    blocks = notion_blocks.markdown_to_blocks(md)
    assert types(blocks) == [
        "paragraph", "bulleted_list_item", "bulleted_list_item", "bulleted_list_item",
        "numbered_list_item", "numbered_list_item", "to_do", "to_do", "quote", "divider", "divider",
        "paragraph",
    ]
    assert notion_blocks.block_text(blocks[0]) == "Intro line one\nline two"
    assert notion_blocks.block_text(blocks[3]) == "nested"
    assert [blocks[6]["to_do"]["checked"], blocks[7]["to_do"]["checked"]] == [False, True]
    assert notion_blocks.block_text(blocks[8]) == "quoted\nmore"
    assert blocks[9] == {"object": "block", "type": "divider", "divider": {}}


def test_fenced_code_keeps_content_and_maps_language() -> None:
    md = "```py\ndef f():\n\n    return '# not a heading'\n```\n~~~weird-lang\nx = 1\n~~~\n```\nunclosed\n- item"
    blocks = notion_blocks.markdown_to_blocks(md)
    assert types(blocks) == ["code", "code", "code"]
    assert blocks[0]["code"]["language"] == "python"
    assert notion_blocks.block_text(blocks[0]) == "def f():\n\n    return '# not a heading'"
    assert blocks[1]["code"]["language"] == "plain text"
    assert notion_blocks.block_text(blocks[2]) == "unclosed\n- item"
    assert notion_blocks.code_language("TS") == "typescript"
    assert notion_blocks.code_language("") == "plain text"


def test_inline_bold_code_italic_and_links() -> None:
    items = notion_blocks.inline_rich_text("a **b** `c` *d* [e](https://example.com/x) [f](javascript:alert(1))")
    texts = [(i["text"]["content"], i.get("annotations"), i["text"]["link"]) for i in items]
    assert ("b", {"bold": True, "italic": False, "code": False}, None) in texts
    assert ("c", {"bold": False, "italic": False, "code": True}, None) in texts
    assert ("d", {"bold": False, "italic": True, "code": False}, None) in texts
    assert ("e", None, {"url": "https://example.com/x"}) in texts
    assert "".join(t for t, _, _ in texts).endswith("[f](javascript:alert(1))")


def test_long_paragraph_is_split_into_items_of_at_most_2000() -> None:
    text = ("word " * 1000).strip()  # 4,999 characters
    [block] = notion_blocks.markdown_to_blocks(text)
    items = block["paragraph"]["rich_text"]
    assert len(items) == 3
    assert all(len(i["text"]["content"]) <= 2000 for i in items)
    assert notion_blocks.block_text(block) == text
    assert items[0]["text"]["content"].endswith(" ")  # cut at a space, not inside a word


def test_split_counts_utf16_units() -> None:
    emoji = "\U0001F600" * 1500  # 3,000 UTF-16 units
    pieces = notion_blocks.split_text(emoji)
    assert "".join(pieces) == emoji
    assert [notion_blocks.utf16_len(p) for p in pieces] == [2000, 1000]


def test_more_than_100_items_spill_into_more_blocks() -> None:
    text = "x" * (2000 * 150)
    blocks = notion_blocks.markdown_to_blocks(text)
    assert types(blocks) == ["paragraph", "paragraph"]
    assert [len(b["paragraph"]["rich_text"]) for b in blocks] == [100, 50]
    assert "".join(notion_blocks.block_text(b) for b in blocks) == text


def test_long_code_block_is_split() -> None:
    code = "\n".join(f"line {i:05d}" for i in range(1000))
    [block] = notion_blocks.markdown_to_blocks(f"```sql\n{code}\n```")
    assert len(block["code"]["rich_text"]) > 1
    assert notion_blocks.block_text(block) == code
    assert_within_limits([block])


def test_chunking_caps_blocks_and_bytes() -> None:
    blocks = notion_blocks.markdown_to_blocks("\n\n".join(f"p{i}" for i in range(250)))
    chunks = notion_blocks.chunk_blocks(blocks)
    assert [len(c) for c in chunks] == [100, 100, 50]
    assert [b for c in chunks for b in c] == blocks
    big = notion_blocks.markdown_to_blocks("\n\n".join("y" * 1900 for _ in range(40)))
    assert all(len(c) < 40 for c in notion_blocks.chunk_blocks(big, max_bytes=20_000))
    assert notion_blocks.chunk_blocks([]) == []


def test_empty_input_gives_nothing() -> None:
    assert notion_blocks.markdown_to_blocks("") == []
    assert notion_blocks.markdown_to_blocks("\n\n  \n") == []


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab #*-`>_[]()\n1.\U0001F600x")), max_size=6000))
def test_any_markdown_stays_within_limits(text: str) -> None:
    blocks = notion_blocks.markdown_to_blocks(text)
    assert_within_limits(blocks)
    for chunk in notion_blocks.chunk_blocks(blocks):
        assert len(chunk) <= notion_blocks.MAX_BLOCKS_PER_REQUEST
