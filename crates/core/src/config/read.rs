//! Reading one setting's raw value: trimmed, empty as unset, parsed by its kind, and every
//! unparsable value reported as a warning instead of stopping the bot (`Config::warnings`).

use std::collections::BTreeMap;

/// The variables handed in by the edge, and the warnings their values raised so far.
pub struct Reader<'a> {
    vars: &'a BTreeMap<String, String>,
    pub(super) warnings: Vec<String>,
}

impl<'a> Reader<'a> {
    pub fn new(vars: &'a BTreeMap<String, String>) -> Self {
        Reader { vars, warnings: Vec::new() }
    }

    /// The value of `name`, trimmed; `None` when unset or empty.
    pub fn get(&self, name: &str) -> Option<String> {
        self.vars.get(name).map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
    }

    /// A whole number; unparsable, `default` and a warning.
    pub fn num(&mut self, name: &str, default: u64) -> u64 {
        match self.get(name) {
            None => default,
            Some(v) => v.parse().unwrap_or_else(|_| {
                self.warn(format!("{name}={v:?} is not a number; using {default}"));
                default
            }),
        }
    }

    /// On for `1`, `true`, `yes`, `on` (any case), off for any other value.
    pub fn flag(&self, name: &str, default: bool) -> bool {
        match self.get(name).map(|v| v.to_ascii_lowercase()) {
            None => default,
            Some(v) => matches!(v.as_str(), "1" | "true" | "yes" | "on"),
        }
    }

    /// Comma-separated items, each trimmed, empty ones dropped.
    pub fn list(&self, name: &str) -> Vec<String> {
        self.get(name)
            .map(|v| v.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect())
            .unwrap_or_default()
    }

    /// Comma-separated Telegram ids; an item that is not one is dropped with a warning.
    pub fn ids(&mut self, name: &str) -> Vec<i64> {
        let mut ids = Vec::new();
        for s in self.list(name) {
            match s.parse() {
                Ok(id) => ids.push(id),
                Err(_) => self.warn(format!("{name}: {s:?} is not a Telegram id; ignored")),
            }
        }
        ids
    }

    /// One of `options` (any case); unset, `default`; anything else, `fallback` and a warning.
    pub fn choice(&mut self, name: &str, options: &[&'static str], default: &'static str, fallback: &'static str) -> &'static str {
        let Some(v) = self.get(name) else { return default };
        match options.iter().find(|o| o.eq_ignore_ascii_case(&v)) {
            Some(o) => o,
            None => {
                self.warn(format!("{name}={v:?} is not {}; using {fallback}", options.join("|")));
                fallback
            }
        }
    }

    pub fn warn(&mut self, warning: String) {
        self.warnings.push(warning);
    }
}
