"""A small XML element tree with line numbers, for reading and writing ``.osim`` files.

``xml.etree`` cannot be used directly: OpenSim files contain tags such as
``HuntCrossleyForce::ContactParametersSet`` that a namespace-aware parser rejects,
and error messages need the line of every element. ``parse`` drives expat without
namespace processing and records each element's line; ``serialize`` writes the
tab-indented layout OpenSim itself writes (without its comments).

Hardening for untrusted files: entity and DOCTYPE declarations are refused (no
entity expansion attacks), and nesting deeper than ``MAX_DEPTH`` is an error, so
the recursive code that walks the tree can never overflow the stack.
"""

from __future__ import annotations

import xml.parsers.expat
from collections.abc import Iterator

__all__ = ["Node", "XMLSyntaxError", "parse", "serialize", "MAX_DEPTH"]

#: Deepest element nesting accepted (OpenSim models nest about 12 levels).
MAX_DEPTH = 200


class XMLSyntaxError(ValueError):
    """Malformed XML: ``line`` is where expat (or the depth check) stopped."""

    def __init__(self, line: int, message: str):
        self.line = line
        super().__init__(message)


class Node:
    """One XML element: ``tag``, ``attrib`` (dict), ``text`` (stripped character
    data directly inside it), ``children`` (list of Node) and ``line`` (1-based line
    of its start tag; 0 for nodes built in memory)."""

    __slots__ = ("tag", "attrib", "text", "children", "line")

    def __init__(
        self, tag: str, attrib: dict | None = None, text: str = "", children: list | None = None, line: int = 0
    ):
        self.tag = tag
        self.attrib = dict(attrib or {})
        self.text = text
        self.children = list(children or [])
        self.line = line

    def __repr__(self) -> str:
        return f"Node({self.tag!r}, {self.attrib!r}, line={self.line})"

    @property
    def name(self) -> str | None:
        """The ``name`` attribute, or ``None``."""
        return self.attrib.get("name")

    def find(self, tag: str) -> Node | None:
        """The first child with this tag, or ``None``."""
        for c in self.children:
            if c.tag == tag:
                return c
        return None

    def iter(self) -> Iterator[Node]:
        """This node and all its descendants, in document order."""
        stack = [self]
        while stack:
            n = stack.pop()
            yield n
            stack.extend(reversed(n.children))

    def append(self, child: Node) -> Node:
        """Add ``child`` as the last child and return it."""
        self.children.append(child)
        return child


def parse(data: bytes | str) -> Node:
    """Parse a whole XML document and return its root element.

    **Arguments:** ``data``: the document (bytes are decoded by expat from the XML
    declaration's encoding, UTF-8 by default).

    **Returns:** the root ``Node``.

    **Raises:** ``XMLSyntaxError`` (with ``line``) for malformed XML, entity or
    DOCTYPE declarations, or nesting deeper than ``MAX_DEPTH``.
    """
    parser = xml.parsers.expat.ParserCreate()
    parser.buffer_text = True  # (a text run in one call, not one per line)
    stack: list[Node] = []
    texts: list[list[str]] = []
    root: list[Node] = []

    def start(tag, attrs):
        if len(stack) >= MAX_DEPTH:
            raise XMLSyntaxError(parser.CurrentLineNumber, f"elements nested deeper than {MAX_DEPTH} levels")
        node = Node(tag, attrs, line=parser.CurrentLineNumber)
        if stack:
            stack[-1].children.append(node)
        else:
            root.append(node)
        stack.append(node)
        texts.append([])

    def end(tag):
        node = stack.pop()
        node.text = "".join(texts.pop()).strip()

    def chars(data):
        if texts:
            texts[-1].append(data)

    def refuse(*args):
        raise XMLSyntaxError(parser.CurrentLineNumber, "DOCTYPE and entity declarations are not allowed")

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = chars
    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    try:
        parser.Parse(data, True)
    except xml.parsers.expat.ExpatError as e:
        raise XMLSyntaxError(
            e.lineno, f"malformed XML: {xml.parsers.expat.ErrorString(e.code)} (line {e.lineno}, column {e.offset + 1})"
        ) from None
    if not root:
        raise XMLSyntaxError(1, "no root element")
    return root[0]


def _escape(text: str, quote: bool = False) -> str:
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    if quote:
        text = text.replace('"', "&quot;")
    return text


def _lines(node: Node, depth: int, out: list[str]) -> None:
    pad = "\t" * depth
    attrs = "".join(f' {k}="{_escape(str(v), True)}"' for k, v in node.attrib.items())
    if node.children:
        out.append(f"{pad}<{node.tag}{attrs}>")
        if node.text:
            out.append(f"{pad}\t{_escape(node.text)}")
        for c in node.children:
            _lines(c, depth + 1, out)
        out.append(f"{pad}</{node.tag}>")
    elif node.text:
        out.append(f"{pad}<{node.tag}{attrs}>{_escape(node.text)}</{node.tag}>")
    else:
        out.append(f"{pad}<{node.tag}{attrs} />")


def serialize(node: Node, depth: int = 0) -> str:
    """The element as tab-indented XML text (no trailing newline, no declaration).

    **Arguments:** ``node``: the element; ``depth``: indentation of its start tag.

    **Returns:** the text; ``parse(serialize(n))`` gives back an equal tree.
    """
    out: list[str] = []
    _lines(node, depth, out)
    return "\n".join(out)
