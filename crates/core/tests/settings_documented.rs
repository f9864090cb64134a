//! The settings declared in `agent_core::config::SETTINGS` are the settings README's settings
//! table documents, row for row, with the same defaults where the table states one; and
//! wrangler.toml's `[vars]` names only declared settings and spells their defaults. (A setting
//! missing from one of these places kept its default silently once.)

use agent_core::config::{Config, Kind, Setting, SETTINGS};
use std::collections::{BTreeMap, BTreeSet};

/// One row of README's table: its names and, for each, the default cell's words.
struct Row {
    line: String,
    names: Vec<String>,
    defaults: Vec<String>,
}

/// The rows of README's "Variables" table. A row naming several settings separates them, and
/// their defaults, with ` / ` or `, `.
fn readme_rows() -> Vec<Row> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).expect("README.md");
    let start = readme.find("\nVariables (").expect("README has a Variables table");
    let mut rows = Vec::new();
    for line in readme[start..].lines().skip(1) {
        if line.starts_with("## ") || line.starts_with("### ") {
            break;
        }
        let cells: Vec<&str> = line.strip_prefix("| ").map(|l| l.split(" | ").collect()).unwrap_or_default();
        let [first, default, ..] = cells[..] else { continue };
        let names: Vec<String> = first.split('`').skip(1).step_by(2).filter(|n| is_setting_name(n)).map(String::from).collect();
        if names.is_empty() {
            continue;
        }
        let sep = if first.contains(" / ") { " / " } else { ", " };
        let defaults = default.split(sep).map(|d| d.trim().to_string()).collect();
        rows.push(Row { line: line.to_string(), names, defaults });
    }
    rows
}

fn is_setting_name(n: &str) -> bool {
    !n.is_empty() && n.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

fn declared(name: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.name == name)
}

#[test]
fn every_setting_is_in_the_readme_table_and_the_table_names_only_settings() {
    let declared: BTreeSet<String> = SETTINGS.iter().map(|s| s.name.to_string()).collect();
    let documented: BTreeSet<String> = readme_rows().into_iter().flat_map(|r| r.names).collect();
    assert!(documented.len() > 40, "read README's table: {documented:?}");
    let undocumented: Vec<_> = declared.difference(&documented).collect();
    let unknown: Vec<_> = documented.difference(&declared).collect();
    assert!(undocumented.is_empty(), "declared in config::SETTINGS but missing from README's variables table: {undocumented:?}");
    assert!(unknown.is_empty(), "in README's variables table but not declared in config::SETTINGS: {unknown:?}");
}

/// A default cell's value when it states one: `` `x` `` is x, `empty` is ""; words in
/// parentheses or prose ("unset", "(adaptive)") state none.
fn stated(cell: &str) -> Option<String> {
    if cell == "empty" {
        return Some(String::new());
    }
    let rest = cell.strip_prefix('`')?;
    Some(rest[..rest.find('`')?].to_string())
}

#[test]
fn the_readme_table_states_the_declared_defaults() {
    let mut wrong = Vec::new();
    for row in readme_rows() {
        assert_eq!(row.names.len(), row.defaults.len(), "one default per name, separated as the names are: {}", row.line);
        for (name, cell) in row.names.iter().zip(&row.defaults) {
            let (Some(setting), Some(value)) = (declared(name), stated(cell)) else { continue };
            let value = match setting.kind {
                Kind::Flag { .. } => matches!(value.to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on").to_string(),
                _ => value,
            };
            if value != setting.default_text() {
                wrong.push(format!("{name}: README says {value:?}, declared {:?}", setting.default_text()));
            }
        }
    }
    assert!(wrong.is_empty(), "README's default column disagrees with config::SETTINGS: {wrong:?}");
}

/// Vars `npm run deploy` writes for the edge itself (queue names, the bot's id), not settings.
const DEPLOY_VARS: [&str; 3] = ["JOBS_QUEUE", "DEAD_LETTER_QUEUE", "BOT_ID"];

/// wrangler.toml's `[vars]`, name → value.
fn wrangler_vars() -> BTreeMap<String, String> {
    let toml = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../wrangler.toml")).expect("wrangler.toml");
    let vars = toml.split("\n[vars]\n").nth(1).expect("a [vars] table");
    vars.lines()
        .take_while(|l| !l.starts_with('['))
        .filter(|l| !l.trim_start().starts_with('#') && l.contains('='))
        .map(|l| {
            let (name, value) = l.split_once('=').unwrap();
            (name.trim().to_string(), value.trim().trim_matches('"').to_string())
        })
        .collect()
}

#[test]
fn every_var_in_wrangler_toml_is_a_declared_setting_at_its_default() {
    let vars = wrangler_vars();
    assert!(vars.len() > 10, "read the [vars] table: {vars:?}");
    let unknown: Vec<_> = vars.keys().filter(|n| declared(n).is_none() && !DEPLOY_VARS.contains(&n.as_str())).collect();
    assert!(unknown.is_empty(), "in wrangler.toml's [vars] but not declared in config::SETTINGS: {unknown:?}");
    let from_toml = Config::from_vars(&vars);
    assert!(from_toml.warnings.is_empty(), "{:?}", from_toml.warnings);
    assert_eq!(from_toml, Config::default(), "wrangler.toml's [vars] spell the declared defaults");
}
