//! The object's schedules: the one alarm also wakes for the chat's next schedule run
//! (`ChatState::next_schedule_ms`, read from D1, which holds the truth). A due run is the
//! core's loop (`chat_state::schedule_due::run`, with the object as its port, `Scheduling`):
//! what it does (`chat::schedule::on_due`: fire, late or not, or skip beyond the lateness
//! limit; its creator's gate), started as a scheduled turn in the object's state, and claimed
//! in D1 by that turn (`bot::answer::answer_turn`), so it fires once whatever is retried or
//! restarted.
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
use agent_core::access::authority::RunGate;
use agent_core::chat_state::schedule_due::{self, DueSchedule, ScheduleHost, REREAD_MS};
use agent_core::chat_state::{ScheduledRun, TurnRun};
use agent_core::conversation::{ChatKind, ConvKey};

impl ChatObject {
    /// Re-reads the chat's next schedule run from D1, stores it in the state and re-arms.
    pub(super) async fn refresh_schedules(&self, ctx: &Ctx) -> Option<i64> {
        let (conv, _) = self.conv()?;
        let next = match storage::schedules::next_run(&ctx.db(), &conv).await {
            Ok(next) => next,
            Err(e) => {
                worker::console_error!("chat {conv}: schedules could not be read: {e}");
                Some(now_ms() + REREAD_MS)
            }
        };
        self.update(|st| st.set_next_schedule(next)).await;
        next
    }

    /// The alarm's `Due::Schedules`: the core's loop over this object.
    pub(super) async fn fire_schedules(&self, ctx: &Ctx) {
        let Some((conv, kind)) = self.conv() else {
            self.update(|st| st.set_next_schedule(None)).await;
            return;
        };
        let host = Scheduling { obj: self, ctx, conv, kind };
        schedule_due::run(&host, &crate::config::tz::Intl, &ctx.cfg.schedule_limits).await;
    }
}

/// The chat object as a schedule run's port (`agent_core::chat_state::schedule_due::ScheduleHost`).
struct Scheduling<'a> {
    obj: &'a ChatObject,
    ctx: &'a Ctx,
    conv: ConvKey,
    kind: ChatKind,
}

state_port!(Scheduling);

impl ScheduleHost for Scheduling<'_> {
    fn new_turn(&self) -> (String, u64) {
        (self.conv.to_string(), u64::from_le_bytes(crate::config::random_bytes::<8>()))
    }
    async fn due(&self, now: i64) -> Option<Vec<DueSchedule>> {
        storage::schedules::due(&self.ctx.db(), &self.conv, now)
            .await
            .inspect_err(|e| worker::console_error!("chat {}: due schedules could not be read: {e}", self.conv))
            .ok()
    }
    async fn skip(&self, due: &DueSchedule, late_ms: i64, next_ms: Option<i64>) -> bool {
        let conv = &self.conv;
        worker::console_warn!("chat {conv}: schedule #{} skipped: {} minutes late, over SCHEDULE_MAX_LATE_MINUTES", due.id, late_ms / 60_000);
        storage::schedules::skip(&self.ctx.db(), due.id, due.next_run_ms, next_ms, now_ms())
            .await
            .inspect_err(|e| worker::console_error!("chat {conv}: schedule #{} could not be skipped: {e}", due.id))
            .is_ok()
    }
    /// What a due run may do (`access::scheduled_run`): a run whose creator or chat no longer
    /// passes the access policy cancels its schedule; a recurring one over its creator's
    /// hourly budget is skipped like a run too late (it runs next time). Both are written
    /// here; a one-off over the creator's hour is `TextOnly` (its own text, no model call).
    async fn gate(&self, due: &DueSchedule, next_ms: Option<i64>) -> Option<RunGate> {
        let (ctx, conv, now) = (self.ctx, &self.conv, now_ms());
        let key = format!("sched:{}:{}", due.id, due.next_run_ms);
        let gate = access::scheduled_run(ctx, conv, self.kind, due.creator_user_id, next_ms.is_some(), &key).await;
        let written = match &gate {
            RunGate::Cancel(reason) => {
                worker::console_warn!("chat {conv}: schedule #{} cancelled: its creator or the chat is refused now ({})", due.id, reason.as_str());
                storage::schedules::admin_cancel(&ctx.db(), due.id, now).await.map(|_| ())
            }
            RunGate::Skip => {
                worker::console_warn!("chat {conv}: schedule #{} skipped: its creator is over their hourly budget", due.id);
                storage::schedules::skip(&ctx.db(), due.id, due.next_run_ms, next_ms, now).await
            }
            RunGate::Fire | RunGate::TextOnly => Ok(()),
        };
        written.inspect_err(|e| worker::console_error!("chat {conv}: schedule #{} could not be updated: {e}", due.id)).ok().map(|_| gate)
    }
    async fn claim(&self, run: &ScheduledRun, turn_id: &str) -> bool {
        match storage::schedules::claim(&self.ctx.db(), run.schedule_id, run.due_ms, run.next_ms, turn_id, now_ms()).await {
            Ok(ours) => ours,
            Err(e) => {
                worker::console_error!("chat {}: schedule #{} could not be claimed: {e}", self.conv, run.schedule_id);
                true
            }
        }
    }
    async fn drive_turn(&self, turn: TurnRun) {
        self.obj.drive_turn(self.ctx, turn).await;
    }
    async fn send_owed_messages(&self) {
        self.obj.send_owed_messages(self.ctx).await;
    }
    async fn refresh(&self) {
        self.obj.refresh_schedules(self.ctx).await;
    }
}
