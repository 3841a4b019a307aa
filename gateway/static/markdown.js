// A small, strict markdown subset rendered straight to DOM nodes.
//
// Model output is never parsed as HTML: every piece of text lands in the page
// through createTextNode/textContent, so `<script>` or `<img onerror=…>` in a
// message shows as the characters it is. Supported: paragraphs, # headings,
// fenced code, `inline code`, **bold**, *em*/_em_, - and 1. lists, > quotes,
// and [links](https://…) whose target is http or https (anything else, e.g.
// javascript: or a relative path, stays plain text).

const MAX_QUOTE_DEPTH = 3;
// The inline patterns scan ahead for their closing mark: a run of text longer
// than this is shown as plain text, so hostile input cannot stall the page.
const MAX_INLINE_CHARS = 5000;

const FENCE = /^\s{0,3}(`{3,}|~{3,})\s*([\w+-]*)\s*$/;
const HEADING = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const QUOTE = /^\s{0,3}>\s?(.*)$/;
const BULLET = /^\s{0,3}[-*+]\s+(.*)$/;
const ORDERED = /^\s{0,3}(\d{1,9})[.)]\s+(.*)$/;
const BLANK = /^\s*$/;

// code | **strong** | *em* | _em_ | [label](url)
const INLINE =
  /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)|\*\*(?=\S)([\s\S]*?\S)\*\*|(?<![\w*])\*(?=[^\s*])([\s\S]*?[^\s*])\*(?![\w*])|(?<![\w_])_(?=[^\s_])([\s\S]*?[^\s_])_(?![\w_])|\[([^\]\n]+)\]\(\s*([^()\s]+)\s*\)/g;

/** The URL if it is an absolute http(s) URL, else null. */
export function safeHref(raw) {
  let url;
  try {
    url = new URL(raw);
  } catch {
    return null;
  }
  return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
}

function appendInline(parent, text) {
  if (text.length > MAX_INLINE_CHARS) {
    parent.append(document.createTextNode(text));
    return;
  }
  let last = 0;
  const matches = [...text.matchAll(INLINE)];
  for (const m of matches) {
    if (m.index > last) parent.append(document.createTextNode(text.slice(last, m.index)));
    last = m.index + m[0].length;
    if (m[2] !== undefined) {
      const code = document.createElement("code");
      code.textContent = m[2];
      parent.append(code);
    } else if (m[3] !== undefined) {
      const strong = document.createElement("strong");
      appendInline(strong, m[3]);
      parent.append(strong);
    } else if (m[4] !== undefined || m[5] !== undefined) {
      const em = document.createElement("em");
      appendInline(em, m[4] ?? m[5]);
      parent.append(em);
    } else {
      const href = safeHref(m[7]);
      if (href === null) {
        parent.append(document.createTextNode(m[0]));
        continue;
      }
      const a = document.createElement("a");
      a.href = href;
      a.rel = "noopener noreferrer nofollow";
      a.target = "_blank";
      appendInline(a, m[6]);
      parent.append(a);
    }
  }
  if (last < text.length) parent.append(document.createTextNode(text.slice(last)));
}

function startsBlock(line) {
  return (
    FENCE.test(line) ||
    HEADING.test(line) ||
    QUOTE.test(line) ||
    BULLET.test(line) ||
    ORDERED.test(line)
  );
}

function renderList(lines, start, pattern, tag) {
  const list = document.createElement(tag);
  let i = start;
  let item = null;
  let itemText = [];
  const flush = () => {
    if (item) {
      appendInline(item, itemText.join("\n"));
      list.append(item);
    }
  };
  while (i < lines.length) {
    const line = lines[i];
    const m = pattern.exec(line);
    if (m) {
      flush();
      item = document.createElement("li");
      itemText = [m[m.length - 1]];
      if (tag === "ol" && list.children.length === 0 && item && Number(m[1]) !== 1) {
        list.start = Number(m[1]);
      }
    } else if (!BLANK.test(line) && /^\s{2,}\S/.test(line) && item) {
      itemText.push(line.trim()); // a continuation line of the item
    } else {
      break;
    }
    i += 1;
  }
  flush();
  return [list, i];
}

function renderBlocks(parent, lines, depth) {
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    let m;
    if (BLANK.test(line)) {
      i += 1;
    } else if ((m = FENCE.exec(line))) {
      const fence = m[1];
      const body = [];
      i += 1;
      while (i < lines.length && !lines[i].trim().startsWith(fence)) body.push(lines[i++]);
      i += 1; // the closing fence (or the end)
      const pre = document.createElement("pre");
      const code = document.createElement("code");
      if (m[2]) code.dataset.lang = m[2];
      code.textContent = body.join("\n");
      pre.append(code);
      parent.append(pre);
    } else if ((m = HEADING.exec(line))) {
      // Message headings sit below the page's own h1/h2.
      const h = document.createElement(`h${Math.min(6, m[1].length + 2)}`);
      appendInline(h, m[2]);
      parent.append(h);
      i += 1;
    } else if (QUOTE.test(line)) {
      const inner = [];
      while (i < lines.length && (m = QUOTE.exec(lines[i]))) {
        inner.push(m[1]);
        i += 1;
      }
      const quote = document.createElement("blockquote");
      if (depth < MAX_QUOTE_DEPTH) renderBlocks(quote, inner, depth + 1);
      else quote.textContent = inner.join("\n");
      parent.append(quote);
    } else if (BULLET.test(line)) {
      const [list, next] = renderList(lines, i, BULLET, "ul");
      parent.append(list);
      i = next;
    } else if (ORDERED.test(line)) {
      const [list, next] = renderList(lines, i, ORDERED, "ol");
      parent.append(list);
      i = next;
    } else {
      const para = [line];
      i += 1;
      while (i < lines.length && !BLANK.test(lines[i]) && !startsBlock(lines[i])) {
        para.push(lines[i++]);
      }
      const p = document.createElement("p");
      appendInline(p, para.join("\n"));
      parent.append(p);
    }
  }
}

/** The markdown `source` as a DocumentFragment of safe DOM nodes. */
export function renderMarkdown(source) {
  const fragment = document.createDocumentFragment();
  const lines = String(source ?? "")
    .replace(/\r\n?/g, "\n")
    .split("\n");
  renderBlocks(fragment, lines, 0);
  return fragment;
}
