//! The chat object: one Durable Object per conversation (chat or forum topic). It holds the
//! conversation's short-lived state (`agent_core::chat_state::ChatState`: debounce, the turn in
//! flight, the reply plan) and carries out what that state machine decides.
//!
//! Routes (from the worker only): `POST /inbox` a reply-asking message or reaction,
//! `POST /job` a retry job (answers a `JobOutcome`), `POST /dead` a dead-lettered job,
//! `GET /state` the state (for tests and debugging).
//!
//! Invariants:
//! - Access policy and commands are applied before anything else; neither calls the model.
//! - The state lives in memory and is written to storage after every change; every handler
//!   re-reads it after each await, because other requests interleave at awaits.
//! - `in_flight` is memory only: a stored turn that this instance is not running belonged to
//!   a dead instance and is recovered.
//! - The alarm handler never fails once the state is loaded (alarms are retried on error): it
//!   logs and re-arms.
//! - Every waiting state has a deadline (`core::chat_state`): a lost retry job never silences
//!   the chat; the alarm is never armed in the past in a loop.
//! - A stored state that does not decode is logged, kept aside under `state.unreadable`, and
//!   replaced by a fresh state (turn ids are random, so no outbox key can repeat). A storage
//!   read error is not that: the handler fails and is retried; nothing is overwritten.
//! - Plan steps run under a guard: deliver asks the state machine, right before every
//!   Telegram call, whether the step is still current; a cancelled step is never sent.
//! - The user's apology is owed in the state and sent by the alarm until it goes out.

pub mod access;
pub mod agent;
pub mod commands;
pub mod deliver;
pub mod memory;
pub mod usage;

use crate::config::{now_ms, random_unit, Ctx};
use crate::outbound::{objects, queues};
use crate::storage;
use agent_core::chat_state::{self, ChatState, Due, Finish, Signal, SignalOutcome, Timing};
use agent_core::commands as core_commands;
use agent_core::conversation::{ChatKind, ConvKey, InboundMessage, InboundReaction};
use agent_core::gating::Trigger;
use agent_core::jobs::{backoff_ms, max_attempts, next_move, Job, JobOutcome, NextMove};
use agent_core::plan::{Step, StepOutcome};
use agent_core::status::TurnStatus;
use serde::{Deserialize, Serialize};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use worker::{durable_object, wasm_bindgen, DurableObject, Env, Method, Request, Response, Result, State};

/// What the webhook hands to a chat object.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Inbox {
    pub update_id: i64,
    pub trigger: Trigger,
    pub message: Option<InboundMessage>,
    pub reaction: Option<InboundReaction>,
    /// `users.access` of the sender, read in the webhook's batch.
    pub access: Option<String>,
    pub bot_username: String,
}

pub const APOLOGY: &str =
    "Sorry, I couldn't answer that because of a technical problem on my side. Please try again in a little while.";

/// Hands an inbox item to its chat object; fails if the object did not accept it (the webhook
/// then answers 500 and Telegram redelivers).
pub async fn send_inbox(ctx: &Ctx, conv: &ConvKey, inbox: &Inbox) -> Result<()> {
    objects::call_ok(ctx, conv, "/inbox", inbox).await.map(|_| ())
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Meta {
    conv: String,
    kind: ChatKind,
}

/// A step that is waiting for a retry job.
struct StepRetry {
    turn_id: String,
    step: usize,
    error: String,
    after_ms: Option<u64>,
}

#[durable_object]
pub struct ChatObject {
    state: State,
    env: Env,
    chat: Rc<RefCell<Option<ChatState>>>,
    meta: RefCell<Option<Meta>>,
    in_flight: Cell<bool>,
    advancing: Cell<bool>,
    /// Update ids being handled right now (a redelivery storm arrives concurrently).
    handling: RefCell<std::collections::HashSet<i64>>,
}

impl DurableObject for ChatObject {
    fn new(state: State, env: Env) -> Self {
        ChatObject {
            state,
            env,
            chat: Rc::new(RefCell::new(None)),
            meta: RefCell::new(None),
            in_flight: Cell::new(false),
            advancing: Cell::new(false),
            handling: RefCell::new(Default::default()),
        }
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        let ctx = Ctx::new(self.env.clone());
        self.load().await?;
        let url = req.url()?;
        if let Some(conv) = url.query_pairs().find(|(k, _)| k == "conv").map(|(_, v)| v.to_string()) {
            self.remember_conv(&conv, None).await;
        }
        match (req.method(), url.path()) {
            (Method::Post, "/inbox") => {
                let inbox: Inbox = req.json().await?;
                self.inbox(&ctx, inbox).await;
                Response::ok("ok")
            }
            (Method::Post, "/job") => {
                let job: Job = req.json().await?;
                let outcome = self.job(&ctx, job).await;
                Response::from_json(&outcome)
            }
            (Method::Post, "/chat") => {
                let body: serde_json::Value = req.json().await?;
                let text = body.get("text").and_then(serde_json::Value::as_str).unwrap_or_default().to_string();
                let name = body.get("name").and_then(serde_json::Value::as_str).unwrap_or("api").to_string();
                let (status, value) = self.api_chat(&ctx, &text, &name).await;
                Ok(Response::from_json(&value)?.with_status(status))
            }
            (Method::Post, "/dead") => {
                let job: Job = req.json().await?;
                self.dead(&ctx, job).await;
                Response::ok("ok")
            }
            (Method::Get, "/state") => {
                self.ensure_loaded().await;
                Response::from_json(&self.chat.borrow().clone().unwrap_or_default())
            }
            _ => Response::error("not found", 404),
        }
    }

    async fn alarm(&self) -> Result<Response> {
        let ctx = Ctx::new(self.env.clone());
        self.load().await?; // an alarm that fails is retried by the platform
        self.on_alarm(&ctx).await;
        Response::ok("ok")
    }
}

impl ChatObject {
    // ---- state ------------------------------------------------------------------------------

    /// Loads the stored state once per instance. Every handler calls this first: a storage
    /// error fails the request (Telegram redelivers the webhook, the queue retries the job, the
    /// platform retries the alarm) and never puts a fresh state over the stored one.
    async fn load(&self) -> Result<()> {
        if self.chat.borrow().is_some() {
            return Ok(());
        }
        let storage = self.state.storage();
        let raw: Option<serde_json::Value> = storage.get("state").await.inspect_err(|e| {
            worker::console_error!("chat state could not be read from storage: {e}");
        })?;
        let meta: Option<Meta> = storage.get("meta").await.ok().flatten();
        if self.chat.borrow().is_none() {
            let loaded = chat_state::load(raw.clone());
            if let Some(error) = &loaded.error {
                // Not a silent reset: logged, the old value kept for the operator, and the
                // object goes on with a fresh state (turn ids cannot collide with the old ones).
                worker::console_error!("chat object: {error}; starting from a fresh state");
                if let Some(raw) = &raw {
                    let _ = storage.put("state.unreadable", raw).await;
                }
            }
            if self.chat.borrow().is_none() {
                *self.chat.borrow_mut() = Some(loaded.state);
            }
        }
        if self.meta.borrow().is_none() {
            *self.meta.borrow_mut() = meta;
        }
        Ok(())
    }

    /// The state is loaded by every handler's first step (`load`); this only repeats it.
    async fn ensure_loaded(&self) {
        if let Err(e) = self.load().await {
            worker::console_error!("chat state not loaded: {e}");
        }
    }

    /// Reads the state.
    async fn with<R>(&self, f: impl FnOnce(&ChatState) -> R) -> R {
        self.ensure_loaded().await;
        let mut guard = self.chat.borrow_mut();
        f(guard.get_or_insert_with(ChatState::default))
    }

    /// Changes the state and writes it to storage.
    async fn update<R>(&self, f: impl FnOnce(&mut ChatState) -> R) -> R {
        self.ensure_loaded().await;
        let (r, snapshot) = {
            let mut guard = self.chat.borrow_mut();
            let st = guard.get_or_insert_with(ChatState::default);
            let r = f(st);
            (r, st.clone())
        };
        if let Err(e) = self.state.storage().put("state", &snapshot).await {
            worker::console_error!("chat state not saved: {e}");
        }
        r
    }

    async fn remember_conv(&self, conv: &str, kind: Option<ChatKind>) {
        self.ensure_loaded().await;
        let current = self.meta.borrow().clone();
        let kind = kind.or(current.as_ref().map(|m| m.kind)).unwrap_or(if conv.starts_with('-') { ChatKind::Group } else { ChatKind::Private });
        if current.as_ref().is_some_and(|m| m.conv == conv && m.kind == kind) {
            return;
        }
        let meta = Meta { conv: conv.to_string(), kind };
        *self.meta.borrow_mut() = Some(meta.clone());
        let _ = self.state.storage().put("meta", &meta).await;
    }

    fn conv(&self) -> Option<(ConvKey, ChatKind)> {
        let meta = self.meta.borrow().clone()?;
        Some((ConvKey::parse(&meta.conv)?, meta.kind))
    }

    fn timing(ctx: &Ctx) -> Timing {
        Timing {
            debounce_ms: ctx.cfg.debounce_ms as i64,
            debounce_max_ms: ctx.cfg.debounce_max_ms as i64,
            watchdog_ms: ctx.cfg.turn_watchdog_ms as i64,
            job_grace_ms: ctx.cfg.job_grace_ms as i64,
        }
    }

    /// When a retry job for attempt `attempt` that was asked to wait `after_ms` counts as lost:
    /// the longest backoff it could get, plus the grace.
    fn job_deadline(ctx: &Ctx, attempt: u32, after_ms: Option<u64>) -> i64 {
        let longest = backoff_ms(attempt, ctx.cfg.retry_base_ms, 300_000, 1.0).max(after_ms.unwrap_or(0)).min(43_200_000);
        now_ms() + longest as i64 + 1000 + ctx.cfg.job_grace_ms as i64
    }

    /// Sets the one alarm to the next time the state needs attention.
    async fn arm(&self, ctx: &Ctx) {
        let in_flight = self.in_flight.get();
        let now = now_ms();
        let wake = self.with(|st| st.next_wake(&Self::timing(ctx), in_flight, now)).await;
        let storage = self.state.storage();
        let result = match wake {
            // An i64 would be an offset; the state machine works in absolute times.
            Some(at) => {
                // Due now (work the alarm will do) is the only time in the past next_wake gives.
                let when = chrono::DateTime::from_timestamp_millis(at.max(now + 1)).unwrap_or_default();
                storage.set_alarm(when).await
            }
            None => storage.delete_alarm().await,
        };
        if let Err(e) = result {
            worker::console_error!("could not set the alarm: {e}");
        }
    }

    // ---- inbox ------------------------------------------------------------------------------

    async fn inbox(&self, ctx: &Ctx, inbox: Inbox) {
        // Concurrent copies of one update: only the first is handled.
        if !self.handling.borrow_mut().insert(inbox.update_id) {
            return;
        }
        self.handle_inbox(ctx, &inbox).await;
        self.handling.borrow_mut().remove(&inbox.update_id);
    }

    async fn handle_inbox(&self, ctx: &Ctx, inbox: &Inbox) {
        let kind = inbox.message.as_ref().map(|m| m.chat.kind).or(inbox.reaction.as_ref().map(|r| r.chat.kind));
        let conv = match (&inbox.message, &inbox.reaction, self.conv()) {
            (Some(m), _, _) => m.conv,
            (None, _, Some((c, _))) => c,
            (None, Some(r), None) => ConvKey::chat(r.chat.id),
            (None, None, None) => return,
        };
        self.remember_conv(&conv.to_string(), kind).await;
        let kind = kind.unwrap_or(ChatKind::Private);

        let (user_id, name, message_id) = match (&inbox.message, &inbox.reaction) {
            (Some(m), _) => (m.speaker.user_id, m.speaker.name.clone(), m.message_id),
            (None, Some(r)) => (r.speaker.user_id, r.speaker.name.clone(), r.message_id),
            _ => return,
        };
        // Redelivered: the signal is already in; nothing else is done again.
        if self.with(|st| st.seen.contains(&inbox.update_id)).await {
            return;
        }
        if !access::admit(ctx, &conv, kind, user_id, &name, inbox.access.as_deref(), message_id).await {
            // Remember the update so a redelivery does not refuse (and notify) twice.
            self.update(|st| st.mark_seen(inbox.update_id)).await;
            return;
        }
        if let Some(m) = &inbox.message {
            if let Some(cmd) = core_commands::parse(m, &inbox.bot_username) {
                let is_new = matches!(cmd, core_commands::Command::New);
                self.update(|st| {
                    st.mark_seen(inbox.update_id);
                    if is_new {
                        // A new session: forget the burst and the plan of the old one.
                        st.pending = None;
                        st.plan = None;
                    }
                })
                .await;
                commands::run(ctx, &conv, m, cmd).await;
                self.arm(ctx).await;
                return;
            }
        }
        // Model budgets (per person, chat and bot): over one, no turn and one notice per window.
        if !access::within_budget(ctx, &conv, user_id, message_id).await {
            self.update(|st| st.mark_seen(inbox.update_id)).await;
            return;
        }
        // The debounce runs on this object's clock: when it learned of the message. (Telegram
        // sends a chat's updates one at a time, each after the previous one was acknowledged,
        // so under load the gap it sees between messages is at least the acknowledgement time.)
        let signal = Signal { update_id: inbox.update_id, target_message_id: Some(message_id), trigger: inbox.trigger, at_ms: now_ms() };
        match self.update(|st| st.signal(&signal)).await {
            SignalOutcome::Duplicate => {}
            SignalOutcome::Accepted { cancelled } => {
                if let Some((turn_id, from)) = cancelled {
                    self.record_cancelled(ctx, &turn_id, from).await;
                }
                self.arm(ctx).await;
            }
        }
    }

    /// Records the steps of a plan that a new message cancelled.
    async fn record_cancelled(&self, ctx: &Ctx, turn_id: &str, from: usize) {
        worker::console_log!("turn {turn_id}: plan cancelled from step {from} by a new message");
        let calls = agent::step_calls(ctx, turn_id).await;
        for index in from..calls.len() {
            agent::record_step_outcome(ctx, turn_id, &calls, index, &StepOutcome::Cancelled).await;
        }
        let _ = storage::turns::set_turn_status(&ctx.db(), turn_id, TurnStatus::Done, Some(format!("cancelled from step {from}")), now_ms()).await;
    }

    // ---- alarm ------------------------------------------------------------------------------

    async fn on_alarm(&self, ctx: &Ctx) {
        let now = now_ms();
        if self
            .update(|st| {
                st.alarms += 1;
                st.take_over_lost_step(now)
            })
            .await
        {
            worker::console_warn!("a step's retry job is overdue (lost?); retrying the step here");
        }
        self.send_apologies(ctx).await;
        // Read after the awaits above: a retry job may have started running the turn meanwhile.
        if let Some(turn) = self.update(|st| st.recover_turn(now_ms(), self.in_flight.get())).await {
            worker::console_warn!("turn {}: taking over (its instance died or its retry job is overdue)", turn.turn_id);
            if turn.attempt > ctx.cfg.max_turn_attempts {
                // It keeps dying (a crash on this input?): stop, and tell the user.
                if let Some((conv, _)) = self.conv() {
                    self.give_up(ctx, &conv, &turn.turn_id, "the turn kept failing").await;
                }
            } else {
                self.run_turn(ctx, turn).await;
            }
            self.arm(ctx).await;
            return;
        }
        match self.with(|st| st.due(now, &Self::timing(ctx))).await {
            Due::StartTurn => {
                self.start_turn(ctx).await;
            }
            Due::AdvancePlan => {
                if let Some(retry) = self.advance(ctx).await {
                    self.queue_step_retry(ctx, retry).await;
                }
            }
            Due::Nothing => {}
        }
        self.arm(ctx).await;
    }

    async fn start_turn(&self, ctx: &Ctx) {
        let Some((conv, _)) = self.conv() else {
            worker::console_error!("a chat object without a conversation key was asked for a turn");
            self.update(|st| st.pending = None).await;
            return;
        };
        let conv_s = conv.to_string();
        let nonce = u64::from_le_bytes(crate::config::random_bytes::<8>());
        let turn = self.update(|st| st.begin_turn(now_ms(), &conv_s, nonce)).await;
        self.run_turn(ctx, turn).await;
    }

    /// Runs a turn from the alarm (a new one, or one taken over from a dead instance). If it
    /// fails transiently, its next attempt goes through the jobs queue.
    async fn run_turn(&self, ctx: &Ctx, turn: agent_core::chat_state::TurnRun) {
        let Some((conv, _)) = self.conv() else { return };
        let conv_s = conv.to_string();
        self.in_flight.set(true);
        self.arm(ctx).await; // the watchdog, in case this instance dies mid-turn
        let result = agent::run(ctx, &conv, &turn, true).await;
        self.in_flight.set(false);
        let outcome = self.after_turn(ctx, &conv, &turn.turn_id, result).await;
        if let JobOutcome::Retry { error, after_ms } = outcome {
            let job = Job::Turn { conv: conv_s.clone(), turn_id: turn.turn_id.clone(), attempt: turn.attempt };
            let max = max_attempts(&job, ctx.cfg.max_turn_attempts, ctx.cfg.max_send_attempts);
            match next_move(&job, &JobOutcome::Retry { error: error.clone(), after_ms }, max, ctx.cfg.retry_base_ms, random_unit()) {
                NextMove::Requeue { job, delay_secs } => {
                    worker::console_warn!("turn {}: {error}; retrying in {delay_secs}s", turn.turn_id);
                    if let Err(e) = queues::enqueue(ctx, &job, delay_secs).await {
                        // No job will come: the object takes the retry over at the deadline.
                        worker::console_error!("turn {}: could not queue its retry ({e}); retrying from the alarm", turn.turn_id);
                    }
                }
                NextMove::DeadLetter { job, error } => {
                    // The user is told now; the dead letter is the operator's record.
                    self.give_up(ctx, &conv, &turn.turn_id, &error).await;
                    if let Err(e) = queues::dead_letter(ctx, &job, &error).await {
                        worker::console_error!("turn {}: dead letter not queued ({e}); recording it here", turn.turn_id);
                        let body = serde_json::to_string(&job).unwrap_or_default();
                        let _ = storage::failures::record_failure(&ctx.db(), "dead_letter", Some(&job.key()), Some(&conv_s), &error, Some(&body), now_ms()).await;
                    }
                }
                NextMove::Ack => {}
            }
        }
    }

    /// Handles a turn's result. `Retry` means the turn now waits for a retry job, which the
    /// caller queues (the alarm) or asks the consumer to queue (a job).
    async fn after_turn(
        &self,
        ctx: &Ctx,
        conv: &ConvKey,
        turn_id: &str,
        result: std::result::Result<agent::TurnOutput, agent::TurnError>,
    ) -> JobOutcome {
        match result {
            Ok(agent::TurnOutput::Planned { steps }) => {
                let nothing_to_send = steps.is_empty();
                let finish = self.update(|st| st.finish_turn(turn_id, steps, now_ms())).await;
                match finish {
                    Finish::Execute if nothing_to_send => {
                        // Silence on purpose (recorded in the turn's empty_reason): done.
                        let _ = storage::turns::set_turn_status(&ctx.db(), turn_id, TurnStatus::Done, None, now_ms()).await;
                    }
                    Finish::Execute => {
                        // The turn is done; a step's own retry goes on the queue as a step job.
                        if let Some(retry) = self.advance(ctx).await {
                            self.queue_step_retry(ctx, retry).await;
                        }
                    }
                    Finish::Stale => {
                        worker::console_log!("turn {turn_id}: new messages arrived during the model call; replanning");
                        let _ = storage::turns::set_turn_status(&ctx.db(), turn_id, TurnStatus::Stale, None, now_ms()).await;
                    }
                    Finish::Superseded => {}
                }
                self.arm(ctx).await;
                JobOutcome::Done
            }
            Ok(agent::TurnOutput::NothingToDo) => {
                self.update(|st| st.end_turn(turn_id)).await;
                let _ = storage::turns::set_turn_status(&ctx.db(), turn_id, TurnStatus::Done, Some("nothing new".into()), now_ms()).await;
                self.arm(ctx).await;
                JobOutcome::Done
            }
            Err(agent::TurnError::Transient { error, after_ms }) => {
                let attempt = self.with(|st| st.turn.as_ref().map_or(1, |t| t.attempt)).await;
                let deadline = Self::job_deadline(ctx, attempt, after_ms);
                self.update(|st| st.turn_waiting(turn_id, deadline)).await;
                self.arm(ctx).await;
                JobOutcome::Retry { error, after_ms }
            }
            Err(agent::TurnError::Permanent { error }) => {
                worker::console_error!("turn {turn_id} failed for good: {error}");
                let _ = storage::failures::record_failure(&ctx.db(), "error", Some(&format!("turn:{turn_id}")), Some(&conv.to_string()), &error, None, now_ms()).await;
                self.give_up(ctx, conv, turn_id, &error).await;
                JobOutcome::Done
            }
        }
    }

    /// Ends a turn or plan that cannot be completed, and tells the user (once).
    /// The apology is owed in the state first, so it is sent even if this invocation cannot.
    async fn give_up(&self, ctx: &Ctx, _conv: &ConvKey, turn_id: &str, error: &str) {
        let now = now_ms();
        self.update(|st| st.give_up(turn_id, now)).await;
        if let Err(e) = storage::turns::set_turn_status(&ctx.db(), turn_id, TurnStatus::Dead, Some(error.to_string()), now_ms()).await {
            worker::console_error!("turn {turn_id}: could not record that it was given up: {e}");
        }
        self.send_apologies(ctx).await;
        self.arm(ctx).await;
    }

    /// Sends the apologies that are due. One that cannot go now (budget, Telegram busy) stays
    /// owed and the alarm tries again; one the chat can never receive (blocked) is dropped.
    async fn send_apologies(&self, ctx: &Ctx) {
        let Some((conv, _)) = self.conv() else { return };
        loop {
            let now = now_ms();
            let Some(turn_id) = self.update(|st| st.apology_due(now)).await else { return };
            let key = format!("{turn_id}/apology");
            match deliver::send_text(ctx, &conv, &key, APOLOGY, None, Some(&turn_id)).await {
                Ok(_) => self.update(|st| st.apology_done(&turn_id)).await,
                Err(e @ deliver::StepError::Fatal { .. }) => {
                    worker::console_error!("turn {turn_id}: the apology cannot be sent: {}", e.message());
                    self.update(|st| st.apology_done(&turn_id)).await;
                }
                Err(e) => {
                    let attempts = self.with(|st| st.apologies.iter().find(|a| a.turn_id == turn_id).map_or(1, |a| a.attempts)).await;
                    let delay = match &e {
                        deliver::StepError::Retry { after_ms, .. } => {
                            backoff_ms(attempts, ctx.cfg.retry_base_ms, 300_000, crate::config::random_unit()).max(after_ms.unwrap_or(0)).min(43_200_000) as i64
                        }
                        _ => 0, // out of budget here: the next invocation has a fresh one
                    };
                    worker::console_warn!("turn {turn_id}: the apology waits ({})", e.message());
                    if !self.update(|st| st.apology_later(&turn_id, now, delay)).await {
                        worker::console_error!("turn {turn_id}: the apology was given up after {attempts} attempts");
                    }
                    return;
                }
            }
        }
    }

    /// Queues the retry of a failed step. If the queue cannot take it, the step's deadline
    /// brings it back through the alarm.
    async fn queue_step_retry(&self, ctx: &Ctx, retry: StepRetry) {
        let Some((conv, _)) = self.conv() else { return };
        let job = Job::Step { conv: conv.to_string(), turn_id: retry.turn_id.clone(), step: retry.step, attempt: 1 };
        let max = max_attempts(&job, ctx.cfg.max_turn_attempts, ctx.cfg.max_send_attempts);
        let outcome = JobOutcome::Retry { error: retry.error, after_ms: retry.after_ms };
        match next_move(&job, &outcome, max, ctx.cfg.retry_base_ms, random_unit()) {
            NextMove::DeadLetter { job, error } => {
                self.give_up(ctx, &conv, &retry.turn_id, &error).await;
                if !queues::apply(ctx, NextMove::DeadLetter { job: job.clone(), error: error.clone() }).await {
                    // Not queued: the object records it itself, as the turn path does.
                    let body = serde_json::to_string(&job).unwrap_or_default();
                    let _ = storage::failures::record_failure(&ctx.db(), "dead_letter", Some(&job.key()), Some(&conv.to_string()), &error, Some(&body), now_ms()).await;
                }
            }
            next => {
                if !queues::apply(ctx, next).await {
                    worker::console_error!("turn {}: step retry not queued; the alarm retries it at its deadline", retry.turn_id);
                }
            }
        }
    }

    // ---- plans ------------------------------------------------------------------------------

    /// Carries out due plan steps in order until the plan ends, waits, or a step must be
    /// retried (returned). Stops as soon as a new message cancels the plan.
    async fn advance(&self, ctx: &Ctx) -> Option<StepRetry> {
        if self.advancing.replace(true) {
            return None;
        }
        let retry = self.advance_inner(ctx).await;
        self.advancing.set(false);
        retry
    }

    async fn advance_inner(&self, ctx: &Ctx) -> Option<StepRetry> {
        let (conv, kind) = self.conv()?;
        let mut step_calls: Option<(String, Vec<Option<usize>>)> = None;
        loop {
            let now = now_ms();
            let current = self
                .with(|st| {
                    let p = st.plan.as_ref().filter(|p| !p.waiting_job && now >= p.not_before_ms)?;
                    let first_send = !p.steps.iter().take(p.next).any(|s| matches!(s, Step::Send { .. }));
                    p.current().map(|s| (p.turn_id.clone(), p.next, s.clone(), p.target_message_id, first_send, p.steps.len()))
                })
                .await;
            let (turn_id, index, step, target, first_send, len) = current?;
            if ctx.meter.count() + 3 > crate::config::SUBREQUEST_BUDGET {
                // Enough for this invocation: the alarm (due now) carries on.
                return None;
            }
            if step_calls.as_ref().is_none_or(|(t, _)| *t != turn_id) {
                step_calls = Some((turn_id.clone(), agent::step_calls(ctx, &turn_id).await));
            }
            let calls = step_calls.as_ref().map(|(_, c)| c.clone()).unwrap_or_default();
            let result = match &step {
                Step::Wait { seconds } => {
                    self.update(|st| st.step_done(&turn_id, index, now.saturating_add(i64::from(*seconds).saturating_mul(1000)))).await;
                    agent::record_step_outcome(ctx, &turn_id, &calls, index, &StepOutcome::Done).await;
                    continue;
                }
                _ => {
                    // The step_calls read above was an await: the plan may be gone meanwhile.
                    let Some(starts) = self.update(|st| st.start_step(&turn_id, index)).await else {
                        return None;
                    };
                    if starts > ctx.cfg.max_send_attempts {
                        worker::console_error!("turn {turn_id} step {index} keeps failing; dropping the plan");
                        self.give_up(ctx, &conv, &turn_id, "a step kept failing").await;
                        return None;
                    }
                    // In groups the first message of a reply threads to the message it answers.
                    let default_reply = (kind.is_group() && first_send && matches!(step, Step::Send { .. } | Step::Sticker { .. }))
                        .then_some(target)
                        .flatten();
                    // Deliver asks this guard right before every Telegram call.
                    let chat = self.chat.clone();
                    let guard_turn = turn_id.clone();
                    let guarded = Ctx {
                        step_guard: Some(Rc::new(move || {
                            chat.borrow().as_ref().is_some_and(|st| st.is_current_step(&guard_turn, index))
                        })),
                        ..ctx.clone()
                    };
                    deliver::run_step(&guarded, &conv, &turn_id, index, &step, default_reply).await
                }
            };
            match result {
                Err(deliver::StepError::Cancelled) => {
                    worker::console_log!("turn {turn_id} step {index}: cancelled before it was sent");
                    return None;
                }
                Ok(outcome) => {
                    // It was carried out (the guard held at the call); record that truthfully
                    // even if a new message cancelled the plan while Telegram answered.
                    let current = self.with(|st| st.is_current_step(&turn_id, index)).await;
                    agent::record_step_outcome(ctx, &turn_id, &calls, index, &outcome).await;
                    if !current {
                        return None;
                    }
                    self.update(|st| st.step_done(&turn_id, index, now_ms())).await;
                    if index + 1 >= len {
                        let _ = storage::turns::set_turn_status(&ctx.db(), &turn_id, TurnStatus::Done, None, now_ms()).await;
                    }
                }
                Err(deliver::StepError::Yield) => {
                    worker::console_log!("turn {turn_id} step {index}: continuing in the next invocation");
                    return None;
                }
                Err(deliver::StepError::Retry { error, after_ms }) => {
                    worker::console_warn!("turn {turn_id} step {index}: {error}");
                    let deadline = Self::job_deadline(ctx, 1, after_ms);
                    self.update(|st| st.step_waiting(&turn_id, index, deadline)).await;
                    return Some(StepRetry { turn_id, step: index, error, after_ms });
                }
                Err(deliver::StepError::Fatal { error, blocked }) => {
                    worker::console_warn!("turn {turn_id} step {index} failed: {error}");
                    agent::record_step_outcome(ctx, &turn_id, &calls, index, &StepOutcome::Failed { error: error.clone() }).await;
                    if blocked || matches!(step, Step::Send { .. }) {
                        // Without this message the rest of the plan makes no sense.
                        self.update(|st| st.drop_plan(&turn_id)).await;
                        let _ = storage::turns::set_turn_status(&ctx.db(), &turn_id, TurnStatus::Failed, Some(error), now_ms()).await;
                        return None;
                    }
                    // A refused reaction or sticker is skipped.
                    self.update(|st| st.step_done(&turn_id, index, now_ms())).await;
                }
            }
        }
    }

    // ---- jobs -------------------------------------------------------------------------------

    async fn job(&self, ctx: &Ctx, job: Job) -> JobOutcome {
        let Some((conv, _)) = self.conv() else { return JobOutcome::Done };
        match job {
            Job::Turn { turn_id, attempt, .. } => {
                let Some(turn) = self.update(|st| st.resume_turn(&turn_id, attempt, now_ms())).await else {
                    return JobOutcome::Done; // finished or superseded meanwhile
                };
                self.arm(ctx).await;
                self.in_flight.set(true);
                let result = agent::run(ctx, &conv, &turn, true).await;
                self.in_flight.set(false);
                self.after_turn(ctx, &conv, &turn_id, result).await
            }
            Job::Step { turn_id, step, attempt, .. } => {
                if !self.update(|st| st.resume_step(&turn_id, step)).await {
                    return JobOutcome::Done;
                }
                let outcome = match self.advance(ctx).await {
                    Some(retry) if retry.turn_id == turn_id && retry.step == step => {
                        // The consumer backs off by this job's attempt: so does the deadline.
                        let deadline = Self::job_deadline(ctx, attempt, retry.after_ms);
                        self.update(|st| st.step_waiting(&turn_id, step, deadline)).await;
                        JobOutcome::Retry { error: retry.error, after_ms: retry.after_ms }
                    }
                    Some(other) => {
                        self.queue_step_retry(ctx, other).await;
                        JobOutcome::Done
                    }
                    None => JobOutcome::Done,
                };
                self.arm(ctx).await;
                outcome
            }
            Job::Consolidate { .. } => JobOutcome::Done,
        }
    }

    /// A synchronous API turn: the text is stored as a message, one turn runs, its messages come
    /// back instead of going to Telegram (and are stored as the bot's).
    async fn api_chat(&self, ctx: &Ctx, text: &str, name: &str) -> (u16, serde_json::Value) {
        use serde_json::json;
        let Some((conv, _)) = self.conv() else { return (400, json!({"error": "no conversation"})) };
        let now = now_ms();
        let conv_s = conv.to_string();
        let nonce = u64::from_le_bytes(crate::config::random_bytes::<8>());
        // Checked and claimed in one step, before any await: two concurrent calls cannot both
        // start a turn.
        let claimed = self
            .update(|st| {
                if st.turn.is_some() || st.plan.is_some() {
                    return None;
                }
                st.pending = None;
                Some(st.begin_turn(now, &conv_s, nonce))
            })
            .await;
        let Some(turn) = claimed else {
            return (409, json!({"error": "this conversation is busy; try again"}));
        };
        self.in_flight.set(true);
        let parts = vec![agent_core::conversation::Part::text(text)];
        if let Err(e) = storage::messages::record_api_message(&ctx.db(), &conv, name, &parts, now).await {
            self.in_flight.set(false);
            self.update(|st| st.end_turn(&turn.turn_id)).await;
            return (503, json!({"error": e.to_string()}));
        }
        let result = agent::run(ctx, &conv, &turn, false).await;
        self.in_flight.set(false);
        self.update(|st| st.end_turn(&turn.turn_id)).await;
        let answer = match result {
            Ok(agent::TurnOutput::Planned { steps }) => {
                let texts: Vec<String> = steps
                    .iter()
                    .filter_map(|s| match s {
                        Step::Send { text, .. } => Some(text.clone()),
                        _ => None,
                    })
                    .collect();
                if let Err(e) = storage::messages::record_api_replies(&ctx.db(), &conv, &turn.turn_id, &texts, &ctx.cfg.bot_name, now_ms()).await {
                    worker::console_error!("api chat {conv}: replies not stored: {e}");
                }
                let _ = storage::turns::set_turn_status(&ctx.db(), &turn.turn_id, TurnStatus::Done, None, now_ms()).await;
                (200, json!({"reply": texts.join("\n\n"), "messages": texts, "turn_id": turn.turn_id}))
            }
            Ok(agent::TurnOutput::NothingToDo) => (200, json!({"reply": null, "messages": [], "turn_id": turn.turn_id})),
            Err(agent::TurnError::Transient { error, .. }) => (503, json!({"error": error})),
            Err(agent::TurnError::Permanent { error }) => (502, json!({"error": error})),
        };
        self.arm(ctx).await;
        answer
    }

    async fn dead(&self, ctx: &Ctx, job: Job) {
        let Some((conv, _)) = self.conv() else { return };
        match &job {
            Job::Turn { turn_id, .. } | Job::Step { turn_id, .. } => {
                self.give_up(ctx, &conv, turn_id, "gave up after the last attempt").await;
            }
            Job::Consolidate { .. } => {}
        }
    }
}
