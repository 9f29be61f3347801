#!/usr/bin/env python3
"""The public API of one crate, as a user can name it: one line per path, from rustdoc's
JSON output (`RUSTC_BOOTSTRAP=1 cargo rustdoc -p CRATE --all-features -- -Z
unstable-options --output-format json`, as docs.rs's nightly would build it).

    scripts/api-record.py target/doc/ratekeeper_core.json            # the record
    scripts/api-record.py target/doc/ratekeeper_core.json --counts   # its first line alone

The first line counts: types (structs, enums, unions, traits and type aliases), functions
(free functions and public inherent methods), each item once however many paths reach it,
and the items reachable at more than one path.

Each line is `kind path`: modules, types, traits, functions, constants, statics and macros
reachable from the crate's root through public modules and public re-exports; a public
type's fields, variants, and the methods and constants of its inherent impls; a public
trait's items; and `impl Trait for Type` for each trait a public type implements by hand
or by derive (auto and blanket impls left out). An item of the crate reachable at two
paths is listed at both and marked `(also at <other path>)`. Items from other crates
re-exported here are `use path = source`.
"""
import json
import sys


def load(path):
    with open(path) as f:
        doc = json.load(f)
    return doc, doc["index"]


def kind_of(item):
    return next(iter(item["inner"]))


def render_type(t):
    """A short rendering of a rustdoc JSON type, enough to name what an impl is for."""
    if not isinstance(t, dict):
        return "?"
    k = next(iter(t))
    v = t[k]
    if k == "resolved_path":
        name = v["path"].split("::")[-1]
        args = v.get("args") or {}
        ab = args.get("angle_bracketed") if isinstance(args, dict) else None
        if ab and ab.get("args"):
            inner = []
            for a in ab["args"]:
                if "type" in a:
                    inner.append(render_type(a["type"]))
                else:
                    inner.append("_")
            return f"{name}<{', '.join(inner)}>"
        return name
    if k == "generic":
        return v
    if k == "primitive":
        return v
    if k == "borrowed_ref":
        return "&" + ("mut " if v.get("is_mutable") else "") + render_type(v["type"])
    if k == "tuple":
        return "(" + ", ".join(render_type(x) for x in v) + ")"
    if k == "slice":
        return "[" + render_type(v) + "]"
    return k


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    doc, index = load(sys.argv[1])
    counts = "--counts" in sys.argv
    lines = []  # (path, kind, id)
    seen_modules = set()

    def visit_module(mid, prefix):
        if (mid, prefix) in seen_modules:
            return
        seen_modules.add((mid, prefix))
        module = index[str(mid)]
        for child in module["inner"]["module"]["items"]:
            item = index.get(str(child))
            if item is None or item["visibility"] != "public":
                continue
            k = kind_of(item)
            if k == "use":
                use = item["inner"]["use"]
                target = index.get(str(use["id"])) if use.get("id") is not None else None
                if use.get("is_glob"):
                    if target is not None and kind_of(target) == "module":
                        visit_module(use["id"], prefix)
                    else:
                        lines.append((f"{prefix}::*", "use", None, use["source"]))
                    continue
                path = f"{prefix}::{use['name']}"
                if target is None:
                    lines.append((path, "use", None, use["source"]))
                    continue
                record(use["id"], target, path)
                continue
            if k == "impl":
                continue
            record(child, item, f"{prefix}::{item['name']}")

    def record(iid, item, path):
        k = kind_of(item)
        lines.append((path, k, iid, None))
        if k == "module":
            visit_module(iid, path)
        elif k in ("struct", "enum", "union"):
            inner = item["inner"][k]
            if k == "struct":
                kind = inner.get("kind", {})
                fields = []
                if isinstance(kind, dict):
                    if "plain" in kind:
                        fields = kind["plain"].get("fields", [])
                    elif "tuple" in kind:
                        fields = [f for f in kind["tuple"] if f is not None]
                for f in fields:
                    fi = index.get(str(f))
                    if fi and fi["visibility"] == "public":
                        lines.append((f"{path}.{fi['name']}", "field", f, None))
            if k == "enum":
                for v in inner.get("variants", []):
                    vi = index.get(str(v))
                    if vi:
                        lines.append((f"{path}::{vi['name']}", "variant", v, None))
            for imp in inner.get("impls", []):
                impl_lines(imp, path)
        elif k == "trait":
            for t in item["inner"]["trait"].get("items", []):
                ti = index.get(str(t))
                if ti:
                    lines.append((f"{path}::{ti['name']}", kind_of(ti), t, None))

    def impl_lines(imp_id, path):
        imp = index.get(str(imp_id))
        if imp is None:
            return
        i = imp["inner"]["impl"]
        if i.get("is_synthetic") or i.get("blanket_impl") is not None:
            return
        if i.get("trait") is not None:
            name = i["trait"]["path"].split("::")[-1]
            if name == "StructuralPartialEq":  # the compiler's marker beside derive(PartialEq)
                return
            lines.append((f"impl {name} for {path}", "impl", None, None))
            return
        for m in i.get("items", []):
            mi = index.get(str(m))
            if mi and mi["visibility"] == "public":
                lines.append((f"{path}::{mi['name']}", kind_of(mi), m, None))

    root = doc["root"]
    crate = index[str(root)]["name"]
    visit_module(root, crate)

    by_id = {}
    for path, kind, iid, _ in lines:
        if iid is not None and kind not in ("impl",):
            by_id.setdefault(iid, []).append(path)
    out = []
    for path, kind, iid, source in sorted(set(lines), key=lambda l: (l[0], l[1])):
        if kind == "use" and source is not None:
            out.append(f"use {path} = {source}")
            continue
        if kind == "impl":
            out.append(path)
            continue
        also = [p for p in by_id.get(iid, []) if p != path] if iid is not None else []
        # Items of a type reached at two paths follow it: mark only the item itself.
        mark = f" (also at {', '.join(sorted(also))})" if also and kind not in ("field", "variant") else ""
        out.append(f"{kind} {path}{mark}")
    types = {i for p, k, i, _ in lines if k in ("struct", "enum", "union", "trait", "type_alias")}
    fns = {i for p, k, i, _ in lines if k == "function"}
    twice = sum(1 for i, ps in by_id.items() if len(set(ps)) > 1)
    head = (
        f"# {crate}: {len(types)} public types and traits, {len(fns)} public functions and "
        f"methods, {twice} items at more than one path"
    )
    print(head if counts else "\n".join([head] + out))

if __name__ == "__main__":
    main()
