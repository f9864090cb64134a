//! A reply plan: the actions of one turn, carried out in order by the chat's Durable Object,
//! and the rules the object follows while carrying them out: which message a step replies to
//! by default ([`default_reply_to`]) and what a step that failed for good does to the rest of
//! the plan ([`after_fatal`]).

use serde::{Deserialize, Serialize};

/// One action of a plan. Written as `{"kind": "send", ...}`; read through [`StepFields`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", try_from = "StepFields")]
pub enum Step {
    /// Send a message (Markdown; rendered and split at send time).
    Send {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reply_to: Option<i64>,
        /// Send with link previews off: the text links something no person posted (decided by
        /// `fetch::needs_preview_off` when the turn ends).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        no_link_preview: bool,
    },
    React { message_id: i64, emoji: String },
    Sticker {
        set_name: String,
        emoji: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reply_to: Option<i64>,
    },
    /// Pause before the next step (an alarm, not a sleep).
    Wait { seconds: u32 },
    /// Make a picture with the image model and send it as a photo (`core::image`): from the
    /// prompt, editing or combining the photos of these messages.
    Image {
        prompt: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        photos: Vec<i64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        aspect_ratio: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reply_to: Option<i64>,
        /// Whose picture it is (the daily limit): the one sender of the turn's burst, else who
        /// the turn answers; set by the edge when the turn ends ([`for_whom`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        for_user: Option<i64>,
    },
}

/// A [`Step`] as stored, read as one flat struct: serde's internally tagged enums buffer every
/// field before they choose the variant, which cost the wasm about 10 KB (as `jobs::JobFields`).
/// The same rules: a variant's missing field or an unknown kind is an error; other fields are
/// ignored; the defaults are the variants'.
#[derive(Deserialize)]
struct StepFields {
    kind: String,
    text: Option<String>,
    reply_to: Option<i64>,
    #[serde(default)]
    no_link_preview: bool,
    message_id: Option<i64>,
    emoji: Option<String>,
    set_name: Option<String>,
    seconds: Option<u32>,
    prompt: Option<String>,
    #[serde(default)]
    photos: Vec<i64>,
    aspect_ratio: Option<String>,
    for_user: Option<i64>,
}

impl TryFrom<StepFields> for Step {
    type Error = String;

    fn try_from(f: StepFields) -> Result<Step, String> {
        use crate::conversation::need;
        Ok(match f.kind.as_str() {
            "send" => Step::Send { text: need(f.text, "text")?, reply_to: f.reply_to, no_link_preview: f.no_link_preview },
            "react" => Step::React { message_id: need(f.message_id, "message_id")?, emoji: need(f.emoji, "emoji")? },
            "sticker" => Step::Sticker { set_name: need(f.set_name, "set_name")?, emoji: need(f.emoji, "emoji")?, reply_to: f.reply_to },
            "wait" => Step::Wait { seconds: need(f.seconds, "seconds")? },
            "image" => Step::Image { prompt: need(f.prompt, "prompt")?, photos: f.photos, aspect_ratio: f.aspect_ratio, reply_to: f.reply_to, for_user: f.for_user },
            other => return Err(format!("unknown variant `{other}`, expected one of `send`, `react`, `sticker`, `wait`, `image`")),
        })
    }
}

/// Sets whose pictures a plan's picture steps are (see [`Step::Image`]).
pub fn for_whom(steps: &mut [Step], user: Option<i64>) {
    for s in steps {
        if let Step::Image { for_user, .. } = s {
            *for_user = user;
        }
    }
}

/// The longest pause a plan may take between steps.
pub const MAX_WAIT_SECS: u32 = 60;

impl Step {
    pub fn kind(&self) -> &'static str {
        match self {
            Step::Send { .. } => "send",
            Step::React { .. } => "react",
            Step::Sticker { .. } => "sticker",
            Step::Wait { .. } => "wait",
            Step::Image { .. } => "image",
        }
    }
    /// Whether the step puts something in front of the user.
    pub fn is_visible(&self) -> bool {
        !matches!(self, Step::Wait { .. })
    }
}

/// The message a step replies to when it names none: in groups, the first message of a reply
/// (the plan's first Send, or a Sticker before any Send) threads to the message the turn
/// answers (`target`), so people see what it answers; in private chats nothing threads.
pub fn default_reply_to(group: bool, steps: &[Step], index: usize, target: Option<i64>) -> Option<i64> {
    let step = steps.get(index)?;
    let first_send = !steps.iter().take(index).any(|s| matches!(s, Step::Send { .. }));
    (group && first_send && matches!(step, Step::Send { .. } | Step::Sticker { .. } | Step::Image { .. })).then_some(target).flatten()
}

/// Visible steps (messages, reactions, stickers) one turn may take unless `MAX_PLAN_STEPS`
/// says otherwise.
pub const DEFAULT_MAX_VISIBLE_STEPS: usize = 10;

/// What [`cap_visible`] left out of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    /// Visible steps left out.
    pub dropped: usize,
    /// The function calls whose steps were left out (their answer says so).
    pub calls: Vec<usize>,
}

/// The line a capped plan ends with, so the person sees that something was left out.
pub fn cut_note(max: usize, dropped: usize) -> String {
    format!("(I stopped here: one answer may take at most {max} steps; {dropped} more were left out.)")
}

/// Caps a plan at `max` visible steps (`steps` and `step_calls` run side by side). The cut is
/// said in the answer: the note ends the last kept message, or, when no message is kept, takes
/// the last visible place. Waits after the last kept step go too. `None`: nothing was cut.
pub fn cap_visible(steps: &mut Vec<Step>, step_calls: &mut Vec<Option<usize>>, max: usize) -> Option<Cut> {
    let max = max.max(1);
    let visible = steps.iter().filter(|s| s.is_visible()).count();
    if visible <= max {
        return None;
    }
    let end_after = |n: usize| steps.iter().enumerate().filter(|(_, s)| s.is_visible()).nth(n - 1).map_or(0, |(i, _)| i + 1);
    let mut keep = end_after(max);
    let has_send = steps[..keep].iter().any(|s| matches!(s, Step::Send { .. }));
    let kept_visible = if has_send { max } else { max - 1 };
    if !has_send {
        keep = if kept_visible == 0 { 0 } else { end_after(kept_visible) };
    }
    let calls = step_calls[keep..].iter().flatten().copied().collect();
    steps.truncate(keep);
    step_calls.truncate(keep);
    let dropped = visible - kept_visible;
    let note = cut_note(max, dropped);
    match steps.iter_mut().rev().find(|s| matches!(s, Step::Send { .. })) {
        Some(Step::Send { text, .. }) => {
            text.push_str("\n\n");
            text.push_str(&note);
        }
        _ => {
            steps.push(Step::Send { text: note, reply_to: None, no_link_preview: false });
            step_calls.push(None);
        }
    }
    Some(Cut { dropped, calls })
}

/// What a step that failed for good does to its plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterFailure {
    /// The rest of the plan makes no sense without it (or the bot may not write here): drop it.
    DropPlan,
    /// Skip the step and go on (a refused reaction or sticker).
    Skip,
}

/// A failed send drops the plan (what follows refers to it); so does any step when the chat
/// blocked the bot. A reaction or sticker Telegram refused is skipped.
pub fn after_fatal(step: &Step, blocked: bool) -> AfterFailure {
    if blocked || matches!(step, Step::Send { .. }) {
        AfterFailure::DropPlan
    } else {
        AfterFailure::Skip
    }
}

/// What became of a step, for the history the model sees later.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepOutcome {
    Sent { message_ids: Vec<i64> },
    Done,
    Cancelled,
    Failed { error: String },
}

#[cfg(test)]
mod rule_tests {
    use super::*;

    #[test]
    fn every_step_reads_back_as_written_and_bad_ones_are_refused() {
        let steps = vec![
            Step::Send { text: "hi".into(), reply_to: Some(3), no_link_preview: true },
            Step::Send { text: "plain".into(), reply_to: None, no_link_preview: false },
            Step::React { message_id: 4, emoji: "👍".into() },
            Step::Sticker { set_name: "s".into(), emoji: "🙂".into(), reply_to: None },
            Step::Wait { seconds: 2 },
            Step::Image { prompt: "a cat".into(), photos: vec![1, 2], aspect_ratio: Some("1:1".into()), reply_to: Some(5), for_user: Some(6) },
            Step::Image { prompt: "a dog".into(), photos: vec![], aspect_ratio: None, reply_to: None, for_user: None },
        ];
        let text = serde_json::to_string(&steps).unwrap();
        assert_eq!(serde_json::from_str::<Vec<Step>>(&text).unwrap(), steps);
        assert_eq!(serde_json::from_value::<Vec<Step>>(serde_json::from_str(&text).unwrap()).unwrap(), steps);
        let extra: Step = serde_json::from_str(r#"{"kind":"wait","seconds":1,"later_field":true}"#).unwrap();
        assert_eq!(extra, Step::Wait { seconds: 1 });
        assert!(serde_json::from_str::<Step>(r#"{"kind":"send"}"#).unwrap_err().to_string().contains("missing field `text`"));
        assert!(serde_json::from_str::<Step>(r#"{"kind":"dance"}"#).unwrap_err().to_string().contains("unknown variant `dance`"));
    }

    fn send() -> Step {
        Step::Send { text: "hi".into(), reply_to: None, no_link_preview: false }
    }
    fn sticker() -> Step {
        Step::Sticker { set_name: "s".into(), emoji: "👍".into(), reply_to: None }
    }
    fn react() -> Step {
        Step::React { message_id: 1, emoji: "👍".into() }
    }

    #[test]
    fn in_groups_only_the_first_message_of_a_reply_threads_to_the_target() {
        let steps = vec![react(), sticker(), send(), Step::Wait { seconds: 1 }, send()];
        let replies: Vec<_> = (0..steps.len()).map(|i| default_reply_to(true, &steps, i, Some(7))).collect();
        assert_eq!(replies, vec![None, Some(7), Some(7), None, None]);
        // A sticker after the first send does not thread.
        let steps = vec![send(), sticker()];
        assert_eq!(default_reply_to(true, &steps, 1, Some(7)), None);
    }

    #[test]
    fn private_chats_and_turns_without_a_target_do_not_thread() {
        let steps = vec![send(), send()];
        assert_eq!(default_reply_to(false, &steps, 0, Some(7)), None);
        assert_eq!(default_reply_to(true, &steps, 0, None), None);
        assert_eq!(default_reply_to(true, &steps, 5, Some(7)), None);
    }

    #[test]
    fn a_failed_send_drops_the_plan_and_a_refused_reaction_or_sticker_is_skipped() {
        assert_eq!(after_fatal(&send(), false), AfterFailure::DropPlan);
        assert_eq!(after_fatal(&react(), false), AfterFailure::Skip);
        assert_eq!(after_fatal(&sticker(), false), AfterFailure::Skip);
        // Blocked: nothing more can go out.
        assert_eq!(after_fatal(&react(), true), AfterFailure::DropPlan);
        assert_eq!(after_fatal(&sticker(), true), AfterFailure::DropPlan);
    }

    #[test]
    fn a_plan_over_the_cap_keeps_the_first_steps_and_says_it_was_cut() {
        let mut steps = vec![react(), send(), Step::Wait { seconds: 1 }, send(), sticker(), send(), send()];
        let mut calls = vec![Some(0), None, Some(1), Some(2), Some(3), Some(4), None];
        let cut = cap_visible(&mut steps, &mut calls, 3).expect("cut");
        assert_eq!(cut, Cut { dropped: 3, calls: vec![3, 4] });
        assert_eq!(steps.len(), 4);
        assert_eq!(calls, vec![Some(0), None, Some(1), Some(2)]);
        let Step::Send { text, .. } = &steps[3] else { panic!("{steps:?}") };
        assert!(text.starts_with("hi\n\n") && text.ends_with(&cut_note(3, 3)), "{text}");
        assert_eq!(steps.iter().filter(|s| s.is_visible()).count(), 3);
    }

    #[test]
    fn a_plan_within_the_cap_is_untouched() {
        let mut steps = vec![send(), react(), Step::Wait { seconds: 2 }];
        let mut calls = vec![None, Some(0), Some(1)];
        assert_eq!(cap_visible(&mut steps, &mut calls, 2), None);
        assert_eq!(steps.len(), 3);
    }

    #[test]
    fn a_capped_plan_without_a_kept_message_ends_with_the_note_in_the_last_place() {
        let mut steps: Vec<Step> = (0..30).map(|_| react()).collect();
        let mut calls: Vec<Option<usize>> = (0..30).map(Some).collect();
        let cut = cap_visible(&mut steps, &mut calls, 4).expect("cut");
        assert_eq!(steps.iter().filter(|s| s.is_visible()).count(), 4);
        assert_eq!(cut.dropped, 27);
        assert_eq!(cut.calls, (3..30).collect::<Vec<_>>());
        assert!(matches!(&steps[3], Step::Send { text, .. } if *text == cut_note(4, 27)));
        // A cap of one keeps only the note.
        let mut steps: Vec<Step> = (0..3).map(|_| sticker()).collect();
        let mut calls = vec![Some(0), Some(1), Some(2)];
        cap_visible(&mut steps, &mut calls, 1).expect("cut");
        assert_eq!(steps.len(), 1);
        assert_eq!(calls, vec![None]);
    }
}
