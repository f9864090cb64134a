//! The turn's ports at the edge: the tools the model can call that return results
//! (`fetch_url`, `search_memory`, `remember`, `set_plan`, the schedule functions) and the clock.
//!
//! Invariants (INVARIANTS.md): "A turn is bounded" (`TURN_TOOL_BUDGET`, here tools and
//! typing). Past the budget a tool answers with an error the model can read, so the model
//! calls, the turn's D1 round trips and the first plan steps still fit.

use crate::bot::memory;
use crate::config::{now_ms, Ctx};
use crate::outbound::net;
use crate::storage;
use agent_core::conversation::ConvKey;
use agent_core::fetch::FetchResponse;
use agent_core::chat::schedule;
use agent_core::turn::{Clock, ToolPort};
use std::time::Duration;

/// Subrequests a turn may spend on tools and typing; the model calls, the turn's D1 round
/// trips and the first plan steps fit in the rest of the invocation's budget.
pub const TURN_TOOL_BUDGET: u32 = 24;

pub struct WorkerClock;
/// What `schedule_message` answers in a group turn whose messages come from several people.
const MIXED_BURST: &str = "not set: in a group a reminder belongs to the one person who asked, and these messages come from several people; ask the person to ask again on their own";

impl Clock for WorkerClock {
    fn now_ms(&self) -> i64 {
        now_ms()
    }
}

/// The tools the model can call that return results.
pub struct EdgeTools<'a> {
    pub ctx: &'a Ctx,
    pub conv: ConvKey,
    /// The people present (for the memory scope of `search_memory`).
    pub people: Vec<i64>,
    /// Who the target message is from (a new schedule's creator in a private chat when the
    /// burst has no one sender).
    pub creator: Option<i64>,
    /// On whose authority the turn's writes act: the one sender of its burst (for a scheduled
    /// run, its creator; `None` when senders mix: `agent_core::access::authority`). In a group only
    /// they cancel, and only their own reminders; a note records them as its supplier.
    pub speaker: Option<i64>,
    /// The turn (a schedule it creates is created once, however often the turn is retried).
    pub turn_id: String,
    /// A group chat: people cancel only the schedules they set, in a burst of their own
    /// (operators any).
    pub group: bool,
}

impl EdgeTools<'_> {
    /// Refuses a tool call once the turn has spent its share of the invocation's subrequests.
    fn within_budget(&self) -> Result<(), String> {
        if self.ctx.meter.count() + 2 > TURN_TOOL_BUDGET {
            return Err("no more tool calls in this turn; answer with what you have".into());
        }
        Ok(())
    }
}

impl ToolPort for EdgeTools<'_> {
    async fn fetch_url(&self, url: &str) -> Result<FetchResponse, String> {
        self.within_budget()?;
        // One hop; the core checks the URL before and every redirect after.
        net::get_capped(
            &self.ctx.meter,
            url,
            &[("user-agent", "edge-agent/0.1 (+https://github.com)"), ("accept", "text/html,text/plain,*/*")],
            Duration::from_secs(10),
        )
        .await
    }

    async fn search_memory(&self, query: &str) -> Vec<String> {
        if self.within_budget().is_err() {
            return Vec::new();
        }
        memory::search(self.ctx, &self.conv, &self.people, query, 8).await.unwrap_or_default()
    }

    /// A note about a person only if that person has written in this chat.
    async fn remember(&self, content: &str, about_user_id: Option<i64>) -> Result<i64, String> {
        self.within_budget()?;
        let supplied_by = about_user_id.and(self.speaker);
        match storage::notes::insert_note(&self.ctx.db(), self.conv.chat_id, about_user_id, content, "agent", supplied_by, now_ms()).await {
            Ok(Some(id)) => Ok(id),
            Ok(None) => Err(format!(
                "not stored: user {} has not written in this chat; a note can only be about someone in this conversation (or leave about_user_id out)",
                about_user_id.unwrap_or_default()
            )),
            Err(e) => Err(e.to_string()),
        }
    }

    async fn set_plan(&self, content: &str) -> Result<(), String> {
        self.within_budget()?;
        storage::conversations::set_plan(&self.ctx.db(), &self.conv, content, now_ms()).await.map_err(|e| e.to_string())
    }

    /// Planned by the core over the chat's zone (else `TIMEZONE`) and its active count; the
    /// insert checks the limit again in the same statement.
    async fn schedule(&self, request: &schedule::Request) -> Result<serde_json::Value, String> {
        self.within_budget()?;
        if agent_core::access::policy::is_api_chat_id(self.conv.chat_id) {
            return Err("schedules are not available in API conversations (nothing could deliver them)".into());
        }
        // A new reminder is its creator's: in a group the one person who wrote the turn's whole
        // burst (a burst mixing senders sets nothing: Bob's request followed by Alice's "ok"
        // must not make Alice its creator, charged for its runs and untouched when Bob is
        // blocked); in a private chat the person, as before.
        let creator = match (self.group, self.speaker) {
            (_, Some(who)) => Some(who),
            (true, None) => return Err(MIXED_BURST.into()),
            (false, None) => self.creator,
        };
        let db = self.ctx.db();
        let limits = self.ctx.cfg.schedule_limits;
        let (zone, active) = storage::schedules::zone_and_count(&db, self.conv.chat_id).await.map_err(|e| e.to_string())?;
        let zone = zone.unwrap_or_else(|| self.ctx.cfg.timezone.clone());
        let now = chrono::DateTime::from_timestamp_millis(now_ms()).unwrap_or_default();
        let new = schedule::plan(&crate::config::tz::Intl, request, now, &zone, &limits, active).map_err(|e| e.to_string())?;
        match storage::schedules::insert(&db, &self.conv, creator, &self.turn_id, &new, limits.max_active, now_ms()).await {
            Ok(Some(id)) => Ok(schedule::created_value(&crate::config::tz::Intl, id, &new)),
            Ok(None) => Err(schedule::ScheduleError::TooMany(limits.max_active).to_string()),
            Err(e) => Err(e.to_string()),
        }
    }

    async fn list_schedules(&self) -> Result<serde_json::Value, String> {
        self.within_budget()?;
        let items = storage::schedules::list_active(&self.ctx.db(), &self.conv).await.map_err(|e| e.to_string())?;
        Ok(schedule::list_value(&crate::config::tz::Intl, &items))
    }

    async fn cancel_schedule(&self, id: i64) -> Result<serde_json::Value, String> {
        self.within_budget()?;
        // The burst's own sender, not the target message's: a burst mixing senders lends
        // nobody's authority (`who` 0 matches no creator).
        let operator = self.speaker.is_some_and(|u| self.ctx.cfg.admin_user_ids.contains(&u));
        let who = (self.group && !operator).then_some(self.speaker.unwrap_or_default());
        match storage::schedules::cancel(&self.ctx.db(), &self.conv, id, who, now_ms()).await {
            Ok(true) => Ok(serde_json::json!({"ok": true, "cancelled": id})),
            Ok(false) if who.is_some() => Err(format!("no active schedule #{id} in this chat that the person asking set")),
            Ok(false) => Err(format!("no active schedule #{id} in this chat")),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Declared only in an owner's own private chat (`request::build`), so the chat is theirs.
    async fn business_digest(&self) -> Result<serde_json::Value, String> {
        if self.group {
            return Err("not available here".into());
        }
        self.within_budget()?;
        // A digest takes about a dozen subrequests (D1's reads and the charge, the model, the
        // send); with fewer left, only whether this turn's digest already went is looked up.
        let can_make = self.ctx.meter.count() + DIGEST_SUBREQUESTS <= TURN_TOOL_BUDGET;
        Ok(crate::bot::business_digest::for_model(self.ctx, &self.conv, &self.turn_id, can_make).await)
    }
}

/// What `business_digest` may spend of a turn's subrequests.
const DIGEST_SUBREQUESTS: u32 = 12;

/// Fresh randomness for the turn's fence boundaries (a page must not be able to guess them).
pub fn fence_seed() -> u128 {
    let mut bytes = [0u8; 16];
    if let Err(e) = getrandom::fill(&mut bytes) {
        worker::console_warn!("no randomness for the fence ({e}); using the clock");
        return (now_ms() as u128) ^ (js_sys::Math::random().to_bits() as u128) << 64;
    }
    u128::from_le_bytes(bytes)
}
