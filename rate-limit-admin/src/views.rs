//! The page's views of what every instance shares: the fleet state this instance applied,
//! and the heavy hitters (merged over the fleet when there is one).

use std::fmt::Write as _;

use crate::Admin;
use crate::html::esc;

/// The fleet state this instance applied: a straggler shows an older version than the
/// others, or an error.
pub(crate) fn fleet_line(b: &mut String, a: &Admin) {
    let Some(f) = a.fleet_json() else { return };
    let _ = write!(
        b,
        "<p class=fleet>Instance <b>{}</b>: fleet settings version <b>{}</b>{}{}.</p>",
        esc(f["instance"].as_str().unwrap_or("")),
        f["version"],
        f["applied_at"]
            .as_u64()
            .map_or_else(String::new, |t| format!(", applied at {t} (Unix time)")),
        match f["error"].as_str() {
            Some(e) => format!(
                ", <span class=err>cut off from the store: {}</span>",
                esc(e)
            ),
            None if f["listening"] == true => ", changes arrive as they are made".to_owned(),
            None => ", changes arrive at each periodic read".to_owned(),
        }
    );
}

/// Each limit's heavy hitters, every count with its bounds (the truth is between what is
/// guaranteed and the count), ranked by what is guaranteed, and a word when the report
/// cannot tell the listed principals from the rest.
pub(crate) async fn hitters_section(b: &mut String, a: &Admin) {
    b.push_str("<h2>Heavy hitters</h2>");
    for l in &a.inner.limits {
        let t = a.top_value(l, 10).await;
        if t["tracked"] != true {
            continue;
        }
        let from = match t["instances"].as_array() {
            Some(who) => {
                let names: Vec<String> = who
                    .iter()
                    .filter_map(|c| c["instance"].as_str())
                    .map(esc)
                    .collect();
                format!("every instance that reported: {}", names.join(", "))
            }
            None => "this instance".to_owned(),
        };
        let _ = write!(
            b,
            "<h3>{} <small>({from})</small></h3><table><tr><th>by use</th><th>used (at least – at most)</th>\
             <th>by refusals</th><th>refused (at least – at most)</th></tr>",
            esc(l.name())
        );
        let rows = |k: &str| t[k].as_array().map_or(&[][..], Vec::as_slice);
        let (u, r) = (rows("by_use"), rows("by_refusals"));
        let name = |v: Option<&serde_json::Value>| {
            v.and_then(|x| x["principal"].as_str())
                .map_or(String::new(), esc)
        };
        let range = |v: Option<&serde_json::Value>| {
            v.map_or(String::new(), |x| {
                let (lo, hi) = (&x["guaranteed"], &x["count"]);
                if lo == hi {
                    lo.to_string()
                } else {
                    format!("{lo} – {hi}")
                }
            })
        };
        for i in 0..u.len().max(r.len()) {
            let _ = write!(
                b,
                "<tr><td class=principal>{}</td><td>{}</td><td class=principal>{}</td><td>{}</td></tr>",
                name(u.get(i)),
                range(u.get(i)),
                name(r.get(i)),
                range(r.get(i))
            );
        }
        b.push_str("</table>");
        for (list, apart, unlisted) in [
            ("use", "by_use_tells_apart", "unlisted_use_at_most"),
            (
                "refusals",
                "by_refusals_tells_apart",
                "unlisted_refusals_at_most",
            ),
        ] {
            if t[apart] != true && !rows(&format!("by_{list}")).is_empty() {
                let _ = write!(
                    b,
                    "<p class=err>By {list}: these principals cannot be told apart. Every count \
                     is within the sketch's error: none surely exceeds what a principal not \
                     listed may have ({}). Many principals each counted a little fill the \
                     sketch this way.</p>",
                    t[unlisted]
                );
            }
        }
    }
}
