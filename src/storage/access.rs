//! Access: refusals (every refused message, and the budget notices), pairing codes, users'
//! access levels, and the budget charges and usage figures the budgets are checked against
//! (for a message, a scheduled run, a crew's continuation turn, a consolidation job).

use crate::args;
use crate::storage::{rows, Db};
use agent_core::limits::{self, Usage};
use serde::Deserialize;
use worker::Result;

/// Records a refusal; returns when the last one of this reason in this chat was recorded
/// before it (for "at most one notice per window"). Two round trips: read, then insert.
pub async fn record_refusal(db: &Db, chat_id: i64, user_id: Option<i64>, reason: &str, now: i64) -> Option<i64> {
    #[derive(Deserialize)]
    struct LastRefusal {
        created_at: Option<i64>,
    }
    let last: Option<LastRefusal> = db
        .first("SELECT MAX(created_at) AS created_at FROM refusals WHERE chat_id = ?1 AND reason = ?2", args![chat_id, reason])
        .await
        .ok()
        .flatten();
    if let Err(e) = insert_refusal(db, chat_id, user_id, reason, now).await {
        worker::console_error!("could not record a refusal: {e}");
    }
    last.and_then(|l| l.created_at)
}

/// Records a refusal, nothing else.
pub async fn insert_refusal(db: &Db, chat_id: i64, user_id: Option<i64>, reason: &str, now: i64) -> Result<()> {
    db.run(
        "INSERT INTO refusals (chat_id, user_id, reason, created_at) VALUES (?1, ?2, ?3, ?4)",
        args![chat_id, user_id, reason, now],
    )
    .await?;
    Ok(())
}

/// The code of the user's pairing that is still open, if any.
pub async fn open_pairing(db: &Db, user_id: i64, now: i64) -> Option<String> {
    #[derive(Deserialize)]
    struct PairingRow {
        code: String,
    }
    let row: Option<PairingRow> = db
        .first(
            "SELECT code FROM pairings WHERE user_id = ?1 AND expires_at > ?2 AND approved_at IS NULL
             ORDER BY created_at DESC LIMIT 1",
            args![user_id, now],
        )
        .await
        .ok()
        .flatten();
    row.map(|r| r.code)
}

pub struct NewPairing<'a> {
    pub code: &'a str,
    pub user_id: i64,
    pub chat_id: i64,
    pub name: &'a str,
    pub now: i64,
    pub expires_at: i64,
}

pub async fn insert_pairing(db: &Db, p: &NewPairing<'_>) -> Result<()> {
    db.run(
        "INSERT INTO pairings (code, user_id, chat_id, name, created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        args![p.code, p.user_id, p.chat_id, p.name, p.now, p.expires_at],
    )
    .await?;
    Ok(())
}

#[derive(Debug, Deserialize)]
pub struct Approved {
    pub user_id: i64,
    pub chat_id: i64,
}

/// Marks an open, unexpired code approved; `None` when there is no such code.
pub async fn approve_pairing(db: &Db, code: &str, by: &str, now: i64) -> Result<Option<Approved>> {
    db.first(
        "UPDATE pairings SET approved_at = ?2, approved_by = ?3
         WHERE code = ?1 AND approved_at IS NULL AND expires_at > ?2 RETURNING user_id, chat_id",
        args![code, now, by],
    )
    .await
}

#[derive(Debug, Clone, serde::Serialize, Deserialize)]
pub struct PairingLine {
    pub code: String,
    pub user_id: i64,
    pub name: Option<String>,
    pub created_at: i64,
    pub expires_at: i64,
}

/// Pairings waiting for approval, newest first.
pub async fn open_pairings(db: &Db, now: i64) -> Result<Vec<PairingLine>> {
    db.all(
        "SELECT code, user_id, name, created_at, expires_at FROM pairings
         WHERE approved_at IS NULL AND expires_at > ?1 ORDER BY created_at DESC LIMIT 100",
        args![now],
    )
    .await
}

/// Sets (or clears, with `None`) a user's access level.
pub async fn set_access(db: &Db, user_id: i64, access: Option<&str>, note: &str, now: i64) -> Result<()> {
    db.run(
        "INSERT INTO users (user_id, name, access, access_note, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (user_id) DO UPDATE SET access = excluded.access, access_note = excluded.access_note,
           updated_at = excluded.updated_at",
        args![user_id, user_id.to_string(), access, note, now],
    )
    .await?;
    Ok(())
}

#[derive(Deserialize, Default)]
struct UsageCounts {
    user_turns: Option<i64>,
    chat_tokens: Option<i64>,
    global_tokens: Option<i64>,
}

impl UsageCounts {
    fn usage(&self) -> Usage {
        let n = |v: Option<i64>| v.unwrap_or(0).max(0) as u64;
        Usage { user_turns_last_hour: n(self.user_turns), chat_tokens_today: n(self.chat_tokens), global_tokens_today: n(self.global_tokens) }
    }
}

/// The last budget notice of each kind in a chat (`reason` is `limits::Scope::reason`).
#[derive(Deserialize)]
pub struct NoticeRow {
    pub reason: String,
    pub at: Option<i64>,
}

/// The budget figures. Rows read stay bounded by the chat's own day, whatever the bot's: the
/// person's hour is their own row's charges (migration 0037) and their keyed charges; the
/// chat's tokens are its calls outside turns since midnight (`model_calls_by_chat`), its
/// turns since midnight, found by their key from each of the chat's conversations, and those
/// conversations' own calls (consolidation's, migration 0038; `usage::chat_tokens_sql`, ?5
/// ?6); the bot's one counter row (`token_days`, migration 0025); `?4` is
/// `limits::day_start`, the counter's key. The old form's rows (`budget_charges` without a
/// key, a turn's calls and consolidation's in `model_calls`) are read too: the previous release
/// writes them during a deploy (migrations 0037 and 0038 are additive steps).
fn select_usage() -> &'static str {
    static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SQL.get_or_init(|| {
        format!(
            "SELECT
       (SELECT COUNT(*) FROM budget_charges WHERE user_id = ?1 AND created_at > ?3)
         + (SELECT COUNT(*) FROM users u, json_each(u.charged) c WHERE u.user_id = ?1 AND u.charged IS NOT NULL AND c.value > ?3) AS user_turns,
       (SELECT COALESCE(SUM(total_tokens), 0) FROM model_calls WHERE chat_id = ?2 AND created_at >= ?4)
         + {} AS chat_tokens,
       (SELECT tokens FROM token_days WHERE day_ms = ?4) AS global_tokens",
            crate::storage::usage::chat_tokens_sql(5)
        )
    })
}

/// The arguments of `select_usage`.
fn usage_args(chat_id: i64, user_id: Option<i64>, now: i64) -> Vec<crate::storage::Arg> {
    let day = limits::day_start(now);
    let mut values = args![user_id, chat_id, now - limits::HOUR_MS, day];
    values.extend(crate::storage::usage::chat_tokens_args(chat_id, day));
    values
}
const SELECT_NOTICES: &str = "SELECT reason, MAX(created_at) AS at FROM refusals
     WHERE chat_id = ?1 AND created_at >= ?3
       AND (reason IN ('budget_chat', 'budget_global') OR (reason = 'budget_user' AND user_id = ?2))
     GROUP BY reason";

/// Budget figures for a person in a chat (the person's hour, the chat's and the bot's day).
pub async fn budget_usage(db: &Db, chat_id: i64, user_id: Option<i64>, now: i64) -> Result<Usage> {
    let c: Option<UsageCounts> = db.first(select_usage(), usage_args(chat_id, user_id, now)).await?;
    Ok(c.unwrap_or_default().usage())
}

/// The budget figures and the last notices, in one round trip.
pub async fn budget_state(db: &Db, chat_id: i64, user_id: Option<i64>, now: i64) -> Result<(Usage, Vec<NoticeRow>)> {
    let since = (now - limits::HOUR_MS).min(limits::day_start(now));
    let r = db
        .batch(vec![
            db.stmt(select_usage(), usage_args(chat_id, user_id, now))?,
            db.stmt(SELECT_NOTICES, args![chat_id, user_id, since])?,
        ])
        .await?;
    let c = r.first().and_then(|r| rows::<UsageCounts>(r).ok()).and_then(|v| v.into_iter().next()).unwrap_or_default();
    let notices = r.get(1).and_then(|r| rows::<NoticeRow>(r).ok()).unwrap_or_default();
    Ok((c.usage(), notices))
}

const SELECT_ACCESS: &str = "SELECT access FROM users WHERE user_id = ?1";

/// A person's stored access level (`users.access`) and the budget figures (their hour, the
/// chat's and the bot's day), in one round trip: what a scheduled run is checked against.
pub async fn run_state(db: &Db, chat_id: i64, user_id: Option<i64>, now: i64) -> Result<(Option<String>, Usage)> {
    #[derive(Deserialize)]
    struct Level {
        access: Option<String>,
    }
    let r = db
        .batch(vec![
            db.stmt(SELECT_ACCESS, args![user_id])?,
            db.stmt(select_usage(), usage_args(chat_id, user_id, now))?,
        ])
        .await?;
    let level = rows::<Level>(&r[0])?.into_iter().next().and_then(|l| l.access);
    let c = r.get(1).and_then(|r| rows::<UsageCounts>(r).ok()).and_then(|v| v.into_iter().next()).unwrap_or_default();
    Ok((level, c.usage()))
}

/// Who wrote a message of the chat (`None`: unknown, or no person).
pub async fn author_of(db: &Db, chat_id: i64, message_id: i64) -> Result<Option<i64>> {
    #[derive(Deserialize)]
    struct Author {
        user_id: Option<i64>,
    }
    let found: Option<Author> = db.first("SELECT user_id FROM messages WHERE chat_id = ?1 AND message_id = ?2", args![chat_id, message_id]).await?;
    Ok(found.and_then(|a| a.user_id))
}

/// Charges a person one reply-asking message, or one run of work taken before an await
/// (`key`: the run's own key, so the same run taken up again after a crash charges nothing
/// more; migration 0036). An unkeyed charge is a time added to the person's own row, whose
/// charges older than the hour are dropped by the same write (one row written, nothing for the
/// cron to delete; migration 0037); a keyed one a row of `budget_charges`, found by its key.
pub async fn charge(db: &Db, chat_id: i64, user_id: i64, now: i64, key: Option<&str>) -> Result<()> {
    match key {
        Some(key) => {
            db.run("INSERT OR IGNORE INTO budget_charges (chat_id, user_id, created_at, charge_key) VALUES (?1, ?2, ?3, ?4)", args![chat_id, user_id, now, key]).await?;
        }
        None => {
            db.run(CHARGE_ROW, args![user_id, now, now - limits::HOUR_MS, MAX_CHARGES_KEPT]).await?;
        }
    }
    Ok(())
}

/// At most this many of a person's charges of the hour are kept in their row (the newest): the
/// highest hourly budget that can be set, and what bounds the row.
const MAX_CHARGES_KEPT: i64 = limits::MAX_USER_TURNS_PER_HOUR as i64;

/// A charge at ?2 added to person ?1's row, with their charges up to ?3 (an hour before)
/// dropped; a person with no row yet gets one (their name is written by their next message).
const CHARGE_ROW: &str = "INSERT INTO users (user_id, name, updated_at, charged) VALUES (?1, '', ?2, json_array(?2))
     ON CONFLICT (user_id) DO UPDATE SET charged = json_insert(
       (SELECT json_group_array(value) FROM
          (SELECT value FROM json_each(COALESCE(users.charged, '[]')) WHERE value > ?3 ORDER BY value DESC LIMIT ?4 - 1)),
       '$[#]', ?2)";
