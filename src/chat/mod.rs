//! # chat: the chat Durable Object and what a conversation does
//!
//! One Durable Object per conversation (chat or forum topic), named by its `ConvKey`. It holds
//! the conversation's short-lived state (`agent_core::chat_state::ChatState`: debounce, the
//! turn in flight, the reply plan, owed apologies) and carries out what that state machine
//! decides. This file is the object's shell: its routes, its state in storage, its one alarm.
//! The object's work is in [`inbox`] (a reply-asking message), [`turn`] (running a turn and
//! what follows it), [`plan`] (carrying out steps), [`jobs`] (retry jobs and dead letters) and
//! [`api_chat`] (the synchronous API chat), [`schedules`] (firing due schedules), [`stream`]
//! (the first sign of a burst, the answer streamed as a draft); what a
//! conversation does is in [`agent`] (one
//! turn), [`deliver`] (the outbox), [`access`], [`commands`], [`memory`] and [`usage`].
//!
//! Routes (from the worker only): `POST /inbox` a reply-asking message or reaction,
//! `POST /job` a retry job (answers a `JobOutcome`), `POST /dead` a dead-lettered job,
//! `POST /chat` an API chat turn, `POST /schedules` re-read the chat's next schedule run (after
//! a change made elsewhere, or the cron's check), `POST /crew` the chat's crew switch (crew
//! mode, [`crew`]), `GET /state` the state (for tests and
//! debugging).
//!
//! Invariants:
//! - The state lives in memory and is written to storage after every change; every handler
//!   re-reads it after each await, because other requests interleave at awaits.
//! - `in_flight` is memory only: a stored turn that this instance is not running belonged to
//!   a dead instance and is recovered.
//! - The alarm handler never fails once the state is loaded (alarms are retried on error): it
//!   logs and re-arms. Every waiting state has a deadline (`core::chat_state`), and the alarm
//!   is never armed in the past in a loop: while a turn or a plan step runs here it is a
//!   re-check a few seconds on (`chat_state::RECHECK_MS`), which also lets an instance that
//!   starts after a restart take the dead one's work over within seconds.
//! - Every outbound call is asked of the invocation's meter first: owed apologies stop at the
//!   budget, a turn starts only in an invocation that has spent at most `TURN_START_MAX`,
//!   and no fetch goes out past `SUBREQUEST_CEILING`; what does not fit is due at once in the
//!   next invocation.
//! - A stored state that does not decode is logged, kept aside under `state.unreadable`, and
//!   replaced by a fresh state (turn ids are random, so no outbox key can repeat). A storage
//!   read error is not that: the handler fails and is retried; nothing is overwritten.
//! - The conversation key and the chat's kind are what the object was told (the key in every
//!   call, the kind by the inbox or the API chat route), never guessed.

pub mod access;
pub mod agent;
mod api_chat;
pub mod commands;
pub mod crew;
pub mod deliver;
mod inbox;
mod jobs;
pub mod memory;
mod plan;
mod schedules;
pub mod stream;
mod turn;
pub mod usage;

use crate::config::{now_ms, Ctx};
use crate::outbound::objects;
use agent_core::chat_state::{self, ChatState, Due, Timing};
use agent_core::conversation::{ChatKind, ConvKey, InboundMessage, InboundReaction};
use agent_core::telegram::gating::Trigger;
use agent_core::background::jobs::{backoff_ms, Job};
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

/// What the object knows about its conversation (stored as `meta`): the key it is called
/// with, and the chat's kind once the inbox or the API chat route told it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Meta {
    #[serde(with = "agent_core::conversation::conv_key_text")]
    conv: ConvKey,
    #[serde(default)]
    kind: Option<ChatKind>,
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
    /// The state as last handed to storage (writes are applied in order, so storage holds it
    /// once they are done): an update that changes nothing writes nothing. `None`: unknown.
    written: Rc<RefCell<Option<String>>>,
    /// The rows the last turn loaded, so the next reads only what is new (in memory only).
    rows: agent::RowCopy,
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
            written: Rc::new(RefCell::new(None)),
            rows: Default::default(),
        }
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        let ctx = Ctx::new(self.env.clone());
        let _metrics = ctx.metrics(|| format!("object {}", req.path()));
        self.load().await?;
        let url = req.url()?;
        if let Some(conv) = url.query_pairs().find(|(k, _)| k == "conv").and_then(|(_, v)| ConvKey::parse(&v)) {
            // API conversations are private chats; other kinds come with the inbox.
            let kind = (url.path() == "/chat").then_some(ChatKind::Private);
            self.remember_conv(conv, kind).await;
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
            (Method::Post, "/schedules") => {
                let next = self.refresh_schedules(&ctx).await;
                Response::from_json(&serde_json::json!({ "next_run_ms": next }))
            }
            (Method::Post, "/crew") => {
                // `{"enabled": bool | null}`: the chat's crew switch (null follows CREW_CHATS).
                let body: serde_json::Value = req.json().await?;
                let on = body.get("enabled").and_then(serde_json::Value::as_bool);
                self.set_crew(&ctx, on).await;
                Response::from_json(&serde_json::json!({ "enabled": on }))
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
        let _metrics = ctx.metrics(|| "alarm".into());
        self.load().await?; // an alarm that fails is retried by the platform
        self.on_alarm(&ctx).await;
        // A statistic, counted once the alarm's work is done: written with the state's next
        // change (any write of it before would be a write of its own, one of five in a turn's
        // alarm).
        self.note(|st| st.alarms += 1);
        Response::ok("ok")
    }
}

impl ChatObject {
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
            (r, chat_state::stored(st))
        };
        if self.written.borrow().as_deref() == Some(snapshot.as_str()) {
            return r;
        }
        *self.written.borrow_mut() = Some(snapshot.clone());
        if let Err(e) = self.state.storage().put("state", snapshot).await {
            worker::console_error!("chat state not saved: {e}");
            *self.written.borrow_mut() = None;
        }
        r
    }

    /// Changes the loaded state in memory only: the change is written with the next `update`
    /// that writes. Only for what may be lost with the instance (statistics).
    fn note(&self, f: impl FnOnce(&mut ChatState)) {
        if let Some(st) = self.chat.borrow_mut().as_mut() {
            f(st);
        }
    }

    /// Remembers the conversation key and, when told, the chat's kind (a kind once known
    /// stays until told otherwise).
    async fn remember_conv(&self, conv: ConvKey, kind: Option<ChatKind>) {
        self.ensure_loaded().await;
        let current = self.meta.borrow().clone();
        let meta = Meta { conv, kind: kind.or(current.as_ref().and_then(|m| m.kind)) };
        if current.as_ref() == Some(&meta) {
            return;
        }
        *self.meta.borrow_mut() = Some(meta.clone());
        let _ = self.state.storage().put("meta", &meta).await;
    }

    /// The conversation and the chat's kind. A kind never told (an object whose first call
    /// was a job: its inbox state was lost) counts as private, which only means its replies
    /// do not thread; it is logged, never guessed from the id.
    fn conv(&self) -> Option<(ConvKey, ChatKind)> {
        let meta = self.meta.borrow().clone()?;
        let kind = meta.kind.unwrap_or_else(|| {
            worker::console_warn!("chat {}: the chat's kind is unknown; replies will not thread", meta.conv);
            ChatKind::Private
        });
        Some((meta.conv, kind))
    }

    /// The state machine's timing; the debounce adapts to the chat's kind unless the
    /// operator fixed it (`DEBOUNCE_MS`).
    fn timing(&self, ctx: &Ctx) -> Timing {
        let group = self.meta.borrow().as_ref().and_then(|m| m.kind).is_some_and(|k| k != ChatKind::Private);
        Timing {
            debounce_ms: ctx.cfg.debounce_ms as i64,
            debounce_max_ms: ctx.cfg.debounce_max_ms as i64,
            watchdog_ms: ctx.cfg.turn_watchdog_ms as i64,
            job_grace_ms: ctx.cfg.job_grace_ms as i64,
            adaptive: (!ctx.cfg.debounce_fixed).then_some(agent_core::chat::debounce::Policy::Adaptive { group }),
        }
    }

    /// Whether `turn` is still the one to answer: no newer message came since it started (a
    /// scheduled run is never superseded). Read by the turn's drafts, which stop once false.
    /// `commit` marks the turn committed (`ChatState::commit_turn`) and stores the state
    /// before part of its answer goes out while it streams.
    fn live(&self, turn: &chat_state::TurnRun) -> stream::Live {
        let chat = self.chat.clone();
        let (generation, scheduled, id) = (turn.generation, turn.scheduled.is_some(), turn.turn_id.clone());
        let current = move || {
            let committed = |st: &ChatState| st.turn.as_ref().is_some_and(|t| t.turn_id == id && t.committed);
            scheduled || chat.borrow().as_ref().is_some_and(|st| st.generation == generation || committed(st))
        };
        let (chat, storage, id) = (self.chat.clone(), Rc::new(self.state.storage()), turn.turn_id.clone());
        let written = self.written.clone();
        let commit = move |upto_seq: i64| -> futures::future::LocalBoxFuture<'static, bool> {
            let snapshot = chat.borrow_mut().as_mut().and_then(|st| st.commit_turn(&id, upto_seq).then(|| chat_state::stored(st)));
            let (storage, written) = (storage.clone(), written.clone());
            Box::pin(async move {
                let Some(snapshot) = snapshot else { return false };
                *written.borrow_mut() = Some(snapshot.clone());
                let saved = storage.put("state", snapshot).await.map_err(|e| worker::console_error!("chat state not saved: {e}")).is_ok();
                if !saved {
                    *written.borrow_mut() = None;
                }
                saved
            })
        };
        stream::Live { turn_id: turn.turn_id.clone(), current: Rc::new(current), commit: Rc::new(commit) }
    }

    /// When a retry job for attempt `attempt` that was asked to wait `after_ms` counts as lost:
    /// the longest backoff it could get, plus the grace.
    fn job_deadline(ctx: &Ctx, attempt: u32, after_ms: Option<u64>) -> i64 {
        let longest = backoff_ms(attempt, ctx.cfg.retry_base_ms, 300_000, 1.0).max(after_ms.unwrap_or(0)).min(43_200_000);
        now_ms() + longest as i64 + 1000 + ctx.cfg.job_grace_ms as i64
    }

    /// Sets the one alarm to the next time the state needs attention.
    /// While this instance has work in flight (a turn, a plan step) that is a re-check a few
    /// seconds on (`chat_state::RECHECK_MS`): never "due now" while the work runs (no spin),
    /// and an instance that starts after a restart takes the dead one's work over then.
    async fn arm(&self, ctx: &Ctx) {
        let (in_flight, advancing) = (self.in_flight.get(), self.advancing.get());
        let now = now_ms();
        let wake = self.with(|st| st.next_wake_here(&self.timing(ctx), in_flight, advancing, now)).await;
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

    async fn on_alarm(&self, ctx: &Ctx) {
        let now = now_ms();
        if self.update(|st| st.take_over_lost_step(now)).await {
            worker::console_warn!("a step's retry job is overdue (lost?); retrying the step here");
        }
        self.send_apologies(ctx).await;
        if ctx.meter.count() > crate::config::TURN_START_MAX {
            // The apologies took this invocation's room: the rest (a turn, a step) is due at
            // once in the next one, which starts with a fresh meter.
            worker::console_log!("the alarm spent {} subrequests; continuing in the next invocation", ctx.meter.count());
            self.arm(ctx).await;
            return;
        }
        // Read after the awaits above: a retry job may have started running the turn meanwhile.
        if let Some(turn) = self.update(|st| st.recover_turn(now_ms(), self.in_flight.get())).await {
            worker::console_warn!("turn {}: taking over (its instance died or its retry job is overdue)", turn.turn_id);
            if turn.attempt > ctx.cfg.max_turn_attempts {
                // It keeps dying (a crash on this input?): stop, and tell the user.
                self.give_up(ctx, &turn.turn_id, "the turn kept failing").await;
            } else {
                self.run_turn(ctx, turn).await;
            }
            self.arm(ctx).await;
            return;
        }
        match self.with(|st| st.due(now, &self.timing(ctx))).await {
            Due::StartTurn => {
                self.start_turn(ctx).await;
            }
            Due::AdvancePlan => {
                if let Some(retry) = self.advance(ctx).await {
                    self.queue_step_retry(ctx, retry).await;
                }
            }
            Due::Schedules => self.fire_schedules(ctx).await,
            Due::Nothing => {}
        }
        self.arm(ctx).await;
    }
}
