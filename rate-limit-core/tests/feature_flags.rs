//! Feature flags, kept in step: one dependency line reaches every feature (each crate
//! forwards the features of the crates below it), and each crate's front page lists
//! exactly the features its `Cargo.toml` has.

// One dependency line reaches every feature: rate-limit-tower forwards each of core's
// features, and rate-limit-axum each of tower's (but `axum`, which it turns on itself).

/// The feature names of the `[features]` table of `crate_dir/Cargo.toml`.
fn features(crate_dir: &str) -> Vec<String> {
    let dir = env!("CARGO_MANIFEST_DIR");
    let text = std::fs::read_to_string(format!("{dir}/../{crate_dir}/Cargo.toml")).unwrap();
    text.lines()
        .skip_while(|l| l.trim() != "[features]")
        .skip(1)
        .take_while(|l| !l.starts_with('['))
        .filter_map(|l| l.split_once('=').map(|(name, _)| name.trim().to_owned()))
        .filter(|name| !name.is_empty() && !name.starts_with('#') && name != "default")
        .collect()
}

#[test]
fn every_lower_feature_is_forwarded_by_the_crates_above() {
    let (core, tower, axum) = (
        features("rate-limit-core"),
        features("rate-limit-tower"),
        features("rate-limit-axum"),
    );
    assert!(core.contains(&"redis".to_owned()), "{core:?}");
    let missing = |from: &[String], to: &[String]| -> Vec<String> {
        let skip = |f: &&String| *f != "axum" && !to.contains(f);
        from.iter().filter(skip).cloned().collect()
    };
    assert_eq!(missing(&core, &tower), Vec::<String>::new(), "not in tower");
    assert_eq!(missing(&tower, &axum), Vec::<String>::new(), "not in axum");
}

/// The features a crate's front page lists: the first column of the table under
/// `# Feature flags` in `src/lib.rs`.
fn documented(crate_dir: &str) -> Vec<String> {
    let dir = env!("CARGO_MANIFEST_DIR");
    let text = std::fs::read_to_string(format!("{dir}/../{crate_dir}/src/lib.rs")).unwrap();
    text.lines()
        .map(|l| l.trim_start_matches("//!").trim())
        .skip_while(|l| *l != "# Feature flags")
        .skip(1)
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| l.split('|').nth(1))
        .map(|cell| cell.trim().trim_matches('`').to_owned())
        .filter(|f| f != "feature" && !f.starts_with("---"))
        .collect()
}

#[test]
fn each_front_page_lists_exactly_its_crates_features() {
    for krate in ["rate-limit-core", "rate-limit-tower", "rate-limit-axum"] {
        let mut have = features(krate);
        let mut listed = documented(krate);
        assert!(
            !listed.is_empty(),
            "{krate}: no `# Feature flags` table in src/lib.rs"
        );
        have.sort();
        listed.sort();
        assert_eq!(
            listed, have,
            "{krate}: the front page's features against Cargo.toml's"
        );
    }
}
