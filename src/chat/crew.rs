//! Crew mode at the edge: which crew speaks in this chat object, starting the next persona's
//! turn, what a persona's answer does to the cycle, and the chat's switch (`/crew on|off`,
//! `PUT /api/v1/chats/{id}/crew`). The cycle's rules are `agent_core::crew`.
//!
//! Invariants:
//! - A persona's outcome is recorded in the same state write that ends its turn, so a restart
//!   resumes at the persona whose turn it was (the pointer is in the stored state).
//! - A persona whose turn is given up is skipped with one log line; the chat gets one apology
//!   only when every persona of a row failed.
//! - A continuation turn is charged to the person whose message started the cycle, like a
//!   message of theirs; over their budget (or the chat's, the bot's) the cycle ends.

use super::ChatObject;
use crate::config::{now_ms, prompts, Ctx};
use crate::storage;
use agent_core::chat_state::{Finish, TurnRun};
use agent_core::conversation::ConvKey;
use agent_core::crew::{self, End, Lineup, Persona};
use agent_core::telegram::gating::Trigger;
use agent_core::chat::plan::Step;
use agent_core::chat::status::TurnStatus;

/// The configured crew (`CREW`), or why it cannot be: an unknown persona, a bad front matter.
/// Resolved once per isolate and `CREW` value (the persona files are part of the build), not
/// on every update.
pub fn personas(ctx: &Ctx) -> Result<Vec<Persona>, String> {
    thread_local! {
        static RESOLVED: std::cell::RefCell<Option<(Vec<String>, Result<Vec<Persona>, String>)>> = const { std::cell::RefCell::new(None) };
    }
    RESOLVED.with(|cell| {
        let mut cached = cell.borrow_mut();
        if let Some((_, result)) = cached.as_ref().filter(|(crew, _)| *crew == ctx.cfg.crew) {
            return result.clone();
        }
        let result = crew::resolve(&ctx.cfg.crew, &prompts::persona_files());
        *cached = Some((ctx.cfg.crew.clone(), result.clone()));
        result
    })
}

/// The configured crew, logging (not failing) when it is misconfigured: the worker's entry
/// points refuse to serve then (see `check`), so this is only reached by a race with a deploy.
pub fn configured(ctx: &Ctx) -> Vec<Persona> {
    personas(ctx).unwrap_or_else(|e| {
        worker::console_error!("crew disabled: {e}");
        Vec::new()
    })
}

/// Runs a turn's model work under crew mode's per-persona time limit
/// (`crew::TURN_LIMIT_MS`); other turns run as they are (each model call has its own timeout).
pub async fn within_limit<F>(turn: &TurnRun, work: F) -> Result<agent_core::turn::TurnResult, agent_core::turn::TurnFailure>
where
    F: std::future::Future<Output = Result<agent_core::turn::TurnResult, agent_core::turn::TurnFailure>>,
{
    if turn.crew.is_none() {
        return work.await;
    }
    let timer = worker::Delay::from(std::time::Duration::from_millis(crew::TURN_LIMIT_MS));
    futures::pin_mut!(work);
    match futures::future::select(work, timer).await {
        futures::future::Either::Left((result, _)) => result,
        futures::future::Either::Right(_) => Err(agent_core::turn::TurnFailure {
            error: agent_core::gemini::ModelError::Network(format!("the persona's turn took longer than {} s", crew::TURN_LIMIT_MS / 1000)),
            calls: Vec::new(),
        }),
    }
}

/// The persona of a crew turn, as configured.
pub fn persona_of(ctx: &Ctx, turn: &TurnRun) -> Option<Persona> {
    let name = crew::persona_of_turn(&turn.turn_id)?;
    turn.crew.as_ref()?;
    configured(ctx).into_iter().find(|p| p.name == name)
}

thread_local! {
    /// The crew's own bots (id, username), by persona, from getMe once per isolate.
    static ACTORS: std::cell::RefCell<std::collections::BTreeMap<String, (i64, String)>> = Default::default();
}

/// The crew's own bots (`CREW_BOT_TOKEN_<NAME>`), as id and username: the id is the token's
/// prefix; the username comes from getMe (once per isolate; empty if it fails, so only
/// replies and text mentions are recognised then).
pub async fn actors(ctx: &Ctx) -> Vec<(i64, String)> {
    let mut out = Vec::new();
    for p in configured(ctx) {
        let Some(token) = crate::config::env::crew_bot_token(&ctx.env, &p.name) else { continue };
        if let Some(known) = ACTORS.with(|a| a.borrow().get(&p.name).cloned()) {
            out.push(known);
            continue;
        }
        let id = token.expose().split(':').next().and_then(|i| i.parse().ok()).unwrap_or(0);
        let client = crate::outbound::telegram::TelegramClient::new(&ctx.cfg.telegram_api_base, token, ctx.meter.clone());
        let username = match client.call("getMe", &serde_json::json!({})).await {
            Ok(v) => v.get("username").and_then(serde_json::Value::as_str).unwrap_or_default().to_string(),
            Err(e) => {
                worker::console_warn!("crew: getMe for {}'s bot failed ({e}); mentions of it are not recognised", p.name);
                String::new()
            }
        };
        if !username.is_empty() {
            ACTORS.with(|a| a.borrow_mut().insert(p.name.clone(), (id, username.clone())));
        }
        out.push((id, username));
    }
    out
}

/// Crew mode's part of gating: in a chat where a crew could speak, a mention of or a reply to
/// one of the crew's own bots asks for a reply too.
pub async fn trigger(ctx: &Ctx, m: &agent_core::conversation::InboundMessage) -> Option<agent_core::telegram::gating::Trigger> {
    if ctx.cfg.crew.is_empty() || !m.chat.kind.is_group() {
        return None;
    }
    crew::addressed_to_actor(m, &actors(ctx).await)
}

impl ChatObject {
    /// The crew that speaks in this conversation, if one does (Telegram chats only).
    pub(super) async fn crew_lineup(&self, ctx: &Ctx, conv: &ConvKey) -> Option<Lineup> {
        if ctx.cfg.crew.is_empty() || conv.chat_id >= agent_core::access::policy::API_CHAT_ID_MIN {
            return None;
        }
        let switch = self.with(|st| st.crew.as_ref().and_then(|c| c.switch)).await;
        if !crew::speaks_in(conv.chat_id, switch, &ctx.cfg.crew_chats) {
            return None;
        }
        let personas = configured(ctx);
        (!personas.is_empty()).then(|| Lineup::of(&personas, ctx.cfg.crew_max_rounds))
    }

    /// Starts the turn that is due: the next persona's when the crew speaks here, else the
    /// single bot's. A cycle left over with no crew (switched off, `CREW` emptied) is dropped.
    pub(super) async fn begin_due_turn(&self, ctx: &Ctx, conv: &ConvKey, nonce: u64) -> Option<TurnRun> {
        let lineup = self.crew_lineup(ctx, conv).await;
        if lineup.is_some() && !self.continuation_within_budget(ctx, conv).await {
            return None;
        }
        let conv_s = conv.to_string();
        let now = now_ms();
        self.update(|st| match &lineup {
            Some(l) => st.begin_crew_turn(now, &conv_s, nonce, l),
            None => {
                if let Some(c) = st.crew.as_mut() {
                    c.cycle = None;
                }
                st.pending.is_some().then(|| st.begin_turn(now, &conv_s, nonce))
            }
        })
        .await
    }

    /// A continuation turn of a cycle (nobody asked just now) is the work of the person whose
    /// message started the cycle (none for a reaction): checked against and charged to their
    /// budget and the chat's and the bot's (`access::work_within_budget`). Over one, the cycle
    /// ends (`over_budget`) and no turn starts.
    async fn continuation_within_budget(&self, ctx: &Ctx, conv: &ConvKey) -> bool {
        let Some((target, trigger)) = self.with(|st| st.crew_continuation()).await else { return true };
        let author = match target.filter(|_| trigger != Trigger::Reaction) {
            Some(id) => storage::access::author_of(&ctx.db(), conv.chat_id, id).await.unwrap_or_else(|e| {
                worker::console_warn!("crew: the cycle's author could not be read ({e}); the chat's budgets only");
                None
            }),
            None => None,
        };
        if super::access::work_within_budget(ctx, conv.chat_id, author).await {
            return true;
        }
        if let Some(end) = self.update(|st| st.end_crew_cycle(End::OverBudget)).await {
            worker::console_log!("crew cycle ended: {}", end.as_str());
        }
        false
    }

    /// Ends a turn with the model's steps: a persona's through the cycle (a pass sends nothing;
    /// without its own bot, its display name leads its message), anyone else's as usual.
    /// `step_calls` stays with the plan (see `ChatState::keep_step_calls`).
    pub(super) async fn finish_any_turn(&self, ctx: &Ctx, turn_id: &str, steps: Vec<Step>, step_calls: Option<Vec<Option<usize>>>) -> (Finish, bool) {
        let persona = crew::persona_of_turn(turn_id).and_then(|name| configured(ctx).into_iter().find(|p| p.name == name));
        let lineup = Lineup::of(&configured(ctx), ctx.cfg.crew_max_rounds);
        let is_crew = self.with(|st| st.turn.as_ref().is_some_and(|t| t.turn_id == turn_id && t.crew.is_some())).await;
        let Some(persona) = persona.filter(|_| is_crew) else {
            let empty = steps.is_empty();
            let finish = self
                .update(|st| {
                    let finish = st.finish_turn(turn_id, steps, now_ms());
                    if let Some(calls) = step_calls {
                        st.keep_step_calls(turn_id, calls);
                    }
                    finish
                })
                .await;
            return (finish, empty);
        };
        // Its own bot speaks only in groups (as `Ctx::speaking_for` decides); else the header.
        let group = self.conv().is_some_and(|(_, kind)| kind.is_group());
        let own_bot = group && crate::config::env::crew_bot_token(&ctx.env, &persona.name).is_some();
        let steps = if own_bot || crew::is_pass(&steps) { steps } else { crew::with_display_name(steps, &persona.display_name) };
        let passed = crew::is_pass(&steps);
        let (finish, end) = self
            .update(|st| {
                let done = st.finish_crew_turn(turn_id, steps, &lineup, now_ms());
                if let Some(calls) = step_calls {
                    st.keep_step_calls(turn_id, calls);
                }
                done
            })
            .await;
        if passed && finish == Finish::Execute {
            worker::console_log!("turn {turn_id}: {} passed", persona.name);
        }
        if let Some(end) = end {
            worker::console_log!("crew cycle ended: {}", end.as_str());
        }
        (finish, passed)
    }

    /// A persona turn with nothing to answer (a first turn: nothing new; later: a pass).
    pub(super) async fn crew_nothing_to_do(&self, ctx: &Ctx, turn_id: &str) -> bool {
        if crew::persona_of_turn(turn_id).is_none() {
            return false;
        }
        let lineup = Lineup::of(&configured(ctx), ctx.cfg.crew_max_rounds);
        self.update(|st| st.crew_nothing_to_do(turn_id, &lineup, now_ms())).await;
        true
    }

    /// Gives up a persona's turn if it is the cycle's current one: skipped with one log line,
    /// no apology of its own (one when everyone failed). False: not a running persona turn.
    pub(super) async fn give_up_crew(&self, ctx: &Ctx, turn_id: &str, error: &str) -> bool {
        let Some(name) = crew::persona_of_turn(turn_id) else { return false };
        let current = self.with(|st| st.crew.as_ref().and_then(|c| c.cycle.as_ref()).is_some_and(|c| c.current.as_deref() == Some(turn_id))).await;
        if !current {
            return false;
        }
        worker::console_warn!("crew: {name}'s turn {turn_id} failed and is skipped: {error}");
        let lineup = Lineup::of(&configured(ctx), ctx.cfg.crew_max_rounds);
        let end = self.update(|st| st.give_up_crew_turn(turn_id, &lineup, now_ms())).await;
        let _ = storage::turns::set_turn_status(&ctx.db(), turn_id, TurnStatus::Dead, Some(error.to_string()), now_ms()).await;
        if end == Some(crew::End::AllFailed) {
            worker::console_error!("crew: every persona failed; the chat gets one apology");
            self.send_apologies(ctx).await;
        }
        self.arm(ctx).await;
        true
    }

    /// Sets the chat's crew switch (`None`: follow `CREW_CHATS`).
    pub(super) async fn set_crew(&self, ctx: &Ctx, on: Option<bool>) -> bool {
        self.update(|st| st.set_crew_switch(on)).await;
        self.arm(ctx).await;
        on.unwrap_or(false)
    }
}
