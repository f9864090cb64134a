//! The object's schedules: the one alarm also wakes for the chat's next schedule run
//! (`ChatState::next_schedule_ms`, read from D1, which holds the truth). A due run is decided
//! by the core (`agent_core::chat::schedule::on_due`: fire, late or not, or skip beyond the lateness
//! limit), started as a scheduled turn in the object's state, and claimed in D1 by that turn
//! (`bot::answer::answer_turn`), so it fires once whatever is retried or restarted.
//!
//! Invariants (INVARIANTS.md): "Schedules fire once, never lost", "A run is its creator's
//! request, made again" (`access::scheduled_run`).
//!
//! Also:
//! - One run per alarm, and never while a turn or plan is in progress (the state machine only
//!   says `Due::Schedules` when neither is).
//! - The hint is re-read after every change and after every firing; when D1 cannot be read
//!   the object looks again a minute later, never in a loop.

use super::ChatObject;
use crate::bot::access;
use crate::config::{now_ms, Ctx};
use crate::storage;
use crate::storage::schedules::DueRow;
use agent_core::chat_state::ScheduledRun;
use agent_core::conversation::{ChatKind, ConvKey};
use agent_core::access::authority::RunGate;
use agent_core::chat::schedule::{self, DueRun};

/// How long to wait before looking again when the schedules cannot be read.
const RETRY_READ_MS: i64 = 60_000;

impl ChatObject {
    /// Re-reads the chat's next schedule run from D1, stores it in the state and re-arms.
    pub(super) async fn refresh_schedules(&self, ctx: &Ctx) -> Option<i64> {
        let (conv, _) = self.conv()?;
        let next = match storage::schedules::next_run(&ctx.db(), &conv).await {
            Ok(next) => next,
            Err(e) => {
                worker::console_error!("chat {conv}: schedules could not be read: {e}");
                Some(now_ms() + RETRY_READ_MS)
            }
        };
        self.update(|st| st.set_next_schedule(next)).await;
        next
    }

    /// The alarm's `Due::Schedules`: skips runs too late to be useful, fires the first one
    /// that is not, then re-reads the next run.
    pub(super) async fn fire_schedules(&self, ctx: &Ctx) {
        let Some((conv, kind)) = self.conv() else {
            self.update(|st| st.set_next_schedule(None)).await;
            return;
        };
        let now = now_ms();
        let db = ctx.db();
        let due = match storage::schedules::due(&db, &conv, now).await {
            Ok(due) => due,
            Err(e) => {
                worker::console_error!("chat {conv}: due schedules could not be read: {e}");
                self.update(|st| st.set_next_schedule(Some(now + RETRY_READ_MS))).await;
                return;
            }
        };
        for row in due {
            match schedule::on_due(&crate::config::tz::Intl, row.next_run_ms, row.repeat.as_deref(), &row.timezone, now, &ctx.cfg.schedule_limits) {
                DueRun::Skip { late_ms, next_ms } => {
                    worker::console_warn!(
                        "chat {conv}: schedule #{} skipped: {} minutes late, over SCHEDULE_MAX_LATE_MINUTES",
                        row.id,
                        late_ms / 60_000
                    );
                    if let Err(e) = storage::schedules::skip(&db, row.id, row.next_run_ms, next_ms, now).await {
                        // Still due in D1: look again later, never in a loop.
                        worker::console_error!("chat {conv}: schedule #{} could not be skipped: {e}", row.id);
                        self.update(|st| st.set_next_schedule(Some(now + RETRY_READ_MS))).await;
                        return;
                    }
                }
                DueRun::Fire { late_ms, next_ms } => {
                    // Its creator's access and budget, asked again now.
                    let Some(gate) = self.admit_run(ctx, &conv, kind, &row, next_ms, now).await else { return };
                    if matches!(gate, RunGate::Cancel(_) | RunGate::Skip) {
                        continue;
                    }
                    let run = ScheduledRun {
                        schedule_id: row.id,
                        due_ms: row.next_run_ms,
                        next_ms,
                        late_ms,
                        text: row.text,
                        timezone: row.timezone,
                        repeat: row.repeat,
                        creator_user_id: row.creator_user_id,
                    };
                    let conv_s = conv.to_string();
                    let nonce = u64::from_le_bytes(crate::config::random_bytes::<8>());
                    if gate == RunGate::TextOnly {
                        self.send_without_model(ctx, &conv_s, nonce, run, now).await;
                        break;
                    }
                    // In the state first: from here a restart resumes this run (the turn claims
                    // it in D1 on every attempt, idempotently).
                    let turn = self.update(|st| st.begin_scheduled_turn(now, &conv_s, nonce, run)).await;
                    worker::console_log!("chat {conv}: schedule #{} fires (turn {})", row.id, turn.turn_id);
                    self.drive_turn(ctx, turn).await;
                    break;
                }
            }
        }
        self.refresh_schedules(ctx).await;
    }

    /// What a due run may do (`access::scheduled_run`): a run whose creator or chat no longer
    /// passes the access policy cancels its schedule; a recurring one over its creator's hourly
    /// budget is skipped like a run too late (it runs next time). Both are written here; a
    /// one-off over the creator's hour is `TextOnly` (its own text, no model call).
    /// `None`: the write failed; the object looks again a minute later.
    async fn admit_run(&self, ctx: &Ctx, conv: &ConvKey, kind: ChatKind, row: &DueRow, next_ms: Option<i64>, now: i64) -> Option<RunGate> {
        let key = format!("sched:{}:{}", row.id, row.next_run_ms);
        let gate = access::scheduled_run(ctx, conv, kind, row.creator_user_id, next_ms.is_some(), &key).await;
        let written = match &gate {
            RunGate::Cancel(reason) => {
                worker::console_warn!("chat {conv}: schedule #{} cancelled: its creator or the chat is refused now ({})", row.id, reason.as_str());
                storage::schedules::admin_cancel(&ctx.db(), row.id, now).await.map(|_| ())
            }
            RunGate::Skip => {
                worker::console_warn!("chat {conv}: schedule #{} skipped: its creator is over their hourly budget", row.id);
                storage::schedules::skip(&ctx.db(), row.id, row.next_run_ms, next_ms, now).await
            }
            RunGate::Fire | RunGate::TextOnly => Ok(()),
        };
        if let Err(e) = written {
            worker::console_error!("chat {conv}: schedule #{} could not be updated: {e}", row.id);
            self.update(|st| st.set_next_schedule(Some(now + RETRY_READ_MS))).await;
            return None;
        }
        Some(gate)
    }

    /// Over the token budget: the run's text goes out as it was set, with no model call. Owed
    /// in the state before the run is claimed (a crash between sends it and may fire the run
    /// once more; never neither), then claimed, then sent like an apology (at most once).
    async fn send_without_model(&self, ctx: &Ctx, conv: &str, nonce: u64, run: ScheduledRun, now: i64) {
        let turn_id = agent_core::chat_state::turn_id(conv, now, nonce);
        worker::console_warn!("chat {conv}: schedule #{} fires over the token budget: its text, no model call", run.schedule_id);
        self.update(|st| st.owe_text(&turn_id, run.text.clone(), now)).await;
        match storage::schedules::claim(&ctx.db(), run.schedule_id, run.due_ms, run.next_ms, &turn_id, now).await {
            Ok(true) => {}
            Ok(false) => {
                self.update(|st| st.apology_done(&turn_id)).await;
                return;
            }
            Err(e) => worker::console_error!("chat {conv}: schedule #{} could not be claimed: {e}", run.schedule_id),
        }
        self.send_owed_messages(ctx).await;
    }
}
