#!/usr/bin/env python3
"""The user documentation holds together: every relative link in README.md and in docs/ names a file
or folder of the repository (and, with #anchor into a Markdown file, one of its headings), and the
README stays within its size (issue 27: at most 15 KB, the rest lives in docs/).

Links in code blocks and code spans are not links; links with a scheme (https:, mailto:) are not
checked (the tests run offline). CTest passes the repository in GMS_SOURCE_DIR; by hand:
  GMS_SOURCE_DIR=. python3 tests/tools/check_links.py -v
"""
import os
import re
import sys
import tempfile
import unittest

SOURCE_DIR = os.environ.get("GMS_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
README_MAX_BYTES = 15000

INLINE_LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def documents(root):
    """README.md and every Markdown file under docs/, as paths relative to root."""
    out = ["README.md"] if os.path.isfile(os.path.join(root, "README.md")) else []
    for dirpath, _, files in os.walk(os.path.join(root, "docs")):
        out += [os.path.relpath(os.path.join(dirpath, f), root) for f in sorted(files) if f.endswith(".md")]
    return sorted(out)


def prose_lines(text, keep_spans=False):
    """(line number, line) outside fenced code blocks, with code spans blanked out unless kept."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.lstrip()
        if fence:
            if stripped.startswith(fence):
                fence = None
            continue
        m = re.match(r"(`{3,}|~{3,})", stripped)
        if m:
            fence = m.group(1)
            continue
        yield number, line if keep_spans else re.sub(r"(`+)(?:(?!\1).)+?\1", "", line)


def links(text):
    """(line number, target) of every inline link, image and reference definition."""
    for number, line in prose_lines(text):
        for m in INLINE_LINK.finditer(line):
            yield number, m.group(1)
        m = REFERENCE_DEF.match(line)
        if m:
            yield number, m.group(1)


def slug(heading):
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*|__", "", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text):
    seen, out = {}, set()
    for _, line in prose_lines(text, keep_spans=True):
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else f"{s}-{n}")
    out.update(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", text))
    return out


def broken_links(root):
    """['FILE:LINE: TARGET: why', ...] for every link of the documents under root that leads nowhere."""
    root = os.path.realpath(root)
    problems = []
    for doc in documents(root):
        with open(os.path.join(root, doc), encoding="utf-8") as f:
            text = f.read()
        for number, target in links(text):
            if SCHEME.match(target):
                continue
            path, _, anchor = target.partition("#")
            where = os.path.realpath(os.path.join(root, os.path.dirname(doc), path)) if path else os.path.join(root, doc)
            why = None
            if os.path.commonpath([root, where]) != root:
                why = "outside the repository"
            elif not os.path.exists(where):
                why = "no such file or folder"
            elif anchor and where.endswith(".md"):
                with open(where, encoding="utf-8") as f:
                    if anchor not in anchors(f.read()):
                        why = f"no heading with the anchor #{anchor} in {os.path.relpath(where, root)}"
            if why:
                problems.append(f"{doc}:{number}: {target}: {why}")
    return problems


class RepositoryLinksTest(unittest.TestCase):
    def test_links_resolve(self):
        docs = documents(SOURCE_DIR)
        self.assertIn("README.md", docs)
        self.assertTrue(any(d.startswith("docs" + os.sep) for d in docs), "no Markdown file under docs/")
        self.assertEqual(broken_links(SOURCE_DIR), [])

    def test_readme_size(self):
        size = os.path.getsize(os.path.join(SOURCE_DIR, "README.md"))
        self.assertLessEqual(size, README_MAX_BYTES,
                             f"README.md is {size} bytes, more than {README_MAX_BYTES}: move detail to docs/")


class CheckerTest(unittest.TestCase):
    """The checker itself, on a made-up tree: it finds what is broken and only that."""

    def tree(self, files):
        root = tempfile.mkdtemp(prefix="gms-links-")
        self.addCleanup(lambda: __import__("shutil").rmtree(root, ignore_errors=True))
        for name, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, name)), exist_ok=True)
            with open(os.path.join(root, name), "w", encoding="utf-8") as f:
                f.write(text)
        return root

    def test_finds_each_kind_of_broken_link(self):
        root = self.tree({
            "README.md": "# Top\n## The command and the library\n"
                         "[ok](docs/a.md) [ok anchor](#the-command-and-the-library) [gone](docs/gone.md)\n"
                         "[bad anchor](docs/a.md#nowhere) [out](../elsewhere.md) [web](https://example.org/x)\n"
                         "`[in a span](nothing.md)`\n```\n[in a block](nothing.md)\n```\n"
                         "[ref]: docs/missing.md\n",
            "docs/a.md": "# A page\n## Copies from `pageable` memory\n[up](../README.md#top) [ok](#copies-from-pageable-memory)\n"
                         "![img](img.png)\n",
        })
        self.assertEqual(broken_links(root), [
            "README.md:3: docs/gone.md: no such file or folder",
            "README.md:4: docs/a.md#nowhere: no heading with the anchor #nowhere in docs/a.md",
            "README.md:4: ../elsewhere.md: outside the repository",
            "README.md:9: docs/missing.md: no such file or folder",
            "docs/a.md:4: img.png: no such file or folder",
        ])

    def test_clean_tree(self):
        root = self.tree({"README.md": "[d](docs/) [p](docs/p.md#a-b)\n", "docs/p.md": "## A: b\n"})
        self.assertEqual(broken_links(root), [])

    def test_repeated_headings_get_numbered_anchors(self):
        self.assertEqual(anchors("## Notes\n## Notes\n"), {"notes", "notes-1"})


if __name__ == "__main__":
    unittest.main()
