//! # config: what every invocation starts from (the lowest room)
//!
//! The worker's bindings, secrets and configuration ([`env`]), the prompts bundled at build
//! time ([`prompts`]), the authentication of callers ([`auth`]), the time-zone database ([`tz`]:
//! the runtime's `Intl`), the clock and randomness, and
//! the per-invocation context [`Ctx`] every handler passes down with its subrequest [`Meter`].
//!
//! Invariants (INVARIANTS.md): "Layers" (this room imports no other room of the edge). The
//! clients built from a context live where they are defined (`Ctx::db` in `storage`,
//! `Ctx::telegram` in `outbound`), so the context knows nothing about them.

pub mod auth;
pub mod env;
pub mod prompts;
pub mod tz;

pub use env::{config_from_env, Secrets};

use agent_core::config::Config;
use std::cell::Cell;
use std::rc::Rc;
use worker::Env;

/// Subrequests one invocation may spend before plan work moves to the next alarm (the free
/// plan allows 50 per invocation; the rest is headroom for the turn and bookkeeping).
pub const SUBREQUEST_BUDGET: u32 = 35;

/// The most subrequests an invocation has spent for a turn (new, taken over, or a scheduled
/// run) to start in it: the turn's own caps (tools and typing 24, drafts and early chunks 27,
/// plan work 35) count from the invocation's start. An alarm that spent more (owed apologies
/// sent first) leaves the turn to the next invocation, due at once.
pub const TURN_START_MAX: u32 = 6;

/// No outbound fetch (Telegram, Gemini, a page, a download) goes out once an invocation has
/// spent this many subrequests: it fails like a broken connection and is retried in a later
/// invocation, so the D1 writes that record what happened still fit under the runtime's 50.
pub const SUBREQUEST_CEILING: u32 = 44;

/// Counts subrequests (D1 round trips, fetches, queue sends, Durable Object calls) of one
/// invocation, to keep each inside the platform's limits and to report them; and, among them,
/// D1 round trips and statements. With `METRICS_LOG` set it also sums the rows D1 reports
/// read and written (see [`Metrics`]); otherwise D1's result meta is never read.
#[derive(Clone, Default)]
pub struct Meter(Rc<MeterCounts>);

#[derive(Default)]
pub struct MeterCounts {
    subrequests: Cell<u32>,
    d1_round_trips: Cell<u32>,
    d1_statements: Cell<u32>,
    rows_on: bool,
    rows_read: Cell<u64>,
    rows_written: Cell<u64>,
    rows_bytes: Cell<u64>,
    queue_sent: Cell<u32>,
    queue_received: Cell<u32>,
    do_rows_read: Cell<u64>,
    do_rows_written: Cell<u64>,
    state_asks: Cell<u32>,
}

impl Meter {
    /// A meter that also sums D1 rows when `rows` is true.
    pub fn new(rows: bool) -> Self {
        Meter(Rc::new(MeterCounts { rows_on: rows, ..Default::default() }))
    }
    /// Whether D1 rows are summed (`METRICS_LOG`).
    pub fn counts_rows(&self) -> bool {
        self.0.rows_on
    }
    /// Rows one D1 statement read and wrote, as its result meta reports them.
    pub fn d1_rows(&self, read: u64, written: u64) {
        self.0.rows_read.set(self.0.rows_read.get() + read);
        self.0.rows_written.set(self.0.rows_written.get() + written);
    }
    /// Bytes of rows (as JSON) one D1 result carried into the worker.
    pub fn d1_bytes(&self, n: u64) {
        self.0.rows_bytes.set(self.0.rows_bytes.get() + n);
    }
    /// Messages put on a queue (each one a Queues write operation).
    pub fn queue_sent(&self, n: u32) {
        self.0.queue_sent.set(self.0.queue_sent.get() + n);
    }
    /// Messages a queue consumer's batch delivered (each one a read; an acked or dead-lettered
    /// one also a delete).
    pub fn queue_received(&self, n: u32) {
        self.0.queue_received.set(self.0.queue_received.get() + n);
    }
    /// Rows of the chat object's own storage read and written (its KV API over SQLite: a key
    /// read is a row read, a key put or deleted a row written, and so is setting or deleting
    /// the alarm, which the platform bills as a row written). Counted whether or not
    /// `METRICS_LOG` is set: the count costs no call.
    pub fn do_rows(&self, read: u64, written: u64) {
        self.0.do_rows_read.set(self.0.do_rows_read.get() + read);
        self.0.do_rows_written.set(self.0.do_rows_written.get() + written);
    }
    /// One round trip between the chat object and its state machine (a read or a change of
    /// `ChatState`): the metrics line's `state_asks`, to see how often the object asks.
    pub fn state_ask(&self) {
        self.0.state_asks.set(self.0.state_asks.get() + 1);
    }
    pub fn add(&self, n: u32) {
        self.0.subrequests.set(self.0.subrequests.get() + n);
    }
    /// One D1 round trip carrying `statements` statements.
    pub fn d1(&self, statements: u32) {
        self.add(1);
        self.0.d1_round_trips.set(self.0.d1_round_trips.get() + 1);
        self.0.d1_statements.set(self.0.d1_statements.get() + statements);
    }
    pub fn count(&self) -> u32 {
        self.0.subrequests.get()
    }
    pub fn d1_round_trips(&self) -> u32 {
        self.0.d1_round_trips.get()
    }
    pub fn d1_statements(&self) -> u32 {
        self.0.d1_statements.get()
    }
}

/// Logs one `metrics {...}` line when dropped (at the end of an invocation, early returns
/// included) if the meter counts rows: the invocation's kind, D1 round trips, statements,
/// rows read and written, the bytes of the rows read into the worker, the chat object's own
/// storage rows and its asks of its state machine (`state_asks`), subrequests, the messages
/// it put on a queue and those its batch delivered (`queue_sent`, `queue_received`: Queues
/// bills each message's write, read and delete), and when it started and ended (the runtime's clock, in ms). `npm run bench` reads these lines (the times
/// tell apart the invocations of one measured window); no values of the request are in them.
pub struct Metrics {
    meter: Meter,
    kind: String,
    started_ms: f64,
}

impl Drop for Metrics {
    fn drop(&mut self) {
        let m = &self.meter.0;
        worker::console_log!(
            "metrics {}",
            serde_json::json!({
                "kind": self.kind,
                "subrequests": m.subrequests.get(),
                "d1_round_trips": m.d1_round_trips.get(),
                "d1_statements": m.d1_statements.get(),
                "rows_read": m.rows_read.get(),
                "rows_written": m.rows_written.get(),
                "rows_bytes": m.rows_bytes.get(),
                "do_rows_read": m.do_rows_read.get(),
                "do_rows_written": m.do_rows_written.get(),
                "state_asks": m.state_asks.get(),
                "started_ms": self.started_ms,
                "ended_ms": worker::js_sys::Date::now(),
                "queue_sent": m.queue_sent.get(),
                "queue_received": m.queue_received.get(),
            })
        );
    }
}

/// What every handler needs.
#[derive(Clone)]
pub struct Ctx {
    pub env: Env,
    pub cfg: Rc<Config>,
    pub secrets: Rc<Secrets>,
    pub meter: Meter,
    /// Crew mode: the token of the persona bot that speaks (`CREW_BOT_TOKEN_<NAME>`), when a
    /// persona's steps and typing go through its own bot; `None` is the main bot.
    pub speaker_token: Option<agent_core::secret::Secret>,
    /// The D1 binding, taken from the environment once per invocation (`storage`'s `Ctx::db`):
    /// taking it checks the binding's type by its constructor's name, three crossings into JS
    /// that a turn repeated for each of its dozen storage calls.
    pub d1: Rc<std::cell::OnceCell<Rc<worker::D1Database>>>,
}

impl Ctx {
    pub fn new(env: Env) -> Self {
        thread_local! {
            /// The configuration and secrets, read from the environment once per isolate: they
            /// are fixed for a deployment (new vars or secrets are a new version, in new
            /// isolates). Reading them crossed into JS once per variable on every invocation,
            /// most of a chatter webhook's own CPU.
            static FROM_ENV: std::cell::RefCell<Option<(Rc<Config>, Rc<Secrets>)>> = const { std::cell::RefCell::new(None) };
        }
        let (cfg, secrets) = FROM_ENV.with(|cell| {
            cell.borrow_mut().get_or_insert_with(|| (Rc::new(config_from_env(&env)), Rc::new(Secrets::from_env(&env)))).clone()
        });
        Ctx { meter: Meter::new(cfg.metrics_log), cfg, secrets, speaker_token: None, d1: Rc::default(), env }
    }

    /// With `METRICS_LOG` set, a guard that logs this invocation's metrics line when it goes
    /// out of scope (hold it for the whole handler: `let _metrics = ctx.metrics(..)`). `kind`
    /// is only called when the setting is on.
    pub fn metrics(&self, kind: impl FnOnce() -> String) -> Option<Metrics> {
        self.meter.counts_rows().then(|| Metrics { meter: self.meter.clone(), kind: kind(), started_ms: worker::js_sys::Date::now() })
    }

    /// The same context with a fresh subrequest meter: each queue message is its own budget.
    pub fn with_fresh_meter(&self) -> Ctx {
        Ctx { meter: Meter::new(self.meter.counts_rows()), ..self.clone() }
    }
}

/// Current time in milliseconds.
pub fn now_ms() -> i64 {
    // Date.now(): no Date object made per call (a turn reads the clock dozens of times).
    js_sys::Date::now() as i64
}

/// Uniform random in [0, 1).
pub fn random_unit() -> f64 {
    let mut b = [0u8; 8];
    if getrandom::fill(&mut b).is_err() {
        return 0.5;
    }
    (u64::from_le_bytes(b) >> 11) as f64 / (1u64 << 53) as f64
}

pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    let _ = getrandom::fill(&mut b);
    b
}
