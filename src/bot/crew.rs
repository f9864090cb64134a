//! Crew mode's lineup and gating: who the personas are (`CREW`, resolved once per isolate),
//! which persona a turn is, the crew's own bots, a crew message's part of gating, and a
//! persona turn's time limit. The cycle the chat object drives is in `chat::crew`; the
//! cycle's rules are `agent_core::crew`.

use crate::config::{prompts, Ctx};
use agent_core::chat_state::TurnRun;
use agent_core::crew::{self, Persona};

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

/// The context speaking as the persona of `turn_id` (crew mode): through the persona's own bot
/// when its secret `CREW_BOT_TOKEN_<NAME>` is set and the chat is a group (a persona's bot
/// cannot write into someone's private chat with the main bot), else the main bot.
pub fn speaking_for(ctx: &Ctx, turn_id: &str, group: bool) -> Ctx {
    let token = agent_core::crew::persona_of_turn(turn_id).filter(|_| group).and_then(|p| crate::config::env::crew_bot_token(&ctx.env, p));
    Ctx { speaker_token: token, ..ctx.clone() }
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
    turn.crew.as_ref()?;
    persona_by_turn_id(ctx, &turn.turn_id)
}

/// The configured persona a turn id names (a persona turn's id carries its name), if any.
fn persona_by_turn_id(ctx: &Ctx, turn_id: &str) -> Option<Persona> {
    let name = crew::persona_of_turn(turn_id)?;
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
