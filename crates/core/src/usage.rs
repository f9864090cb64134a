//! Model usage and what it costs: the totals read from `model_calls`, priced with the
//! configured table (`Config::price`), and the `/usage` text.
//!
//! Invariant: thinking tokens are billed as output, cached input tokens at the cached price;
//! a model the price table does not know has no cost (shown without one), never a guessed one.

use crate::config::Config;
use serde::Deserialize;

/// Token totals of one model (in one chat and day, when the query groups by them).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct ModelUsage {
    pub model: String,
    pub calls: i64,
    pub prompt_tokens: i64,
    pub candidates_tokens: i64,
    pub thoughts_tokens: i64,
    pub cached_tokens: i64,
    /// Google Search queries the model ran (`WEB_SEARCH`), billed per query.
    #[serde(default)]
    pub search_queries: i64,
}

/// Cost in USD of a usage row, if the price table knows its model. Input tokens served from
/// Gemini's cache (part of the prompt tokens) are billed at the cached price.
pub fn cost(cfg: &Config, r: &ModelUsage) -> Option<f64> {
    let (input, output) = cfg.price(&r.model)?;
    let cached_price = cfg.cached_price(&r.model).unwrap_or(input);
    let cached = r.cached_tokens.clamp(0, r.prompt_tokens.max(0));
    let fresh = r.prompt_tokens - cached;
    let tokens = (fresh as f64 * input + cached as f64 * cached_price + (r.candidates_tokens + r.thoughts_tokens) as f64 * output) / 1e6;
    Some(tokens + r.search_queries.max(0) as f64 * cfg.search_price_per_1000 / 1000.0)
}

/// The share of input tokens served from Gemini's cache (0 to 1), when there was input.
pub fn cached_share(r: &ModelUsage) -> Option<f64> {
    (r.prompt_tokens > 0).then(|| r.cached_tokens.clamp(0, r.prompt_tokens) as f64 / r.prompt_tokens as f64)
}

/// The cached share of input tokens over several rows.
pub fn total_cached_share(rows: &[ModelUsage]) -> Option<f64> {
    let total = ModelUsage {
        prompt_tokens: rows.iter().map(|r| r.prompt_tokens).sum(),
        cached_tokens: rows.iter().map(|r| r.cached_tokens.clamp(0, r.prompt_tokens.max(0))).sum(),
        ..Default::default()
    };
    cached_share(&total)
}

/// `/usage`'s lines about a chat's model calls (one per model) and their estimated cost.
pub fn chat_totals_text(cfg: &Config, rows: &[ModelUsage]) -> String {
    if rows.is_empty() {
        return "No model calls in this chat yet.".to_string();
    }
    let mut out = String::from("Model usage in this chat:");
    let mut total = 0.0;
    for r in rows {
        out.push_str(&format!(
            "\n{}: {} calls, {} input + {} output tokens ({} thinking, {} cached: {:.0}% of input)",
            r.model,
            r.calls,
            r.prompt_tokens,
            r.candidates_tokens + r.thoughts_tokens,
            r.thoughts_tokens,
            r.cached_tokens,
            cached_share(r).unwrap_or(0.0) * 100.0
        ));
        if r.search_queries > 0 {
            out.push_str(&format!(", {} web searches", r.search_queries));
        }
        if let Some(c) = cost(cfg, r) {
            total += c;
            out.push_str(&format!(", ${c:.4}"));
        }
    }
    out.push_str(&format!("\nEstimated cost: ${total:.4}"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn cfg(prices: &str) -> Config {
        let mut vars = BTreeMap::new();
        vars.insert("PRICES".to_string(), prices.to_string());
        Config::from_vars(&vars)
    }

    fn row(model: &str, prompt: i64, out: i64, thinking: i64) -> ModelUsage {
        ModelUsage { model: model.into(), calls: 2, prompt_tokens: prompt, candidates_tokens: out, thoughts_tokens: thinking, cached_tokens: 5, search_queries: 0 }
    }

    #[test]
    fn cached_input_is_billed_at_the_cached_price() {
        let c = cfg("m=2/10/0.5, n=4/8");
        let r = ModelUsage { model: "m".into(), calls: 1, prompt_tokens: 1_000_000, candidates_tokens: 0, thoughts_tokens: 0, cached_tokens: 600_000, search_queries: 0 };
        assert_eq!(cost(&c, &r), Some(0.4 * 2.0 + 0.6 * 0.5));
        let n = ModelUsage { model: "n".into(), cached_tokens: 1_000_000, ..r.clone() };
        assert_eq!(cost(&c, &n), Some(1.0), "a quarter of the input price when PRICES does not say");
        let odd = ModelUsage { cached_tokens: 5_000_000, ..r };
        assert_eq!(cost(&c, &odd), Some(0.5), "never more cached than prompt tokens");
    }

    #[test]
    fn thinking_is_billed_as_output_and_unknown_models_have_no_cost() {
        let c = cfg("m=2/10");
        let uncached = |r: ModelUsage| ModelUsage { cached_tokens: 0, ..r };
        assert_eq!(cost(&c, &uncached(row("m", 1_000_000, 100_000, 100_000))), Some(2.0 + 2.0));
        assert_eq!(cost(&c, &uncached(row("m-002", 500_000, 0, 0))), Some(1.0));
        assert_eq!(cost(&c, &row("other", 1_000_000, 0, 0)), None);
    }

    #[test]
    fn the_usage_text_lists_each_model_and_totals_what_is_priced() {
        let c = cfg("m=2/10");
        let text = chat_totals_text(&c, &[row("m", 1_000_000, 100_000, 50_000), row("other", 10, 1, 0)]);
        assert_eq!(
            text,
            "Model usage in this chat:\n\
             m: 2 calls, 1000000 input + 150000 output tokens (50000 thinking, 5 cached: 0% of input), $3.5000\n\
             other: 2 calls, 10 input + 1 output tokens (0 thinking, 5 cached: 50% of input)\n\
             Estimated cost: $3.5000"
        );
        assert_eq!(chat_totals_text(&c, &[]), "No model calls in this chat yet.");
    }

    #[test]
    fn web_searches_are_counted_and_priced_per_query() {
        let mut vars = BTreeMap::new();
        vars.insert("PRICES".to_string(), "m=2/10".to_string());
        vars.insert("SEARCH_PRICE_PER_1000".to_string(), "14".to_string());
        let c = Config::from_vars(&vars);
        let r = ModelUsage { search_queries: 3, cached_tokens: 0, ..row("m", 0, 0, 0) };
        assert_eq!(cost(&c, &r), Some(3.0 * 14.0 / 1000.0));
        assert!(chat_totals_text(&c, &[r]).contains("(0 thinking, 0 cached: 0% of input), 3 web searches, $0.0420"));
    }

    #[test]
    fn the_cached_share_is_of_input_tokens() {
        let a = ModelUsage { prompt_tokens: 1000, cached_tokens: 750, ..Default::default() };
        let b = ModelUsage { prompt_tokens: 3000, cached_tokens: 9000, ..Default::default() };
        assert_eq!(cached_share(&a), Some(0.75));
        assert_eq!(cached_share(&b), Some(1.0), "never more than all of the input");
        assert_eq!(cached_share(&ModelUsage::default()), None);
        assert_eq!(total_cached_share(&[a, b]), Some(3750.0 / 4000.0));
    }
}
