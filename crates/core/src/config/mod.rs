//! Configuration: every `[vars]` value the worker reads, parsed once into typed settings.
//! Each setting (name, kind, default, bounds, doc) is declared once, in [`SETTINGS`]
//! (`settings.rs`); reading a raw value is `read.rs`. Pure: the edge hands in a name → value
//! lookup, nothing else. Invariants (INVARIANTS.md): "Settings are declared once and never
//! stop the bot", "Settings are documented".

mod read;
mod settings;

pub use read::Reader;
pub use settings::{Kind, Setting, SETTINGS, VAR_NAMES};
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

/// All settings, with defaults applied. Each field is set by its setting in [`SETTINGS`] (name,
/// default, bounds); the docs here say what the field means.
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
    /// Private chats see the answer stream in as a Telegram draft.
    pub stream_drafts: bool,
    /// `RICH_MESSAGES=auto`: answers with tables, maths or headings go as rich messages in
    /// private chats (unless the person said `/rich off`); `off`: never.
    pub rich_messages: bool,
    /// `STOP_KEEPS=partial`: a turn stopped with Telegram's Stop button sends what it wrote so
    /// far, marked as stopped; `nothing`: nothing.
    pub stop_keeps_partial: bool,
    /// `BUSINESS=on`: Telegram Business connections are kept and `/business` works
    /// (`crate::business`); `off`: business updates are acknowledged and ignored.
    pub business: bool,
    /// `BUSINESS_AWAY_SECONDS`: in away mode, the owner's time to answer a contact first.
    pub business_away_secs: u32,
    /// `BUSINESS_DAILY_LIMIT`: model calls per business owner a UTC day.
    pub business_daily_limit: u64,
    /// `NEW_OPENS_TOPIC=on`: `/new` in a private chat with topics opens a fresh topic
    /// (`telegram::new_topic`); `off`: it resets the current conversation.
    pub new_opens_topic: bool,
    /// The least time between two draft updates of one answer.
    pub draft_interval_ms: u64,
    /// IANA time zone name for the "current time" line of the prompt, and schedules' default.
    pub timezone: String,
    /// Gemini's Google Search grounding rides along with the functions.
    pub web_search: bool,
    /// USD per 1,000 Google Search queries a grounded call ran, for every model; `None`: the
    /// model's own search price ([`Config::search_price`]).
    pub search_price_per_1000: Option<f64>,
    /// The reminders' limits.
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
    /// The Mini App's address (`https://…/app`) for the menu button and the buttons under
    /// `/memory` and `/reminders`; empty: no buttons (the page is still served at `/app`).
    pub miniapp_url: String,
    /// How old the Mini App's signed init data may be (`MINIAPP_MAX_AGE_SECONDS`).
    pub miniapp_max_age_secs: i64,
    /// How old an operator's init data may be for the operator's view
    /// (`MINIAPP_OPERATOR_MAX_AGE_SECONDS`): an operator session's lifetime.
    pub miniapp_operator_max_age_secs: i64,
    /// Idle time after which the next message starts a new session.
    pub session_idle_secs: i64,
    pub persona: String,
    pub role_prompts: Vec<String>,
    pub sticker_sets: Vec<String>,
    /// Let fetch_url reach loopback addresses (tests, local development only); other private
    /// addresses stay refused.
    pub fetch_allow_private: bool,
    /// Log one `metrics` line per invocation with its D1 round trips and the rows D1 reports
    /// read and written (for `npm run bench`; off, the result meta is not even read).
    pub metrics_log: bool,
    /// Requests fetch_url may make in one turn, every redirect hop counted.
    pub max_fetches_per_turn: usize,
    /// Visible plan steps (messages, reactions, stickers) one turn may take.
    pub max_plan_steps: usize,
    /// Bytes of photos, voice notes, documents... a turn sends to the model (at most 15 MiB:
    /// base64 makes it a third larger, and Gemini takes 20 MB of inline request).
    pub media_bytes_per_turn: u64,
    /// The model that describes media.
    pub media_model: String,
    /// Media a turn may have described at most.
    pub media_describe_budget: usize,
    /// The image model `generate_image` uses; empty: no pictures (the function is not offered).
    pub image_model: String,
    /// Pictures per person and per chat per UTC day (0: unlimited).
    pub image_limits: crate::image::Limits,
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
    /// How long a running turn goes before the chat object checks on it.
    pub turn_watchdog_ms: u64,
    /// How late a retry job may be before the chat object presumes it lost
    /// and takes the work over itself.
    pub job_grace_ms: u64,
    /// How long the tables that only grow keep rows (0: forever; see
    /// `core::background::retention`).
    pub retention_days: u32,
    /// Updates of one refused sender recorded (and handed to the chat object, for its one
    /// notice) per hour; past it only a counter moves (`core::access::policy`).
    pub refused_updates_per_hour: u32,
    /// Gemini thinking level (`low`, `medium`, `high`), or empty for the model's default.
    pub thinking_level: String,
    pub max_output_tokens: u32,
    /// The price table (`core::gemini::prices`): the operator's `PRICES` (cached input at a tenth of
    /// the input price when not given), else Google's published prices with their dates.
    pub prices: Vec<crate::gemini::prices::ModelPrice>,
    pub pairing_code_ttl_secs: i64,
    /// Messages a session must have beyond the budget before consolidation writes a summary.
    pub consolidate_min_messages: usize,
    pub embeddings_model: String,
    pub warnings: Vec<String>,
    /// Model budgets; 0 means unlimited.
    pub budgets: crate::limits::Budgets,
    /// Crew mode (`core::crew`): persona names in speaking order, where the crew speaks (ids or
    /// `*`), full rounds per cycle.
    pub crew: Vec<String>,
    pub crew_chats: Vec<String>,
    pub crew_max_rounds: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config::from_vars(&BTreeMap::new())
    }
}

impl Config {
    /// Builds the configuration from variables, each read as [`SETTINGS`] declares it; unknown
    /// names are ignored.
    pub fn from_vars(vars: &BTreeMap<String, String>) -> Self {
        let mut r = Reader::new(vars);
        let mut c = Config::unset();
        for setting in SETTINGS {
            setting.apply(&mut c, &mut r);
        }
        // The rules across settings.
        c.debounce_max_ms = c.debounce_max_ms.max(c.debounce_ms);
        c.debounce_fixed = r.get("DEBOUNCE_MS").is_some_and(|v| v.parse::<u64>().is_ok());
        c.warnings = r.warnings;
        c
    }

    /// Every field empty or zero, before the settings are applied.
    fn unset() -> Self {
        Config {
            telegram_api_base: String::new(),
            gemini_api_base: String::new(),
            gemini_model: String::new(),
            history_format: HistoryFormat::Structured,
            debounce_ms: 0,
            debounce_max_ms: 0,
            debounce_fixed: false,
            stream_drafts: false,
            rich_messages: false,
            stop_keeps_partial: false,
            business: false,
            business_daily_limit: 0,
            business_away_secs: 0,
            new_opens_topic: false,
            draft_interval_ms: 0,
            timezone: String::new(),
            web_search: false,
            search_price_per_1000: None,
            schedule_limits: crate::chat::schedule::Limits { max_active: 0, min_repeat_minutes: 0, max_late_ms: 0, fallback_ms: 0 },
            bot_name: String::new(),
            bot_username: String::new(),
            name_trigger: false,
            dm_policy: DmPolicy::Pairing,
            dm_allowlist: Vec::new(),
            group_allowlist: Vec::new(),
            admin_user_ids: Vec::new(),
            miniapp_url: String::new(),
            miniapp_max_age_secs: 0,
            miniapp_operator_max_age_secs: 0,
            session_idle_secs: 0,
            persona: String::new(),
            role_prompts: Vec::new(),
            sticker_sets: Vec::new(),
            fetch_allow_private: false,
            metrics_log: false,
            max_fetches_per_turn: 0,
            max_plan_steps: 0,
            media_bytes_per_turn: 0,
            media_model: String::new(),
            media_describe_budget: 0,
            image_model: String::new(),
            image_limits: crate::image::Limits { per_person_per_day: 0, per_chat_per_day: 0 },
            history_token_budget: 0,
            memory_token_budget: 0,
            max_turn_attempts: 0,
            max_send_attempts: 0,
            retry_base_ms: 0,
            turn_watchdog_ms: 0,
            job_grace_ms: 0,
            retention_days: 0,
            refused_updates_per_hour: 0,
            thinking_level: String::new(),
            max_output_tokens: 0,
            prices: Vec::new(),
            pairing_code_ttl_secs: 0,
            consolidate_min_messages: 0,
            embeddings_model: String::new(),
            warnings: Vec::new(),
            budgets: crate::limits::Budgets { user_turns_per_hour: 0, chat_tokens_per_day: 0, global_tokens_per_day: 0 },
            crew: Vec::new(),
            crew_chats: Vec::new(),
            crew_max_rounds: 0,
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
    fn every_name_custom_code_reads_is_declared() {
        // The edge passes only VAR_NAMES to from_vars: a name read by a setting's own code but
        // not declared would silently keep its default in the worker.
        let code = [include_str!("settings.rs"), include_str!("mod.rs")].concat();
        let code = &code[..code.rfind("#[cfg(test)]").unwrap()];
        let mut read = Vec::new();
        for reader in ["get(\"", "num(\"", "flag(\"", "list(\"", "ids(\"", "text(\"", "custom(\"", "name: \""] {
            for (at, _) in code.match_indices(reader) {
                let rest = &code[at + reader.len()..];
                read.push(rest[..rest.find('"').unwrap()].to_string());
            }
        }
        assert!(read.len() > SETTINGS.len(), "{read:?}");
        let missing: Vec<&String> = read.iter().filter(|n| !VAR_NAMES.contains(&n.as_str())).collect();
        assert!(missing.is_empty(), "read but not declared: {missing:?}");
    }

    #[test]
    fn an_hourly_budget_is_at_most_what_a_persons_row_keeps() {
        // A person's charges of the hour are kept in their row, at most
        // MAX_USER_TURNS_PER_HOUR: a higher budget could never be reached, so it is read as that.
        let c = Config::from_vars(&vars(&[("USER_TURNS_PER_HOUR", "5000")]));
        assert_eq!(c.budgets.user_turns_per_hour, crate::limits::MAX_USER_TURNS_PER_HOUR);
        let c = Config::from_vars(&vars(&[("USER_TURNS_PER_HOUR", "999")]));
        assert_eq!(c.budgets.user_turns_per_hour, 999);
    }

    #[test]
    fn each_setting_is_declared_once_with_sane_bounds_and_choices() {
        let mut names: Vec<&str> = SETTINGS.iter().map(|s| s.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), SETTINGS.len(), "a name declared twice");
        for s in SETTINGS {
            assert!(!s.doc.is_empty() && !s.doc.contains('\n'), "{}: a one-line doc", s.name);
            match s.kind {
                Kind::Num { default, min, max, .. } => assert!(min <= default && default <= max, "{}: default within bounds", s.name),
                Kind::Choice { options, default, fallback, .. } => {
                    assert!(options.contains(&default) && options.contains(&fallback), "{}", s.name);
                    for o in options {
                        let c = Config::from_vars(&vars(&[(s.name, o)]));
                        assert!(c.warnings.is_empty(), "{}={o}", s.name);
                        let rich = if c.rich_messages { "auto" } else { "off" };
                        let keeps = if c.stop_keeps_partial { "partial" } else { "nothing" };
                        let shown = [c.history_format.as_str(), c.dm_policy.as_str(), rich, keeps];
                        assert!(shown.contains(o), "{}={o} is applied", s.name);
                    }
                }
                _ => {}
            }
        }
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
