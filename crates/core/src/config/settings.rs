//! The one declaration of every setting: name, kind (with its default and bounds), a one-line
//! doc, and where its value lands in [`Config`]. The parser ([`Config::from_vars`]), the names
//! the edge looks up ([`VAR_NAMES`]) and the checks of README's settings table and of
//! wrangler.toml's `[vars]` (`crates/core/tests/settings_documented.rs`) all come from
//! [`SETTINGS`]; a declarative table, so the 80-line rule does not apply to it.

use super::read::Reader;
use super::{Config, DmPolicy, HistoryFormat, DEFAULT_MODEL};

/// One setting of `[vars]`.
pub struct Setting {
    pub name: &'static str,
    pub kind: Kind,
    /// One line: what it sets.
    pub doc: &'static str,
}

/// How a setting's value is read, its default and bounds, and the field it sets.
pub enum Kind {
    /// A whole number, clamped to `min..=max`; unparsable, the default and a warning.
    Num { default: u64, min: u64, max: u64, set: fn(&mut Config, u64) },
    /// On for `1`, `true`, `yes`, `on`; off for any other value.
    Flag { default: bool, set: fn(&mut Config, bool) },
    /// Text; unset or empty, the default.
    Text { default: &'static str, set: fn(&mut Config, String) },
    /// Comma-separated items (default: none).
    List { set: fn(&mut Config, Vec<String>) },
    /// Comma-separated Telegram ids (default: none); an item that is not one is dropped with a
    /// warning.
    Ids { set: fn(&mut Config, Vec<i64>) },
    /// One of `options`; unset, `default`; anything else, `fallback` and a warning.
    Choice { options: &'static [&'static str], default: &'static str, fallback: &'static str, set: fn(&mut Config, &str) },
    /// Read by its own code (depends on another setting, or has its own syntax); `default`
    /// says in words what unset means.
    Custom { default: &'static str, set: fn(&mut Config, &mut Reader) },
}

const MAX: u64 = u64::MAX;

const fn num(name: &'static str, default: u64, min: u64, max: u64, doc: &'static str, set: fn(&mut Config, u64)) -> Setting {
    Setting { name, kind: Kind::Num { default, min, max, set }, doc }
}
const fn flag(name: &'static str, default: bool, doc: &'static str, set: fn(&mut Config, bool)) -> Setting {
    Setting { name, kind: Kind::Flag { default, set }, doc }
}
const fn text(name: &'static str, default: &'static str, doc: &'static str, set: fn(&mut Config, String)) -> Setting {
    Setting { name, kind: Kind::Text { default, set }, doc }
}
const fn list(name: &'static str, doc: &'static str, set: fn(&mut Config, Vec<String>)) -> Setting {
    Setting { name, kind: Kind::List { set }, doc }
}
const fn ids(name: &'static str, doc: &'static str, set: fn(&mut Config, Vec<i64>)) -> Setting {
    Setting { name, kind: Kind::Ids { set }, doc }
}
const fn custom(name: &'static str, default: &'static str, doc: &'static str, set: fn(&mut Config, &mut Reader)) -> Setting {
    Setting { name, kind: Kind::Custom { default, set }, doc }
}

/// Every setting, in the order they are applied.
#[rustfmt::skip]
pub const SETTINGS: &[Setting] = &[
    text("TELEGRAM_API_BASE", "https://api.telegram.org", "Bot API base URL", |c, v| c.telegram_api_base = v.trim_end_matches('/').to_string()),
    text("GEMINI_API_BASE", "https://generativelanguage.googleapis.com", "Gemini base URL (an AI Gateway URL works too)", |c, v| c.gemini_api_base = v.trim_end_matches('/').to_string()),
    text("GEMINI_MODEL", DEFAULT_MODEL, "model for turns and consolidation; a chat may override it", |c, v| c.gemini_model = v),
    text("THINKING_LEVEL", "", "Gemini thinking level (low, medium, high); empty: the model's default", |c, v| c.thinking_level = v.to_ascii_lowercase()),
    num("MAX_OUTPUT_TOKENS", 4096, 0, MAX, "output tokens per model call", |c, n| c.max_output_tokens = n as u32),
    Setting { name: "HISTORY_FORMAT", doc: "how history is given to the model (structured or compact)", kind: Kind::Choice {
        options: &["structured", "compact"], default: "structured", fallback: "structured",
        set: |c, v| c.history_format = HistoryFormat::parse(v).unwrap_or(HistoryFormat::Structured) } },
    num("HISTORY_TOKEN_BUDGET", 12_000, 0, MAX, "estimated tokens of history in a prompt", |c, n| c.history_token_budget = n as usize),
    num("MEMORY_TOKEN_BUDGET", 1_500, 0, MAX, "estimated tokens of memories in a prompt", |c, n| c.memory_token_budget = n as usize),
    num("DEBOUNCE_MS", 1500, 0, MAX, "fixed quiet time before answering a burst; unset, adaptive (`crate::chat::debounce`)", |c, n| c.debounce_ms = n),
    num("DEBOUNCE_MAX_MS", 8000, 0, MAX, "the longest a burst may postpone the model call (at least DEBOUNCE_MS)", |c, n| c.debounce_max_ms = n),
    flag("STREAM_DRAFTS", true, "private chats see the answer stream in as a Telegram draft", |c, b| c.stream_drafts = b),
    Setting { name: "RICH_MESSAGES", doc: "answers needing tables, maths or headings go as rich messages in private chats (auto) or never (off)", kind: Kind::Choice {
        options: &["auto", "off"], default: "auto", fallback: "auto",
        set: |c, v| c.rich_messages = v != "off" } },
    Setting { name: "STOP_KEEPS", doc: "what a turn stopped with Telegram's Stop button sends: what it wrote so far, marked stopped (partial), or nothing", kind: Kind::Choice {
        options: &["partial", "nothing"], default: "partial", fallback: "partial",
        set: |c, v| c.stop_keeps_partial = v != "nothing" } },
    flag("BUSINESS", true, "the bot acts for owners who connect it to their Telegram Business account (on) or ignores business updates (off)", |c, b| c.business = b),
    num("BUSINESS_AWAY_SECONDS", 300, 0, 43_200, "in away mode, how long the owner has to answer a contact before the bot does", |c, n| c.business_away_secs = n as u32),
    num("BUSINESS_DAILY_LIMIT", 100, 0, 10_000, "suggested replies (model calls) per Telegram Business owner a UTC day", |c, n| c.business_daily_limit = n),
    flag("NEW_OPENS_TOPIC", true, "/new in a private chat with topics opens a fresh topic (on) or resets the current conversation (off)", |c, b| c.new_opens_topic = b),
    num("DRAFT_INTERVAL_MS", 500, 100, 10_000, "the least time between two draft updates of one answer", |c, n| c.draft_interval_ms = n),
    custom("SESSION_IDLE_HOURS", "24", "idle hours after which the next message starts a new session", |c, r| {
        if r.get("SESSION_IDLE_MINUTES").is_none() {
            c.session_idle_secs = (r.num("SESSION_IDLE_HOURS", 24) * 60) as i64 * 60;
        }
    }),
    custom("SESSION_IDLE_MINUTES", "unset", "the same in minutes; when set, replaces the hours", |c, r| {
        if r.get("SESSION_IDLE_MINUTES").is_some() {
            c.session_idle_secs = r.num("SESSION_IDLE_MINUTES", 24 * 60) as i64 * 60;
        }
    }),
    text("TIMEZONE", "UTC", "IANA zone of the prompt's time and reminders' default zone", |c, v| c.timezone = v),
    num("MAX_SCHEDULES_PER_CHAT", 25, 1, 1000, "active reminders per chat", |c, n| c.schedule_limits.max_active = n as usize),
    num("SCHEDULE_MIN_REPEAT_MINUTES", 15, 1, 10_080, "the shortest interval of a recurring reminder", |c, n| c.schedule_limits.min_repeat_minutes = n as i64),
    num("SCHEDULE_MAX_LATE_MINUTES", 360, 1, 10_080, "how late a missed run may still fire", |c, n| c.schedule_limits.max_late_ms = n as i64 * 60_000),
    num("SCHEDULE_FALLBACK_SECONDS", (crate::chat::schedule::FALLBACK_MS / 1000) as u64, 1, 3600, "when a failing reminder sends its own text", |c, n| c.schedule_limits.fallback_ms = n as i64 * 1000),
    flag("WEB_SEARCH", false, "Google Search grounding alongside the functions", |c, b| c.web_search = b),
    custom("SEARCH_PRICE_PER_1000", "the model's", "USD per 1,000 search queries for every model; unset or not a price, the model's own", |c, r| {
        c.search_price_per_1000 = r.get("SEARCH_PRICE_PER_1000").and_then(|v| crate::decimal::parse_f64(&v)).filter(|p| p.is_finite() && *p >= 0.0);
    }),
    text("BOT_NAME", "Edge", "the name in prompts and as a group trigger", |c, v| c.bot_name = v),
    text("BOT_USERNAME", "", "the bot's @username (the @ optional); empty: read with getMe", |c, v| c.bot_username = v.trim_start_matches('@').to_string()),
    flag("NAME_TRIGGER", true, "answer in groups when the bot's name appears as a word", |c, b| c.name_trigger = b),
    text("PERSONA", "default", "the persona file of prompts/personas/", |c, v| c.persona = v),
    list("ROLE_PROMPTS", "role files of prompts/roles/", |c, l| c.role_prompts = l),
    list("STICKER_SETS", "sticker sets the agent may send from", |c, l| c.sticker_sets = l),
    Setting { name: "DM_POLICY", doc: "who may talk to the bot in private chats; an unknown value fails closed (pairing)", kind: Kind::Choice {
        options: &["open", "allowlist", "pairing", "disabled"], default: "open", fallback: "pairing",
        set: |c, v| c.dm_policy = DmPolicy::parse(v).unwrap_or(DmPolicy::Pairing) } },
    ids("DM_ALLOWLIST", "users allowed in private chats under the allowlist policy", |c, l| c.dm_allowlist = l),
    ids("GROUP_ALLOWLIST", "groups the bot answers in; empty: all", |c, l| c.group_allowlist = l),
    ids("ADMIN_USER_IDS", "the operators (approve pairings, see /status details)", |c, l| c.admin_user_ids = l),
    text("MINIAPP_URL", "", "the Mini App's https address for the buttons under /memory and /reminders (npm run deploy sets it); empty: no buttons", |c, v| c.miniapp_url = v),
    num("MINIAPP_MAX_AGE_SECONDS", 86_400, 60, 604_800, "how old the Mini App's signed init data may be", |c, n| c.miniapp_max_age_secs = n as i64),
    num("MINIAPP_OPERATOR_MAX_AGE_SECONDS", 3_600, 60, 86_400, "how old an operator's Mini App init data may be for the operator's view (the admin API's routes)", |c, n| c.miniapp_operator_max_age_secs = n as i64),
    num("PAIRING_CODE_TTL_MINUTES", 60, 0, MAX, "how long a pairing code is valid", |c, n| c.pairing_code_ttl_secs = n as i64 * 60),
    num("MAX_TURN_ATTEMPTS", 10, 1, 50, "attempts of a model turn before the dead-letter queue", |c, n| c.max_turn_attempts = n as u32),
    num("MAX_SEND_ATTEMPTS", 8, 1, 50, "attempts of a Telegram send before the dead-letter queue", |c, n| c.max_send_attempts = n as u32),
    num("RETRY_BASE_MS", 2000, 100, 60_000, "first step of the retry backoff", |c, n| c.retry_base_ms = n),
    num("JOB_GRACE_MS", 300_000, 100, 86_400_000, "how late a retry job may be before the chat takes it over", |c, n| c.job_grace_ms = n),
    num("TURN_WATCHDOG_MS", 120_000, 100, 3_600_000, "how long a running turn goes before the chat object checks on it", |c, n| c.turn_watchdog_ms = n),
    flag("FETCH_ALLOW_PRIVATE", false, "let fetch_url reach loopback (tests, local development)", |c, b| c.fetch_allow_private = b),
    num("MEDIA_BYTES_PER_TURN", 10 << 20, 1, 15 << 20, "bytes of media one turn sends to the model", |c, n| c.media_bytes_per_turn = n),
    text("MEDIA_MODEL", "gemini-3.5-flash-lite", "the model that describes media", |c, v| c.media_model = v),
    custom("IMAGE_MODEL", "unset (no pictures)", "the image model `generate_image` uses; `on`: the current default (`core::image::DEFAULT_IMAGE_MODEL`); unset: no pictures", |c, r| {
        c.image_model = match r.get("IMAGE_MODEL").unwrap_or_default().trim() {
            "" | "off" | "0" | "false" | "no" => String::new(),
            "on" | "1" | "true" | "yes" | "default" => crate::image::DEFAULT_IMAGE_MODEL.to_string(),
            model => model.to_string(),
        };
    }),
    num("IMAGE_DAILY_LIMIT", 5, 0, MAX, "pictures per person per UTC day; 0: unlimited", |c, n| c.image_limits.per_person_per_day = n),
    num("IMAGE_CHAT_DAILY_LIMIT", 20, 0, MAX, "pictures per chat per UTC day; 0: unlimited", |c, n| c.image_limits.per_chat_per_day = n),
    num("MEDIA_DESCRIBE_BUDGET", 4, 0, 10, "new media a turn has described at most", |c, n| c.media_describe_budget = n as usize),
    num("MAX_FETCHES_PER_TURN", crate::fetch::DEFAULT_MAX_FETCHES_PER_TURN as u64, 0, 20, "requests fetch_url may make in one turn, redirect hops counted", |c, n| c.max_fetches_per_turn = n as usize),
    num("MAX_PLAN_STEPS", crate::chat::plan::DEFAULT_MAX_VISIBLE_STEPS as u64, 1, 50, "visible steps one answer may take", |c, n| c.max_plan_steps = n as usize),
    num("USER_TURNS_PER_HOUR", 60, 0, crate::limits::MAX_USER_TURNS_PER_HOUR, "reply-asking messages per person per hour (at most 1000); 0: unlimited", |c, n| c.budgets.user_turns_per_hour = n),
    num("CHAT_TOKENS_PER_DAY", 2_000_000, 0, MAX, "model tokens per chat per UTC day; 0: unlimited", |c, n| c.budgets.chat_tokens_per_day = n),
    num("GLOBAL_TOKENS_PER_DAY", 20_000_000, 0, MAX, "model tokens of the whole bot per UTC day; 0: unlimited", |c, n| c.budgets.global_tokens_per_day = n),
    num("RETENTION_DAYS", 30, 0, 36_500, "how long the tables that only grow keep rows; 0: forever", |c, n| c.retention_days = n as u32),
    num("REFUSED_UPDATES_PER_HOUR", 5, 1, 1000, "updates of one refused sender recorded per hour", |c, n| c.refused_updates_per_hour = n as u32),
    num("CONSOLIDATE_MIN_MESSAGES", 40, 0, MAX, "older messages needed before consolidation writes a summary", |c, n| c.consolidate_min_messages = n as usize),
    text("EMBEDDINGS_MODEL", "", "the embeddings model for vector recall; empty: full-text only", |c, v| c.embeddings_model = v),
    list("CREW", "crew persona names in speaking order", |c, l| c.crew = l),
    list("CREW_CHATS", "chat ids where the crew speaks, or *", |c, l| c.crew_chats = l),
    num("CREW_MAX_ROUNDS", 3, 1, 20, "full rounds a crew cycle takes at most", |c, n| c.crew_max_rounds = n as u32),
    flag("METRICS_LOG", false, "log one metrics line per invocation (npm run bench)", |c, b| c.metrics_log = b),
    custom("PRICES", "Google's published prices", "model=input/output[/cached] USD per million tokens, comma-separated, replacing the table", |c, r| c.prices = prices(r)),
];

/// Every variable name the worker reads (the edge looks each one up).
pub const VAR_NAMES: [&str; SETTINGS.len()] = names();

const fn names() -> [&'static str; SETTINGS.len()] {
    let mut out = [""; SETTINGS.len()];
    let mut i = 0;
    while i < SETTINGS.len() {
        out[i] = SETTINGS[i].name;
        i += 1;
    }
    out
}

impl Setting {
    /// Reads this setting from `r` and sets its field of `c`.
    pub fn apply(&self, c: &mut Config, r: &mut Reader) {
        match self.kind {
            Kind::Num { default, min, max, set } => set(c, r.num(self.name, default).clamp(min, max)),
            Kind::Flag { default, set } => set(c, r.flag(self.name, default)),
            Kind::Text { default, set } => set(c, r.get(self.name).unwrap_or_else(|| default.to_string())),
            Kind::List { set } => set(c, r.list(self.name)),
            Kind::Ids { set } => set(c, r.ids(self.name)),
            Kind::Choice { options, default, fallback, set } => set(c, r.choice(self.name, options, default, fallback)),
            Kind::Custom { set, .. } => set(c, r),
        }
    }

    /// The default as README's table writes it: a number, `true`/`false`, the text ("" for
    /// none), or the words of a custom setting.
    pub fn default_text(&self) -> String {
        match self.kind {
            Kind::Num { default, .. } => default.to_string(),
            Kind::Flag { default, .. } => default.to_string(),
            Kind::Text { default, .. } | Kind::Choice { default, .. } | Kind::Custom { default, .. } => default.to_string(),
            Kind::List { .. } | Kind::Ids { .. } => String::new(),
        }
    }
}

/// `PRICES`: the operator's table, else Google's published prices (`crate::gemini::prices`).
fn prices(r: &mut Reader) -> Vec<crate::gemini::prices::ModelPrice> {
    let mut prices = Vec::new();
    for entry in r.list("PRICES") {
        match price(&entry) {
            Some(p) => prices.push(p),
            None => r.warn(format!("PRICES: {entry:?} is not model=input/output or model=input/output/cached")),
        }
    }
    if prices.is_empty() {
        prices = crate::gemini::prices::default_prices();
    }
    prices
}

/// One `model=input/output` or `model=input/output/cached` entry.
fn price(entry: &str) -> Option<crate::gemini::prices::ModelPrice> {
    let (model, p) = entry.split_once('=')?;
    let mut n = p.split('/').map(|x| crate::decimal::parse_f64(x.trim()));
    let (i, o, c) = (n.next()??, n.next()??, n.next().map(|c| c.ok_or(())));
    let cached = match c {
        None => None,
        Some(Ok(c)) => Some(c),
        Some(Err(())) => return None,
    };
    n.next().is_none().then(|| crate::gemini::prices::ModelPrice::flat(model.trim(), i, o, cached))
}
