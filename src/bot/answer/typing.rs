//! "typing…" while a turn works: sent at once and refreshed every 4 seconds (Telegram shows it
//! for 5), while the turn's tool budget allows (a slow model call must not spend the
//! invocation on typing).

use super::tools::TURN_TOOL_BUDGET;
use crate::config::Ctx;
use agent_core::conversation::ConvKey;
use futures::future::{select, Either};
use std::time::Duration;
use worker::Delay;

/// Runs `work` with the typing indicator up in `conv`.
pub async fn with_typing<F: std::future::Future>(ctx: &Ctx, conv: &ConvKey, work: F) -> F::Output {
    let tg = ctx.telegram();
    let typing = async {
        loop {
            if ctx.meter.count() < TURN_TOOL_BUDGET {
                tg.typing(conv.chat_id, conv.thread_id).await;
            }
            Delay::from(Duration::from_secs(4)).await;
        }
    };
    futures::pin_mut!(work);
    futures::pin_mut!(typing);
    match select(work, typing).await {
        Either::Left((out, _)) => out,
        Either::Right(_) => unreachable!("the typing loop never ends"),
    }
}
