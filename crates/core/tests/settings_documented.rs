//! Every setting the worker reads is in README's variables table, and the table names no
//! setting the worker does not read (a setting missing from one of them kept its default
//! silently once).

use agent_core::config::VAR_NAMES;
use std::collections::BTreeSet;

/// The names in the first column of README's "Variables" table.
fn documented() -> BTreeSet<String> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).expect("README.md");
    let start = readme.find("\nVariables (").expect("README has a Variables table");
    let mut names = BTreeSet::new();
    for line in readme[start..].lines().skip(1) {
        if line.starts_with("## ") {
            break;
        }
        let Some(first) = line.strip_prefix("| ").and_then(|l| l.split(" | ").next()) else { continue };
        for name in first.split('`').skip(1).step_by(2) {
            if name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_') && !name.is_empty() {
                names.insert(name.to_string());
            }
        }
    }
    names
}

#[test]
fn every_setting_is_in_the_readme_table_and_the_table_names_only_settings() {
    let read: BTreeSet<String> = VAR_NAMES.iter().map(|s| s.to_string()).collect();
    let documented = documented();
    let undocumented: Vec<_> = read.difference(&documented).collect();
    let unknown: Vec<_> = documented.difference(&read).collect();
    assert!(undocumented.is_empty(), "read by the worker but missing from README's variables table: {undocumented:?}");
    assert!(unknown.is_empty(), "in README's variables table but never read by the worker: {unknown:?}");
}

/// Vars `npm run deploy` writes for the edge itself (queue names, the bot's id), not settings.
const DEPLOY_VARS: [&str; 3] = ["JOBS_QUEUE", "DEAD_LETTER_QUEUE", "BOT_ID"];

#[test]
fn every_var_in_wrangler_toml_is_a_setting_the_worker_reads() {
    let toml = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../wrangler.toml")).expect("wrangler.toml");
    let vars = toml.split("\n[vars]\n").nth(1).expect("a [vars] table");
    let names: Vec<&str> = vars
        .lines()
        .take_while(|l| !l.starts_with('['))
        .filter(|l| !l.trim_start().starts_with('#') && l.contains('='))
        .map(|l| l.split('=').next().unwrap().trim())
        .collect();
    assert!(names.len() > 10, "read the [vars] table: {names:?}");
    let unknown: Vec<_> = names.iter().filter(|n| !VAR_NAMES.contains(n) && !DEPLOY_VARS.contains(n)).collect();
    assert!(unknown.is_empty(), "in wrangler.toml's [vars] but never read by the worker: {unknown:?}");
}
