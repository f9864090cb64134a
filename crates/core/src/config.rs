//! Configuration: every `[vars]` value the worker reads, parsed once into typed settings with
//! the documented defaults. Pure: the edge hands in a name → value lookup, nothing else.
//!
//! Invariant: a missing or unparsable value never stops the bot; it falls back to the default
//! and the problem is reported in [`Config::warnings`] (logged by the edge).

use std::collections::BTreeMap;

/// Default Gemini model: the current GA Flash model (checked against the models reference,
/// November 2026). Gemini retires names, so this is config, and a chat may override it.
pub const DEFAULT_MODEL: &str = "gemini-3.8-flash";

/// How history is given to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistoryFormat {
    /// `contents` with user/model roles and a metadata part per message.
    Structured,
    /// One plain-text turn, a line per message.
    Compact,
}

impl HistoryFormat {
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "structured" => Some(HistoryFormat::Structured),
            "compact" => Some(HistoryFormat::Compact),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            HistoryFormat::Structured => "structured",
            HistoryFormat::Compact => "compact",
        }
    }
}

/// Who may talk to the bot in private chats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DmPolicy {
    Open,
    Allowlist,
    Pairing,
    Disabled,
}

impl DmPolicy {
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "open" => Some(DmPolicy::Open),
            "allowlist" => Some(DmPolicy::Allowlist),
            "pairing" => Some(DmPolicy::Pairing),
            "disabled" => Some(DmPolicy::Disabled),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            DmPolicy::Open => "open",
            DmPolicy::Allowlist => "allowlist",
            DmPolicy::Pairing => "pairing",
            DmPolicy::Disabled => "disabled",
        }
    }
}

/// All settings, with defaults applied.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub telegram_api_base: String,
    pub gemini_api_base: String,
    pub gemini_model: String,
    pub history_format: HistoryFormat,
    /// Quiet time after the last message of a burst before the model is called.
    pub debounce_ms: u64,
    /// The longest a burst may postpone the model call.
    pub debounce_max_ms: u64,
    /// `DEBOUNCE_MS` was set: the operator's fixed quiet window instead of the adaptive one
    /// (`crate::chat::debounce`).
    pub debounce_fixed: bool,
    /// `STREAM_DRAFTS` (on): private chats see the answer stream in as a Telegram draft.
    pub stream_drafts: bool,
    /// `DRAFT_INTERVAL_MS` (500): the least time between two draft updates of one answer.
    pub draft_interval_ms: u64,
    /// IANA time zone name for the "current time" line of the prompt, and schedules' default.
    pub timezone: String,
    /// `WEB_SEARCH`: Gemini's Google Search grounding rides along with the functions.
    pub web_search: bool,
    /// `SEARCH_PRICE_PER_1000`: USD per 1,000 Google Search queries a grounded call ran, for
    /// every model; unset, the model's own search price (`core::gemini::prices`), else $14.
    pub search_price_per_1000: Option<f64>,
    /// `MAX_SCHEDULES_PER_CHAT`, `SCHEDULE_MIN_REPEAT_MINUTES`, `SCHEDULE_MAX_LATE_MINUTES`,
    /// `SCHEDULE_FALLBACK_SECONDS`.
    pub schedule_limits: crate::chat::schedule::Limits,
    pub bot_name: String,
    /// The bot's @username without the @; when empty it is read with getMe.
    pub bot_username: String,
    /// Answer in groups when the bot's name appears as a word.
    pub name_trigger: bool,
    pub dm_policy: DmPolicy,
    pub dm_allowlist: Vec<i64>,
    /// Groups the bot answers in; empty means all.
    pub group_allowlist: Vec<i64>,
    /// Telegram user ids of the operators (may approve pairings, see /status details).
    pub admin_user_ids: Vec<i64>,
    /// Idle time after which the next message starts a new session.
    pub session_idle_secs: i64,
    pub persona: String,
    pub role_prompts: Vec<String>,
    pub sticker_sets: Vec<String>,
    /// Let fetch_url reach loopback addresses (tests, local development only); other private
    /// addresses stay refused.
    pub fetch_allow_private: bool,
    /// `METRICS_LOG`: log one `metrics` line per invocation with its D1 round trips and the
    /// rows D1 reports read and written (for `npm run bench`; off by default, and then the
    /// result meta is not even read).
    pub metrics_log: bool,
    /// Requests fetch_url may make in one turn, every redirect hop counted.
    pub max_fetches_per_turn: usize,
    /// Visible plan steps (messages, reactions, stickers) one turn may take.
    pub max_plan_steps: usize,
    /// `MEDIA_BYTES_PER_TURN`: bytes of photos, voice notes, documents... a turn sends to the
    /// model (default 10 MiB, at most 15 MiB: base64 makes it a third larger, and Gemini takes
    /// 20 MB of inline request).
    pub media_bytes_per_turn: u64,
    /// `MEDIA_MODEL`: the model that describes media (default a Flash-Lite).
    pub media_model: String,
    /// `MEDIA_DESCRIBE_BUDGET`: media a turn may have described at most (default 4, at most 10).
    pub media_describe_budget: usize,
    /// Estimated-token budget for the history part of the prompt.
    pub history_token_budget: usize,
    /// Estimated-token budget for memories in the system instruction.
    pub memory_token_budget: usize,
    /// Attempts for a model turn before it is dead-lettered.
    pub max_turn_attempts: u32,
    /// Attempts for a Telegram send before it is dead-lettered.
    pub max_send_attempts: u32,
    /// First step of the retry backoff (doubles per attempt, with jitter, capped at 5 min).
    pub retry_base_ms: u64,
    /// `TURN_WATCHDOG_MS`: how long a running turn goes before the chat object checks on it.
    pub turn_watchdog_ms: u64,
    /// `JOB_GRACE_MS`: how late a retry job may be before the chat object presumes it lost
    /// and takes the work over itself.
    pub job_grace_ms: u64,
    /// `RETENTION_DAYS`: how long the tables that only grow keep rows (0: forever; see
    /// `core::background::retention`).
    pub retention_days: u32,
    /// `REFUSED_UPDATES_PER_HOUR` (5): updates of one refused sender recorded (and handed to the
    /// chat object, for its one notice) per hour; past it only a counter moves (`core::access::policy`).
    pub refused_updates_per_hour: u32,
    /// Gemini thinking level (`low`, `medium`, `high`), or empty for the model's default.
    pub thinking_level: String,
    pub max_output_tokens: u32,
    /// The price table (`core::gemini::prices`): `PRICES` (`model=input/output` or
    /// `model=input/output/cached`, USD per million tokens, comma-separated; cached input at a
    /// tenth of the input price when not given), else Google's published prices with their dates.
    pub prices: Vec<crate::gemini::prices::ModelPrice>,
    pub pairing_code_ttl_secs: i64,
    /// Messages a session must have beyond the budget before consolidation writes a summary.
    pub consolidate_min_messages: usize,
    pub embeddings_model: String,
    pub warnings: Vec<String>,
    /// Model budgets: `USER_TURNS_PER_HOUR` (60), `CHAT_TOKENS_PER_DAY` (2,000,000),
    /// `GLOBAL_TOKENS_PER_DAY` (20,000,000); 0 means unlimited.
    pub budgets: crate::limits::Budgets,
    /// Crew mode (`core::crew`): `CREW` persona names in speaking order, `CREW_CHATS` where the
    /// crew speaks (ids or `*`), `CREW_MAX_ROUNDS` full rounds per cycle (default 3).
    pub crew: Vec<String>,
    pub crew_chats: Vec<String>,
    pub crew_max_rounds: u32,
}

/// Every variable name the worker reads (the edge looks each one up).
pub const VAR_NAMES: [&str; 55] = [
    "TELEGRAM_API_BASE",
    "GEMINI_API_BASE",
    "GEMINI_MODEL",
    "HISTORY_FORMAT",
    "DEBOUNCE_MS",
    "DEBOUNCE_MAX_MS",
    "TIMEZONE",
    "BOT_NAME",
    "BOT_USERNAME",
    "NAME_TRIGGER",
    "DM_POLICY",
    "DM_ALLOWLIST",
    "GROUP_ALLOWLIST",
    "ADMIN_USER_IDS",
    "SESSION_IDLE_HOURS",
    "PERSONA",
    "ROLE_PROMPTS",
    "STICKER_SETS",
    "FETCH_ALLOW_PRIVATE",
    "HISTORY_TOKEN_BUDGET",
    "MEMORY_TOKEN_BUDGET",
    "MAX_TURN_ATTEMPTS",
    "MAX_SEND_ATTEMPTS",
    "THINKING_LEVEL",
    "MAX_OUTPUT_TOKENS",
    "PRICES",
    "PAIRING_CODE_TTL_MINUTES",
    "CONSOLIDATE_MIN_MESSAGES",
    "EMBEDDINGS_MODEL",
    "SESSION_IDLE_MINUTES",
    "RETRY_BASE_MS",
    "MAX_FETCHES_PER_TURN",
    "MAX_PLAN_STEPS",
    "MEDIA_BYTES_PER_TURN",
    "MEDIA_MODEL",
    "MEDIA_DESCRIBE_BUDGET",
    "TURN_WATCHDOG_MS",
    "JOB_GRACE_MS",
    "REFUSED_UPDATES_PER_HOUR",
    "RETENTION_DAYS",
    "USER_TURNS_PER_HOUR",
    "CHAT_TOKENS_PER_DAY",
    "GLOBAL_TOKENS_PER_DAY",
    "WEB_SEARCH",
    "MAX_SCHEDULES_PER_CHAT",
    "SCHEDULE_MIN_REPEAT_MINUTES",
    "SCHEDULE_MAX_LATE_MINUTES",
    "SCHEDULE_FALLBACK_SECONDS",
    "SEARCH_PRICE_PER_1000",
    "STREAM_DRAFTS",
    "DRAFT_INTERVAL_MS",
    "CREW",
    "CREW_CHATS",
    "CREW_MAX_ROUNDS",
    "METRICS_LOG",
];

impl Default for Config {
    fn default() -> Self {
        Config::from_vars(&BTreeMap::new())
    }
}

impl Config {
    /// Builds the configuration from variables; unknown names are ignored.
    pub fn from_vars(vars: &BTreeMap<String, String>) -> Self {
        let mut warnings = Vec::new();
        let get = |name: &str| vars.get(name).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let mut num = |name: &str, default: u64| -> u64 {
            match get(name) {
                None => default,
                Some(v) => v.parse().unwrap_or_else(|_| {
                    warnings.push(format!("{name}={v:?} is not a number; using {default}"));
                    default
                }),
            }
        };
        let debounce_ms = num("DEBOUNCE_MS", 1500);
        let debounce_max_ms = num("DEBOUNCE_MAX_MS", 8000).max(debounce_ms);
        let debounce_fixed = get("DEBOUNCE_MS").is_some_and(|v| v.parse::<u64>().is_ok());
        let draft_interval_ms = num("DRAFT_INTERVAL_MS", 500).clamp(100, 10_000);
        let idle_minutes = match get("SESSION_IDLE_MINUTES") {
            Some(_) => num("SESSION_IDLE_MINUTES", 24 * 60),
            None => num("SESSION_IDLE_HOURS", 24) * 60,
        };
        let history_token_budget = num("HISTORY_TOKEN_BUDGET", 12_000) as usize;
        let memory_token_budget = num("MEMORY_TOKEN_BUDGET", 1_500) as usize;
        let max_turn_attempts = num("MAX_TURN_ATTEMPTS", 10).clamp(1, 50) as u32;
        let max_send_attempts = num("MAX_SEND_ATTEMPTS", 8).clamp(1, 50) as u32;
        let retry_base_ms = num("RETRY_BASE_MS", 2000).clamp(100, 60_000);
        let turn_watchdog_ms = num("TURN_WATCHDOG_MS", 120_000).clamp(100, 3_600_000);
        let job_grace_ms = num("JOB_GRACE_MS", 300_000).clamp(100, 86_400_000);
        let retention_days = num("RETENTION_DAYS", 30).min(36_500) as u32;
        let refused_updates_per_hour = num("REFUSED_UPDATES_PER_HOUR", 5).clamp(1, 1000) as u32;
        let max_output_tokens = num("MAX_OUTPUT_TOKENS", 4096) as u32;
        let pairing_ttl = num("PAIRING_CODE_TTL_MINUTES", 60) as i64 * 60;
        let consolidate_min_messages = num("CONSOLIDATE_MIN_MESSAGES", 40) as usize;
        let media_bytes_per_turn = num("MEDIA_BYTES_PER_TURN", 10 << 20).clamp(1, 15 << 20);
        let media_describe_budget = num("MEDIA_DESCRIBE_BUDGET", 4).min(10) as usize;
        let schedule_limits = crate::chat::schedule::Limits {
            max_active: num("MAX_SCHEDULES_PER_CHAT", 25).clamp(1, 1000) as usize,
            min_repeat_minutes: num("SCHEDULE_MIN_REPEAT_MINUTES", 15).clamp(1, 10_080) as i64,
            max_late_ms: num("SCHEDULE_MAX_LATE_MINUTES", 360).clamp(1, 10_080) as i64 * 60_000,
            fallback_ms: num("SCHEDULE_FALLBACK_SECONDS", (crate::chat::schedule::FALLBACK_MS / 1000) as u64).clamp(1, 3600) as i64 * 1000,
        };
        let max_fetches_per_turn =
            num("MAX_FETCHES_PER_TURN", crate::fetch::DEFAULT_MAX_FETCHES_PER_TURN as u64).min(20) as usize;
        let max_plan_steps = num("MAX_PLAN_STEPS", crate::chat::plan::DEFAULT_MAX_VISIBLE_STEPS as u64).clamp(1, 50) as usize;
        let crew_max_rounds = num("CREW_MAX_ROUNDS", 3).clamp(1, 20) as u32;
        let budgets = crate::limits::Budgets {
            user_turns_per_hour: num("USER_TURNS_PER_HOUR", 60),
            chat_tokens_per_day: num("CHAT_TOKENS_PER_DAY", 2_000_000),
            global_tokens_per_day: num("GLOBAL_TOKENS_PER_DAY", 20_000_000),
        };

        let flag = |name: &str, default: bool| match get(name).map(|v| v.to_ascii_lowercase()) {
            None => default,
            Some(v) => matches!(v.as_str(), "1" | "true" | "yes" | "on"),
        };
        let list = |name: &str| -> Vec<String> {
            get(name)
                .map(|v| v.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect())
                .unwrap_or_default()
        };
        let mut ids = |name: &str| -> Vec<i64> {
            list(name)
                .into_iter()
                .filter_map(|s| match s.parse() {
                    Ok(id) => Some(id),
                    Err(_) => {
                        warnings.push(format!("{name}: {s:?} is not a Telegram id; ignored"));
                        None
                    }
                })
                .collect()
        };
        let dm_allowlist = ids("DM_ALLOWLIST");
        let group_allowlist = ids("GROUP_ALLOWLIST");
        let admin_user_ids = ids("ADMIN_USER_IDS");

        let history_format = match get("HISTORY_FORMAT") {
            None => HistoryFormat::Structured,
            Some(v) => HistoryFormat::parse(&v).unwrap_or_else(|| {
                warnings.push(format!("HISTORY_FORMAT={v:?} is not structured|compact; using structured"));
                HistoryFormat::Structured
            }),
        };
        let dm_policy = match get("DM_POLICY") {
            None => DmPolicy::Open,
            Some(v) => DmPolicy::parse(&v).unwrap_or_else(|| {
                warnings.push(format!("DM_POLICY={v:?} is not open|allowlist|pairing|disabled; using pairing"));
                DmPolicy::Pairing
            }),
        };
        let mut prices = Vec::new();
        for entry in list("PRICES") {
            let parsed = entry.split_once('=').and_then(|(model, p)| {
                let mut n = p.split('/').map(|x| x.trim().parse::<f64>().ok());
                let (i, o, c) = (n.next()??, n.next()??, n.next().map(|c| c.ok_or(())));
                let cached = match c {
                    None => None,
                    Some(Ok(c)) => Some(c),
                    Some(Err(())) => return None,
                };
                (n.next().is_none()).then(|| crate::gemini::prices::ModelPrice::flat(model.trim(), i, o, cached))
            });
            match parsed {
                Some(p) => prices.push(p),
                None => warnings.push(format!("PRICES: {entry:?} is not model=input/output or model=input/output/cached")),
            }
        }
        if prices.is_empty() {
            prices = crate::gemini::prices::default_prices();
        }

        Config {
            telegram_api_base: get("TELEGRAM_API_BASE")
                .unwrap_or_else(|| "https://api.telegram.org".into())
                .trim_end_matches('/')
                .to_string(),
            gemini_api_base: get("GEMINI_API_BASE")
                .unwrap_or_else(|| "https://generativelanguage.googleapis.com".into())
                .trim_end_matches('/')
                .to_string(),
            gemini_model: get("GEMINI_MODEL").unwrap_or_else(|| DEFAULT_MODEL.into()),
            history_format,
            debounce_ms,
            debounce_max_ms,
            debounce_fixed,
            stream_drafts: flag("STREAM_DRAFTS", true),
            draft_interval_ms,
            timezone: get("TIMEZONE").unwrap_or_else(|| "UTC".into()),
            web_search: flag("WEB_SEARCH", false),
            search_price_per_1000: get("SEARCH_PRICE_PER_1000").and_then(|v| v.parse::<f64>().ok()).filter(|p| p.is_finite() && *p >= 0.0),
            schedule_limits,
            bot_name: get("BOT_NAME").unwrap_or_else(|| "Edge".into()),
            bot_username: get("BOT_USERNAME").map(|u| u.trim_start_matches('@').to_string()).unwrap_or_default(),
            name_trigger: flag("NAME_TRIGGER", true),
            dm_policy,
            dm_allowlist,
            group_allowlist,
            admin_user_ids,
            session_idle_secs: idle_minutes as i64 * 60,
            persona: get("PERSONA").unwrap_or_else(|| "default".into()),
            role_prompts: list("ROLE_PROMPTS"),
            sticker_sets: list("STICKER_SETS"),
            fetch_allow_private: flag("FETCH_ALLOW_PRIVATE", false),
            metrics_log: flag("METRICS_LOG", false),
            max_fetches_per_turn,
            max_plan_steps,
            media_bytes_per_turn,
            media_model: get("MEDIA_MODEL").unwrap_or_else(|| "gemini-3.5-flash-lite".into()),
            media_describe_budget,
            history_token_budget,
            memory_token_budget,
            max_turn_attempts,
            max_send_attempts,
            retry_base_ms,
            turn_watchdog_ms,
            job_grace_ms,
            retention_days,
            refused_updates_per_hour,
            thinking_level: get("THINKING_LEVEL").unwrap_or_default().to_ascii_lowercase(),
            max_output_tokens,
            prices,
            pairing_code_ttl_secs: pairing_ttl,
            consolidate_min_messages,
            embeddings_model: get("EMBEDDINGS_MODEL").unwrap_or_default(),
            crew: list("CREW"),
            crew_chats: list("CREW_CHATS"),
            crew_max_rounds,
            warnings,
            budgets,
        }
    }

    /// The price of `model` at `at_ms` (a call's time), if the table knows it.
    pub fn price_at(&self, model: &str, at_ms: i64) -> Option<&crate::gemini::prices::ModelPrice> {
        crate::gemini::prices::price_at(&self.prices, model, at_ms)
    }

    /// USD per 1,000 search queries of `price`'s model: `SEARCH_PRICE_PER_1000` when set, else
    /// the model's own, else the page's Gemini 3 price.
    pub fn search_price(&self, price: &crate::gemini::prices::ModelPrice) -> f64 {
        self.search_price_per_1000.or(price.search_per_1000).unwrap_or(crate::gemini::prices::SEARCH_PER_1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_setting_read_is_a_name_the_edge_passes() {
        // The edge passes only VAR_NAMES to from_vars: a setting read here but missing there
        // would silently keep its default in the worker.
        let src = include_str!("config.rs");
        let code = &src[..src.find("#[cfg(test)]").unwrap()];
        let mut read = Vec::new();
        for reader in ["get(\"", "num(\"", "flag(\"", "list(\"", "ids(\""] {
            for (at, _) in code.match_indices(reader) {
                let rest = &code[at + reader.len()..];
                read.push(rest[..rest.find('"').unwrap()].to_string());
            }
        }
        assert!(read.len() > 40, "{read:?}");
        let missing: Vec<&String> = read.iter().filter(|n| !VAR_NAMES.contains(&n.as_str())).collect();
        assert!(missing.is_empty(), "read but not passed by the edge: {missing:?}");
    }

    fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn defaults_match_the_documented_contract() {
        let c = Config::default();
        assert_eq!(c.telegram_api_base, "https://api.telegram.org");
        assert_eq!(c.gemini_api_base, "https://generativelanguage.googleapis.com");
        assert_eq!(c.gemini_model, DEFAULT_MODEL);
        assert_eq!(c.history_format, HistoryFormat::Structured);
        assert_eq!(c.debounce_ms, 1500);
        assert!(!c.debounce_fixed, "adaptive unless DEBOUNCE_MS is set");
        assert!(c.stream_drafts);
        assert_eq!(c.draft_interval_ms, 500);
        assert_eq!(c.session_idle_secs, 24 * 3600);
        assert_eq!(c.dm_policy, DmPolicy::Open);
        assert_eq!(c.max_fetches_per_turn, 5);
        assert!(!c.fetch_allow_private);
        assert!(c.warnings.is_empty());
    }

    #[test]
    fn bad_values_fall_back_with_a_warning() {
        let c = Config::from_vars(&vars(&[
            ("DEBOUNCE_MS", "soon"),
            ("HISTORY_FORMAT", "xml"),
            ("DM_POLICY", "friends"),
            ("DM_ALLOWLIST", "12, x, 34"),
            ("GEMINI_API_BASE", "http://127.0.0.1:9/"),
        ]));
        assert_eq!(c.debounce_ms, 1500);
        assert_eq!(c.history_format, HistoryFormat::Structured);
        // An unknown access policy fails closed, not open.
        assert_eq!(c.dm_policy, DmPolicy::Pairing);
        assert_eq!(c.dm_allowlist, vec![12, 34]);
        assert_eq!(c.gemini_api_base, "http://127.0.0.1:9");
        assert_eq!(c.warnings.len(), 4, "{:?}", c.warnings);
    }

    #[test]
    fn cached_prices_are_given_or_a_tenth_of_the_input_price() {
        let c = Config::from_vars(&vars(&[("PRICES", "gemini-x=1/2/0.1, gemini-y=4/8, bad=1/2/x, worse=1/2/3/4")]));
        assert_eq!(c.price_at("gemini-x-001", 0).map(|p| p.cached_input), Some(0.1));
        assert_eq!(c.price_at("gemini-y", 0).map(|p| p.cached_input), Some(0.4));
        assert!(c.price_at("other", 0).is_none());
        assert!(c.price_at("bad", 0).is_none());
        assert!(c.price_at("worse", 0).is_none());
        assert_eq!(c.warnings.len(), 2);
    }

    #[test]
    fn prices_parse_and_match_model_versions() {
        let c = Config::from_vars(&vars(&[("PRICES", "gemini-x=1/2, broken")]));
        assert_eq!(c.price_at("gemini-x", 0).map(|p| (p.input, p.output)), Some((1.0, 2.0)));
        assert_eq!(c.price_at("gemini-x-001", i64::MAX).map(|p| (p.input, p.output)), Some((1.0, 2.0)), "an operator's price has no dates");
        assert!(c.price_at("other", 0).is_none());
        assert_eq!(c.warnings.len(), 1);
        let d = Config::from_vars(&vars(&[]));
        assert_eq!(d.prices, crate::gemini::prices::default_prices());
    }

    #[test]
    fn the_search_price_is_the_setting_else_the_models() {
        let d = Config::from_vars(&vars(&[]));
        let p = d.price_at("gemini-3.8-flash", 0).unwrap().clone();
        assert_eq!(d.search_price(&p), 14.0);
        let set = Config::from_vars(&vars(&[("SEARCH_PRICE_PER_1000", "35")]));
        assert_eq!(set.search_price(&p), 35.0);
        assert_eq!(d.search_price(&crate::gemini::prices::ModelPrice::flat("m", 1.0, 1.0, None)), 14.0);
    }
}
