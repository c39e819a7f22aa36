"""A contract type for import-linter that the stock ones lack: no import cycle between
MODULES (stock `acyclic_siblings` works on packages, and a Django app's package holds
modules of every layer, so it would see cycles where there are none).

Named in pyproject.toml's [tool.importlinter] `contract_types`; `make lint` runs it with
the others (lint-imports puts the working directory on sys.path, so `tests.architecture`
imports)."""

from __future__ import annotations

from typing import Any

from importlinter.application import output
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck


class AcyclicModulesContract(Contract):
    """Every strongly connected set of modules under `packages` (except `ignore`d ones,
    such as migrations) is broken: A imports B and B, directly or not, imports A."""

    type_name = "acyclic_modules"

    packages = fields.ListField(subfield=fields.StringField())
    ignore = fields.ListField(subfield=fields.StringField(), required=False)

    def check(self, graph: Any, verbose: bool) -> ContractCheck:
        roots = tuple(f"{p}." for p in self.packages) + tuple(self.packages)  # type: ignore[attr-defined]
        ignored = tuple(self.ignore or ())  # type: ignore[attr-defined]
        modules = sorted(
            m for m in graph.modules if m.startswith(roots) and not any(i in m for i in ignored)
        )
        inside = set(modules)
        edges = {
            m: sorted(set(graph.find_modules_directly_imported_by(m)) & inside) for m in modules
        }
        cycles = [sorted(c) for c in _strongly_connected(modules, edges) if len(c) > 1]
        return ContractCheck(kept=not cycles, metadata={"cycles": cycles, "edges": edges})

    def render_broken_contract(self, check: ContractCheck) -> None:
        edges = check.metadata["edges"]
        for cycle in check.metadata["cycles"]:
            output.print_error(f"These {len(cycle)} modules import each other:", bold=True)
            members = set(cycle)
            for module in cycle:
                for imported in edges[module]:
                    if imported in members:
                        output.indent_cursor()
                        output.print_error(f"{module} -> {imported}", bold=False)
            output.new_line()


def _strongly_connected(nodes: list[str], edges: dict[str, list[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iteratively (a deep import chain must not hit the recursion
    limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for start in nodes:
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            node, child = work.pop()
            if child == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            if child < len(edges[node]):
                work.append((node, child + 1))
                nxt = edges[node][child]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                found.append(component)
    return found
