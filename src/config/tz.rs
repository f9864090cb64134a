//! The runtime's time-zone database ([`Intl`]): the core's [`TimeZones`] in the worker. The
//! runtime ships the IANA data with its ICU, so the wasm carries no tables of its own
//! (chrono-tz's were ~120 KB of the gzipped wasm). Only lookups live here; what a local time
//! means when clocks change is decided in the core (`schedule::cron::resolve`).
//!
//! - A zone is known when `Intl.DateTimeFormat` accepts it (case-insensitively, as the runtime
//!   does); it is stored with the runtime's spelling when that differs only in case
//!   (`europe/berlin` → `Europe/Berlin`), else as written (`Europe/Kyiv` stays `Europe/Kyiv`,
//!   not the runtime's older canonical `Europe/Kiev`).
//! - An offset is the zone's wall-clock time at an instant (formatted in `en-US`, 24-hour,
//!   parsed back) minus the instant.
//! - An abbreviation is the first English one the runtime has for the zone in `en-US`, `en-GB`,
//!   `en-AU`, `en-IN` or `en-ZA` (`EST`, `CET`, `AEST`, `IST`, `SAST`), else its `GMT+9` form.
//! - Formatters are built once per zone and isolate (at most [`MAX_CACHED`] zones kept); a
//!   runtime error (a name it refuses, a date out of its range) is never thrown into the wasm:
//!   every call into `Intl` is caught.

use agent_core::time_zone::TimeZones;
use chrono::NaiveDate;
use js_sys::{Function, Object, Reflect};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use wasm_bindgen::{JsCast, JsValue};

/// The runtime's time-zone database.
pub struct Intl;

/// Zones whose formatters an isolate keeps (a chat uses one; the cache is cleared when full).
pub const MAX_CACHED: usize = 64;

/// The English locales tried for an abbreviation, in order.
const ABBREVIATION_LOCALES: [&str; 5] = ["en-US", "en-GB", "en-AU", "en-IN", "en-ZA"];

/// Instants the runtime formats: years 1 to 9999 (`Date` allows more; the numbers parsed back
/// stay four-digit and positive).
const MIN_S: i64 = -62_135_596_800;
const MAX_S: i64 = 253_402_300_799;

struct Formats {
    /// The name as stored.
    name: String,
    /// `format` bound to a numeric en-US formatter in the zone.
    numeric: Function,
    /// `formatToParts` of the short-name formatters, by locale, built when first needed.
    short: RefCell<Vec<Option<Object>>>,
}

thread_local! {
    static ZONES: RefCell<HashMap<String, Rc<Formats>>> = RefCell::new(HashMap::new());
}

/// `new Intl.DateTimeFormat(locale, options)`, or `None` when the runtime refuses.
fn formatter(locale: &str, zone: &str, fields: &[(&str, &str)]) -> Option<Object> {
    let intl = Reflect::get(&js_sys::global(), &"Intl".into()).ok()?;
    let ctor: Function = Reflect::get(&intl, &"DateTimeFormat".into()).ok()?.dyn_into().ok()?;
    let options = Object::new();
    Reflect::set(&options, &"timeZone".into(), &zone.into()).ok()?;
    for (k, v) in fields {
        Reflect::set(&options, &(*k).into(), &(*v).into()).ok()?;
    }
    let args = js_sys::Array::of2(&locale.into(), &options);
    Reflect::construct(&ctor, &args).ok()?.dyn_into().ok()
}

fn formats(name: &str) -> Option<Rc<Formats>> {
    if let Some(f) = ZONES.with(|z| z.borrow().get(name).cloned()) {
        return Some(f);
    }
    let numeric_fields = [
        ("hourCycle", "h23"),
        ("year", "numeric"),
        ("month", "numeric"),
        ("day", "numeric"),
        ("hour", "numeric"),
        ("minute", "numeric"),
        ("second", "numeric"),
    ];
    let fmt = formatter("en-US", name, &numeric_fields)?;
    let numeric: Function = Reflect::get(&fmt, &"format".into()).ok()?.dyn_into().ok()?;
    let resolved_options: Function = Reflect::get(&fmt, &"resolvedOptions".into()).ok()?.dyn_into().ok()?;
    let resolved = resolved_options
        .call0(&fmt)
        .ok()
        .and_then(|o| Reflect::get(&o, &"timeZone".into()).ok())
        .and_then(|z| z.as_string())
        .unwrap_or_default();
    let stored = if resolved.eq_ignore_ascii_case(name) { resolved } else { name.to_string() };
    let f = Rc::new(Formats { name: stored.clone(), numeric, short: RefCell::new(vec![None; ABBREVIATION_LOCALES.len()]) });
    ZONES.with(|z| {
        let mut z = z.borrow_mut();
        if z.len() >= MAX_CACHED {
            z.clear();
        }
        z.insert(name.to_string(), f.clone());
        z.insert(stored, f.clone());
    });
    Some(f)
}

/// `7/15/2026, 14:00:00` (en-US, 24-hour) as seconds since the epoch, read as UTC.
fn wall_seconds(text: &str) -> Option<i64> {
    let n: Vec<u32> = text.split(|c: char| !c.is_ascii_digit()).filter(|s| !s.is_empty()).map(|s| s.parse().ok()).collect::<Option<_>>()?;
    let [month, day, year, hour, minute, second] = n.as_slice() else { return None };
    let t = NaiveDate::from_ymd_opt(*year as i32, *month, *day)?.and_hms_opt(*hour, *minute, *second)?;
    Some(t.and_utc().timestamp())
}

impl TimeZones for Intl {
    fn find(&self, name: &str) -> Option<String> {
        formats(name).map(|f| f.name.clone())
    }

    fn offset(&self, zone: &str, utc_s: i64) -> i32 {
        let Some(f) = formats(zone) else { return 0 };
        let at = utc_s.clamp(MIN_S, MAX_S);
        let text = f.numeric.call1(&JsValue::UNDEFINED, &JsValue::from_f64(at as f64 * 1000.0)).ok().and_then(|v| v.as_string());
        text.as_deref().and_then(wall_seconds).map_or(0, |wall| (wall - at) as i32)
    }

    fn abbreviation(&self, zone: &str, utc_s: i64) -> String {
        let Some(f) = formats(zone) else { return "UTC".to_string() };
        let date = js_sys::Date::new(&JsValue::from_f64(utc_s.clamp(MIN_S, MAX_S) as f64 * 1000.0));
        let mut first = None;
        for (i, locale) in ABBREVIATION_LOCALES.iter().enumerate() {
            let fmt = f.short.borrow()[i].clone().or_else(|| formatter(locale, zone, &[("timeZoneName", "short")]));
            let Some(fmt) = fmt else { continue };
            f.short.borrow_mut()[i] = Some(fmt.clone());
            let Some(name) = short_name(&fmt, &date) else { continue };
            // `GMT+1` is the form a locale without a common abbreviation gives: try the next.
            if !name.starts_with("GMT+") && !name.starts_with("GMT-") {
                return name;
            }
            first.get_or_insert(name);
        }
        first.unwrap_or_else(|| "UTC".to_string())
    }
}

/// The `timeZoneName` part of `fmt.formatToParts(date)`.
fn short_name(fmt: &Object, date: &js_sys::Date) -> Option<String> {
    let format_to_parts: Function = Reflect::get(fmt, &"formatToParts".into()).ok()?.dyn_into().ok()?;
    let parts: js_sys::Array = format_to_parts.call1(fmt, date).ok()?.dyn_into().ok()?;
    parts.iter().find_map(|p| {
        let kind = Reflect::get(&p, &"type".into()).ok()?.as_string()?;
        (kind == "timeZoneName").then(|| Reflect::get(&p, &"value".into()).ok()?.as_string()).flatten()
    })
}
