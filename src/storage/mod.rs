//! # storage: D1, and every SQL statement the worker runs
//!
//! This file is the thin layer over D1: statements with bound arguments only, numbers bound as
//! JS numbers (D1 rejects BigInt; Telegram ids stay exact below 2^53), and the count of round
//! trips on the invocation's meter. The named queries live in the files below, grouped by the
//! tables they touch (schema in `migrations/`).
//!
//! Invariants:
//! - SQL appears nowhere else in the edge (`scripts/check-modules.mjs` fails on it).
//! - Every value is bound (`?N` placeholders); the only text spliced into SQL comes from the
//!   core (`agent_core::scope` predicates, `agent_core::retention` shapes) or from constants.
//! - This room imports only `config` (and the core).

pub mod access;
pub mod chats;
pub mod consolidation;
pub mod conversations;
pub mod failures;
pub mod media;
pub mod memory;
pub mod messages;
pub mod notes;
pub mod outbox;
pub mod overview;
pub mod retention;
pub mod schedules;
pub mod turns;
pub mod usage;

use crate::config::env::DB;
use crate::config::{Ctx, Meter};
use serde::de::DeserializeOwned;
use wasm_bindgen::JsValue;
use worker::{D1Database, D1PreparedStatement, D1Result, Env, Result};

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
        Db::new(&self.env, self.meter.clone())
    }
}

pub struct Db {
    db: D1Database,
    meter: Meter,
}

impl Db {
    pub fn new(env: &Env, meter: Meter) -> Self {
        Db { db: env.d1(DB).expect("the DB binding is configured in wrangler.toml"), meter }
    }

    /// A prepared statement with its arguments bound.
    pub fn stmt(&self, sql: &str, args: Vec<Arg>) -> Result<D1PreparedStatement> {
        let values: Vec<JsValue> = args.iter().map(Arg::to_js).collect();
        self.db.prepare(sql).bind(&values)
    }

    /// Runs statements in one round trip, as one transaction.
    pub async fn batch(&self, statements: Vec<D1PreparedStatement>) -> Result<Vec<D1Result>> {
        if statements.is_empty() {
            return Ok(Vec::new());
        }
        self.meter.d1(statements.len() as u32);
        let results = self.db.batch(statements).await?;
        results.iter().for_each(|r| self.count_rows(r));
        Ok(results)
    }

    pub async fn all<T: DeserializeOwned>(&self, sql: &str, args: Vec<Arg>) -> Result<Vec<T>> {
        self.meter.d1(1);
        let r = self.stmt(sql, args)?.all().await?;
        self.count_rows(&r);
        r.results()
    }

    pub async fn first<T: DeserializeOwned>(&self, sql: &str, args: Vec<Arg>) -> Result<Option<T>> {
        Ok(self.all(sql, args).await?.into_iter().next())
    }

    /// Runs a write; returns D1's change count (which includes writes made by triggers:
    /// use RETURNING to count rows of tables that have them).
    pub async fn run(&self, sql: &str, args: Vec<Arg>) -> Result<usize> {
        self.meter.d1(1);
        let r = self.stmt(sql, args)?.run().await?;
        self.count_rows(&r);
        Ok(r.meta()?.and_then(|m| m.changes).unwrap_or(0))
    }

    /// Adds a result's rows read and written to the meter, only when it counts them
    /// (`METRICS_LOG`): reading the meta costs a JS round trip per statement.
    fn count_rows(&self, r: &D1Result) {
        if self.meter.counts_rows() {
            if let Ok(Some(m)) = r.meta() {
                self.meter.d1_rows(m.rows_read.unwrap_or(0) as u64, m.rows_written.unwrap_or(0) as u64);
            }
        }
    }
}

/// Rows of a batch result.
pub fn rows<T: DeserializeOwned>(r: &D1Result) -> Result<Vec<T>> {
    r.results()
}

/// The bound values of a scope predicate.
pub fn scope_args(p: &agent_core::scope::Predicate) -> Vec<Arg> {
    p.binds
        .iter()
        .map(|b| match b {
            agent_core::scope::Bind::Null => Arg::Null,
            agent_core::scope::Bind::Int(i) => Arg::Int(*i),
            agent_core::scope::Bind::Text(t) => Arg::Text(t.clone()),
        })
        .collect()
}
