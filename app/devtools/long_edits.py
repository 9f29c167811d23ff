"""Builds ``resources/bench/long_edits.jsonl``: long prompts (2-4k tokens) over this repo's
own code and documentation (``README.md`` and ``docs/``), each asking for a small change (the
answer copies the given text around it) or for a rewrite (the answer is new text).

``python -m app.devtools.long_edits [OUT]`` rebuilds the file from the sources as they are
now; the edits are found in them (the first class, the first function of some length), so
the set keeps working as the code changes. A developer's tool, not in the installers.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "resources" / "bench" / "long_edits.jsonl"


@dataclass(frozen=True)
class Prompt:
    id: str
    category: str  # "copy": a small change, the rest copied; "rewrite": new text
    prompt: str

    def line(self) -> str:
        return json.dumps(
            {"id": self.id, "category": self.category, "prompt": self.prompt}, ensure_ascii=False
        )


def _code(path: str) -> tuple[str, ast.Module]:
    text = (ROOT / path).read_text(encoding="utf-8")
    return text, ast.parse(text)


def _given(path: str, text: str, language: str) -> str:
    return f"Here is `{path}`:\n\n```{language}\n{text.rstrip()}\n```\n\n"


def _first_class(tree: ast.Module) -> ast.ClassDef:
    return next(node for node in tree.body if isinstance(node, ast.ClassDef))


def _functions(tree: ast.Module, min_lines: int) -> list[ast.FunctionDef]:
    found = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef)
        and (node.end_lineno or node.lineno) - node.lineno + 1 >= min_lines
    ]
    return sorted(found, key=lambda node: node.lineno)


def _sections(*titles: str) -> str:
    return "\n".join(_section(title) for title in titles)


def _section(title: str) -> str:
    """A section of README.md or of a page in docs/ (the first that has the heading): from its
    heading to the next heading of the same or a higher level."""
    heading = re.compile(rf"^{re.escape(title)}\n", re.M)
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        readme = page.read_text(encoding="utf-8")
        found = heading.search(readme)
        if found is not None:
            break
    else:
        raise ValueError(f"no section {title!r} in README.md or docs/")
    level = len(title) - len(title.lstrip("#"))
    start = found.start()
    following = re.compile(rf"^#{{1,{level}}} ", re.M)
    # headings inside fenced code (shell comments) are not headings
    position = start + len(title) + 1
    fenced = False
    for line in readme[position:].splitlines(keepends=True):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and following.match(line):
            break
        position += len(line)
    return readme[start:position].rstrip() + "\n"


def _about_code(id: str, category: str, path: str, ask: str) -> Prompt:
    text, _ = _code(path)
    return Prompt(id, category, _given(path, text, "python") + ask)


def _about_readme(
    id: str, category: str, titles: tuple[str, ...], ask: str, *, one: bool = False
) -> Prompt:
    """``ask`` about sections of the README, given as ``one`` section or as several."""
    given = "Here is a section of a README" if one else "Here are sections of a README"
    return Prompt(id, category, f"{given}:\n\n" + _sections(*titles) + "\n" + ask)


def rename_class(path: str) -> Prompt:
    name = _first_class(_code(path)[1]).name
    return _about_code(
        "rename-class",
        "copy",
        path,
        f"Rename the class `{name}` to `{name}V2`. Reply with the complete changed class "
        "and nothing else, everything but the name exactly as it is.",
    )


def add_docstring(path: str) -> Prompt:
    functions = _functions(_code(path)[1], 12)
    function = next(f for f in functions if ast.get_docstring(f) is None)
    return _about_code(
        "add-docstring",
        "copy",
        path,
        f"Add a short docstring to `{function.name}`. Reply with the complete function, "
        "otherwise unchanged, and nothing else.",
    )


def fix_line(path: str) -> Prompt:
    text, tree = _code(path)
    lines = text.splitlines()
    for function in _functions(tree, 10):
        body = lines[function.lineno : function.end_lineno]
        for line in body:
            match = re.search(r"\b(\d+)\b", line)
            if match and not line.strip().startswith(("#", '"')):
                number = int(match.group(1))
                fixed = line[: match.start()] + str(number + 1) + line[match.end() :]
                return _about_code(
                    "fix-line",
                    "copy",
                    path,
                    f"In `{function.name}`, the line `{line.strip()}` is wrong: it should "
                    f"read `{fixed.strip()}`. Reply with the complete corrected function and "
                    "nothing else.",
                )
    raise ValueError(f"{path}: no function line with a number to change")


def rename_in_prose(*titles: str) -> Prompt:
    return _about_readme(
        "prose-rename",
        "copy",
        titles,
        "The project is being renamed: replace every `SpecDeck` with `DraftDeck` and "
        "`python -m app` with `draftdeck`. Reply with the whole section, otherwise word for "
        "word, and nothing else.",
        one=True,
    )


def past_tense(*titles: str) -> Prompt:
    return _about_readme(
        "prose-tense",
        "copy",
        titles,
        "Put the first paragraph in the past tense and leave everything else word for "
        "word. Reply with the whole text and nothing else.",
    )


def rewrite_first_class(path: str) -> Prompt:
    return _about_code("rewrite-first-class", "rewrite", path, "Rewrite this module's first class.")


def summarize(path: str) -> Prompt:
    return _about_code(
        "summarize-module",
        "rewrite",
        path,
        "Summarize what this module does in five short bullet points for a new contributor.",
    )


def casual_style(*titles: str) -> Prompt:
    return _about_readme(
        "casual-style",
        "rewrite",
        titles,
        "Retell them as a short, casual blog post for people new to the project, in your "
        "own words.",
    )


def explain(path: str) -> Prompt:
    function = next(f for f in _functions(_code(path)[1], 15) if not f.name.startswith("_"))
    return _about_code(
        "explain-function",
        "rewrite",
        path,
        f"Explain step by step, in plain English, what `{function.name}` does and why.",
    )


def build() -> list[Prompt]:
    return [
        rename_class("app/engine/exactness.py"),
        add_docstring("app/engine/process/child.py"),
        fix_line("app/models/fit.py"),
        rename_in_prose(
            "## `--version`",
            "## `generate`",
            "## `bench`",
            "## `pull`",
            "## `check-pair`",
            "## `fit`",
            "## Lab",
            "## `serve`: an OpenAI-compatible endpoint",
        ),
        past_tense(
            "## The loop",
            "## Exactness: the text stays the target's",
            "## Drafters",
            "## Download and install",
            "## On your own machine",
        ),
        rewrite_first_class("app/engine/events.py"),
        summarize("app/engine/chat_template.py"),
        casual_style(
            "## Quick start (from source)",
            "## The loop",
            "## Exactness: the text stays the target's",
            "## Drafters",
            "## Download and install",
        ),
        explain("app/engine/drafters/mtp.py"),
    ]


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else OUT
    out.write_text("".join(p.line() + "\n" for p in build()), encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
