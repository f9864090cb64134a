//! The request of a turn, laid out for Gemini's implicit cache (what changes least first): the
//! system instruction (`agent_core::turn::prompt`: prompts, the operator's notes, the chat), the
//! function declarations, the history (structured or compact) with the media the turn looks
//! at, and last the turn context (situation, plan, memories, summary, time); and the safety
//! the turn runs under.

use super::inputs::AnswerInputs;
use super::tools::fence_seed;
use crate::config::{prompts, Ctx};
use agent_core::chat_state::TurnRun;
use agent_core::config::HistoryFormat;
use agent_core::conversation::{ChatKind, ConvKey, Part};
use agent_core::fetch::{self, LinkSet};
use agent_core::telegram::gating::Trigger;
use agent_core::gemini::{GenerationConfig, Part as GeminiPart, ThinkingConfig};
use agent_core::history::{self, Role};
use agent_core::turn::prompt::{self, ChatDetails, PromptInput, Reaction, ScheduledSituation, Situation};
use agent_core::chat::schedule;
use agent_core::turn::{TurnRequest, TurnSafety};
use std::collections::BTreeMap;

/// The model of a turn: a crew persona's own (its front matter), else the chat's own, else
/// the configured one.
pub fn model_of(ctx: &Ctx, c: &AnswerInputs, turn: &TurnRun) -> String {
    let persona = crate::bot::crew::persona_of(ctx, turn).and_then(|p| p.model);
    persona.or_else(|| c.chat.as_ref().and_then(|ch| ch.model.clone())).unwrap_or_else(|| ctx.cfg.gemini_model.clone())
}

/// The reaction that triggered a turn, from the newest reaction event of the history.
fn reaction_of(messages: &[history::HistoryMessage]) -> Option<Reaction> {
    let m = messages.iter().rev().find(|m| {
        m.role == Role::Event && m.parts.iter().any(|p| matches!(p, Part::Event { kind, .. } if kind == "reaction"))
    })?;
    let detail = m.parts.iter().find_map(|p| match p {
        Part::Event { detail, .. } => Some(detail.clone()),
        _ => None,
    })?;
    let (emoji, id) = detail.split_once(" to #")?;
    Some(Reaction { emoji: emoji.to_string(), message_id: id.parse().ok()?, by: m.name.clone() })
}

/// What the situation says about a scheduled run: its time in its zone, how late, how it
/// repeats.
fn scheduled_situation(run: &agent_core::chat_state::ScheduledRun) -> ScheduledSituation {
    let tz = &schedule::Zone::or_utc(&crate::config::tz::Intl, &run.timezone);
    ScheduledSituation {
        schedule_id: run.schedule_id,
        text: run.text.clone(),
        due_local: schedule::local_text(run.due_ms, tz),
        late_minutes: (run.late_ms > schedule::LATE_NOTICE_MS).then_some(run.late_ms / 60_000),
        repeat: run.repeat.as_deref().zip(run.next_ms).map(|(r, next)| (schedule::repeat_label(r), schedule::local_text(next, tz))),
    }
}

/// The system instruction of a turn (the same for every turn of the chat) and its turn context
/// (what changes every turn: the request's last part).
fn prompt_texts(ctx: &Ctx, conv: &ConvKey, turn: &TurnRun, c: &AnswerInputs, model: &str, now: i64) -> (String, String) {
    let w = &c.window;
    // The summary stands in for what the budget cut; if it does not cover all of it, the
    // prompt says so.
    let (summary, uncovered) = agent_core::turn::window::summary_for(w.last_cut, c.memories.summary.as_deref(), c.memories.summary_until);
    let situation = Situation {
        target_message_id: turn.target_message_id,
        new_session: w.new_session,
        trigger: turn.trigger,
        reaction: if turn.trigger == Trigger::Reaction { reaction_of(&w.messages) } else { None },
        format: ctx.cfg.history_format,
        history_cut_without_summary: uncovered,
        scheduled: c.scheduled.as_ref().map(scheduled_situation),
    };
    let chat = ChatDetails {
        kind: c.chat.as_ref().map_or(ChatKind::Private, |ch| ChatKind::from_telegram(&ch.kind, 0)),
        title: c.chat.as_ref().and_then(|ch| ch.title.clone()),
        topic_id: conv.thread_id,
    };
    let (curated, learned) = agent_core::turn::window::split_notes(&c.notes, prompts::curated_notes(), c.memories.items.clone());
    let crew_persona = agent_core::crew::persona_of_turn(&turn.turn_id).filter(|_| turn.crew.is_some());
    let input = PromptInput {
        situation: &situation,
        library: &prompts::library(),
        persona: crew_persona.unwrap_or(&ctx.cfg.persona),
        roles: &ctx.cfg.role_prompts,
        values: &prompts::template_values(ctx, model),
        plan: c.plan.as_deref(),
        curated: &curated,
        memories: &learned,
        memory_budget: ctx.cfg.memory_token_budget,
        now: chrono::DateTime::from_timestamp_millis(now).unwrap_or_default(),
        timezone: &ctx.cfg.timezone,
        zones: &crate::config::tz::Intl,
        chat: &chat,
        summary,
    };
    let mut instruction = prompt::system_instruction(&input);
    if rich_answers(ctx, conv, c) {
        instruction.push_str("\n\n");
        instruction.push_str(agent_core::format::rich::PROMPT_NOTE);
    }
    crew_section(ctx, turn, instruction, prompt::turn_context(&input))
}

/// Whether this turn's answer may go rich (`bot::deliver::rich_on`, with the person's setting
/// read with the chat's row): only then is the model told about tables and maths.
pub fn rich_answers(ctx: &Ctx, conv: &ConvKey, c: &AnswerInputs) -> bool {
    let off = c.chat.as_ref().and_then(|ch| ch.rich_off).unwrap_or(0) != 0;
    crate::bot::deliver::rich_on(ctx, conv, off)
}

/// A crew persona's system instruction ends with the crew: who it is, the others, how to pass
/// (the same every turn of that persona); a note for this turn (a persona skipped before it)
/// goes into the turn context.
fn crew_section(ctx: &Ctx, turn: &TurnRun, instruction: String, turn_context: String) -> (String, String) {
    let (Some(name), Some(ct)) = (agent_core::crew::persona_of_turn(&turn.turn_id), turn.crew.as_ref()) else { return (instruction, turn_context) };
    let personas = crate::bot::crew::configured(ctx);
    let instruction = format!("{instruction}\n\n{}", agent_core::crew::situation(&personas, name, None));
    match ct.note.as_deref() {
        Some(note) => (instruction, format!("{turn_context}\n\n## Crew\nNote: {note}")),
        None => (instruction, turn_context),
    }
}

/// The messages as the turn's speaker sees them: for a crew persona, the others' messages are
/// named people's messages (`agent_core::crew::as_seen_by`).
fn seen_by(ctx: &Ctx, turn: &TurnRun, messages: &[history::HistoryMessage]) -> Option<Vec<history::HistoryMessage>> {
    let name = agent_core::crew::persona_of_turn(&turn.turn_id).filter(|_| turn.crew.is_some())?;
    let names = agent_core::order::map_of(crate::bot::crew::configured(ctx).into_iter().map(|p| (p.name, p.display_name)));
    Some(agent_core::crew::as_seen_by(messages, name, &names, &ctx.cfg.bot_name))
}

/// The whole request of a turn.
pub fn build(ctx: &Ctx, conv: &ConvKey, turn: &TurnRun, c: &AnswerInputs, model: &str, media: &BTreeMap<i64, Vec<GeminiPart>>, now: i64) -> TurnRequest {
    let crew_view = seen_by(ctx, turn, &c.window.messages);
    let messages = crew_view.as_deref().unwrap_or(&c.window.messages);
    let mut history = if ctx.cfg.history_format == HistoryFormat::Structured {
        history::render_structured_with_media(messages, &c.turns, media)
    } else {
        history::render_compact_with_media(messages, turn.target_message_id, media)
    };
    if let Some(run) = &c.scheduled {
        // The model answers a user turn: the run's marker closes the history (the situation
        // says what it is), and a history with no messages is not empty.
        history.push(agent_core::gemini::Content::user(vec![GeminiPart::text(schedule::marker(&crate::config::tz::Intl, run))]));
        history = history::normalize_contents(history);
    }
    if crew_view.is_some() && history.last().is_some_and(|c| c.is_model()) {
        // A persona's turn after its own message: the history must end with a user turn.
        history.push(agent_core::gemini::Content::user(vec![GeminiPart::text(agent_core::crew::YOUR_TURN)]));
    }
    let (system_instruction, turn_context) = prompt_texts(ctx, conv, turn, c, model, now);
    history::append_turn_context(&mut history, turn_context);
    let mut tools = agent_core::turn::tools::declarations_with_search(&ctx.cfg.sticker_sets, ctx.cfg.web_search);
    if crew_view.is_some() {
        agent_core::crew::add_pass(&mut tools);
    }
    if !ctx.cfg.image_model.is_empty() {
        agent_core::turn::tools::add_generate_image(&mut tools);
    }
    // An owner's own private chat (never a crew persona's turn, never a group): what they
    // missed in their business chats, sent to them as its own message.
    let owner = c.chat.as_ref().is_some_and(|r| r.kind == "private" && r.business_owner == Some(1));
    if ctx.cfg.business && owner && crew_view.is_none() {
        agent_core::turn::tools::add_business_digest(&mut tools);
    }
    agent_core::turn::media::sticker_catalog(&mut tools, &ctx.cfg.sticker_sets, &c.stickers);
    TurnRequest {
        model: model.to_string(),
        system_instruction,
        history,
        tools,
        generation_config: Some(GenerationConfig {
            max_output_tokens: Some(ctx.cfg.max_output_tokens),
            thinking_config: (!ctx.cfg.thinking_level.is_empty()).then(|| ThinkingConfig {
                thinking_level: Some(ctx.cfg.thinking_level.clone()),
                include_thoughts: false,
            }),
            ..Default::default()
        }),
        sticker_sets: ctx.cfg.sticker_sets.clone(),
        fetch_allow_private: ctx.cfg.fetch_allow_private,
        safety: TurnSafety {
            people_links: LinkSet::from_people(messages),
            outside_text_in_view: fetch::outside_text_in_view(messages),
            max_fetches: ctx.cfg.max_fetches_per_turn,
            max_steps: ctx.cfg.max_plan_steps,
            fence_seed: fence_seed(),
        },
        // A crew persona may pass (`pass`, `no_reply`, an empty answer).
        silence_allowed: matches!(turn.trigger, Trigger::Reaction | Trigger::Name) || crew_view.is_some(),
        // A scheduled run the model leaves empty still goes out, as its text.
        empty_reply: c.scheduled.as_ref().map(|run| format!("⏰ {}", agent_core::format::escape_markdown(&run.text))),
    }
}
