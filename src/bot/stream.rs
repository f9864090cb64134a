//! Answering fast: the first visible sign of a burst, and the answer streaming in as a draft.
//!
//! - [`first_sign`]: as soon as a burst's first message is in (before the debounce is over),
//!   the person sees the bot is on it: in a private chat an empty `sendMessageDraft` (Telegram
//!   shows "Thinking…"), the typing action if that is refused or in a group. Sent once per
//!   burst, off the webhook's path; the turn's typing loop refreshes it while the turn runs.
//! - [`StreamingModel`]: the turn's model port. In a private chat (and `STREAM_DRAFTS` on) it
//!   asks Gemini for a streamed answer and shows the text so far as a draft at a bounded rate
//!   (`core::telegram::drafts::DraftPacer`, `DRAFT_INTERVAL_MS`), rendered by `core::format::draft`.
//!   Elsewhere it is the plain `generateContent` call.
//!
//! Invariants (INVARIANTS.md): "Drafts are never messages", "Early chunks are the plan's
//! chunks", "A turn is bounded" (`MAX_DRAFTS_PER_TURN`, `MAX_EARLY_CHUNKS`).
//!
//! Also:
//! - Only the early chunks record sends (through `deliver::send_early_chunk`) and the
//!   state (the commit, through [`Live::commit`], refused once a newer message came: then
//!   nothing goes out and the turn replans as before). Early chunks are step 0 of the turn:
//!   only in the port's first call, whose text is the plan's first step. A committed turn is
//!   carried out whatever arrives (a retry of it answers only what the first attempt saw:
//!   `bot/answer/inputs.rs`). A chunk that fails (a 429 included) ends the early chunks of
//!   the turn: the plan sends the rest, with its usual retries; none past the invocation's
//!   subrequest budget.
//! - A refusal of the draft method itself (a plain 400, 401/404) turns drafts off in the
//!   isolate for a while (`core::telegram::drafts::drafts_off_ms`), so a bot without drafts does
//!   not pay for them each turn.
//! - A newer message ([`Live`] turns false: the turn will be replanned) ends the drafts too,
//!   and the half answer shown is replaced by the placeholder, so no half answer stays up.
//! - A turn that went stale (replanned) puts the placeholder back at once ([`first_sign_soon`]
//!   from `chat/turn_life.rs`): the stale answer's last draft does not stay up while it replans.
//! - An early start (`core::chat::debounce::starts_early`, [`Live::early_until`]): its port
//!   hands the turn no answer before the burst's quiet window is over (so no tool runs and no
//!   plan is made) and sends no early chunk before then.
//! - The turn's one stop switch ([`Live::stop`], a [`Stop`]; thrown by the chat object,
//!   `chat/stop.rs`) ends its model call at once, woken by the switch (no polling), and the
//!   port makes no other call; nothing more is drafted or sent early. Its [`StopReason`] says
//!   what stays: the person's Stop keeps the answer as far as it was written ([`StreamingModel::stopped`],
//!   what of it is sent is `STOP_KEEPS`'s); an abandoned early start (a newer message) drops
//!   it, the call failing as `ModelError::Abandoned`. Both are charged what the call cost.

use crate::config::{now_ms, Ctx};
use crate::outbound::gemini::GeminiClient;
use crate::outbound::gemini_stream::ChunkSink;
pub use crate::outbound::gemini_stream::{Stop, StopReason};
use crate::outbound::telegram::TelegramClient;
use agent_core::conversation::{ChatKind, ConvKey};
use agent_core::gemini::{GenerateContentRequest, GenerateContentResponse, ModelError};
use agent_core::format::{draft::settled_chunks, split::TELEGRAM_LIMIT};
use agent_core::gemini::stream::visible_so_far;
use agent_core::telegram::drafts::{draft_id, drafts_off_ms, DraftPacer, MAX_DRAFTS_PER_TURN, MAX_EARLY_CHUNKS};
use agent_core::telegram::api::TelegramError;
use agent_core::turn::ModelPort;
use futures::future::LocalBoxFuture;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// Telegram's limit on a draft's text.
const DRAFT_LIMIT: usize = 4096;

thread_local! {
    /// Until when drafts are off in this isolate (Telegram refused the method itself).
    static DRAFTS_OFF_UNTIL: Cell<i64> = const { Cell::new(0) };
    /// Conversations whose first sign (the "Thinking…" draft) is still at Telegram. An early
    /// start's turn may stream before that call is answered; its drafts wait for it, so a bot
    /// whose drafts Telegram refuses pays one refused draft, not two.
    static SIGN_IN_FLIGHT: RefCell<std::collections::HashSet<ConvKey>> = RefCell::new(Default::default());
}

/// Whether drafts may be tried now (`STREAM_DRAFTS`, and not recently refused as a method).
fn drafts_on(ctx: &Ctx) -> bool {
    ctx.cfg.stream_drafts && DRAFTS_OFF_UNTIL.with(Cell::get) <= now_ms()
}

/// Telegram refused a draft: maybe drafts are off for a while (`core::telegram::drafts::drafts_off_ms`).
fn refused(conv: &ConvKey, e: &TelegramError) {
    worker::console_warn!("chat {conv}: a draft was refused ({e}); the answer comes as a message");
    if let Some(ms) = drafts_off_ms(e) {
        DRAFTS_OFF_UNTIL.with(|c| c.set(now_ms() + ms));
    }
}

/// The running turn as its stream sees it.
#[derive(Clone)]
pub struct Live {
    pub turn_id: String,
    /// Whether the turn is still the one to answer (no newer message came, or it is committed).
    pub current: Rc<dyn Fn() -> bool>,
    /// Commits the turn before part of its answer goes out (stored in the object's state),
    /// with the newest message seq the answer saw; false: it may not (a newer message came).
    pub commit: Rc<dyn Fn(i64) -> LocalBoxFuture<'static, bool>>,
    /// The turn's one stop switch (the chat object throws it: `chat/stop.rs`).
    pub stop: Rc<Stop>,
    /// An early start: the end of its burst's quiet window (`TurnRun::early_until_ms`).
    pub early_until: Option<i64>,
}

impl Live {
    /// Whether an early start's quiet window is still open: nothing of it may be handed on.
    fn holding(&self) -> bool {
        self.early_until.is_some_and(|until| now_ms() < until)
    }
}

/// The draft id of a conversation's "Thinking…" placeholder (shown before a turn exists, and
/// without Stop: a Stop for it could name no turn). A turn's own drafts carry its own id
/// (`core::telegram::drafts::draft_id` of the turn id) and offer Stop; a new id replaces the
/// draft shown.
fn conv_draft_id(conv: &ConvKey) -> i64 {
    draft_id(&conv.to_string())
}

/// Shows that the bot is on it (see the module doc). `placeholder`: the "Thinking…" draft may
/// be used (not for a reaction, which the model may leave unanswered on purpose: a placeholder
/// would then linger). Errors are logged, never retried.
pub async fn first_sign(ctx: &Ctx, conv: ConvKey, kind: ChatKind, placeholder: bool) {
    let tg = ctx.telegram();
    if placeholder && kind == ChatKind::Private && drafts_on(ctx) {
        SIGN_IN_FLIGHT.with(|s| s.borrow_mut().insert(conv));
        let sent = tg.draft(conv.chat_id, conv.thread_id, conv_draft_id(&conv), "").await;
        SIGN_IN_FLIGHT.with(|s| s.borrow_mut().remove(&conv));
        match sent {
            Ok(()) => return,
            Err(e) => refused(&conv, &e),
        }
    }
    tg.typing(conv.chat_id, conv.thread_id).await;
}

/// Sends the first sign without holding up the caller (the webhook waits for the inbox).
pub fn first_sign_soon(ctx: &Ctx, conv: ConvKey, kind: ChatKind, placeholder: bool) {
    let ctx = ctx.clone();
    worker::wasm_bindgen_futures::spawn_local(async move { first_sign(&ctx, conv, kind, placeholder).await });
}

/// Where a turn's drafts go.
struct Drafts {
    ctx: Ctx,
    tg: TelegramClient,
    conv: ConvKey,
    interval_ms: i64,
    live: Live,
    /// Telegram refused a draft, or the turn was superseded: no more drafts in this turn.
    done: Cell<bool>,
    /// Drafts sent in this turn (at most `MAX_DRAFTS_PER_TURN`).
    sent: Cell<u32>,
    /// Chunks of the answer sent as messages before the turn is over.
    early: Cell<usize>,
    /// No more early chunks in this turn (one failed, or the turn may not commit).
    early_over: Cell<bool>,
    /// Model calls made through the port (early chunks only in the first).
    calls: Cell<u32>,
    /// The newest message seq the turn's context holds (what a commit answers).
    newest_seq: i64,
    /// Rich answers are on for this turn (`bot::deliver::rich_on`): an answer that needs them
    /// is drafted with `sendRichMessageDraft` and sends nothing early (it goes whole, rich).
    rich: Cell<bool>,
    /// The visible text of the turn's latest model call, as far as it came (what a stopped
    /// turn keeps).
    written: RefCell<String>,
}

/// The model port of a turn: streamed with drafts in a private chat, plain elsewhere.
pub struct StreamingModel {
    client: GeminiClient,
    drafts: Option<Drafts>,
    /// The turn's stop switch and early window, whether or not it is drafted.
    live: Option<Live>,
}

impl StreamingModel {
    /// `private`: the chat is a private Telegram chat; `live`: the object's check that the
    /// turn is current (`None`: not a Telegram chat, e.g. the API chat); `newest_seq`: the
    /// newest message of the turn's context.
    pub fn new(ctx: &Ctx, conv: &ConvKey, private: bool, live: Option<Live>, newest_seq: i64) -> Self {
        let drafts = live.clone().filter(|_| private && drafts_on(ctx)).map(|live| Drafts {
            ctx: ctx.clone(),
            tg: ctx.telegram(),
            conv: *conv,
            interval_ms: ctx.cfg.draft_interval_ms as i64,
            live,
            done: Cell::new(false),
            sent: Cell::new(0),
            early: Cell::new(0),
            early_over: Cell::new(false),
            calls: Cell::new(0),
            newest_seq,
            rich: Cell::new(false),
            written: RefCell::new(String::new()),
        });
        StreamingModel { client: ctx.gemini(), drafts, live }
    }

    /// An early start's answer waits for the end of its quiet window; the stop thrown meanwhile
    /// ends the wait: a newer message abandons the answer, charged what the call cost; the
    /// person's Stop keeps it (it is what was written).
    async fn hand_over(&self, request: &GenerateContentRequest, result: Result<GenerateContentResponse, ModelError>) -> Result<GenerateContentResponse, ModelError> {
        let Some(live) = &self.live else { return result };
        let Ok(response) = result else { return result };
        if let Some(wait) = live.early_until.map(|until| until - now_ms()).filter(|w| *w > 0) {
            let quiet = worker::Delay::from(std::time::Duration::from_millis(wait as u64));
            Stop::unless_thrown(Some(&live.stop), quiet).await;
        }
        match live.stop.reason() {
            Some(StopReason::Abandoned) => Err(ModelError::Abandoned { usage: agent_core::turn::abandoned_usage(request, std::slice::from_ref(&response)) }),
            _ => Ok(response),
        }
    }

    /// The answer as far as it was written, if the person stopped this turn (Telegram's Stop
    /// button: the switch thrown for [`StopReason::Person`]).
    pub fn stopped(&self) -> Option<String> {
        let live = self.live.as_ref()?;
        (live.stop.reason() == Some(StopReason::Person)).then(|| self.drafts.as_ref().map(|d| d.written.borrow().clone()).unwrap_or_default())
    }

    /// Rich answers are on for this turn (see [`Drafts::rich`]).
    pub fn with_rich(self, on: bool) -> Self {
        if let Some(d) = &self.drafts {
            d.rich.set(on);
        }
        self
    }
}

impl ModelPort for StreamingModel {
    async fn generate(&self, model: &str, request: &GenerateContentRequest) -> Result<GenerateContentResponse, ModelError> {
        let stop = self.live.as_ref().map(|l| &*l.stop);
        // Stopped before this call: no model call at all, the turn ends here (the person's
        // Stop: the answer is what was written; nothing of this call is charged).
        if let Some(stop) = stop.filter(|s| s.is_thrown()) {
            return match stop.reason() {
                Some(StopReason::Person) => Ok(stopped_response()),
                _ => Err(ModelError::Abandoned { usage: agent_core::turn::abandoned_usage(request, &[]) }),
            };
        }
        let result = match &self.drafts {
            None => match Stop::unless_thrown(stop, self.client.generate(model, request)).await {
                Some(result) => result,
                None => return crate::outbound::gemini_stream::ended(stop, request, Vec::new()),
            },
            Some(drafts) => {
                let first = drafts.calls.replace(drafts.calls.get() + 1) == 0;
                let sink = Sink { drafts, pacer: RefCell::new(DraftPacer::new(drafts.interval_ms)), first };
                let answer = self.client.stream_generate(model, request, &sink, stop).await;
                if let Ok(r) = &answer {
                    *drafts.written.borrow_mut() = visible_so_far(std::slice::from_ref(r)).0;
                }
                answer
            }
        };
        self.hand_over(request, result).await
    }
}

/// One model call's drafts.
struct Sink<'a> {
    drafts: &'a Drafts,
    pacer: RefCell<DraftPacer>,
    /// The port's first call: its text is the plan's first step, so its chunks may go early.
    first: bool,
}

/// The answer of a model call not made because the turn was stopped.
fn stopped_response() -> GenerateContentResponse {
    let mut r = GenerateContentResponse::default();
    r.candidates.push(agent_core::gemini::Candidate { finish_reason: Some(agent_core::telegram::drafts::STOPPED_REASON.into()), ..Default::default() });
    r
}

impl ChunkSink for Sink<'_> {
    async fn chunk(&self, so_far: &[GenerateContentResponse]) {
        if self.drafts.live.stop.is_thrown() {
            return;
        }
        let (text, calls) = visible_so_far(so_far);
        if self.first {
            self.send_settled(&text, calls).await;
        }
        self.draft(&text, calls).await;
    }
}

impl Sink<'_> {
    /// Sends the chunks of the answer that can no longer change, as messages (module doc).
    async fn send_settled(&self, text: &str, calls: bool) {
        let d = self.drafts;
        // An early start sends nothing before its quiet window is over (it may be abandoned).
        if calls || d.early_over.get() || d.live.holding() {
            return;
        }
        // An answer that will go rich goes whole (rich messages split by their own limits).
        if d.rich.get() && agent_core::format::rich::needs_rich(text) {
            d.early_over.set(true);
            return;
        }
        let settled = settled_chunks(text, TELEGRAM_LIMIT);
        while d.early.get() < settled.len().min(MAX_EARLY_CHUNKS) {
            let i = d.early.get();
            // Three subrequests a chunk (outbox, Telegram, sent record), and the plan's delivery
            // still has to fit.
            if d.ctx.meter.count() + 8 > crate::config::SUBREQUEST_BUDGET || (i == 0 && !(d.live.commit)(d.newest_seq).await) {
                d.early_over.set(true);
                return;
            }
            let (step_key, no_preview) = (format!("{}/0", d.live.turn_id), agent_core::fetch::needs_preview_off(text, &Default::default()));
            match super::deliver::send_early_chunk(&d.ctx, &d.conv, &step_key, i, &settled[i], (no_preview, d.newest_seq), &d.live.turn_id).await {
                Ok(true) => d.early.set(i + 1),
                Ok(false) => d.early_over.set(true),
                Err(e) => {
                    worker::console_warn!("chat {}: chunk {i} of the streamed answer waits for the plan ({})", d.conv, e.message());
                    d.early_over.set(true);
                }
            }
            if d.early_over.get() {
                return;
            }
        }
    }

    /// Shows the answer so far as a draft, paced.
    async fn draft(&self, text: &str, calls: bool) {
        let d = self.drafts;
        // Drafts turned off while the turn ran (an early start's first sign was refused as a
        // method meanwhile): none is tried.
        if d.done.get() || d.sent.get() >= MAX_DRAFTS_PER_TURN || !drafts_on(&d.ctx) {
            return;
        }
        // The first sign still at Telegram (an early start streams at once): this piece waits
        // for the next (the pacer tries again with the next piece).
        if SIGN_IN_FLIGHT.with(|s| s.borrow().contains(&d.conv)) {
            return;
        }
        // The turn's own draft id: a Stop names it (`core::telegram::drafts::stops_turn`).
        let id = draft_id(&d.live.turn_id);
        if !(d.live.current)() {
            // A newer message: the turn will be replanned. Take the half answer down.
            d.done.set(true);
            if self.pacer.borrow().sent > 0 {
                let _ = d.tg.draft(d.conv.chat_id, d.conv.thread_id, conv_draft_id(&d.conv), "").await;
            }
            return;
        }
        let now = now_ms();
        if !self.pacer.borrow_mut().due(now, text, calls) {
            return;
        }
        if d.rich.get() && agent_core::format::rich::needs_rich(text) {
            if let Some(html) = agent_core::format::rich::render_rich_draft(text) {
                match d.tg.rich_draft(d.conv.chat_id, d.conv.thread_id, id, &html).await {
                    Ok(()) => {
                        self.pacer.borrow_mut().shown(now, text);
                        d.sent.set(d.sent.get() + 1);
                        return;
                    }
                    // Refused: this turn's drafts (and, the method missing, a while's answers)
                    // are ordinary; this draft goes as one at once.
                    Err(e) if e.refuses_rich() => {
                        worker::console_warn!("chat {}: a rich draft was refused ({e}); drafting as text", d.conv);
                        super::deliver::rich_refused(&e);
                        d.rich.set(false);
                    }
                    Err(e) => {
                        refused(&d.conv, &e);
                        d.done.set(true);
                        return;
                    }
                }
            }
        }
        let Some(html) = agent_core::format::draft::render_draft(text, DRAFT_LIMIT) else { return };
        match d.tg.stoppable_draft(d.conv.chat_id, d.conv.thread_id, id, &html).await {
            Ok(()) => {
                self.pacer.borrow_mut().shown(now, text);
                d.sent.set(d.sent.get() + 1);
            }
            Err(e) => {
                refused(&d.conv, &e);
                d.done.set(true);
            }
        }
    }
}
