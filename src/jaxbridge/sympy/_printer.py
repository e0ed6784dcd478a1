"""Prints a SymPy expression DAG as a flat list of JAX assignments.

The walk is iterative (an explicit stack, never Python recursion), so a 20,000-operation
expression, however deep, prints without a RecursionError. Each distinct node is printed once
(hash-consing: the common-subexpression elimination of `cse=True`), in linear time even when
the expression is a DAG whose tree form is exponentially large; `sympy.cse` itself is not used
because its rebuilding queries SymPy assumptions, which is exponential on such DAGs.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import sympy

from . import _functions, _host_fallback
from ._atoms import Leaf, Mask, literal_like
from ._nodes import NodeRules

# Beyond this many operands an Add or Mul is a call with many arguments, not a chain of
# binary operators: CPython's compiler recurses on long `a + b + c + ...` chains.
_CHAIN = 8


@dataclass(frozen=True)
class Context:
    """Where a node is evaluated: the root, or a Piecewise branch whose inputs are guarded."""

    id: int
    parent: Context | None = None
    mask: Hashable | None = None  # a `Mask` node, evaluated in `parent`


class Printer(NodeRules):
    """Accumulates the assignments of one generated function."""

    def __init__(
        self,
        leaves: dict[sympy.Basic, Leaf],
        extra_functions: dict,
        compile_derivative: _host_fallback.Compiler,
        cse: bool = True,
        display: dict[sympy.Basic, str] | None = None,
    ) -> None:
        """A printer for one generated function.

        Args:
            leaves: how each input symbol is read from the arguments.
            extra_functions: the user's `{sympy_function: jax_callable}`.
            compile_derivative: `(expr, args) -> callable`, the compiler of the generated
                code above this module, for the derivatives of host fallbacks.
            cse: print each distinct node once.
            display: internal symbols -> the user's names, in errors.
        """
        self.leaves = leaves
        self.compile_derivative = compile_derivative
        self.display = dict(display or {})  # internal symbols -> the user's names, in errors
        self._hosts: dict[Hashable, str] = {}
        self.extra_functions = dict(extra_functions or {})
        self.cse = cse
        self.lines: list[str] = []
        self.namespace: dict[str, object] = {}
        self.memo: dict[Hashable, str] = {}
        self.missing: set[sympy.Basic] = set()
        self.root = Context(0)
        self._contexts: dict[tuple, Context] = {}
        self._rewrites: dict[sympy.Basic, sympy.Basic] = {}
        self._safe: dict[sympy.Basic, bool] = {}
        self._children: dict[Hashable, list[Hashable]] = {}
        self._counter = itertools.count()
        self._names: dict[int, str] = {}

    # Keys, variables and the namespace.

    def _key(self, node: Hashable, ctx: Context) -> Hashable:
        if self.cse or isinstance(node, (Mask, sympy.Atom)) or node in self.leaves:
            return (ctx.id, node)
        return (ctx.id, node, next(self._counter))  # cse=False: every occurrence on its own

    def assign(self, code: str) -> str:
        name = f"t{len(self.lines)}"
        self.lines.append(f"{name} = {code}")
        return name

    def register(self, prefix: str, value: object) -> str:
        """Puts a Python object into the generated code's namespace; returns its name."""
        if id(value) not in self._names:
            self._names[id(value)] = f"{prefix}{len(self._names)}"
            self.namespace[self._names[id(value)]] = value
        return self._names[id(value)]

    def host_name(self, node: sympy.Basic) -> str:
        """The namespace name of `node`'s host fallback (registered once per node)."""
        key = ("host", node)
        if key not in self._hosts:
            fallback = _host_fallback.make(node, self.compile_derivative, self.labels(node))
            self._hosts[key] = self.register("_h", fallback)
        return self._hosts[key]

    def host(self, node: sympy.Basic, codes: list[str]) -> str:
        return f"{self.host_name(node)}({', '.join(codes)})"

    def labels(self, node: sympy.Basic) -> list[str]:
        """The arguments of a host call as the user wrote them (their symbols, not ours)."""
        rename = {s: sympy.Symbol(n) for s, n in self.display.items()}
        args = _functions.host_arguments(node)
        return [str(a.xreplace(rename)) if rename else str(a) for a in args]

    def context(self, parent: Context, piecewise: Any, k: int) -> Context:
        """The guarded context of branch `k`; the parent itself if the branch is always safe."""
        branch = piecewise.args[k].expr
        if self.is_safe(branch):
            return parent
        key = (parent.id, piecewise, k)
        if key not in self._contexts:
            self._contexts[key] = Context(len(self._contexts) + 1, parent, Mask(piecewise, k))
        return self._contexts[key]

    def rewrite(self, node: sympy.Basic, fn: Callable[[sympy.Basic], sympy.Basic]) -> sympy.Basic:
        if node not in self._rewrites:
            self._rewrites[node] = fn(node)
        return self._rewrites[node]

    # The walk.

    def emit(self, root: sympy.Basic) -> str:
        """Prints `root` (and everything it needs) in the root context; returns its code."""
        root_key = self._key(root, self.root)
        stack: list[tuple[Hashable, Hashable, Context, bool]] = [(root_key, root, self.root, False)]
        while stack:
            key, node, ctx, expanded = stack.pop()
            if key in self.memo:
                continue
            if not expanded:
                deps = self.deps(node, ctx)
                keys = [self._key(child, child_ctx) for child, child_ctx in deps]
                self._children[key] = keys
                todo = [
                    (k, c, cc, False)
                    for k, (c, cc) in zip(keys, deps, strict=True)
                    if k not in self.memo
                ]
                if todo:
                    stack.append((key, node, ctx, True))
                    stack.extend(reversed(todo))
                    continue
            codes = [self.memo[k] for k in self._children.pop(key)]
            code = self.code(node, ctx, codes)
            is_simple = code.isidentifier() or literal_like(code)
            self.memo[key] = code if is_simple else self.assign(code)
        return self.memo[root_key]

    def is_safe(self, root: sympy.Basic) -> bool:
        """Whether every node is a polynomial operation, whose derivative is finite anywhere."""
        stack = [root]
        while stack:
            node = stack.pop()
            if node in self._safe:
                if not self._safe[node]:
                    self._safe[root] = False
                    return False
                continue
            ok = (
                node.is_Atom
                or isinstance(node, (sympy.Add, sympy.Mul))
                or (isinstance(node, sympy.Pow) and node.exp.is_Integer and node.exp >= 0)
            )
            self._safe[node] = ok
            if not ok:
                self._safe[root] = False
                return False
            stack.extend(node.args)
        self._safe[root] = True
        return True
