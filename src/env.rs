//! Bindings, secrets and configuration read from the worker's `Env`, plus the per-invocation
//! context every handler passes down.
//!
//! Invariant: secrets are read into [`Secret`]s here and leave them only where they go on the
//! wire; nothing in this crate logs or formats them.

use agent_core::config::{Config, VAR_NAMES};
use agent_core::secret::Secret;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;
use worker::Env;

/// D1 database binding.
pub const DB: &str = "DB";
/// Durable Object namespace of chat objects.
pub const CHATS: &str = "CHATS";
/// Retry and fan-out jobs.
pub const JOBS: &str = "JOBS";
/// Jobs that ran out of attempts.
pub const DEAD_LETTERS: &str = "DEAD_LETTERS";
/// Queue names (as in wrangler.toml), to tell the consumer's batches apart.
pub const JOBS_QUEUE: &str = "edge-agent-jobs";
pub const DEAD_LETTER_QUEUE: &str = "edge-agent-dead-letters";

#[derive(Clone, Default)]
pub struct Secrets {
    pub bot_token: Secret,
    pub webhook_secret: Secret,
    pub gemini_api_key: Secret,
    pub admin_token: Secret,
}

impl Secrets {
    pub fn from_env(env: &Env) -> Self {
        // Read as secrets. workers-rs cannot tell a secret from a plain var at runtime (both are
        // string bindings), so what keeps them out of [vars] is the repository: wrangler.toml
        // holds none of these names (tests/e2e/access-safety.test.js checks) and the scripts put
        // them with `wrangler secret put`. A missing secret is empty and matches nothing.
        let get = |name: &str| env.secret(name).map(|s| Secret::new(s.to_string())).unwrap_or_default();
        Secrets {
            bot_token: get("TELEGRAM_BOT_TOKEN"),
            webhook_secret: get("TELEGRAM_WEBHOOK_SECRET"),
            gemini_api_key: get("GEMINI_API_KEY"),
            admin_token: get("ADMIN_TOKEN"),
        }
    }

    /// The bot's numeric id: the part of the token before the colon.
    pub fn bot_id(&self) -> i64 {
        self.bot_token.expose().split(':').next().and_then(|id| id.parse().ok()).unwrap_or(0)
    }
}

pub fn config_from_env(env: &Env) -> Config {
    let mut vars = BTreeMap::new();
    for name in VAR_NAMES {
        if let Ok(v) = env.var(name) {
            vars.insert(name.to_string(), v.to_string());
        }
    }
    let cfg = Config::from_vars(&vars);
    for w in &cfg.warnings {
        worker::console_warn!("config: {w}");
    }
    cfg
}

/// Counts subrequests (D1 round trips, fetches, queue sends, Durable Object calls) of one
/// invocation, to keep each inside the platform's limits and to report them; and, among them,
/// D1 round trips and statements.
#[derive(Clone, Default)]
pub struct Meter(Rc<MeterCounts>);

#[derive(Default)]
pub struct MeterCounts {
    subrequests: Cell<u32>,
    d1_round_trips: Cell<u32>,
    d1_statements: Cell<u32>,
}

impl Meter {
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

/// What every handler needs.
#[derive(Clone)]
pub struct Ctx {
    pub env: Env,
    pub cfg: Rc<Config>,
    pub secrets: Rc<Secrets>,
    pub meter: Meter,
    /// While a plan step runs: whether it is still wanted. Delivery asks right before every
    /// Telegram call (no await between the answer and the call), so a step that a new message
    /// cancelled is never sent.
    pub step_guard: Option<Rc<dyn Fn() -> bool>>,
}

impl Ctx {
    pub fn new(env: Env) -> Self {
        Ctx {
            cfg: Rc::new(config_from_env(&env)),
            secrets: Rc::new(Secrets::from_env(&env)),
            meter: Meter::default(),
            step_guard: None,
            env,
        }
    }

    /// False once the plan step this context runs was cancelled (see `step_guard`).
    pub fn step_wanted(&self) -> bool {
        self.step_guard.as_ref().is_none_or(|g| g())
    }

    /// The same context with a fresh subrequest meter: each queue message is its own budget.
    pub fn with_fresh_meter(&self) -> Ctx {
        Ctx { meter: Meter::default(), ..self.clone() }
    }

    pub fn db(&self) -> crate::db::Db {
        crate::db::Db::new(&self.env, self.meter.clone())
    }

    pub fn telegram(&self) -> crate::telegram::TelegramClient {
        crate::telegram::TelegramClient::new(&self.cfg.telegram_api_base, self.secrets.bot_token.clone(), self.meter.clone())
    }
}

/// Current time in milliseconds.
pub fn now_ms() -> i64 {
    worker::Date::now().as_millis() as i64
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
