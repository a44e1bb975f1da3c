#!/usr/bin/env python3
"""Checks the module layering: every #include and every CMake link between tune's modules must
be an edge that docs/ARCHITECTURE.md allows, and a module's CMake link to another is PUBLIC
exactly when one of its headers includes that module (PRIVATE otherwise).

Usage: layering_check.py SOURCE_DIR [--inject FILE:HEADER ...]
  --inject pretends FILE also has `#include "HEADER"` (to show that a back edge is caught).
Prints one line per violation and exits 1 if there is any, else prints a summary and exits 0.
"""
import argparse
import os
import re
import sys

# Folder -> CMake library. The module of a file is the longest folder that holds it.
LIBRARIES = {
    "base": "tune_base",
    "search": "tune_search",
    "codegen/ir": "tune_codegen_ir",
    "codegen/cpu": "tune_codegen_cpu",
    "codegen/cuda": "tune_codegen_cuda",
    "codegen/runtime": "tune_codegen_runtime",
    "codegen": "tune_codegen",
    "measure": "tune_measure",
    "costmodel": "tune_costmodel",
    "dataset": "tune_dataset",
    "tuner": "tune_tuner",
    "tuner/main": "tune",
    "proto": "tune_proto",
    "server": "tune_server",
    "graph": "tune_graph",
    "executor": "tune_executor",
    "exporter": "tune_exporter",
}
# Generated code is included by its proto package path.
INCLUDE_ALIASES = {"tune/v1/": "proto"}
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
TABLE_BEGIN = "<!-- layering:begin -->"
TABLE_END = "<!-- layering:end -->"


def module_of(path):
    """The module a repository-relative path (a file or an include) belongs to, or None."""
    for prefix, module in INCLUDE_ALIASES.items():
        if path.startswith(prefix):
            return module
    best = None
    for folder in LIBRARIES:
        if path.startswith(folder + "/") and (best is None or len(folder) > len(best)):
            best = folder
    return best


def allowed_edges(root):
    """module -> set of modules it may depend on, from the table in docs/ARCHITECTURE.md."""
    text = open(os.path.join(root, "docs", "ARCHITECTURE.md"), encoding="utf-8").read()
    if TABLE_BEGIN not in text or TABLE_END not in text:
        sys.exit("layering: docs/ARCHITECTURE.md has no layering table (%s ... %s)" % (TABLE_BEGIN, TABLE_END))
    table = text.split(TABLE_BEGIN, 1)[1].split(TABLE_END, 1)[0]
    allowed = {}
    for line in table.splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or cells[0] in ("module", "") or set(cells[0]) <= set("-: "):
            continue
        deps = {d.strip().strip("`") for d in cells[1].split(",")} - {"", "-", "(none)"}
        allowed[cells[0]] = deps
    unknown = (set(allowed) | set().union(*allowed.values())) - set(LIBRARIES)
    if unknown:
        sys.exit("layering: the table names unknown modules: " + ", ".join(sorted(unknown)))
    return allowed


def source_files(root, module):
    folder = os.path.join(root, module)
    for name in sorted(os.listdir(folder)):
        if name.endswith((".h", ".cc")):
            yield module + "/" + name


def includes(root, path, injected):
    text = open(os.path.join(root, path), encoding="utf-8").read()
    return INCLUDE_RE.findall(text) + injected.get(path, [])


def cmake_links(root, module):
    """(library, scope) pairs of tune_* libraries the module's CMakeLists.txt links."""
    path = os.path.join(root, module, "CMakeLists.txt")
    if not os.path.exists(path):
        return []
    text = re.sub(r"#.*", "", open(path, encoding="utf-8").read())
    links = []
    for call in re.finditer(r"(tune_module|target_link_libraries)\s*\(([^)]*)\)", text):
        tokens = call.group(2).split()
        scope = "PUBLIC" if call.group(1) == "tune_module" else "PRIVATE"
        for token in tokens[1:]:
            if token in ("PUBLIC", "PRIVATE", "INTERFACE"):
                scope = token
            elif token in LIBRARIES.values():
                links.append((token, scope))
    return links


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("--inject", action="append", default=[])
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    injected = {}
    for item in args.inject:
        file, header = item.split(":", 1)
        injected.setdefault(file, []).append(header)
    allowed = allowed_edges(root)
    library_module = {lib: m for m, lib in LIBRARIES.items()}
    errors = []
    edges = 0
    for module in LIBRARIES:
        if module == "proto":
            continue  # generated code only
        if module not in allowed:
            errors.append("%s: module missing from the table in docs/ARCHITECTURE.md" % module)
            continue
        header_deps = set()
        for path in source_files(root, module):
            for inc in includes(root, path, injected):
                dep = module_of(inc)
                if dep is None or dep == module:
                    continue
                edges += 1
                if dep not in allowed[module]:
                    errors.append('%s: #include "%s": %s may not depend on %s' % (path, inc, module, dep))
                if path.endswith(".h"):
                    header_deps.add(dep)
        for lib, scope in cmake_links(root, module):
            dep = library_module[lib]
            if dep == module:
                continue
            if dep not in allowed[module]:
                errors.append("%s/CMakeLists.txt: links %s: %s may not depend on %s" % (module, lib, module, dep))
            elif scope == "PUBLIC" and dep not in header_deps:
                errors.append("%s/CMakeLists.txt: %s is PUBLIC but no header of %s includes %s (make it PRIVATE)"
                              % (module, lib, module, dep))
            elif scope == "PRIVATE" and dep in header_deps:
                errors.append("%s/CMakeLists.txt: %s is PRIVATE but a header of %s includes %s (make it PUBLIC)"
                              % (module, lib, module, dep))
    for e in errors:
        print("layering: " + e)
    if errors:
        return 1
    print("layering: %d includes between modules, all allowed by docs/ARCHITECTURE.md" % edges)
    return 0


if __name__ == "__main__":
    sys.exit(main())
