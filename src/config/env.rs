//! Bindings, secrets and configuration read from the worker's `Env`.
//!
//! Invariants (INVARIANTS.md): "Secrets never print", "Secrets are secrets". Secrets are
//! read into [`Secret`]s here.

use agent_core::config::{Config, VAR_NAMES};
use agent_core::secret::Secret;
use std::collections::BTreeMap;
use worker::Env;

/// D1 database binding.
pub const DB: &str = "DB";
/// Durable Object namespace of chat objects.
pub const CHATS: &str = "CHATS";
/// Retry and fan-out jobs.
pub const JOBS: &str = "JOBS";
/// Jobs that ran out of attempts.
pub const DEAD_LETTERS: &str = "DEAD_LETTERS";
/// The var naming the dead-letter queue, to tell the consumer's batches apart. A binding does
/// not expose its queue's name, and each deployment names its own queues (`npm run deploy`
/// writes this var), so the name is configuration, never a constant.
pub const DEAD_LETTER_QUEUE_VAR: &str = "DEAD_LETTER_QUEUE";

/// Whether a batch from `queue` holds dead letters: its name is the configured dead-letter
/// queue's. Without the var (a hand-written configuration) nothing is taken for a dead letter.
pub fn is_dead_letter_queue(env: &Env, queue: &str) -> bool {
    env.var(DEAD_LETTER_QUEUE_VAR).is_ok_and(|v| v.to_string() == queue && !queue.is_empty())
}

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

/// A crew persona's own bot token (`CREW_BOT_TOKEN_<NAME>`), if that secret is set and
/// looks like a bot token.
pub fn crew_bot_token(env: &Env, persona: &str) -> Option<Secret> {
    let value = env.secret(&agent_core::crew::token_secret_name(persona)).ok()?.to_string();
    value.split_once(':').is_some_and(|(id, rest)| id.parse::<i64>().is_ok() && !rest.is_empty()).then(|| Secret::new(value))
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
