//! The prompts bundled from `prompts/` at build time (see build.rs), and the template values
//! they are filled with.

use crate::config::Ctx;
use agent_core::order::map_of;
use agent_core::turn::prompt::PromptLibrary;
use std::collections::BTreeMap;

mod bundled {
    include!(concat!(env!("OUT_DIR"), "/prompts.rs"));
}

pub fn library() -> PromptLibrary {
    PromptLibrary {
        instructions: bundled::INSTRUCTIONS.to_string(),
        // A persona file's front matter (crew mode) is not part of its prompt.
        personas: map_of(bundled::PERSONAS.iter().map(|(k, v)| (k.to_string(), agent_core::crew::prompt_of(v).to_string()))),
        roles: map_of(bundled::ROLES.iter().map(|(k, v)| (k.to_string(), v.to_string()))),
    }
}

/// The persona files as bundled, front matter included (crew mode parses them).
pub fn persona_files() -> BTreeMap<String, String> {
    map_of(bundled::PERSONAS.iter().map(|(k, v)| (k.to_string(), v.to_string())))
}

/// Curated notes from `prompts/notes.md`: one per list item (`- ...`), always shown first.
pub fn curated_notes() -> Vec<String> {
    bundled::NOTES
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- "))
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// The instruction prompts of consolidation (`prompts/memory/consolidate.md`) and of the
/// summary (`prompts/memory/summary.md`).
pub fn memory_prompts() -> (&'static str, &'static str) {
    (bundled::MEMORY_CONSOLIDATE, bundled::MEMORY_SUMMARY)
}

/// The instruction of a media description call (`prompts/media/describe.md`).
pub fn media_prompt() -> &'static str {
    bundled::MEDIA_DESCRIBE
}

/// Values for `{{name}}` in prompts.
pub fn template_values(ctx: &Ctx, model: &str) -> BTreeMap<String, String> {
    let mut v = BTreeMap::new();
    v.insert("bot_name".into(), ctx.cfg.bot_name.clone());
    v.insert("bot_username".into(), ctx.cfg.bot_username.clone());
    v.insert("timezone".into(), ctx.cfg.timezone.clone());
    v.insert("model".into(), model.to_string());
    v.insert("sticker_sets".into(), ctx.cfg.sticker_sets.join(", "));
    v
}
