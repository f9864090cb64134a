//! # chat: the chat Durable Object
//!
//! One Durable Object per conversation (chat or forum topic), named by its `ConvKey`. It holds
//! the conversation's short-lived state (`agent_core::chat_state::ChatState`: debounce, the
//! turn in flight, the reply plan, owed apologies) and carries out what that state machine
//! decides. This file is the object's shell: the requests it answers (`fetch`), its state in
//! storage, its one alarm. The object's work is in [`inbox`] (an arrival: a reply-asking
//! message), [`turn_life`] (a turn's life in the object: starting it, driving it, what follows
//! it), [`plan`] (carrying out steps), [`jobs`] (queueing a retry, or giving up), [`api_chat`] (the
//! synchronous API chat), [`schedules`] (firing due schedules) and [`crew`] (the crew cycle).
//! The events' loops are the core's (`agent_core::chat_state::{alarm, arrival, job,
//! schedule_due, api_turn}`); this object is their port.
//! What the bot does in a turn (answering it, delivery, streaming, access, commands, memory,
//! usage, crew lineup) is the `bot` room's.
//!
//! Requests (from the worker only, through `outbound::objects`): one `ChatRequest` per call,
//! parsed once by `fetch` — an arrival (a reply-asking message or reaction), a retry job
//! (answers a `JobOutcome`), a dead-lettered job, an API chat turn, re-reading the chat's next
//! schedule run (after a change made elsewhere, or the cron's check), the chat's crew switch
//! ([`crew`]), when it next wakes (its alarm), and Stop.
//!
//! Invariants (INVARIANTS.md): "One turn at a time per conversation" (`Running` is memory
//! only: a stored turn this instance is not running is recovered), "An alarm fails only before
//! its work", "Every waiting state has a deadline", "The alarm never loops", "Bounded
//! invocations", "Turn ids never repeat", "The conversation key is a type".
//!
//! Also: the state lives in memory and is written to storage after every change; every
//! handler re-reads it after each await, because other requests interleave at awaits. A
//! storage read error is not an undecodable state: the handler fails and is retried; nothing
//! is overwritten. The key comes in every call, the chat's kind with an arrival or an API
//! chat turn.

/// `StatePort` for an event's port that holds the object (`obj`) and the invocation (`ctx`):
/// [`Host`]'s state and clock, log lines at the log level.
macro_rules! state_port {
    ($port:ident) => {
        impl agent_core::chat_state::port::StatePort for $port<'_> {
            async fn ask<R>(&self, f: impl FnOnce(&mut agent_core::chat_state::ChatState, &agent_core::chat_state::Timing) -> R) -> R {
                let host = super::Host { obj: self.obj, ctx: self.ctx };
                <super::Host as agent_core::chat_state::port::StatePort>::ask(&host, f).await
            }
            async fn peek<R>(&self, f: impl FnOnce(&agent_core::chat_state::ChatState) -> R) -> R {
                self.obj.with(f).await
            }
            fn now(&self) -> i64 {
                crate::config::now_ms()
            }
            fn log(&self, line: &str) {
                worker::console_log!("{line}");
            }
        }
    };
}

mod api_chat;
mod crew;
mod inbox;
mod jobs;
mod plan;
mod schedules;
mod stop;
mod turn_life;

use crate::bot::{answer, stream};
use crate::config::{now_ms, Ctx};
use crate::outbound::objects::ChatRequest;
use agent_core::background::jobs::JobOutcome;
use agent_core::chat_state::effects::Limits;
use agent_core::chat_state::job::StepRetry;
use agent_core::chat_state::running::Running;
use agent_core::chat_state::{self, ChatState, Timing};
use agent_core::conversation::{ChatKind, ConvKey};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::rc::Rc;
use worker::{durable_object, wasm_bindgen, DurableObject, Env, Request, Response, Result, State};

/// What the object knows about its conversation (stored as `meta`): the key it is called
/// with, and the chat's kind once an arrival or an API chat turn told it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Meta {
    #[serde(with = "agent_core::conversation::conv_key_text")]
    conv: ConvKey,
    #[serde(default)]
    kind: Option<ChatKind>,
}

/// Writes the state's snapshot to storage: the one place the state is written (`update`, and
/// a streaming turn's commit). `written` remembers what storage holds (unknown after a failed
/// write). Returns whether it was saved.
async fn persist(storage: &worker::Storage, written: &RefCell<Option<String>>, meter: &StorageMeter, snapshot: String) -> bool {
    *written.borrow_mut() = Some(snapshot.clone());
    meter.count(0, 1);
    let saved = storage.put("state", snapshot).await.map_err(|e| worker::console_error!("chat state not saved: {e}")).is_ok();
    if !saved {
        *written.borrow_mut() = None;
    }
    saved
}

/// Counts the object's storage rows on the meter of the invocation that started last (the
/// `do_rows_read` / `do_rows_written` of its metrics line): each key read is a row read, each
/// key put or deleted and each alarm set or deleted a row written. Requests interleave at
/// awaits, so a row may be counted on an overlapping invocation's line, but once.
#[derive(Clone, Default)]
struct StorageMeter(Rc<RefCell<crate::config::Meter>>);

impl StorageMeter {
    fn count(&self, read: u64, written: u64) {
        self.0.borrow().do_rows(read, written);
    }
    /// One ask of the state machine (see `Meter::state_ask`).
    fn ask(&self) {
        self.0.borrow().state_ask();
    }
    fn set(&self, meter: &crate::config::Meter) {
        *self.0.borrow_mut() = meter.clone();
    }
}

#[durable_object]
pub struct ChatObject {
    state: State,
    env: Env,
    chat: Rc<RefCell<Option<ChatState>>>,
    meta: RefCell<Option<Meta>>,
    /// The work this instance runs now: the turn in flight with its stop switch (thrown by
    /// `stop.rs`), whether it carries out plan steps, and the rows the last turn loaded, so the
    /// next reads only what is new (memory only, see `Running`).
    running: RefCell<Running<Rc<stream::Stop>, answer::RowCacheSlot>>,
    /// Update ids being handled right now (a redelivery storm arrives concurrently).
    handling: RefCell<std::collections::HashSet<i64>>,
    /// The state as last handed to storage (writes are applied in order, so storage holds it
    /// once they are done): an update that changes nothing writes nothing. `None`: unknown.
    written: Rc<RefCell<Option<String>>>,
    /// Counts this object's storage rows (see [`StorageMeter`]).
    storage_meter: StorageMeter,
    /// The alarm this instance last set (`Some(None)`: deleted; `None`: unknown, as after a
    /// start, a failed write or once the alarm fired): an arm that would set the same time
    /// again writes nothing (each write is a billed row).
    armed: std::cell::Cell<Option<Option<i64>>>,
    /// Changes of the state this instance wrote (a request that changed nothing does not arm).
    changes: std::cell::Cell<u64>,
}

impl DurableObject for ChatObject {
    fn new(state: State, env: Env) -> Self {
        ChatObject {
            state,
            env,
            chat: Rc::new(RefCell::new(None)),
            meta: RefCell::new(None),
            running: RefCell::new(Running::default()),
            handling: RefCell::new(Default::default()),
            written: Rc::new(RefCell::new(None)),
            storage_meter: StorageMeter::default(),
            armed: std::cell::Cell::new(None),
            changes: std::cell::Cell::new(0),
        }
    }

    /// Every call from the worker: one `ChatRequest` in the body, parsed once here.
    async fn fetch(&self, mut req: Request) -> Result<Response> {
        let ctx = Ctx::new(self.env.clone());
        let Ok(request) = req.json::<ChatRequest>().await else {
            return Response::error("not a chat request", 400);
        };
        let _metrics = ctx.metrics(|| format!("object {}", request.name()));
        self.storage_meter.set(&ctx.meter);
        self.load().await?;
        let url = req.url()?;
        if let Some(conv) = url.query_pairs().find(|(k, _)| k == "conv").and_then(|(_, v)| ConvKey::parse(&v)) {
            // API conversations are private chats; other kinds come with an arrival.
            let kind = matches!(request, ChatRequest::Chat { .. }).then_some(ChatKind::Private);
            self.remember_conv(conv, kind).await;
        }
        // The one arm of a request, after its work (the alarm's is at the end of `on_alarm`;
        // work that runs long arms a re-check before it starts: `run_turn`, `advance`).
        // The cron's schedule check (`Schedules`) sets the alarm whatever this instance
        // believes is set: it repairs an object whose alarm went missing.
        let repair = matches!(request, ChatRequest::Schedules);
        if repair {
            self.armed.set(None);
        }
        let changes = self.changes.get();
        let response = self.answer(&ctx, request).await;
        if repair || self.changes.get() != changes {
            self.arm(&ctx).await;
        }
        response
    }

    async fn alarm(&self) -> Result<Response> {
        let ctx = Ctx::new(self.env.clone());
        let _metrics = ctx.metrics(|| "alarm".into());
        self.storage_meter.set(&ctx.meter);
        self.armed.set(None); // the platform took the alarm that fired
        self.load().await?; // an alarm that fails is retried by the platform
        self.on_alarm(&ctx).await;
        // A statistic, counted once the alarm's work is done: written with the state's next
        // change (any write of it before would be a write of its own, one of five in a turn's
        // alarm).
        self.note(ChatState::count_alarm);
        Response::ok("ok")
    }
}

impl ChatObject {
    /// Does what a request asks and answers it (see `ChatRequest` for each answer).
    async fn answer(&self, ctx: &Ctx, request: ChatRequest) -> Result<Response> {
        match request {
            ChatRequest::Arrival(arrival) => {
                self.take_arrival(ctx, arrival).await;
                Response::ok("ok")
            }
            ChatRequest::Job(job) => Response::from_json(&chat_state::job::run(&Host { obj: self, ctx }, job, &Self::limits(ctx)).await),
            ChatRequest::Chat { text, name } => {
                let (status, value) = self.api_chat(ctx, &text, &name).await;
                Ok(Response::from_json(&value)?.with_status(status))
            }
            ChatRequest::Dead(job) => {
                chat_state::job::dead(&Host { obj: self, ctx }, &job).await;
                Response::ok("ok")
            }
            ChatRequest::Schedules => {
                let next = self.refresh_schedules(ctx).await;
                Response::from_json(&serde_json::json!({ "next_run_ms": next }))
            }
            ChatRequest::Crew { enabled } => {
                self.set_crew(enabled).await;
                Response::from_json(&serde_json::json!({ "enabled": enabled }))
            }
            ChatRequest::Stop { draft_id } => {
                let stopped = self.stop_generation(draft_id).await;
                Response::from_json(&serde_json::json!({ "stopped": stopped }))
            }
            ChatRequest::Wake => {
                let at = self.state.storage().get_alarm().await?;
                Response::from_json(&serde_json::json!({ "next_wake_ms": at }))
            }
        }
    }

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
        self.storage_meter.count(2, 0);
        if self.chat.borrow().is_none() {
            let loaded = chat_state::load(raw.clone());
            if let Some(error) = &loaded.error {
                // Not a silent reset: logged, the old value kept for the operator, and the
                // object goes on with a fresh state (turn ids cannot collide with the old ones).
                worker::console_error!("chat object: {error}; starting from a fresh state");
                if let Some(raw) = &raw {
                    self.storage_meter.count(0, 1);
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
        self.storage_meter.ask();
        let mut guard = self.chat.borrow_mut();
        f(guard.get_or_insert_with(ChatState::default))
    }

    /// Changes the state and writes it to storage (through one untyped function, so each
    /// caller's closure adds only this wrapper to the worker's size).
    async fn update<R>(&self, f: impl FnOnce(&mut ChatState) -> R) -> R {
        let (mut f, mut out) = (Some(f), None);
        self.update_dyn(&mut |st| out = f.take().map(|f| f(st))).await;
        out.expect("update_dyn runs its closure once")
    }

    async fn update_dyn(&self, f: &mut dyn FnMut(&mut ChatState)) {
        self.ensure_loaded().await;
        self.storage_meter.ask();
        let snapshot = {
            let mut guard = self.chat.borrow_mut();
            let st = guard.get_or_insert_with(ChatState::default);
            f(st);
            chat_state::stored(st)
        };
        if self.written.borrow().as_deref() != Some(snapshot.as_str()) {
            self.changes.set(self.changes.get() + 1);
            persist(&self.state.storage(), &self.written, &self.storage_meter, snapshot).await;
        }
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
        self.storage_meter.count(0, 1);
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

    /// The state machine's timing for state `st` (read inside the one ask of an event); the
    /// debounce adapts to the chat's kind unless the operator fixed it (`DEBOUNCE_MS`).
    fn timing_for(&self, ctx: &Ctx, st: &ChatState) -> Timing {
        let group = self.meta.borrow().as_ref().and_then(|m| m.kind).is_some_and(|k| k != ChatKind::Private);
        let adaptive = (!ctx.cfg.debounce_fixed).then_some(agent_core::chat::debounce::Policy::Adaptive { group });
        Timing {
            debounce_ms: ctx.cfg.debounce_ms as i64,
            debounce_max_ms: ctx.cfg.debounce_max_ms as i64,
            watchdog_ms: ctx.cfg.turn_watchdog_ms as i64,
            job_grace_ms: ctx.cfg.job_grace_ms as i64,
            adaptive,
            early_start: agent_core::chat::debounce::starts_early(adaptive, !self.crew_here(ctx, st.crew_switch()).allows_early_start()),
        }
    }

    /// Whether a crew speaks in this conversation (`agent_core::crew::here`): `CREW` set, the
    /// chat's switch (`switch`, from the state) and `CREW_CHATS` (a `CREW` naming an unknown
    /// persona makes the webhook refuse, so set means configured; read on every ask, so no
    /// persona is resolved here). An object that does not know its conversation yet counts as
    /// a crew's (its turns never start early).
    fn crew_here(&self, ctx: &Ctx, switch: Option<bool>) -> agent_core::crew::Here {
        let Some(chat_id) = self.meta.borrow().as_ref().map(|m| m.conv.chat_id) else { return agent_core::crew::Here::Speaks };
        agent_core::crew::here(chat_id, switch, !ctx.cfg.crew.is_empty(), &ctx.cfg.crew_chats)
    }

    /// The object's limits (`agent_core::chat_state::effects::Limits`), from the configuration.
    fn limits(ctx: &Ctx) -> Limits {
        Limits {
            max_turn_attempts: ctx.cfg.max_turn_attempts,
            max_send_attempts: ctx.cfg.max_send_attempts,
            retry_base_ms: ctx.cfg.retry_base_ms,
            job_grace_ms: ctx.cfg.job_grace_ms,
            subrequest_budget: crate::config::SUBREQUEST_BUDGET,
            turn_start_max: crate::config::TURN_START_MAX,
        }
    }

    /// Whether `turn` is still the one to answer: no newer message came since it started (a
    /// scheduled run is never superseded). Read by the turn's drafts, which stop once false.
    /// `commit` marks the turn committed (`ChatState::commit_turn`) and stores the state
    /// before part of its answer goes out while it streams.
    fn live(&self, turn: &chat_state::TurnRun) -> stream::Live {
        let (chat, this_turn) = (self.chat.clone(), turn.clone());
        let current = move || chat.borrow().as_ref().is_some_and(|st| st.still_current(&this_turn));
        let (chat, storage, id) = (self.chat.clone(), Rc::new(self.state.storage()), turn.turn_id.clone());
        let (written, meter) = (self.written.clone(), self.storage_meter.clone());
        let commit = move |upto_seq: i64| -> futures::future::LocalBoxFuture<'static, bool> {
            let snapshot = chat.borrow_mut().as_mut().and_then(|st| st.commit_turn(&id, upto_seq, now_ms()).then(|| chat_state::stored(st)));
            let (storage, written, meter) = (storage.clone(), written.clone(), meter.clone());
            Box::pin(async move {
                match snapshot {
                    Some(snapshot) => persist(&storage, &written, &meter, snapshot).await,
                    None => false,
                }
            })
        };
        let stop = Rc::new(stream::Stop::default());
        stream::Live { turn_id: turn.turn_id.clone(), current: Rc::new(current), commit: Rc::new(commit), stop, early_until: turn.early_until_ms }
    }

    /// Sets the one alarm to the next time the state needs attention (`next_wake_here`), unless
    /// it is set to that time already. While this instance has work in flight (a turn, a plan
    /// step) that is a re-check a few seconds on (`chat_state::RECHECK_MS`): never "due now"
    /// while the work runs (no spin), and an instance that starts after a restart takes the
    /// dead one's work over then.
    async fn arm(&self, ctx: &Ctx) {
        let (in_flight, advancing) = {
            let r = self.running.borrow();
            (r.in_flight(), r.advancing())
        };
        let now = now_ms();
        let (wake, busy) = self.with(|st| (st.next_wake_here(&self.timing_for(ctx, st), in_flight, advancing, now), st.busy_here(in_flight, advancing))).await;
        // Due now (work the alarm will do) is the only time in the past next_wake gives.
        let at = wake.map(|at| at.max(now + 1));
        if !agent_core::chat_state::effects::alarm_write(self.armed.get(), at, busy, now) {
            return;
        }
        self.armed.set(Some(at));
        let storage = self.state.storage();
        self.storage_meter.count(0, 1);
        let result = match at {
            Some(at) => storage.set_alarm(chrono::DateTime::from_timestamp_millis(at).unwrap_or_default()).await,
            None => storage.delete_alarm().await,
        };
        if let Err(e) = result {
            self.armed.set(None);
            worker::console_error!("could not set the alarm: {e}");
        }
    }

    /// The alarm's work: the core's loop (`chat_state::alarm::run`) over this object.
    async fn on_alarm(&self, ctx: &Ctx) {
        agent_core::chat_state::alarm::run(&Host { obj: self, ctx }, &Self::limits(ctx)).await;
    }
}

/// The chat object as its events' ports (`agent_core::chat_state::{port, alarm, job}`): its
/// state (asked through `update`, written once if it changed), the clock, the invocation's
/// meter, and its work. (The ports that also hold their event, `inbox::Arriving`,
/// `schedules::Scheduling` and `api_chat::ApiCall`, take its state and clock: `state_port!`.)
pub(super) struct Host<'a> {
    pub(super) obj: &'a ChatObject,
    pub(super) ctx: &'a Ctx,
}

impl chat_state::port::StatePort for Host<'_> {
    async fn ask<R>(&self, f: impl FnOnce(&mut ChatState, &Timing) -> R) -> R {
        self.obj.update(|st| f(st, &self.obj.timing_for(self.ctx, st))).await
    }
    async fn peek<R>(&self, f: impl FnOnce(&ChatState) -> R) -> R {
        self.obj.with(f).await
    }
    fn now(&self) -> i64 {
        now_ms()
    }
    fn log(&self, line: &str) {
        worker::console_warn!("{line}");
    }
}

impl chat_state::job::JobHost for Host<'_> {
    async fn answer_turn(&self, turn: chat_state::TurnRun) -> JobOutcome {
        let Some((conv, _)) = self.obj.conv() else { return JobOutcome::Done };
        let result = self.obj.run_turn(self.ctx, &conv, &turn).await;
        self.obj.after_turn(self.ctx, &conv, &turn.turn_id, result).await
    }
    async fn advance_plan(&self) -> Option<StepRetry> {
        self.obj.advance(self.ctx).await
    }
    async fn queue_step_retry(&self, retry: StepRetry) {
        self.obj.queue_step_retry(self.ctx, retry).await;
    }
    async fn give_up(&self, turn_id: &str, reason: &str) {
        self.obj.give_up(self.ctx, turn_id, reason).await;
    }
}

impl chat_state::alarm::AlarmHost for Host<'_> {
    fn spent(&self) -> u32 {
        self.ctx.meter.count()
    }
    fn in_flight(&self) -> bool {
        self.obj.running.borrow().in_flight()
    }
    async fn send_owed(&self, turn_id: &str, text: &str) -> agent_core::chat_state::effects::Owed {
        self.obj.deliver_owed(self.ctx, turn_id, text).await
    }
    async fn drive_turn(&self, turn: chat_state::TurnRun) {
        self.obj.drive_turn(self.ctx, turn).await;
    }
    async fn give_up(&self, turn_id: &str, reason: &'static str) {
        self.obj.give_up(self.ctx, turn_id, reason).await;
    }
    async fn start_turn(&self) {
        self.obj.start_turn(self.ctx).await;
    }
    async fn advance_plan(&self) {
        if let Some(retry) = self.obj.advance(self.ctx).await {
            self.obj.queue_step_retry(self.ctx, retry).await;
        }
    }
    async fn fire_schedules(&self) {
        self.obj.fire_schedules(self.ctx).await;
    }
    async fn arm(&self) {
        self.obj.arm(self.ctx).await;
    }
}
