//! What Dragonfly needs of a script, checked here where Dragonfly cannot be installed:
//! every key a script touches is one it declared (Dragonfly refuses undeclared keys), and
//! the scripts use only what Lua 5.1 (Redis, Valkey) and Lua 5.4 (Dragonfly) share.
//!
//! The keys are checked on real servers: `compat.rs` runs every script under `MONITOR` on
//! each server of the matrix and hands the stream to [`assert_only_declared_keys`]. The
//! dialect is checked by reading the scripts' sources.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;

use crate::monitor::{Seen, commands};

/// The scripts' sources, by file name.
pub(crate) fn scripts() -> Vec<(&'static str, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../rate-limit-core/src/store/redis");
    [
        "chain.lua",
        "window.lua",
        "refund.lua",
        "slots.lua",
        "pacer.lua",
        "fleet.lua",
        "fleet_restore.lua",
        "fleet_read.lua",
        "top_put.lua",
    ]
    .into_iter()
    .map(|name| {
        // As script.rs joins them: the log's functions first in each script that counts a
        // log, the chain script in two files.
        let read = |file: &str| std::fs::read_to_string(dir.join(file)).unwrap();
        let source = match name {
            "chain.lua" => read("log.lua") + &read(name) + &read("chain_run.lua"),
            "window.lua" | "refund.lua" => read("log.lua") + &read(name),
            _ => read(name),
        };
        (name, source)
    })
    .collect()
}

/// Every command a script ran (the `[db lua]` lines after its `EVAL`/`EVALSHA`) names only
/// keys that call declared. `shas` maps each script's SHA1 to its name; returns the names
/// of the scripts seen, so a caller can require that each ran.
pub(crate) fn assert_only_declared_keys(
    stream: &str,
    shas: &HashMap<String, &'static str>,
) -> BTreeSet<&'static str> {
    let by_code: HashMap<String, &'static str> =
        scripts().into_iter().map(|(n, s)| (s, n)).collect();
    let mut seen = BTreeSet::new();
    let mut current: Option<(&'static str, BTreeSet<Vec<u8>>)> = None;
    let mut inner = 0;
    for Seen { by_script, args } in commands(stream) {
        let name = String::from_utf8_lossy(&args[0]).to_ascii_uppercase();
        if !by_script {
            current = None;
            if name == "EVAL" || name == "EVALSHA" {
                let id = String::from_utf8_lossy(&args[1]).into_owned();
                let script = if name == "EVAL" {
                    by_code.get(&id)
                } else {
                    shas.get(&id)
                };
                let script =
                    *script.unwrap_or_else(|| panic!("a script that is not ours ran: {id:.60}"));
                let n: usize = String::from_utf8_lossy(&args[2]).parse().unwrap();
                seen.insert(script);
                current = Some((script, args[3..3 + n].iter().cloned().collect()));
            }
            continue;
        }
        let (script, declared) = current
            .as_ref()
            .expect("a script's command follows its call");
        inner += 1;
        for key in keys_of(&name, &args[1..]) {
            assert!(
                declared.contains(key),
                "{script} ran {name} on {:?}, a key its call did not declare",
                String::from_utf8_lossy(key)
            );
        }
    }
    assert!(inner > 0, "no command run by a script was seen");
    seen
}

/// The keys of one command a script runs (its key positions, as `COMMAND INFO` gives them).
fn keys_of<'a>(name: &str, args: &'a [Vec<u8>]) -> &'a [Vec<u8>] {
    match name {
        "TIME" | "PUBLISH" => &[],
        "MGET" => args,
        "HGET" | "HGETALL" | "HSET" | "HDEL" | "HINCRBY" | "DEL" => &args[..1],
        "GET" | "SET" | "ZADD" | "ZREM" | "ZREMRANGEBYSCORE" | "ZCARD" | "ZSCORE" | "ZRANGE"
        | "PEXPIRE" | "INCRBY" => &args[..1],
        other => panic!("a script ran {other}: add its key positions here"),
    }
}

/// The scripts read as Lua: no global outside what Lua 5.1 and 5.4 share (plus what Redis,
/// Valkey and Dragonfly all give a script), no library function only one of them has, no
/// syntax only 5.2+ knows, numbers written only through `string.format` (Lua 5.4 writes a
/// float `3.0` where 5.1 writes `3`), and `unpack` only as `table.unpack or unpack`.
#[test]
fn the_scripts_use_only_what_lua_5_1_and_5_4_share() {
    const GLOBALS: &[&str] = &[
        // Given to a script by Redis, Valkey and Dragonfly alike.
        "redis",
        "KEYS",
        "ARGV",
        "struct",
        "cjson",
        "cmsgpack",
        "bit",
        // The base library in 5.1 and 5.4 both.
        "assert",
        "error",
        "ipairs",
        "next",
        "pairs",
        "pcall",
        "rawequal",
        "rawget",
        "rawset",
        "select",
        "setmetatable",
        "getmetatable",
        "tonumber",
        "type",
        "xpcall",
        "string",
        "table",
        "math",
    ];
    const SHARED: &[(&str, &[&str])] = &[
        (
            "string",
            &[
                "byte", "char", "find", "format", "gmatch", "gsub", "len", "lower", "match", "rep",
                "reverse", "sub", "upper",
            ],
        ),
        ("table", &["concat", "insert", "remove", "sort"]),
        (
            "math",
            &[
                "abs", "ceil", "cos", "exp", "floor", "fmod", "huge", "log", "max", "min", "modf",
                "pi", "sin", "sqrt", "tan",
            ],
        ),
        ("struct", &["pack", "unpack", "size"]),
        (
            "redis",
            &["call", "pcall", "error_reply", "status_reply", "sha1hex"],
        ),
    ];
    let mut checked = 0;
    for (name, source) in scripts() {
        let tokens = lex(&source);
        assert!(
            tokens.len() > 50,
            "{name}: too few tokens, the lexer lost its way"
        );
        for t in &tokens {
            assert!(
                !matches!(
                    t.text.as_str(),
                    "goto" | "::" | "//" | "&" | "|" | "<<" | ">>" | "~"
                ),
                "{name}:{}: `{}` is Lua 5.2+ only",
                t.line,
                t.text
            );
            assert!(
                t.text != "tostring",
                "{name}:{}: write numbers with string.format",
                t.line
            );
        }
        for g in globals(&tokens) {
            let t = &tokens[g];
            let next = tokens.get(g + 1).map(|t| t.text.as_str());
            let fallback = t.text == "unpack"
                && g >= 4
                && tokens[g - 4..g]
                    .iter()
                    .map(|t| t.text.as_str())
                    .eq(["table", ".", "unpack", "or"]);
            assert!(
                GLOBALS.contains(&t.text.as_str()) || fallback,
                "{name}:{}: the global `{}` is not in both Lua 5.1 and 5.4 (or not given to scripts)",
                t.line,
                t.text
            );
            if let Some((_, fields)) = SHARED.iter().find(|(lib, _)| *lib == t.text)
                && next == Some(".")
            {
                let field = &tokens[g + 2];
                let ok = fields.contains(&field.text.as_str())
                    || (t.text == "table"
                        && field.text == "unpack"
                        && tokens.get(g + 3).is_some_and(|t| t.text == "or"));
                assert!(
                    ok,
                    "{name}:{}: {}.{} is not in both Lua 5.1 and 5.4",
                    t.line, t.text, field.text
                );
            }
            checked += 1;
        }
    }
    assert!(
        checked > 40,
        "only {checked} global references found: the scan is not reading"
    );
}

struct Token {
    text: String,
    line: usize,
}

/// Lua source as tokens: names, numbers and operators; comments and strings dropped
/// (a string is kept as one `"` token).
fn lex(src: &str) -> Vec<Token> {
    let b = src.as_bytes();
    let (mut i, mut line, mut out) = (0, 1, Vec::new());
    let long_close = |i: usize| -> Option<(usize, usize)> {
        // `[[` or `[==[` at i: the index after its closing bracket.
        let eq = b[i + 1..].iter().take_while(|&&c| c == b'=').count();
        (b.get(i + 1 + eq) == Some(&b'[')).then_some(())?;
        let close = format!("]{}]", "=".repeat(eq));
        let start = i + 2 + eq;
        let end = src[start..].find(&close)? + start + close.len();
        Some((end, src[i..end].matches('\n').count()))
    };
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            line += 1;
            i += 1;
        } else if c.is_ascii_whitespace() {
            i += 1;
        } else if src[i..].starts_with("--") {
            match (b.get(i + 2) == Some(&b'['))
                .then(|| long_close(i + 2))
                .flatten()
            {
                Some((end, lines)) => (i, line) = (end, line + lines),
                None => i = src[i..].find('\n').map_or(b.len(), |n| i + n),
            }
        } else if c == b'[' && long_close(i).is_some() {
            let (end, lines) = long_close(i).unwrap();
            out.push(Token {
                text: "\"".into(),
                line,
            });
            (i, line) = (end, line + lines);
        } else if c == b'"' || c == b'\'' {
            let mut j = i + 1;
            while b[j] != c {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            out.push(Token {
                text: "\"".into(),
                line,
            });
            i = j + 1;
        } else if c.is_ascii_digit() {
            let n = (i..b.len())
                .find(|&j| {
                    !(b[j].is_ascii_alphanumeric()
                        || b[j] == b'.'
                        || (matches!(b[j], b'+' | b'-') && matches!(b[j - 1], b'e' | b'E')))
                })
                .unwrap_or(b.len())
                - i;
            out.push(Token {
                text: src[i..i + n].into(),
                line,
            });
            i += n;
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let n = b[i..]
                .iter()
                .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
                .count();
            out.push(Token {
                text: src[i..i + n].into(),
                line,
            });
            i += n;
        } else {
            let two = src.get(i..i + 2).unwrap_or("");
            let n = if ["==", "~=", "<=", ">=", "..", "//", "::", "<<", ">>"].contains(&two) {
                if src[i..].starts_with("...") { 3 } else { 2 }
            } else {
                1
            };
            out.push(Token {
                text: src[i..i + n].into(),
                line,
            });
            i += n;
        }
    }
    out
}

/// The indices of the tokens that name a global: a name not after `.` or `:`, not a
/// table constructor's field, and not declared `local`, as a parameter or as a loop
/// variable before it. Scopes are not tracked: a name declared local anywhere earlier
/// counts as local from there on, which can only hide a global, and the scripts keep each
/// name for one thing. A `local` statement's names take effect at the end of its line, so
/// `local unpack = table.unpack or unpack` reads the global on its right.
fn globals(tokens: &[Token]) -> Vec<usize> {
    const KEYWORDS: &[&str] = &[
        "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "if", "in",
        "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while",
    ];
    let ident = |t: &Token| {
        (t.text.as_bytes()[0].is_ascii_alphabetic() || t.text.starts_with('_'))
            && !KEYWORDS.contains(&t.text.as_str())
    };
    let text = |p: usize| tokens[p].text.as_str();
    let (mut locals, mut pending, mut pending_line) = (BTreeSet::new(), Vec::new(), 0);
    let (mut braces, mut out) = (0usize, Vec::new());
    for (i, t) in tokens.iter().enumerate() {
        if t.line != pending_line {
            locals.append(&mut pending.drain(..).collect());
        }
        match t.text.as_str() {
            "{" => braces += 1,
            "}" => braces = braces.saturating_sub(1),
            _ => {}
        }
        if !ident(t) || (i > 0 && matches!(text(i - 1), "." | ":")) {
            continue;
        }
        // The token before the run of `name ,` that ends at this name.
        let p = (0..i).rev().find(|&p| text(p) != "," && !ident(&tokens[p]));
        let before = |k: usize| p.and_then(|p| p.checked_sub(k)).map(text);
        match p.map(text) {
            // `local a, b`
            Some("local") => {
                pending.push(t.text.as_str());
                pending_line = t.line;
                continue;
            }
            // `local function f`
            Some("function") if p == Some(i - 1) && before(1) == Some("local") => {
                locals.insert(t.text.as_str());
                continue;
            }
            // `function f(a, b)`, `function(a, b)`, `for k, v`
            Some("(") if before(1) == Some("function") || before(2) == Some("function") => {
                locals.insert(t.text.as_str());
                continue;
            }
            Some("for") => {
                locals.insert(t.text.as_str());
                continue;
            }
            _ => {}
        }
        let field = braces > 0
            && matches!(text(i - 1), "{" | ",")
            && tokens.get(i + 1).is_some_and(|n| n.text == "=");
        if !field && !locals.contains(t.text.as_str()) {
            out.push(i);
        }
    }
    out
}
