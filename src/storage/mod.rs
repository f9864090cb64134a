//! # storage: D1, and every SQL statement the worker runs
//!
//! This file is the thin layer over D1: statements with bound arguments only, numbers bound as
//! JS numbers (D1 rejects BigInt; Telegram ids stay exact below 2^53), and the count of round
//! trips on the invocation's meter. The named queries live in the files below, grouped by the
//! tables they touch (schema in `migrations/`).
//!
//! Invariants (INVARIANTS.md): "Layers" (SQL appears nowhere else in the edge; this room
//! imports only `config` and the core), "Every SQL value is bound" (`?N` placeholders; the
//! only text spliced into SQL comes from the core, `agent_core::memory::scope` predicates and
//! `agent_core::background::retention` shapes, or from constants).

pub mod access;
pub mod activity;
pub mod business;
pub mod chats;
pub mod consolidation;
pub mod conversations;
pub mod failures;
pub mod images;
pub mod media;
pub mod memory;
pub mod messages;
pub mod miniapp;
pub mod notes;
pub mod outbox;
pub mod overview;
pub mod prefs;
pub mod retention;
pub mod schedules;
pub mod turns;
pub mod usage;

use crate::config::env::DB;
use crate::config::{Ctx, Meter};
use serde::de::DeserializeOwned;
use std::rc::Rc;
use wasm_bindgen::JsValue;
use worker::js_sys::{Array, Function, Promise, Reflect, JSON};
use worker::wasm_bindgen::JsCast;
use worker::wasm_bindgen_futures::JsFuture;
use worker::{D1Database, D1PreparedStatement, Result};

/// A value bound to a `?` placeholder.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
}

impl From<i64> for Arg {
    fn from(v: i64) -> Self {
        Arg::Int(v)
    }
}
impl From<u64> for Arg {
    fn from(v: u64) -> Self {
        Arg::Int(v as i64)
    }
}
impl From<u32> for Arg {
    fn from(v: u32) -> Self {
        Arg::Int(v as i64)
    }
}
impl From<usize> for Arg {
    fn from(v: usize) -> Self {
        Arg::Int(v as i64)
    }
}
impl From<bool> for Arg {
    fn from(v: bool) -> Self {
        Arg::Int(v as i64)
    }
}
impl From<f64> for Arg {
    fn from(v: f64) -> Self {
        Arg::Real(v)
    }
}
impl From<&str> for Arg {
    fn from(v: &str) -> Self {
        Arg::Text(v.to_string())
    }
}
impl From<String> for Arg {
    fn from(v: String) -> Self {
        Arg::Text(v)
    }
}
impl From<&String> for Arg {
    fn from(v: &String) -> Self {
        Arg::Text(v.clone())
    }
}
impl<T: Into<Arg>> From<Option<T>> for Arg {
    fn from(v: Option<T>) -> Self {
        v.map_or(Arg::Null, Into::into)
    }
}

impl Arg {
    fn to_js(&self) -> JsValue {
        match self {
            Arg::Null => JsValue::null(),
            Arg::Int(i) => JsValue::from_f64(*i as f64),
            Arg::Real(f) => JsValue::from_f64(*f),
            Arg::Text(s) => JsValue::from_str(s),
        }
    }
}

/// Builds an argument list: `args![a, b, c]`.
#[macro_export]
macro_rules! args {
    ($($v:expr),* $(,)?) => { vec![$($crate::storage::Arg::from($v)),*] };
}

impl Ctx {
    /// The D1 database, counting on this context's meter.
    pub fn db(&self) -> Db {
        let db = self.d1.get_or_init(|| Rc::new(self.env.d1(DB).expect("the DB binding is configured in wrangler.toml"))).clone();
        Db { db, meter: self.meter.clone() }
    }
}

pub struct Db {
    db: Rc<D1Database>,
    meter: Meter,
}

impl Db {
    /// A prepared statement with its arguments bound.
    pub fn stmt(&self, sql: &str, args: Vec<Arg>) -> Result<D1PreparedStatement> {
        let values: Vec<JsValue> = args.iter().map(Arg::to_js).collect();
        self.db.prepare(sql).bind(&values)
    }

    /// Runs statements in one round trip, as one transaction.
    pub async fn batch(&self, statements: Vec<D1PreparedStatement>) -> Result<Vec<D1Rows>> {
        if statements.is_empty() {
            return Ok(Vec::new());
        }
        self.meter.d1(statements.len() as u32);
        let list: Array = statements.iter().map(|s| JsValue::from(s.inner().clone())).collect();
        let results = call((*self.db).as_ref(), "batch", &[list.into()]).await?;
        let results: Vec<D1Rows> = Array::from(&results).iter().map(|value| D1Rows { value, meter: self.meter.clone() }).collect();
        results.iter().for_each(|r| self.count_rows(r));
        Ok(results)
    }

    pub async fn all<T: DeserializeOwned>(&self, sql: &str, args: Vec<Arg>) -> Result<Vec<T>> {
        self.meter.d1(1);
        let r = D1Rows { value: call(self.stmt(sql, args)?.inner(), "all", &[]).await?, meter: self.meter.clone() };
        self.count_rows(&r);
        rows(&r)
    }

    pub async fn first<T: DeserializeOwned>(&self, sql: &str, args: Vec<Arg>) -> Result<Option<T>> {
        Ok(self.all(sql, args).await?.into_iter().next())
    }

    /// Runs a write; returns D1's change count (which includes writes made by triggers:
    /// use RETURNING to count rows of tables that have them).
    pub async fn run(&self, sql: &str, args: Vec<Arg>) -> Result<usize> {
        self.meter.d1(1);
        let r = D1Rows { value: call(self.stmt(sql, args)?.inner(), "run", &[]).await?, meter: self.meter.clone() };
        self.count_rows(&r);
        Ok(KEYS.with(|k| r.meta(&k.changes)) as usize)
    }

    /// Adds a result's rows read and written to the meter, only when it counts them
    /// (`METRICS_LOG`): reading the meta costs JS round trips per statement.
    fn count_rows(&self, r: &D1Rows) {
        if self.meter.counts_rows() {
            let (read, written) = KEYS.with(|k| (r.meta(&k.rows_read), r.meta(&k.rows_written)));
            self.meter.d1_rows(read, written);
        }
    }
}

/// Calls a method of a D1 object that returns a promise, and awaits it. A D1 error (a JS
/// exception or a rejection) becomes the error's message.
async fn call(this: &JsValue, method: &str, args: &[JsValue]) -> Result<JsValue> {
    let f: Function = Reflect::get(this, &JsValue::from_str(method))?.dyn_into()?;
    let promise: Promise = f.apply(this, &args.iter().collect::<Array>()).map_err(d1_error)?.dyn_into()?;
    JsFuture::from(promise).await.map_err(d1_error)
}

fn d1_error(e: JsValue) -> worker::Error {
    let message = e.dyn_ref::<worker::js_sys::Error>().map(|e| String::from(e.message())).or_else(|| e.as_string());
    worker::Error::RustError(message.unwrap_or_else(|| "D1 failed".to_string()))
}

/// One statement's result, as D1 gives it (`{ results, meta }`).
///
/// Its rows are read as JSON: one `JSON.stringify` in the runtime and one parse in wasm, rather
/// than a JS round trip per field (`serde_wasm_bindgen`). Measured (`npm run bench`, before and
/// after in one run) this did not lower a turn's CPU beyond the noise: the conversion costs
/// about the same either way (issue 17, section 2).
pub struct D1Rows {
    value: JsValue,
    /// The invocation's meter, which counts the bytes `rows` reads (`METRICS_LOG`).
    meter: Meter,
}

impl D1Rows {
    /// A number of the result's `meta` (0 when absent).
    fn meta(&self, key: &JsValue) -> u64 {
        KEYS.with(|k| Reflect::get(&self.value, &k.meta))
            .and_then(|m| Reflect::get(&m, key))
            .ok()
            .and_then(|v| v.as_f64())
            .map_or(0, |n| n as u64)
    }
}

/// Rows of a statement's result.
pub fn rows<T: DeserializeOwned>(r: &D1Rows) -> Result<Vec<T>> {
    let results = KEYS.with(|k| Reflect::get(&r.value, &k.results))?;
    if results.is_undefined() || results.is_null() {
        return Ok(Vec::new());
    }
    let json = utf8(&JSON::stringify(&results)?);
    if r.meter.counts_rows() {
        r.meter.d1_bytes(json.len() as u64);
    }
    // Read as text, as every other JSON here: one reader's code in the wasm, not two.
    let text = std::str::from_utf8(&json).map_err(|e| worker::Error::RustError(e.to_string()))?;
    serde_json::from_str(text).map_err(|e| worker::Error::RustError(format!("a D1 row is not what the query reads: {e}")))
}

#[wasm_bindgen::prelude::wasm_bindgen]
extern "C" {
    /// The runtime's `TextEncoder`.
    type TextEncoder;
    #[wasm_bindgen(constructor)]
    fn new() -> TextEncoder;
    #[wasm_bindgen(method)]
    fn encode(this: &TextEncoder, text: &worker::js_sys::JsString) -> worker::js_sys::Uint8Array;
}

thread_local! {
    static ENCODER: TextEncoder = TextEncoder::new();
    /// The property names a result is read by, made into JavaScript strings once.
    static KEYS: Keys = Keys {
        results: JsValue::from_str("results"),
        meta: JsValue::from_str("meta"),
        changes: JsValue::from_str("changes"),
        rows_read: JsValue::from_str("rows_read"),
        rows_written: JsValue::from_str("rows_written"),
    };
}

struct Keys {
    results: JsValue,
    meta: JsValue,
    changes: JsValue,
    rows_read: JsValue,
    rows_written: JsValue,
}

/// A JavaScript string's UTF-8 bytes, encoded natively and copied in one piece. (Taking it as
/// a Rust `String` walks it a character at a time in JavaScript while it is ASCII: for the
/// rows of 300 stored vectors, megabytes of text, that walk was a tenth of the turn's own CPU.)
fn utf8(text: &worker::js_sys::JsString) -> Vec<u8> {
    ENCODER.with(|e| e.encode(text).to_vec())
}

/// The bound values of a scope predicate.
pub fn scope_args(p: &agent_core::memory::scope::Predicate) -> Vec<Arg> {
    p.binds
        .iter()
        .map(|b| match b {
            agent_core::memory::scope::Bind::Null => Arg::Null,
            agent_core::memory::scope::Bind::Int(i) => Arg::Int(*i),
            agent_core::memory::scope::Bind::Text(t) => Arg::Text(t.clone()),
        })
        .collect()
}
