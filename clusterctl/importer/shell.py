"""Read a launch script as bash would, without running it.

The script is parsed by tree-sitter's bash grammar (the parser editors use), then walked in
order: assignments, exports and ``${X:-default}`` are resolved as bash resolves them,
quotes removed, unquoted expansions split into words, ``$((...))`` computed. Nothing the
script says is executed: a command substitution, a variable the script never sets (unless
given in ``env``) or the script's own arguments stay unresolved, and every such place is
reported with its line. Branches (if, case, loops) are walked as written, their commands
marked conditional: the reader cannot know which branch runs.
"""

from __future__ import annotations

import ast
import codecs
import operator
import re
import shlex
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

from clusterctl.files import NotRegularFile, open_regular

_PARSER = Parser(Language(tree_sitter_bash.language()))
_MAX_CALL_DEPTH = 8
# Children of if / case / for that are conditions, patterns or loop words, not statements.
_NOT_STATEMENTS = {
    "test_command",
    "word",
    "variable_name",
    "extglob_pattern",
    "concatenation",
    "string",
    "raw_string",
    "simple_expansion",
    "expansion",
    "number",
}  # functions calling functions: enough for launch scripts, never a loop


def _sent_to_background(node: Node) -> bool:
    """`cmd &`, `a 2>&1 | tee log &`, `( ... ) &`, a loop or list sent off whole: the node or
    a statement it is part of is followed by bash's `&`."""
    at: Node | None = node
    while at is not None and at.parent is not None:
        after = at.next_sibling
        if after is not None and not after.is_named and after.type == "&":
            return True
        at = at.parent
    return False


class ScriptError(ValueError):
    """The script cannot be read as bash."""


@dataclass
class Command:
    """One simple command as bash would run it."""

    argv: list[str]
    line: int  # 1-based, first line of the command
    end_line: int
    env: dict[str, str]  # VAR=value prefixes
    conditional: bool  # inside if / case / a loop: it may not run
    unresolved: list[str]  # what could not be resolved, e.g. "$(date +%s)"
    background: bool = False  # sent to the background (`cmd &`): a side process


@dataclass
class Variable:
    value: str
    line: int
    exported: bool = False
    items: list[str] | None = None  # an array's elements
    unresolved: list[str] = field(default_factory=list)  # text kept as written in value


@dataclass
class Script:
    """What a launch script does, in order."""

    commands: list[Command] = field(default_factory=list)
    variables: dict[str, Variable] = field(default_factory=dict)
    sbatch: list[tuple[int, str]] = field(default_factory=list)  # (line, option)
    notes: list[tuple[int, str]] = field(default_factory=list)  # (line, what was not read)
    assumed: list[tuple[int, str]] = field(default_factory=list)  # (line, what a dry run took)
    assigned_at: dict[str, int] = field(default_factory=dict)  # a variable's line, for a dry run
    stopped: str = ""  # how a dry run ended, when the script failed under it
    allocated_at: int = 0  # the srun line whose options made the job's allocation (no header)

    def exported(self) -> dict[str, Variable]:
        return {name: var for name, var in self.variables.items() if var.exported}


@dataclass
class _Piece:
    text: str
    split: bool  # an unquoted expansion: bash splits it into words at white space


_ARITH: dict[type, Callable[[int, int], int]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.floordiv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}


class _Unresolved(Exception):
    pass


class _Reader:
    def __init__(
        self, source: bytes, env: Mapping[str, str], args: list[str], base: Path | None = None
    ) -> None:
        self.source = source
        self.env = dict(env)
        self.args = args
        self.base = base  # the script's directory: where `source FILE` is looked up
        self.fixed_line: int | None = None  # inside `bash -c` / a sourced file: the caller's
        self.script = Script()
        self.functions: dict[str, Node] = {}
        self.depth = 0
        self._unresolved: list[str] = []
        self.kept: list[str] = []  # text kept as written, by placeholder number

    # ---- statements ---------------------------------------------------------------------

    def walk(self, node: Node, conditional: bool = False) -> None:
        kind = node.type
        if kind in ("program", "compound_statement", "list", "pipeline", "do_group"):
            for child in node.named_children:
                self.walk(child, conditional)
        elif kind == "comment":
            self.comment(node)
        elif kind == "variable_assignment":
            self.assign(node, exported=False)
        elif kind == "variable_assignments":
            for child in node.named_children:
                self.assign(child, exported=False)
        elif kind == "declaration_command":
            self.declare(node)
        elif kind == "command":
            self.command(node, conditional)
        elif kind == "redirected_statement" and self.heredoc_read(node):
            return
        elif kind in ("redirected_statement", "negated_command", "subshell"):
            for child in node.named_children:
                if child.type not in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
                    self.walk(child, conditional)
        elif kind == "function_definition":
            name = node.child_by_field_name("name")
            body = node.child_by_field_name("body")
            if name is not None and body is not None:
                self.functions[self.text(name)] = body
        elif kind in (
            "if_statement",
            "elif_clause",
            "else_clause",
            "case_statement",
            "case_item",
            "for_statement",
            "c_style_for_statement",
            "while_statement",
        ):
            self.note(node, f"{kind.replace('_', ' ')}: its branches are read as written")
            for child in node.named_children:
                if child.type not in _NOT_STATEMENTS:
                    self.walk(child, True)
        elif kind in ("heredoc_body", "heredoc_start", "heredoc_end", "file_redirect"):
            return
        else:
            self.note(node, f"{kind.replace('_', ' ')} not read")

    def heredoc_read(self, node: Node) -> bool:
        """`read [-r] [-d ''] VAR <<EOF ... EOF`: VAR gets the here-document (all of it with
        -d '', else its first line), expanded as bash expands an unquoted one. True when
        NODE was such a read."""
        body = node.child_by_field_name("body")
        heredoc = next((c for c in node.named_children if c.type == "heredoc_redirect"), None)
        if body is None or heredoc is None or body.type != "command":
            return False
        argv = [self.text(c) for c in body.named_children]
        if not argv or argv[0] != "read" or len(argv) < 2:
            return False
        text_node = next((c for c in heredoc.named_children if c.type == "heredoc_body"), None)
        start = next((c for c in heredoc.named_children if c.type == "heredoc_start"), None)
        if text_node is None:
            return False
        if start is not None and self.text(start)[:1] in "'\"\\":
            text = self.text(text_node)  # a quoted delimiter: nothing is expanded
        else:
            text = "".join(p.text for p in self.string_pieces(text_node, heredoc=True))
        whole = any(a.startswith("-d") for a in argv[1:])  # -d '': up to NUL, i.e. all of it
        value = text if whole else text.split("\n", 1)[0]
        name = argv[-1]
        self.script.variables[name] = Variable(value.strip(), self.line(node))
        return True

    def comment(self, node: Node) -> None:
        text = self.text(node)
        if text.startswith("#SBATCH"):
            try:
                words = shlex.split(text[len("#SBATCH") :], comments=True)
            except ValueError as exc:
                self.note(node, f"#SBATCH line not read: {exc}")
                return
            for word in words:
                self.script.sbatch.append((self.line(node), word))

    def assign(self, node: Node, exported: bool) -> tuple[str, str] | None:
        name_node = node.child_by_field_name("name")
        value_node = node.child_by_field_name("value")
        if name_node is None:
            return None
        name = self.text(name_node)
        if name_node.type == "subscript":
            self.note(node, f"{name}: array elements not read")
            return None
        items: list[str] | None = None
        if value_node is not None and value_node.type == "array":
            saved, self._unresolved = self._unresolved, []
            items = [
                word
                for child in value_node.named_children
                if child.type != "comment"
                for word in self.words(child)
            ]
            value, unresolved = " ".join(items), self._unresolved
            self._unresolved = saved
        else:
            value, unresolved = ("", []) if value_node is None else self.scalar(value_node)
        previous = self.script.variables.get(name)
        append = any(not c.is_named and c.type == "+=" for c in node.children)
        if append and previous is not None:
            if items is not None:
                items = [*(previous.items or [previous.value]), *items]
                value = " ".join(items)
            else:
                value = previous.value + value
            unresolved = [*previous.unresolved, *unresolved]
        for item in unresolved:
            self.note(node, f"{name}: {item} is not resolved")
        self.script.variables[name] = Variable(
            value,
            self.line(node),
            exported or bool(previous and previous.exported),
            items,
            list(unresolved),
        )
        return name, value

    def declare(self, node: Node) -> None:
        keyword = self.text(node.children[0])
        exported = keyword == "export" or any(
            self.text(c) == "-x" for c in node.named_children if c.type == "word"
        )
        for child in node.named_children:
            if child.type == "variable_assignment":
                self.assign(child, exported)
            elif child.type == "variable_name" and exported:
                name = self.text(child)
                if name in self.script.variables:
                    self.script.variables[name].exported = True
                elif name in self.env:
                    self.script.variables[name] = Variable(self.env[name], self.line(node), True)

    def command(self, node: Node, conditional: bool) -> None:
        env: dict[str, str] = {}
        argv: list[str] = []
        self._unresolved = []
        for child in node.named_children:
            if child.type == "variable_assignment":
                name_node = child.child_by_field_name("name")
                value_node = child.child_by_field_name("value")
                if name_node is not None:
                    env[self.text(name_node)] = (
                        self.scalar(value_node, collect=True)[0] if value_node else ""
                    )
            elif child.type == "command_name":
                argv += self.words(child.named_children[0] if child.named_children else child)
            elif child.type in ("file_redirect", "herestring_redirect", "heredoc_redirect"):
                continue
            else:
                argv += self.words(child)
        if not argv:
            return
        if argv[0] in ("source", ".") and len(argv) > 1:
            self.source_file(node, argv[1], argv[2:], conditional)
            return
        inner = next(
            (i for i in range(len(argv) - 2) if argv[i] in ("bash", "sh") and argv[i + 1] == "-c"),
            None,
        )
        if inner is not None and self.depth < _MAX_CALL_DEPTH:
            # `bash -c "..."` (also behind srun): its commands are read as bash would run them
            self.nested(
                self.restore(argv[inner + 2]).encode(), argv[inner + 3 :], node, conditional
            )
            return
        if argv[0] == "shift" and not conditional:
            count = argv[1] if len(argv) > 1 else "1"
            self.args = self.args[int(count) :] if count.isdigit() else self.args
        unresolved = list(dict.fromkeys(self._unresolved))
        argv = [self.restore(word) for word in argv]
        env = {name: self.restore(value) for name, value in env.items()}
        if argv[0] in self.functions and self.depth < _MAX_CALL_DEPTH:
            self.depth += 1
            self.walk(self.functions[argv[0]], conditional)
            self.depth -= 1
            return
        self.script.commands.append(
            Command(
                argv,
                self.line(node),
                node.end_point[0] + 1,
                env,
                conditional,
                unresolved,
                background=_sent_to_background(node),
            )
        )

    def source_file(self, node: Node, name: str, args: list[str], conditional: bool) -> None:
        """`source FILE ARGS`: the file's statements, read here, beside the script; only a
        regular file of the script's folder (no absolute path, `..` or link out of it), of
        at most a launch script's size."""
        name = self.restore(name)
        why = "not found beside the script"
        data = None
        if self.base is not None and self.depth < _MAX_CALL_DEPTH:
            folder = self.base.resolve()
            path = (folder / name).resolve()
            if not path.is_relative_to(folder):
                why = "outside the script's folder"
            elif path.is_file():
                try:
                    data = read_script_file(path)
                except ScriptError as exc:
                    why = str(exc)
        if data is None:
            self.note(node, f"source {name}: not read ({why})")
            return
        self.nested(data, args, node, conditional)

    def nested(self, source: bytes, args: list[str], node: Node, conditional: bool) -> None:
        """Walk another script text (a sourced file, a `bash -c` string) with this one's
        variables, its commands counted at NODE's line."""
        tree = _PARSER.parse(source)
        if tree.root_node.has_error:
            self.note(node, "a nested script (bash -c or source) that cannot be read")
            return
        saved = (self.source, self.args, self.fixed_line)
        self.source, self.args, self.fixed_line = source, list(args), self.line(node)
        self.depth += 1
        try:
            self.walk(tree.root_node, conditional)
        finally:
            self.depth -= 1
            self.source, self.args, self.fixed_line = saved

    # ---- words --------------------------------------------------------------------------

    def scalar(self, node: Node, collect: bool = False) -> tuple[str, list[str]]:
        """A value as an assignment sees it: expanded, not split."""
        saved, self._unresolved = self._unresolved, []
        if node.type == "array":
            text = " ".join(w for child in node.named_children for w in self.words(child))
        else:
            text = "".join(p.text for p in self.pieces(node))
        found = self._unresolved
        self._unresolved = saved + found if collect else saved
        return text, found

    def words(self, node: Node) -> list[str]:
        """The words bash makes of one argument: unquoted expansions split at white space,
        an unquoted expansion that is empty gone."""
        if node.type == "string" and [self.text(c) for c in node.named_children] in (
            ["$@"],
            ["${@}"],
        ):
            return list(self.args)  # "$@": one word per argument, none without arguments
        if node.type == "string" and len(node.named_children) == 1:
            only = node.named_children[0]
            if only.type == "expansion" and any(
                c.type == "special_variable_name" and self.text(c) == "@" for c in only.children
            ):
                return (self.expand(only) or "").split()  # "${@:N}": the arguments' words
            items = self.array_items(only)
            if items is not None:
                return items  # "${A[@]}": one word per element
        words: list[str] = []
        current: str | None = None  # None: no word started
        for piece in self.pieces(node):
            if not piece.split:
                current = (current or "") + piece.text
                continue
            fields = piece.text.split()
            if piece.text[:1].isspace() and current is not None:
                words.append(current)
                current = None
            for i, part in enumerate(fields):
                if i and current is not None:
                    words.append(current)
                    current = None
                current = (current or "") + part
            if fields and piece.text[-1:].isspace() and current is not None:
                words.append(current)
                current = None
        if current is not None:
            words.append(current)
        return words

    def pieces(self, node: Node) -> list[_Piece]:
        kind = node.type
        if kind in ("word", "number", "extglob_pattern"):
            return [_Piece(self.unescape(self.text(node)), False)]
        if kind == "raw_string":
            return [_Piece(self.text(node)[1:-1], False)]
        if kind == "ansi_c_string":
            body = self.text(node)[2:-1]
            return [_Piece(codecs.decode(body.encode(), "unicode_escape"), False)]
        if kind in ("concatenation", "command_name"):
            return [p for child in node.children for p in self.pieces(child)]
        if kind == "string":
            return [_Piece("".join(p.text for p in self.string_pieces(node)), False)]
        if kind in ("simple_expansion", "expansion"):
            value = self.expand(node)
            if value is None:
                return [self.keep(node)]
            return [_Piece(value, True)]
        if kind == "arithmetic_expansion":
            try:
                return [_Piece(str(self.arithmetic(node)), True)]
            except (_Unresolved, ZeroDivisionError):
                return [self.keep(node)]
        if kind == "array":
            return [_Piece(" ".join(self.words(c)[0] for c in node.named_children), True)]
        if kind in ("command_substitution", "process_substitution"):
            return [self.keep(node)]
        if not node.is_named:  # punctuation the grammar gives its own node, e.g. "="
            return [_Piece(self.text(node), False)]
        return [self.keep(node)]

    def string_pieces(self, node: Node, heredoc: bool = False) -> Iterator[_Piece]:
        """A double-quoted string (or an unquoted here-document's body): the text between its
        expansions, with \\ escapes."""
        cursor = node.start_byte + (0 if heredoc else 1)
        end = node.end_byte - (0 if heredoc else 1)
        for child in node.named_children:
            if child.start_byte > cursor:
                yield _Piece(self.dquote(self.source[cursor : child.start_byte]), False)
            if child.type in ("string_content", "heredoc_content"):
                yield _Piece(self.dquote(self.source[child.start_byte : child.end_byte]), False)
            else:
                yield _Piece("".join(p.text for p in self.pieces(child)), False)
            cursor = child.end_byte
        if end > cursor:
            yield _Piece(self.dquote(self.source[cursor:end]), False)

    def expand(self, node: Node) -> str | None:
        """$NAME, ${NAME}, ${NAME:-word} and friends; None when it cannot be known."""
        if node.type == "simple_expansion":
            name = self.text(node)[1:]
            return self.lookup(name)
        children = node.children
        subscript = next((c for c in children if c.type == "subscript"), None)
        if subscript is not None:
            items = self.array_items(node)
            return " ".join(items) if items is not None else None
        names = [c for c in children if c.type in ("variable_name", "special_variable_name")]
        if not names or children[1].type == "#":
            return None
        name = self.text(names[0])
        after = children[children.index(names[0]) + 1 :]
        op = after[0].type if after and not after[0].is_named else "}"
        if op == "}":
            return self.lookup(name)
        value = self.lookup(name, report=False)
        if op == ":" and name == "@":  # ${@:N}: the script's arguments from N
            start = self.text(after[1]) if len(after) > 2 else ""
            return " ".join(self.args[int(start) - 1 :]) if start.isdigit() else None
        if op in ("/", "//") and value is not None and len(after) > 2:
            pattern = self.text(after[1])
            replacement = self.text(after[3]) if len(after) > 4 else ""
            if any(ch in pattern + replacement for ch in "*?[$\\'\""):
                return None
            return value.replace(pattern, replacement, -1 if op == "//" else 1)
        if op not in (":-", "-", ":=", "=", ":+", "+"):
            return None
        word = "".join(p.text for c in after[1:-1] for p in self.pieces(c))
        unset = value is None and name not in self.env
        empty = unset or value == ""
        if op in (":-", ":="):
            result = word if empty else value
        elif op in ("-", "="):
            result = word if unset else value
        else:  # :+ and +
            result = "" if (empty if op == ":+" else unset) else word
        if op in (":=", "=") and result == word:
            self.script.variables[name] = Variable(word, self.line(node))
        return result

    def array_items(self, node: Node) -> list[str] | None:
        """The elements ${A[@]} / ${A[*]} / ${A[N]} name, or None when it is not one."""
        if node.type != "expansion":
            return None
        subscript = next((c for c in node.children if c.type == "subscript"), None)
        if subscript is None or len(node.children) != 3:
            return None
        name_node = subscript.child_by_field_name("name")
        index_node = subscript.child_by_field_name("index")
        if name_node is None or index_node is None:
            return None
        variable = self.script.variables.get(self.text(name_node))
        if variable is None:
            self._unresolved.append(self.text(node))
            return None
        self._unresolved.extend(variable.unresolved)
        items = variable.items if variable.items is not None else [variable.value]
        index = self.text(index_node)
        if index in ("@", "*"):
            return list(items)
        if index.isdigit():
            return [items[int(index)]] if int(index) < len(items) else []
        return None

    def lookup(self, name: str, report: bool = True) -> str | None:
        if name in ("@", "*"):
            return " ".join(self.args)
        if name.isdigit():
            index = int(name)
            if index == 0:
                return None
            return self.args[index - 1] if index <= len(self.args) else ""
        if name == "#":
            return str(len(self.args))
        if name in self.script.variables:
            variable = self.script.variables[name]
            self._unresolved.extend(variable.unresolved)
            return variable.value
        if name in self.env:
            return self.env[name]
        if report:
            self._unresolved.append(f"${name}")
        return None

    def arithmetic(self, node: Node) -> int:
        text = self.text(node)[3:-2]

        def value(tree: ast.AST) -> int:
            if isinstance(tree, ast.Constant) and isinstance(tree.value, int):
                return tree.value
            if isinstance(tree, ast.Name):
                found = self.lookup(tree.id)
                if found is None or not found.strip().lstrip("-").isdigit():
                    raise _Unresolved
                return int(found)
            if isinstance(tree, ast.BinOp) and type(tree.op) in _ARITH:
                return _ARITH[type(tree.op)](value(tree.left), value(tree.right))
            if isinstance(tree, ast.UnaryOp) and isinstance(tree.op, ast.USub):
                return -value(tree.operand)
            raise _Unresolved

        try:
            return value(ast.parse(text.replace("$", "").strip(), mode="eval").body)
        except SyntaxError:
            raise _Unresolved from None

    def keep(self, node: Node) -> _Piece:
        """What cannot be known stays as written, and is reported. It travels as a
        placeholder without white space, so splitting a value around it keeps it whole."""
        text = self.text(node)
        self._unresolved.append(text)
        self.kept.append(text)
        return _Piece(f"\x00{len(self.kept) - 1}\x00", False)

    def restore(self, text: str) -> str:
        return re.sub(r"\x00(\d+)\x00", lambda m: self.kept[int(m.group(1))], text)

    # ---- text ---------------------------------------------------------------------------

    def text(self, node: Node) -> str:
        return self.source[node.start_byte : node.end_byte].decode("utf-8", "replace")

    def line(self, node: Node) -> int:
        return self.fixed_line or node.start_point[0] + 1

    def note(self, node: Node, message: str) -> None:
        self.script.notes.append((self.line(node), message))

    @staticmethod
    def unescape(text: str) -> str:
        """Backslashes outside quotes: \\x is x, backslash-newline is nothing."""
        return _unbackslash(text, _ANY_ESCAPE)

    @staticmethod
    def dquote(raw: bytes) -> str:
        """Inside double quotes a backslash escapes only $ ` " \\ and newline."""
        return _unbackslash(raw.decode("utf-8", "replace"), _DQUOTE_ESCAPE)


_ANY_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_DQUOTE_ESCAPE = re.compile(r"\\([$`\"\\\n])")


def _unbackslash(text: str, escape: re.Pattern[str]) -> str:
    """Each escape's character kept, its backslash dropped; backslash-newline is nothing."""
    return escape.sub(lambda m: "" if m.group(1) == "\n" else m.group(1), text)


MAX_SCRIPT_BYTES = 1 << 20  # a launch script is kilobytes; the frameworks' largest is 12 KB


def read_script_file(path: Path, limit: int = MAX_SCRIPT_BYTES) -> bytes:
    """The bytes of a regular file of at most LIMIT bytes; a device, FIFO or directory, or a
    larger file, is a ScriptError that says which."""
    try:
        handle = open_regular(path)
    except NotRegularFile:
        raise ScriptError("not a regular file (a device, FIFO or directory)") from None
    except OSError as exc:
        raise ScriptError(exc.strerror or str(exc)) from None
    with handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise ScriptError(f"larger than {limit // 1024} KiB: not a launch script")
    return data


def read_script(
    source: str | bytes,
    env: Mapping[str, str] | None = None,
    args: list[str] | None = None,
    base: Path | None = None,
) -> Script:
    """Parse and walk a bash script; ``env`` is the environment it would start with, ``base``
    the directory `source FILE` is read from (None: sourced files are not read)."""
    data = source.encode() if isinstance(source, str) else source
    tree = _PARSER.parse(data)
    if tree.root_node.has_error:
        line = _first_error(tree.root_node)
        raise ScriptError(f"line {line}: bash syntax this parser cannot read")
    reader = _Reader(data, env or {}, args or [], base)
    reader.walk(tree.root_node)
    for variable in reader.script.variables.values():
        variable.value = reader.restore(variable.value)
        if variable.items is not None:
            variable.items = [reader.restore(item) for item in variable.items]
    return reader.script


def _first_error(node: Node) -> int:
    stack: list[Any] = [node]
    while stack:
        current = stack.pop(0)
        if current.type == "ERROR" or current.is_missing:
            return int(current.start_point[0]) + 1
        stack[:0] = list(current.children)
    return int(node.start_point[0]) + 1
