"""Reading YAML texts (`safe_load`), and where a field is in one: `facets.prompt[1]` to its
line number.

Error messages name the line of the field they are about (study files, prompt files). The text
is composed once (`yaml.compose`, which keeps every node's position); a field path is then
walked through the node tree as far as it exists.
"""

from __future__ import annotations

from typing import Any

import yaml

#: libyaml's parser where PyYAML was built with it (the packaged price table parses in 4 ms
#: instead of 33, before every command's first request), else PyYAML's own. Both build the
#: same values with the same safe constructor, and raise the same `yaml.YAMLError`s with marks.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load(text: str | bytes) -> Any:
    """`yaml.safe_load`, with libyaml's parser when there is one. It does what `yaml.load`
    does with this loader, without calling `yaml.load`, which `tests/security` forbids."""
    loader = _LOADER(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


class YamlLines:
    """Maps a field path (`facets.prompt[1]`, `messages[2].role`) to its 1-based line."""

    def __init__(self, text: str):
        try:
            self._root = yaml.compose(text, Loader=_LOADER)
        except yaml.YAMLError:
            self._root = None

    def line_of(self, field: str | None) -> int | None:
        """The line of the deepest node of `field` that exists (None: not even the first)."""
        if not field or self._root is None:
            return None
        node = self._root
        line = None
        for part in split_path(field):
            if isinstance(node, yaml.MappingNode) and isinstance(part, str):
                match = next((kv for kv in node.value if kv[0].value == part), None)
                if match is None:
                    break
                line = match[0].start_mark.line + 1
                node = match[1]
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
                if part >= len(node.value):
                    break
                node = node.value[part]
                line = node.start_mark.line + 1
            else:
                break
        return line


def split_path(field: str) -> list[str | int]:
    """`a.b[2].c` -> `["a", "b", 2, "c"]`."""
    parts: list[str | int] = []
    for chunk in field.replace("]", "").split("."):
        name, *indices = chunk.split("[")
        if name:
            parts.append(name)
        parts.extend(int(i) for i in indices)
    return parts
