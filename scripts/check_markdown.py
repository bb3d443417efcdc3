#!/usr/bin/env python3
"""Checks every Markdown file of the repository with a CommonMark parser.

  scripts/check_markdown.py [ROOT] [FILE.md ...]

With no FILE, every .md under ROOT (default: the repository) is checked,
except build folders, .git, .venv, .cache and fuzz corpora. It fails on:

  - a fence left open at the end of the file;
  - a line that looks like a fence but is not one, so that a code block
    swallows what follows it (a closing fence with text after it, such as
    "``` text", does not close the block under CommonMark; an opener whose
    info string holds a backtick is no fence at all);
  - a relative link or image to a file or folder that does not exist;
  - a link to an anchor that the target .md file (or this one, for "#x")
    does not have: the GitHub slug of one of its headings, or an explicit
    <a id="..."> / <a name="...">;
  - a code block after a line `<!-- verbatim: PATH -->` (PATH relative to
    the repository) that differs from that file: examples shown in the docs
    are real files that the build compiles and the tests run.

Editors and GitHub render such mistakes without complaint, which is why a
test parses the files the way GitHub does (markdown-it-py, CommonMark plus
tables) instead of reading fences line by line.
"""

import os
import re
import sys
import unicodedata
from urllib.parse import unquote

try:
    from markdown_it import MarkdownIt
except ImportError:
    sys.exit("check_markdown.py: needs markdown-it-py (Debian: python3-markdown-it; "
             "scripts/setup.sh --tests installs it)")

SKIP_DIRS = {".git", ".venv", ".cache", "corpus", "node_modules", "__pycache__"}
FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
ANCHOR_RE = re.compile(r"<a\s+(?:[^>]*\s)?(?:id|name)\s*=\s*[\"']([^\"']+)[\"']", re.IGNORECASE)
SCHEME_RE = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
VERBATIM_RE = re.compile(r"^<!--\s*verbatim:\s*(\S+)\s*-->\s*$")


def is_build_dir(path):
    name = os.path.basename(path)
    return name == "build" or name.startswith("build-") or os.path.exists(os.path.join(path, "CMakeCache.txt"))


def markdown_files(root):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames
                             if d not in SKIP_DIRS and not is_build_dir(os.path.join(dirpath, d)))
        for f in sorted(filenames):
            if f.endswith(".md"):
                yield os.path.join(dirpath, f)


def parser():
    return MarkdownIt("commonmark").enable("table")


def plain_text(inline):
    """The text of a heading as GitHub slugs it: text and code, no markup."""
    out = []
    for child in inline.children or []:
        if child.type in ("text", "code_inline"):
            out.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            out.append(" ")
    return "".join(out)


def github_slug(text):
    """GitHub's heading anchor: lower case, drop punctuation except - and _,
    spaces become hyphens."""
    text = text.strip().lower()
    kept = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in "-_" or ch == " " or cat[0] in ("L", "N") or cat == "Mn":
            kept.append(ch)
    return "".join(kept).replace(" ", "-")


class Doc:
    def __init__(self, path, md):
        self.path = path
        with open(path, encoding="utf-8") as f:
            self.text = f.read()
        self.lines = self.text.split("\n")
        self.tokens = md.parse(self.text)
        self._anchors = None

    def anchors(self):
        if self._anchors is None:
            seen = {}
            anchors = set()
            for i, tok in enumerate(self.tokens):
                if tok.type == "heading_open":
                    slug = github_slug(plain_text(self.tokens[i + 1]))
                    n = seen.get(slug, 0)
                    seen[slug] = n + 1
                    anchors.add(slug if n == 0 else f"{slug}-{n}")
            # Explicit anchors, in HTML blocks or inline HTML (not in code).
            for tok in self.tokens:
                sources = []
                if tok.type == "html_block":
                    sources.append(tok.content)
                elif tok.type == "inline":
                    sources += [c.content for c in tok.children or [] if c.type == "html_inline"]
                for s in sources:
                    anchors.update(ANCHOR_RE.findall(s))
            self._anchors = anchors
        return self._anchors


def check_fences(doc, errors):
    for tok in doc.tokens:
        if tok.type == "fence" and tok.map:
            start, end = tok.map  # 0-based; end is one past the block's last line
            opener = FENCE_RE.match(doc.lines[start])
            char, length = opener.group(1)[0], len(opener.group(1))
            last = doc.lines[end - 1] if end - 1 > start else ""
            closer = FENCE_RE.match(last)
            closed = (end - 1 > start and closer is not None and closer.group(1)[0] == char
                      and len(closer.group(1)) >= length and closer.group(2).strip() == "")
            if not closed:
                errors.append(f"{doc.path}:{start + 1}: the code block opened here is never closed "
                              f"(it runs to the end of the file)")
            body_end = end - 1 if closed else end
            for n in range(start + 1, body_end):
                m = FENCE_RE.match(doc.lines[n])
                if m and m.group(1)[0] == char and len(m.group(1)) >= length:
                    errors.append(
                        f"{doc.path}:{n + 1}: '{doc.lines[n].strip()[:40]}' looks like a fence but does not "
                        f"close the code block opened at line {start + 1} (a closing fence has nothing after "
                        f"it), so the block swallows what follows; put the text on a line of its own")
        elif tok.type in ("paragraph_open", "heading_open", "table_open") and tok.map:
            # A line starting with ``` outside any code block that CommonMark
            # did not take as a fence: its info string holds a backtick.
            for n in range(tok.map[0], tok.map[1]):
                m = FENCE_RE.match(doc.lines[n])
                if m and m.group(1)[0] == "`":
                    errors.append(f"{doc.path}:{n + 1}: '{doc.lines[n].strip()[:40]}' starts like a fence but is "
                                  f"not one (an info string may not contain a backtick)")


def check_verbatim(doc, root, errors):
    """Each `<!-- verbatim: PATH -->` line is followed by a code block equal to PATH."""
    fences = {tok.map[0]: tok for tok in doc.tokens if tok.type == "fence" and tok.map}
    for n, line in enumerate(doc.lines):
        m = VERBATIM_RE.match(line)
        if not m:
            continue
        path = os.path.join(root, m.group(1))
        block = fences.get(n + 1)
        if block is None:
            errors.append(f"{doc.path}:{n + 1}: '{line.strip()}' must be followed by a fenced code block")
        elif not os.path.isfile(path):
            errors.append(f"{doc.path}:{n + 1}: '{line.strip()}': {path} does not exist")
        else:
            with open(path, encoding="utf-8") as f:
                text = f.read()
            if block.content != text:
                errors.append(f"{doc.path}:{n + 2}: the code block differs from {m.group(1)}; copy the file into it")


def link_targets(doc):
    for tok in doc.tokens:
        if tok.type != "inline":
            continue
        first, end = tok.map if tok.map else (0, 0)
        for child in tok.children or []:
            if child.type == "link_open":
                href = child.attrGet("href")
            elif child.type == "image":
                href = child.attrGet("src")
            else:
                continue
            # The parser knows the paragraph's lines; the link's is the first that names it.
            line = next((n for n in range(first, end) if href and href in doc.lines[n]), first)
            yield line + 1, href


def check_links(doc, docs, md, errors):
    for line, href in link_targets(doc):
        if not href or SCHEME_RE.match(href) or href.startswith("//"):
            continue
        path, _, fragment = href.partition("#")
        path, fragment = unquote(path), unquote(fragment)
        if path:
            target = os.path.normpath(os.path.join(os.path.dirname(doc.path), path))
            if not os.path.exists(target):
                errors.append(f"{doc.path}:{line}: link to '{href}': {target} does not exist")
                continue
        else:
            target = doc.path
        if not fragment or not target.endswith(".md") or os.path.isdir(target):
            continue
        if target not in docs:
            docs[target] = Doc(target, md)
        if fragment not in docs[target].anchors():
            errors.append(f"{doc.path}:{line}: link to '{href}': {os.path.relpath(target)} has no heading "
                          f"or <a id> with the anchor '#{fragment}'")


def main(argv):
    root = os.path.abspath(argv[1]) if len(argv) > 1 else os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
    files = [os.path.abspath(f) for f in argv[2:]] or list(markdown_files(root))
    md = parser()
    docs = {}
    errors = []
    for f in files:
        if f not in docs:
            docs[f] = Doc(f, md)
        check_fences(docs[f], errors)
        check_links(docs[f], docs, md, errors)
        check_verbatim(docs[f], root, errors)
    for e in errors:
        print(e.replace(root + os.sep, ""))
    if errors:
        print(f"check_markdown: FAIL: {len(errors)} problem(s) in {len(files)} Markdown files")
        return 1
    print(f"check_markdown: ok: {len(files)} Markdown files")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
