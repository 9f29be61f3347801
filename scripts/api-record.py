#!/usr/bin/env python3
"""The public API of one crate, as a user can name it: one line per path, from rustdoc's
JSON output (`RUSTC_BOOTSTRAP=1 cargo rustdoc -p CRATE --all-features -- -Z
unstable-options --output-format json`, as docs.rs's nightly would build it).

    scripts/api-record.py target/doc/ratekeeper_core.json            # the record
    scripts/api-record.py target/doc/ratekeeper_core.json --counts   # its first line alone

The first line counts: types (structs, enums, unions, traits and type aliases), functions
(free functions and public inherent methods), each item once however many paths reach it,
and the items reachable at more than one path.

Each line is `kind path` and what a user's code depends on besides the name (a function's
signature, a field's or a constant's type, a variant's fields, `#[non_exhaustive]`): modules, types, traits, functions, constants, statics and macros
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


def render_path(v):
    """A path with its generic arguments: `Option<Duration>`, `Fn(&Refusal) -> Response<Bytes>`."""
    name = v["path"].split("::")[-1]
    args = v.get("args") or {}
    if not isinstance(args, dict):
        return name
    if "parenthesized" in args:
        par = args["parenthesized"]
        out = f"{name}(" + ", ".join(render_type(x) for x in par.get("inputs", [])) + ")"
        if par.get("output") is not None:
            out += " -> " + render_type(par["output"])
        return out
    ab = args.get("angle_bracketed")
    if not ab:
        return name
    inner = []
    for a in ab.get("args", []):
        if "type" in a:
            inner.append(render_type(a["type"]))
        elif "lifetime" in a:
            inner.append(a["lifetime"])
        elif "const" in a:
            inner.append(str(a["const"].get("expr", "_")))
        else:
            inner.append("_")
    for c in ab.get("constraints", []):
        binding = c.get("binding", {})
        if isinstance(binding, dict) and "equality" in binding:
            eq = binding["equality"]
            inner.append(f"{c['name']} = " + (render_type(eq["type"]) if "type" in eq else "_"))
        elif isinstance(binding, dict) and "constraint" in binding:
            inner.append(f"{c['name']}: " + render_bounds(binding["constraint"]))
    return f"{name}<{', '.join(inner)}>" if inner else name


def render_bounds(bounds):
    out = []
    for b in bounds:
        if "trait_bound" in b:
            tb = b["trait_bound"]
            mod = "?" if tb.get("modifier") == "maybe" else ""
            out.append(mod + render_path(tb["trait"]))
        elif "outlives" in b:
            out.append(b["outlives"])
    return " + ".join(out)


def render_type(t):
    """A rustdoc JSON type as Rust writes it, paths shortened to their last segment."""
    if not isinstance(t, dict):
        return "?"
    k = next(iter(t))
    v = t[k]
    if k == "resolved_path":
        return render_path(v)
    if k in ("generic", "primitive"):
        return v
    if k == "borrowed_ref":
        life = (v["lifetime"] + " ") if v.get("lifetime") else ""
        return "&" + life + ("mut " if v.get("is_mutable") else "") + render_type(v["type"])
    if k == "raw_pointer":
        return ("*mut " if v.get("is_mutable") else "*const ") + render_type(v["type"])
    if k == "tuple":
        return "(" + ", ".join(render_type(x) for x in v) + ")"
    if k == "slice":
        return "[" + render_type(v) + "]"
    if k == "array":
        return f"[{render_type(v['type'])}; {v['len']}]"
    if k == "impl_trait":
        return "impl " + render_bounds(v)
    if k == "dyn_trait":
        traits = [render_path(x["trait"]) for x in v.get("traits", [])]
        if v.get("lifetime"):
            traits.append(v["lifetime"])
        return "dyn " + " + ".join(traits)
    if k == "qualified_path":
        trait = render_path(v["trait"]) if v.get("trait") else ""
        self_type = render_type(v["self_type"])
        return f"<{self_type} as {trait}>::{v['name']}" if trait else f"{self_type}::{v['name']}"
    if k == "function_pointer":
        sig = v["sig"]
        out = "fn(" + ", ".join(render_type(x[1]) for x in sig["inputs"]) + ")"
        return out + (" -> " + render_type(sig["output"]) if sig.get("output") else "")
    if k == "infer":
        return "_"
    return k


def render_generics(g):
    """`<T: Bound, const N: usize>` and a where clause, leaving out `impl Trait` arguments."""
    params = []
    for p in g.get("params", []):
        kind = p["kind"]
        if "type" in kind:
            if kind["type"].get("is_synthetic"):
                continue
            bounds = render_bounds(kind["type"].get("bounds", []))
            params.append(p["name"] + (f": {bounds}" if bounds else ""))
        elif "lifetime" in kind:
            params.append(p["name"])
        elif "const" in kind:
            params.append(f"const {p['name']}: {render_type(kind['const']['type'])}")
    where = []
    for w in g.get("where_predicates", []):
        if "bound_predicate" in w:
            bp = w["bound_predicate"]
            where.append(f"{render_type(bp['type'])}: {render_bounds(bp['bounds'])}")
    return (f"<{', '.join(params)}>" if params else ""), (
        " where " + ", ".join(where) if where else ""
    )


def signature(item):
    """What a user's code depends on besides the name: a function's generics, arguments
    and return; a field's, a constant's or a type alias's type; a variant's fields."""
    k = kind_of(item)
    inner = item["inner"][k]
    if k == "function":
        sig = inner["sig"]
        head = inner.get("header", {})
        quals = "".join(
            f" {q}" for q, on in (("const", head.get("is_const")), ("async", head.get("is_async")),
                                  ("unsafe", head.get("is_unsafe"))) if on
        )
        params, where = render_generics(inner.get("generics", {}))
        args = []
        for name, ty in sig["inputs"]:
            if name == "self":
                rendered = render_type(ty)
                args.append({"Self": "self", "&Self": "&self", "&mut Self": "&mut self"}.get(
                    rendered, f"self: {rendered}"))
            else:
                args.append(render_type(ty))
        out = f"{params}(" + ", ".join(args) + ")"
        if sig.get("output") is not None:
            out += " -> " + render_type(sig["output"])
        return out + where + (f" [{quals.strip()}]" if quals else "")
    if k == "struct_field":
        return ": " + render_type(inner)
    if k in ("constant", "assoc_const"):
        ty = inner.get("type")
        return ": " + render_type(ty) if ty is not None else ""
    if k == "type_alias":
        return " = " + render_type(inner["type"])
    if k == "variant":
        vk = inner.get("kind")
        if isinstance(vk, dict) and "tuple" in vk:
            return "(" + ", ".join(
                "_" if f is None else render_type(INDEX[str(f)]["inner"]["struct_field"])
                for f in vk["tuple"]) + ")"
        if isinstance(vk, dict) and "struct" in vk:
            return " { " + ", ".join(
                f"{INDEX[str(f)]['name']}: {render_type(INDEX[str(f)]['inner']['struct_field'])}"
                for f in vk["struct"]["fields"]) + " }"
    return ""


INDEX = {}


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    doc, index = load(sys.argv[1])
    INDEX.update(index)
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
        item = index.get(str(iid)) if iid is not None else None
        sig = signature(item) if item is not None else ""
        if item is not None and "non_exhaustive" in str(item.get("attrs", [])):
            sig += " #[non_exhaustive]"
        also = [p for p in by_id.get(iid, []) if p != path] if iid is not None else []
        # Items of a type reached at two paths follow it: mark only the item itself.
        mark = f" (also at {', '.join(sorted(also))})" if also and kind not in ("field", "variant") else ""
        out.append(f"{kind} {path}{sig}{mark}")
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
