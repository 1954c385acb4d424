// C syntax highlighting, one line at a time (highlight.js core + its C grammar only, bundled).
// The code view draws only the lines in view, so a file of any size costs the same: a cheap scan
// over the whole text finds the lines that start inside a /* block comment */, and each visible
// line is highlighted on its own, its comment head (if any) as a comment.
// highlight.js is part of widget.js but evaluated only when the first line is highlighted (as the
// timeline's plotly): loading the widget does not pay for it.

import { esc } from "./format.js";

let hljs = null;
function highlighter() {
  if (!hljs) {
    // esbuild turns these requires into lazily evaluated modules inside the one bundle
    // eslint-disable-next-line no-undef
    hljs = require("highlight.js/lib/core");
    // eslint-disable-next-line no-undef
    hljs.registerLanguage("c", require("highlight.js/lib/languages/c"));
  }
  return hljs;
}

export function languageOf(path) {
  return /\.(c|h|cc|cpp|hpp|inc)$/i.test(path || "") ? "c" : null;
}

// For each line: 1 if it starts inside a block comment.  Strings, character literals and line
// comments are skipped so that a "/*" inside them opens nothing.
export function commentStates(lines) {
  const out = new Uint8Array(lines.length);
  let inBlock = false;
  for (let i = 0; i < lines.length; i++) {
    out[i] = inBlock ? 1 : 0;
    const s = lines[i];
    const n = s.length;
    let j = 0;
    while (j < n) {
      if (inBlock) {
        const k = s.indexOf("*/", j);
        if (k < 0) break;
        inBlock = false;
        j = k + 2;
        continue;
      }
      const ch = s.charCodeAt(j);
      if (ch === 47 /* / */ && j + 1 < n) {
        const nx = s.charCodeAt(j + 1);
        if (nx === 42 /* * */) {
          inBlock = true;
          j += 2;
          continue;
        }
        if (nx === 47) break; // line comment: the rest of the line
      }
      if (ch === 34 /* " */ || ch === 39 /* ' */) {
        j++;
        while (j < n && s.charCodeAt(j) !== ch) j += s.charCodeAt(j) === 92 /* \ */ ? 2 : 1;
      }
      j++;
    }
  }
  return out;
}

// One line as HTML (escaped); `inBlock`: it starts inside a block comment.
export function highlightLine(line, inBlock, language = "c") {
  if (!language) return esc(line);
  let head = "";
  let rest = line;
  if (inBlock) {
    const k = line.indexOf("*/");
    if (k < 0) return `<span class="hljs-comment">${esc(line)}</span>`;
    head = `<span class="hljs-comment">${esc(line.slice(0, k + 2))}</span>`;
    rest = line.slice(k + 2);
  }
  if (!rest) return head;
  return head + highlighter().highlight(rest, { language, ignoreIllegals: true }).value;
}
