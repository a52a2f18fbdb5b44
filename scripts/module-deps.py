#!/usr/bin/env python3
"""Module circles: modules of a crate that use each other in a loop (issue 42).

Every crate of the workspace (each library, proc-macro and binary target
that `cargo metadata` lists) is read from its root file along its `mod`
declarations, so a file is a module exactly when the compiler takes it for
one.

Module A uses module B when A's code names B:

- every `use` declaration of A, and every path in A's code that starts
  with `crate::`, `super::`, `self::` or one of A's child modules;
- a name that a module only imports (`pub use child::Name`, or a plain
  `use` that a child reaches through `super::Name`) is followed to the
  module that defines it, over as many imports as it takes: using a name
  is using the file it is written in;
- using an ancestor is not a use: a child using its parent is the module
  tree's own shape.

Not read: comments, doc links included (a link tells the reader where to
read on, not what the code needs; counted, they would tie most of the
runtime into one circle of cross-references), and test-only code
(`#[cfg(test)]` items and modules, which may reach across the tree to
check it).

A circle is a set of sibling modules (children of one module, each taken
with everything under it) that use each other in a loop, at any depth: two
files of one folder, or two folders whose files use each other. A loop of
files anywhere in a crate is always one of these, among the children of
the closest module that holds all its files.

Every circle is printed, with the uses that make it. The check fails on a
circle that the allow-list (scripts/module-circles.allow, one circle a
line) does not name, and on a line of the list that names no circle any
more, so that the list cannot go stale.

    scripts/module-deps.py                     # every crate of the workspace
    scripts/module-deps.py retry-runtime/src   # one crate: its src/ or its root file
    scripts/module-deps.py -v                  # also the map inside every module
    scripts/module-deps.py --allow FILE        # another allow-list
"""

import argparse
import bisect
import functools
import json
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
ALLOW_LIST = ROOT / "scripts" / "module-circles.allow"

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


class CheckError(Exception):
    """Something the checker cannot read correctly: it stops rather than guess."""


# --- Reading Rust source ------------------------------------------------------


RAW_STRING = re.compile(r'(?:br|cr|r)(#*)"')


def code_only(text):
    """The text with comments, string and character literals blanked out
    (newlines kept, so offsets and line numbers stay those of the file)."""
    out = list(text)
    n, i = len(text), 0

    def blank(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    def ident_char(k):
        return k >= 0 and (text[k].isalnum() or text[k] == "_")

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            blank(i, j)
            i = j
        elif c in "rbc" and not ident_char(i - 1) and (raw := RAW_STRING.match(text, i)):
            end = text.find('"' + raw.group(1), raw.end())
            j = n if end < 0 else end + 1 + len(raw.group(1))
            blank(i, j)
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            blank(i, j + 1)
            i = j + 1
        elif c == "'":
            # A character literal ('x', '\n', '\u{1F600}'), not a lifetime ('a).
            m = re.match(r"'(?:\\(?:u\{[0-9A-Fa-f]*\}|x[0-9A-Fa-f]{2}|.)|[^\\'\n])'", text[i : i + 12])
            if m:
                blank(i, i + m.end())
                i += m.end()
            else:
                i += 1
        else:
            i += 1
    return "".join(out)


# `#[cfg(test)]`, or `#[cfg(all(..., test, ...))]` (one level of nesting inside).
NOT_PARENS = r"(?:[^()]|\([^()]*\))*"
TEST_ONLY = re.compile(rf"#\[cfg\(\s*(?:test|all\({NOT_PARENS}\btest\b{NOT_PARENS}\))\s*\)\]")
BLOCK_ITEM = re.compile(
    r"(?:pub(?:\([^)]*\))?\s+)?(?:(?:const|async|unsafe|extern(?:\s+\"C\")?)\s+)*"
    r"(?:fn|mod|impl|trait|struct|enum|union|macro_rules!)\b"
)


def item_end(code, i):
    """Where the item (or field, or statement) starting at `code[i]` ends:
    after its `;` or `,`, after the block of an item that has one, or before
    the bracket that closes what holds it."""
    n = len(code)
    while True:  # its other attributes
        while i < n and code[i].isspace():
            i += 1
        if not code.startswith("#[", i):
            break
        depth, i = 0, i + 1
        while i < n:
            depth += {"[": 1, "]": -1}.get(code[i], 0)
            i += 1
            if depth == 0:
                break
    has_block = BLOCK_ITEM.match(code, i) is not None
    depth = 0
    while i < n:
        ch = code[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                return i
            depth -= 1
            if depth == 0 and ch == "}" and has_block:
                return i + 1
        elif ch in ";," and depth == 0:
            return i + 1
        i += 1
    return n


def without_tests(code):
    """`code` with every test-only item blanked out: `#[cfg(test)]` or
    `#[cfg(all(test, ...))]` and what it applies to."""
    out = list(code)
    for m in reversed(list(TEST_ONLY.finditer(code))):
        for k in range(m.start(), item_end(code, m.end())):
            if out[k] != "\n":
                out[k] = " "
    return "".join(out)


def expand_use(spec):
    """The paths of one `use` tree, each as (segments, the name it binds):
    `a::{b, c::{d as e}, self}` -> (a::b, b), (a::c::d, e), (a, a). The name
    is "*" for a glob and None for `as _`; a leading `::` stays a segment."""
    spec = re.sub(r"\s+as\s+", "@", spec.strip())
    spec = re.sub(r"\s+", "", spec)
    out = []

    def walk(prefix, tree):
        brace = tree.find("{")
        if brace >= 0:
            head, body = tree[:brace], tree[brace + 1 : tree.rindex("}")]
            base = prefix + split_path(head)
            part, depth = "", 0
            for ch in body + ",":
                if ch == "," and depth == 0:
                    if part:
                        walk(base, part)
                    part = ""
                    continue
                depth += {"{": 1, "}": -1}.get(ch, 0)
                part += ch
            return
        path, _, alias = tree.partition("@")
        segs = prefix + split_path(path)
        if segs and segs[-1] == "self":
            segs = segs[:-1]
        if not segs:
            return
        name = "*" if segs[-1] == "*" else (alias or segs[-1])
        out.append((segs, None if name == "_" else name))

    walk([], spec)
    return out


def split_path(text):
    """`::a::b` -> ["::", "a", "b"]; `a::b::` -> ["a", "b"]."""
    segs = [s for s in text.split("::") if s]
    return ["::"] + segs if text.startswith("::") else segs


# --- The module tree ------------------------------------------------------------

TOKEN = re.compile(
    rf"\bmod\s+(?P<inline>{IDENT})\s*\{{"
    rf"|\bmod\s+(?P<decl>{IDENT})\s*;"
    r"|\buse\s+(?P<use>[^;]+);"
    rf"|\b(?:(?:const|static|struct|enum|union|trait|type|fn)\s+)+(?:mut\s+)?(?P<item>{IDENT})"
    rf"|\bmacro_rules!\s*(?P<macro>{IDENT})"
    rf"|(?P<path>(?<![A-Za-z0-9_:$])(?:\$crate|{IDENT})(?:::{IDENT})+)"
    r"|(?P<brace>[{}])"
)


class Module:
    """One module: a file, or an inline `mod name { .. }` in one."""

    def __init__(self, path, file, child_dir):
        self.path = path  # ("breaker", "state"); () for the crate root
        self.file = file
        self.child_dir = child_dir  # where its `mod name;` files are
        self.children = {}  # name -> module path
        self.imports = {}  # name -> path segments of the `use` that binds it
        self.globs = []  # path segments of its `use ..::*`
        self.defined = set()  # names of the items it defines


class Crate:
    """A crate's modules, read from its root file along its `mod` declarations."""

    def __init__(self, root_file):
        self.modules = {}
        # (module path, path segments, file, offset): every path the code names.
        self.references = []
        pending = [((), root_file, root_file.parent)]
        while pending:
            pending += self._read(*pending.pop())

    def _read(self, path, file, child_dir):
        code = without_tests(code_only(file.read_text(encoding="utf-8")))
        if re.search(r"#\[path\b", code):
            raise CheckError(f"{file}: #[path] is not supported by this checker")
        self.modules[path] = Module(path, file, child_dir)
        found = []
        scopes = [(0, path)]  # (brace depth its block closes at, module path)
        depth = 0
        for m in TOKEN.finditer(code):
            here = self.modules[scopes[-1][1]]
            if m.group("inline"):
                depth += 1
                inner = here.path + (m.group("inline"),)
                here.children[m.group("inline")] = inner
                self.modules[inner] = Module(inner, file, here.child_dir / m.group("inline"))
                scopes.append((depth, inner))
            elif m.group("decl"):
                name = m.group("decl")
                candidates = [here.child_dir / f"{name}.rs", here.child_dir / name / "mod.rs"]
                existing = [c for c in candidates if c.is_file()]
                if len(existing) != 1:
                    raise CheckError(
                        f"{file}: `mod {name};` needs exactly one of {candidates[0]} and {candidates[1]}"
                    )
                child = existing[0]
                here.children[name] = here.path + (name,)
                child_dir = child.parent if child.name == "mod.rs" else child.parent / name
                found.append((here.path + (name,), child, child_dir))
            elif m.group("use"):
                for segs, name in expand_use(m.group("use")):
                    if name == "*":
                        here.globs.append(segs)
                    elif name is not None:
                        here.imports.setdefault(name, segs)
                    self.references.append((here.path, segs, file, m.start()))
            elif m.group("item") or m.group("macro"):
                here.defined.add(m.group("item") or m.group("macro"))
            elif m.group("path"):
                self.references.append((here.path, split_path(m.group("path")), file, m.start()))
            elif m.group("brace") == "{":
                depth += 1
            else:
                if len(scopes) > 1 and scopes[-1][0] == depth:
                    scopes.pop()
                depth -= 1
        return found

    def resolve(self, segs, context, seen=frozenset()):
        """Where the path `segs`, written in module `context`, leads:
        ("module", path) for a module, ("item", path) for an item of that
        module. A name that cannot be placed (another crate's, `::name`
        included, the prelude's, a local variable's) is taken for one of
        `context`'s own: no use of another module."""
        first = segs[0]
        if first in ("crate", "$crate"):
            place, rest = ("module", ()), segs[1:]
        elif first in ("self", "super"):
            base, i = context, 0
            while i < len(segs) and segs[i] in ("self", "super"):
                base = base[:-1] if segs[i] == "super" else base
                i += 1
            place, rest = ("module", base), segs[i:]
        else:
            place, rest = self._lookup(context, first, seen), segs[1:]
        for seg in rest:
            if place[0] != "module" or seg == "*":
                break
            place = self._lookup(place[1], seg, seen)
        return place

    def _lookup(self, module, name, seen):
        """Where `name`, a name of `module`, is defined: imports are followed
        to the module that defines what they import."""
        here = self.modules[module]
        if name in here.children:
            return ("module", here.children[name])
        if (module, name) in seen:  # an import loop: the compiler refuses it anyway
            return ("item", module)
        seen = seen | {(module, name)}
        if name in here.imports:
            return self.resolve(here.imports[name], module, seen)
        if name not in here.defined:
            for glob in here.globs:
                place = self.resolve(glob, module, seen)
                if place[0] == "module" and self._names(place[1], name):
                    return self._lookup(place[1], name, seen)
        return ("item", module)

    def _names(self, module, name):
        here = self.modules[module]
        return name in here.children or name in here.imports or name in here.defined

    def uses(self):
        """Every use of a module of the crate: (user module, used module,
        file, offset, the path as written)."""
        for context, segs, file, offset in self.references:
            _, used = self.resolve(segs, context)
            yield context, used, file, offset, "::".join(segs)

    def sibling_maps(self):
        """parent module -> {child: {child it uses: first use}}: the uses
        among the children of every module, each child taken with its
        descendants. A use is (file, offset, path as written, used module)."""
        maps = {}
        for user, used, file, offset, written in self.uses():
            k = 0
            while k < min(len(user), len(used)) and user[k] == used[k]:
                k += 1
            if k == len(user) or k == len(used):
                # A module using itself, its child or its ancestor: the
                # tree's own shape, with no sibling involved.
                continue
            children = maps.setdefault(user[:k], {})
            children.setdefault(user[k], {}).setdefault(used[k], (file, offset, written, used))
            children.setdefault(used[k], {})
        return maps

    def describe(self, module):
        """How a module is shown: its file, its folder (trailing /) for a
        mod.rs, or its file and name when it is inline."""
        here = self.modules[module]
        parent = self.modules.get(module[:-1])
        if parent is not None and parent.file == here.file and module:
            return f"{show(here.file)} (mod {module[-1]})"
        if here.file.name == "mod.rs":
            return show(here.file.parent) + "/"
        return show(here.file)


def strongly_connected(graph):
    """The strongly connected components of more than one node (Tarjan's
    algorithm, iterative), each sorted, in a stable order."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    for start in sorted(graph):
        if start in index:
            continue
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        work = [(start, iter(sorted(graph[start])))]
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph.get(succ, ())))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found)


# --- The check -------------------------------------------------------------------


class Circle:
    """Sibling modules that use each other in a loop."""

    def __init__(self, crate, parent, children, uses):
        self.crate, self.parent, self.children, self.uses = crate, parent, children, uses
        self.members = [crate.describe(parent + (child,)) for child in children]
        self.line = " <-> ".join(self.members)  # as the allow-list writes it

    def print(self, allowed_by):
        print(f"  circle{f' (allowed by {allowed_by})' if allowed_by else ''}: {self.line}")
        for child in self.children:
            for other in self.children:
                if other in self.uses.get(child, {}):
                    file, offset, written, used = self.uses[child][other]
                    print(
                        f"    {child} -> {other}: {show(file)}:{line_of(file, offset)} "
                        f"uses {written}, in {self.crate.describe(used)}"
                    )


def show(path):
    """A path as printed and as the allow-list writes it: from the repository root."""
    path = pathlib.Path(path).resolve()
    try:
        return path.relative_to(ROOT).as_posix()
    except ValueError:
        return path.as_posix()


@functools.cache
def line_starts(file):
    text = file.read_text(encoding="utf-8")
    return [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"]


def line_of(file, offset):
    return bisect.bisect_right(line_starts(file), offset)


def workspace_crates():
    """(package name, root file) of every library, proc-macro and binary
    target of the workspace, as cargo lists them."""
    try:
        out = subprocess.run(
            ["cargo", "metadata", "--no-deps", "--format-version", "1"],
            cwd=ROOT, check=True, capture_output=True, text=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise CheckError(f"cargo metadata failed: {getattr(e, 'stderr', '') or e}") from e
    crates = []
    for package in json.loads(out)["packages"]:
        for target in package["targets"]:
            if {"lib", "proc-macro", "bin"} & set(target["kind"]):
                crates.append((package["name"], pathlib.Path(target["src_path"])))
    return sorted(crates, key=lambda crate: show(crate[1]))


def crate_root(arg):
    """The root file of a crate named on the command line: the file itself,
    or the lib.rs or main.rs of the folder."""
    path = pathlib.Path(arg)
    if path.is_dir():
        roots = [path / name for name in ("lib.rs", "main.rs") if (path / name).is_file()]
        if not roots:
            raise CheckError(f"{arg}: no lib.rs or main.rs in it")
        return roots[0]
    if not path.is_file():
        raise CheckError(f"{arg}: no such crate root")
    return path


def read_allow_list(file):
    """(line number, set of members) for every circle the list names."""
    if not file.is_file():
        return []
    entries = []
    for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if line:
            entries.append((number, frozenset(part.strip() for part in line.split("<->"))))
    return entries


def check_crate(name, root, verbose):
    """Reads the crate, prints the map of its top-level modules (of every
    module with `verbose`), and returns its circles."""
    crate = Crate(root)
    maps = crate.sibling_maps()
    print(f"== {show(root.parent)}" + (f" ({name})" if name else ""))

    def print_map(parent, indent):
        children = crate.modules[parent].children
        width = max((len(child) for child in children), default=0)
        for child in sorted(children):
            uses = maps.get(parent, {}).get(child, {})
            print(f"{indent}{child:<{width}} -> {' '.join(sorted(uses)) or '(nothing)'}")

    print_map((), "  ")
    if verbose:
        for parent in sorted(p for p, m in crate.modules.items() if p and len(m.children) > 1):
            print(f"  in {crate.describe(parent)}")
            print_map(parent, "    ")
    return [
        Circle(crate, parent, children, maps[parent])
        for parent in sorted(maps)
        for children in strongly_connected({child: set(uses) for child, uses in maps[parent].items()})
    ]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("crates", nargs="*", help="a crate's src/ or root file (default: the workspace's)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print the map inside every module too")
    parser.add_argument("--allow", type=pathlib.Path, default=ALLOW_LIST, help="the allow-list")
    args = parser.parse_args(argv)
    allowed = read_allow_list(args.allow)
    failures, checked_folders, found = [], [], set()
    try:
        crates = [(None, crate_root(arg)) for arg in args.crates] or workspace_crates()
        for name, root in crates:
            checked_folders.append(show(root.parent) + "/")
            for circle in check_crate(name, root, args.verbose):
                members = frozenset(circle.members)
                found.add(members)
                listed = any(members == entry for _, entry in allowed)
                circle.print(show(args.allow) if listed else None)
                if not listed:
                    failures.append(f"a module circle: {circle.line}")
    except CheckError as e:
        print(f"module-deps: {e}", file=sys.stderr)
        return 2
    for number, entry in allowed:
        checked = all(any(member.startswith(folder) for folder in checked_folders) for member in entry)
        if checked and entry not in found:
            failures.append(
                f"{show(args.allow)}:{number} names a circle that is gone "
                f"({' <-> '.join(sorted(entry))}): delete the line"
            )
    for failure in failures:
        print(f"module-deps: {failure}", file=sys.stderr)
    left = sum(1 for _, entry in allowed if entry in found)
    if left:
        print(f"module-deps: {left} allowed circle(s) left in {show(args.allow)}, which must end empty",
              file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
