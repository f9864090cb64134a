//! One model call outside a turn (a guest answer, a Telegram Business suggestion): asked with
//! the default model, its usage recorded under the payer's own private chat (never another
//! chat), and its visible text returned (`None` for an empty answer).

use crate::config::{now_ms, Ctx};
use agent_core::conversation::ConvKey;
use agent_core::gemini::{GenerateContentRequest, ModelError, Outcome};
use agent_core::turn::{CallRecord, ModelPort};

pub async fn ask(ctx: &Ctx, request: &GenerateContentRequest, payer: i64, purpose: &str) -> Result<Option<String>, ModelError> {
    let model = ctx.cfg.gemini_model.clone();
    let started = now_ms();
    let result = ctx.gemini().generate(&model, request).await;
    let call = CallRecord::of(&model, &result, now_ms() - started);
    let db = ctx.db();
    let conv = ConvKey::chat(payer).to_string();
    match crate::storage::usage::model_call_stmt(&db, None, Some(&conv), Some(payer), purpose, &call, now_ms()) {
        Ok(stmt) => {
            if let Err(e) = db.batch(vec![stmt]).await {
                worker::console_error!("a {purpose} call's usage was not recorded: {e}");
            }
        }
        Err(e) => worker::console_error!("a {purpose} call's usage was not recorded: {e}"),
    }
    Ok(match result?.outcome() {
        Outcome::Content(c) => Some(c.visible_text()),
        Outcome::Empty { .. } => None,
    })
}
