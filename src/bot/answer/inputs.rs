//! A turn's inputs (`AnswerInputs`: what its prompt is made from), loaded in two D1 round trips: first the conversation, the chat, the session's
//! newest messages and the last answered seq; then (they depend on who and what is shown) the
//! notes, the bot's stored turns, what is known of the window's media (put into their parts,
//! so history shows descriptions instead of placeholders; an album is joined into one
//! message), the described stickers `send_sticker` may send, and the recalled memories. The
//! window itself is decided by the core (`agent_core::turn::window::window`).

use super::AnswerError;
use crate::bot::memory::{self, Memories};
use crate::config::Ctx;
use crate::storage::{self, turns::ChatRow};
use agent_core::chat_state::TurnRun;
use agent_core::config::HistoryFormat;
use agent_core::turn::window::{self as window, Limits, Loaded, Note, RowCache, Window};
use agent_core::conversation::ConvKey;
use agent_core::history::BotTurn;
use agent_core::turn::media::{self, Described, KnownSticker};
use std::collections::BTreeMap;

/// Everything a turn's prompt is made from.
pub struct AnswerInputs {
    pub window: Window,
    pub chat: Option<ChatRow>,
    /// The conversation's plan (`set_plan`).
    pub plan: Option<String>,
    pub notes: Vec<Note>,
    /// The bot's stored turns (structured history only).
    pub turns: BTreeMap<String, BotTurn>,
    pub memories: Memories,
    /// The newest message seq an earlier turn answered (what is newer is what this turn answers).
    pub answered_seq: i64,
    /// What is known of the media in the window (already put into their parts).
    pub known_media: Vec<Described>,
    /// The scheduled run this turn carries out, if it is one.
    pub scheduled: Option<agent_core::chat_state::ScheduledRun>,
    /// The described stickers of the sets `send_sticker` may send from.
    pub stickers: Vec<KnownSticker>,
}

/// Where a chat object keeps the rows its last turn loaded (an `agent_core::turn::window::RowCache`,
/// or none yet): in the instance's memory only (a new instance reads the whole window once).
pub type RowCacheSlot = std::rc::Rc<std::cell::RefCell<Option<RowCache>>>;

/// Loads a turn's inputs; `None` when there is nothing to answer (the chat blocked the bot,
/// or nothing new from people since the last answered turn). `copy`: the chat object's copy of
/// the rows, used when it holds and updated after.
pub async fn load(ctx: &Ctx, conv: &ConvKey, turn: &TurnRun, now: i64, copy: Option<&RowCacheSlot>) -> Result<Option<AnswerInputs>, AnswerError> {
    let db = ctx.db();
    // A turn retried more than once loads fewer rows (it may have run out of CPU time), and
    // neither uses nor keeps the copy.
    let row_limit = window::rows_for_attempt(storage::turns::HISTORY_ROWS as usize, turn.attempt);
    let copy = copy.filter(|_| row_limit == storage::turns::HISTORY_ROWS as usize);
    // Taken, not copied (the turn's load replaces it).
    let offered = copy.and_then(|c| c.borrow_mut().take()).filter(|c| c.conv == conv.to_string() && c.serves(row_limit));
    let mut first = storage::turns::load_turn_context(&db, &conv.to_string(), conv.chat_id, &turn.turn_id, row_limit, offered, ctx.secrets.bot_id()).await?;
    if let Some(copy) = copy {
        *copy.borrow_mut() = Some(std::mem::take(&mut first.kept));
    }
    if first.chat.as_ref().is_some_and(|c| c.blocked_at.is_some()) {
        return Ok(None);
    }
    let answered_seq = first.answered_seq;
    let mut messages = first.messages;
    let mut answers = first.answers;
    // A committed turn's retry answers what its first attempt saw, nothing newer: newer
    // messages get their own turn after it (`ChatState::commit_turn`).
    if let Some(upto) = turn.committed_upto {
        messages.retain(|m| m.seq <= upto);
        // Its own chunks sent since are not history to it (they sat after `upto` as rows).
        answers.retain(|m| m.seq <= upto && m.turn_id.as_deref() != Some(turn.turn_id.as_str()));
    }
    let loaded = Loaded {
        messages,
        answered_seq: first.answered_seq,
        stored_start: first.conversation.session_start_seq,
        stored_started_at: first.conversation.session_started_at,
        // A scheduled run, and a crew cycle's later turns (the others spoke), answer with
        // nothing new from people.
        scheduled: turn.scheduled.is_some() || turn.crew.as_ref().is_some_and(|c| c.continues),
        stored_cut: first.conversation.history_cut_seq,
        summary_until: first.conversation.summary_until,
        answers,
    };
    let limits = Limits {
        row_limit,
        session_idle_secs: ctx.cfg.session_idle_secs,
        token_budget: ctx.cfg.history_token_budget,
        structured: ctx.cfg.history_format == HistoryFormat::Structured,
    };
    let Some(mut window) = window::window(loaded, limits, now) else { return Ok(None) };
    // An album is one unit: one message with all its items (a turn answering any of it sees
    // them all).
    media::join_albums(&mut window.messages);
    let (notes, turns, memories, (known_media, stickers)) = load_recall(ctx, conv, &window, limits.structured).await?;
    media::annotate(&mut window.messages, &known_media);
    let scheduled = turn.scheduled.clone();
    Ok(Some(AnswerInputs { window, chat: first.chat, plan: first.conversation.plan, notes, turns, memories, answered_seq, known_media, stickers, scheduled }))
}

/// What the second round trip brings: notes, stored turns, memories, known media and stickers.
type Recalled = (Vec<Note>, BTreeMap<String, BotTurn>, Memories, (Vec<Described>, Vec<KnownSticker>));

/// Notes, the bot's stored turns, what is known of the window's media (only when it has some),
/// the described stickers of the configured sets (only when there are some) and recall, in one
/// round trip. A failed recall is logged and the turn goes on without
/// memories.
async fn load_recall(ctx: &Ctx, conv: &ConvKey, w: &Window, structured: bool) -> Result<Recalled, AnswerError> {
    let db = ctx.db();
    let mut stmts = vec![storage::notes::notes_stmt(&db, conv.chat_id, &w.people)?, storage::turns::bot_turns_stmt(&db, &w.messages)?];
    let media_ids = media::unique_ids(&w.messages);
    if !media_ids.is_empty() {
        stmts.push(storage::media::known_stmt(&db, &media_ids)?);
    }
    let sets = &ctx.cfg.sticker_sets;
    if !sets.is_empty() {
        stmts.push(storage::media::stickers_stmt(&db, sets)?);
    }
    let recall_at = stmts.len();
    stmts.extend(memory::recall_statements(&db, conv, &w.people, &w.messages, !ctx.cfg.embeddings_model.is_empty())?);
    let results = db.batch(stmts).await?;
    let notes: Vec<Note> = storage::rows(&results[0])?;
    let turns = if structured { storage::turns::bot_turns(&results[1])? } else { BTreeMap::new() };
    let known: Vec<Described> = if media_ids.is_empty() { Vec::new() } else { storage::rows(&results[2])? };
    let stickers: Vec<KnownSticker> = if sets.is_empty() { Vec::new() } else { storage::rows(&results[recall_at - 1])? };
    let memories = memory::recall(ctx, conv, &w.people, &w.messages, results.get(recall_at..).unwrap_or_default()).await.unwrap_or_else(|e| {
        worker::console_warn!("recall failed (the turn goes on without memories): {e}");
        Default::default()
    });
    Ok((notes, turns, memories, (known, stickers)))
}
