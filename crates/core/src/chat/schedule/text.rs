//! The texts people and the model read about schedules: local times, the list (as text and
//! as the function's answer), a created schedule's answer, an id in a command's arguments.
use serde_json::Value;
use super::cron::{local_text, repeat_label};
use super::request::NewSchedule;
use crate::time_zone::{TimeZones, Zone};

/// A stored schedule as the model and people see it in lists.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
pub struct Listed {
    pub id: i64,
    pub text: String,
    pub timezone: String,
    #[serde(default)]
    pub repeat: Option<String>,
    #[serde(default)]
    pub next_run_ms: Option<i64>,
}

/// One line per schedule for `/reminders`, in `tz` (the chat's zone). Markdown: the text
/// is escaped so it shows as written.
pub fn list_text(zones: &dyn TimeZones, items: &[Listed], tz_name: &str) -> String {
    if items.is_empty() {
        return "No reminders are set in this chat. Ask me to remind you of something, and /reminders lists it here.".into();
    }
    let tz = &Zone::or_utc(zones, tz_name);
    let mut out = format!("Reminders in this chat (times in {}):\n", crate::format::escape_markdown(tz.name()));
    for s in items {
        let when = s.next_run_ms.map_or("—".to_string(), |ms| local_text(ms, tz));
        let repeat = s.repeat.as_deref().map(|r| format!(", {}", repeat_label(r))).unwrap_or_default();
        let text: String = s.text.chars().take(120).collect();
        out.push_str(&format!("\n#{} · {}{}\n{}\n", s.id, crate::format::escape_markdown(&when), crate::format::escape_markdown(&repeat), crate::format::escape_markdown(&text)));
    }
    out.push_str("\nCancel one with /cancel <id>.");
    out
}

/// What the model gets from `list_schedules`.
pub fn list_value(zones: &dyn TimeZones, items: &[Listed]) -> Value {
    let list: Vec<Value> = items
        .iter()
        .map(|s| {
            let tz = &Zone::or_utc(zones, &s.timezone);
            serde_json::json!({
                "id": s.id,
                "text": s.text,
                "next_run": s.next_run_ms.map(|ms| local_text(ms, tz)),
                "repeat": s.repeat.as_deref().map(repeat_label),
            })
        })
        .collect();
    serde_json::json!({ "schedules": list })
}

/// What the model gets back from a successful `schedule_message`.
pub fn created_value(zones: &dyn TimeZones, id: i64, s: &NewSchedule) -> Value {
    let tz = &Zone::or_utc(zones, &s.timezone);
    serde_json::json!({
        "ok": true,
        "id": id,
        "next_run": local_text(s.first_run_ms, tz),
        "timezone": s.timezone,
        "repeat": s.repeat.as_deref().map(repeat_label),
    })
}

/// `/cancel`'s argument: a schedule id (`12` or `#12`).
pub fn parse_id(args: &str) -> Option<i64> {
    let w = args.trim();
    let w = w.strip_prefix('#').unwrap_or(w);
    (!w.is_empty() && w.chars().all(|c| c.is_ascii_digit())).then(|| w.parse().ok()).flatten()
}
