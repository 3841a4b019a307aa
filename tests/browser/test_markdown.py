"""The page's markdown subset (gateway/static/markdown.js), run in Chromium."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import OpenPage

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

# Renders each source into a detached element and returns its HTML (serialised
# by the browser, so any element or attribute the renderer made shows up).
RENDER = """
async (sources) => {
  const { renderMarkdown } = await import('/ui/assets/markdown.js');
  return sources.map((source) => {
    const box = document.createElement('div');
    box.append(renderMarkdown(source));
    return box.innerHTML;
  });
}
"""

CASES: list[tuple[str, str]] = [
    (
        "plain **bold** and *em* and _em_",
        "<p>plain <strong>bold</strong> and <em>em</em> and <em>em</em></p>",
    ),
    ("# Title\n\ntext", "<h3>Title</h3><p>text</p>"),
    ("- one\n- two **2**", "<ul><li>one</li><li>two <strong>2</strong></li></ul>"),
    ("3. three\n4. four", '<ol start="3"><li>three</li><li>four</li></ol>'),
    ("> quoted *x*", "<blockquote><p>quoted <em>x</em></p></blockquote>"),
    ("```py\n<b>x</b>\n```", '<pre><code data-lang="py">&lt;b&gt;x&lt;/b&gt;</code></pre>'),
    ("use `<i>` here", "<p>use <code>&lt;i&gt;</code> here</p>"),
    (
        "[ok](https://example.com/a?b=1&c=2)",
        '<p><a href="https://example.com/a?b=1&amp;c=2" rel="noopener noreferrer nofollow"'
        ' target="_blank">ok</a></p>',
    ),
    ("[js](javascript:alert(1))", "<p>[js](javascript:alert(1))</p>"),
    ("[rel](/runs/x)", "<p>[rel](/runs/x)</p>"),
    (
        "[data](data:text/html,<script>x</script>)",
        "<p>[data](data:text/html,&lt;script&gt;x&lt;/script&gt;)</p>",
    ),
    (
        '<a href="https://x">a</a> <svg onload=alert(1)>',
        '<p>&lt;a href="https://x"&gt;a&lt;/a&gt; &lt;svg onload=alert(1)&gt;</p>',
    ),
    ("2 * 3 * 4", "<p>2 * 3 * 4</p>"),
    ("snake_case_name", "<p>snake_case_name</p>"),
]


async def test_the_markdown_subset_builds_only_safe_elements(ui: OpenPage) -> None:
    rendered: list[Any] = await ui.page.evaluate(RENDER, [source for source, _ in CASES])
    for (source, expected), html in zip(CASES, rendered, strict=True):
        assert html == expected, source


async def test_very_long_inline_text_is_kept_as_plain_text(ui: OpenPage) -> None:
    hostile = "**" + "*a" * 4000 + " [x](https://example.com)"
    (html,) = await ui.page.evaluate(RENDER, [hostile])
    assert html.startswith("<p>**")
    assert "<a" not in html and "<strong>" not in html
